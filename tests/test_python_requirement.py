"""nox and CI take the supported Python from pyproject.toml: nox refuses an older one in one
line, and .ci/find-python picks the newest one that is new enough, skipping any that fail."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

# These run nox and shell scripts, not JAX.
pytestmark = pytest.mark.once

ROOT = Path(__file__).parents[1]
RUNNING = f"{sys.version_info.major}.{sys.version_info.minor}"
TOO_NEW = f"{sys.version_info.major}.{sys.version_info.minor + 1}"


def project_requiring(tmp_path: Path, minimum: str) -> Path:
    """A copy of the noxfile, its settings and the CI scripts, with a pyproject.toml that
    requires Python `minimum`."""
    tmp_path.mkdir(exist_ok=True)
    pyproject = (ROOT / "pyproject.toml").read_text()
    requires = next(line for line in pyproject.splitlines() if line.startswith("requires-python"))
    (tmp_path / "pyproject.toml").write_text(
        pyproject.replace(requires, f'requires-python = ">={minimum}"')
    )
    shutil.copy(ROOT / "noxfile.py", tmp_path)
    shutil.copytree(ROOT / ".ci", tmp_path / ".ci")
    # The settings the noxfile loads.
    for module in ("src/spmd_guide/environment.py", "docs/_ext/offline_inventories.py"):
        (tmp_path / module).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(ROOT / module, tmp_path / module)
    return tmp_path


def test_nox_on_too_old_a_python_stops_with_one_line(tmp_path):
    project = project_requiring(tmp_path, TOO_NEW)
    result = subprocess.run(
        [sys.executable, "-m", "nox", "-l"], cwd=project, capture_output=True, text=True
    )
    assert result.returncode != 0
    (line,) = result.stderr.strip().splitlines()
    assert f"Python {sys.version_info.major}.{sys.version_info.minor}." in line
    assert f"needs Python >={TOO_NEW}" in line
    assert "python3.13 -m nox" in line
    assert result.stdout == ""


def test_nox_on_a_supported_python_lists_the_sessions(tmp_path):
    project = project_requiring(tmp_path, RUNNING)
    result = subprocess.run(
        [sys.executable, "-m", "nox", "-l"], cwd=project, capture_output=True, text=True
    )
    assert result.returncode == 0, result.stderr
    assert "docs-latest" in result.stdout


@pytest.fixture
def machine(tmp_path):
    """A PATH with the tools find-python needs, a broken pyenv shim and a pyenv install of the
    Python running the tests; no other Python."""
    tools = tmp_path / "tools"
    tools.mkdir()
    for tool in ("bash", "sed", "sort", "tail", "grep", "dirname", "env"):
        (tools / tool).symlink_to(shutil.which(tool))
    shims = tmp_path / "shims"
    shims.mkdir()
    shim = shims / "python3"
    # What pyenv's shim does when its version is not selected.
    shim.write_text("#!/bin/sh\necho 'pyenv: python3: command not found' >&2\nexit 127\n")
    shim.chmod(0o755)
    installed = tmp_path / "pyenv" / "versions" / RUNNING / "bin"
    installed.mkdir(parents=True)
    (installed / "python3").symlink_to(sys.executable)
    env = {
        "PATH": f"{shims}{os.pathsep}{tools}",
        "PYENV_ROOT": str(tmp_path / "pyenv"),
        "HOME": str(tmp_path),
    }
    return env, installed / "python3"


def find_python(project: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["bash", str(project / ".ci" / "find-python")], env=env, capture_output=True, text=True
    )


def test_find_python_skips_a_broken_shim_and_picks_pyenvs(tmp_path, machine):
    env, installed = machine
    result = find_python(project_requiring(tmp_path / "project", RUNNING), env)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == str(installed)


def test_find_python_says_when_none_is_new_enough(tmp_path, machine):
    env, _ = machine
    result = find_python(project_requiring(tmp_path / "project", TOO_NEW), env)
    assert result.returncode == 1
    assert result.stdout == ""
    assert f"no Python {TOO_NEW} or newer on this machine" in result.stderr

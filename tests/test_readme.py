"""The README's snippet is the first code a visitor copies; it must run and print what it says."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from spmd_guide.environment import environment_without_jax_settings

# The snippet runs in a process of its own.
pytestmark = pytest.mark.once

README = Path(__file__).parents[1] / "README.md"


def test_readme_snippet_runs_and_prints_its_comment():
    (snippet,) = re.findall(r"```python\n(.*?)```", README.read_text(), flags=re.S)
    promised = re.search(r"print\(.*\)\s+# (.+)", snippet).group(1).strip()
    # A machine without accelerators; libtpu, installed for the TPU compiler, would look for a TPU.
    env = {**environment_without_jax_settings(), "JAX_PLATFORMS": "cpu"}
    result = subprocess.run(
        [sys.executable, "-W", "error", "-c", snippet],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == promised


def layout_table() -> dict[str, str]:
    """The README's layout table: each path it names (a cell may name several), to its row."""
    section = README.read_text().split("## Layout", 1)[1]
    rows = [line for line in section.splitlines() if line.startswith("| `")]
    named = {}
    for row in rows:
        paths_cell, what = row.strip("|").split("|", 1)
        for path in re.findall(r"`([^`]+)`", paths_cell):
            named[path] = what
    return named


def tracked_files() -> list[Path]:
    root = README.parent
    listed = subprocess.run(
        ["git", "ls-files"], cwd=root, capture_output=True, text=True, check=False
    )
    if listed.returncode:
        pytest.skip("not a git checkout")
    return [Path(line) for line in listed.stdout.splitlines() if (root / line).exists()]


def test_the_layout_table_names_every_folder_and_what_is_in_the_small_ones():
    named = layout_table()
    root = README.parent
    for path in named:
        assert (root / path).exists(), f"README layout names {path}, which does not exist"
    files = tracked_files()
    folders = {file.parent for file in files} - {Path(".")}
    # One folder per problem below practice_solutions/ is described by its parent's row.
    unnamed = sorted(
        str(folder)
        for folder in folders
        if f"{folder}/" not in named and folder.parent != Path("tests/practice_solutions")
    )
    assert not unnamed, f"README layout table: add a row for {unnamed}"
    # In these folders every file but a package's __init__.py is named in its row, so a new
    # module cannot go unmentioned.
    itemised = [
        "src/spmd_guide/",
        "src/spmd_guide/practice/",
        "docs/_ext/",
        "benchmarks/",
        "examples/distributed/",
        "examples/multihost/",
        ".ci/",
        ".github/workflows/",
    ]
    missing = sorted(
        str(file)
        for file in files
        if f"{file.parent}/" in itemised
        and file.name != "__init__.py"
        and f"`{file.name}`" not in named[f"{file.parent}/"]
    )
    assert not missing, f"README layout table: say what each of {missing} is, in its row"

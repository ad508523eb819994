"""Fresh Python processes get the machine they ask for, and say clearly when they fail."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from spmd_guide.environment import (
    compilation_cache_env,
    cpu_devices_env,
    kill_python_when,
    repository_root,
    run_python,
    trim_compilation_cache,
)

# Every test here starts a process of its own.
pytestmark = pytest.mark.once


def test_a_process_gets_the_devices_asked_for_and_none_of_this_ones_settings(monkeypatch):
    monkeypatch.setenv("XLA_FLAGS", "--xla_force_host_platform_device_count=3")
    finished = run_python(
        "-c", "import jax, os; print(jax.device_count(), os.environ.get('XLA_FLAGS'))", devices=2
    )
    assert finished.stdout.split() == ["2", "None"]


COMPILES_ONE_PROGRAM = """
import jax, jax.numpy as jnp
hits = []
jax.monitoring.register_event_listener(
    lambda event, **_: hits.append(event) if event.endswith("cache_hits") else None
)
jax.jit(lambda x: jnp.sin(x) * 2)(jnp.arange(8.0))
print(len(hits))
"""


def test_a_second_process_loads_what_the_first_compiled_from_the_cache(tmp_path, monkeypatch):
    # Set in this process, as nox sets it for the tests: the processes started must keep it.
    for name, value in compilation_cache_env(tmp_path / "cache").items():
        monkeypatch.setenv(name, value)
    first = run_python("-c", COMPILES_ONE_PROGRAM, devices=2)
    assert first.stdout.split() == ["0"]
    assert any((tmp_path / "cache").iterdir())
    second = run_python("-c", COMPILES_ONE_PROGRAM, devices=2)
    assert int(second.stdout) > 0


def test_the_cache_folder_is_emptied_only_once_it_holds_more_than_its_bound(tmp_path):
    folder = tmp_path / "cache"
    assert not trim_compilation_cache(folder)  # none yet
    folder.mkdir()
    (folder / "a").write_bytes(b"x" * 600)
    (folder / "b").write_bytes(b"x" * 400)
    assert not trim_compilation_cache(folder, max_bytes=1000)
    assert sorted(p.name for p in folder.iterdir()) == ["a", "b"]
    (folder / "c").write_bytes(b"x")
    assert trim_compilation_cache(folder, max_bytes=1000)
    assert not folder.exists()


def test_the_environment_names_the_platform_and_count():
    assert cpu_devices_env(4) == {"JAX_PLATFORMS": "cpu", "JAX_NUM_CPU_DEVICES": "4"}


def test_a_failing_process_raises_with_its_output_unless_asked_not_to():
    with pytest.raises(RuntimeError, match=r"(?s)exited with status 3.*went wrong"):
        run_python("-c", "import sys; print('went wrong'); sys.exit(3)")
    finished = run_python("-c", "import sys; sys.exit(3)", check=False)
    assert finished.returncode == 3


def test_the_repository_is_found_from_a_folder_inside_it():
    here = Path(__file__).parent
    assert repository_root(here) == here.parent
    assert (repository_root(here) / "examples").is_dir()


def test_outside_a_repository_the_error_says_where_to_run(tmp_path):
    with pytest.raises(FileNotFoundError, match="run from inside a clone"):
        repository_root(tmp_path)


def test_a_process_is_killed_once_the_condition_holds_while_it_is_frozen(tmp_path):
    marker = tmp_path / "started"
    code = (
        "import pathlib, time\n"
        "print('up', flush=True)\n"
        f"pathlib.Path({str(marker)!r}).touch()\n"
        "time.sleep(60)\n"
    )
    killed = kill_python_when("-c", code, condition=marker.exists, timeout=30)
    assert killed.returncode == -9
    assert killed.stdout == "up\n"


def test_a_process_that_ends_before_the_condition_holds_is_an_error(tmp_path):
    with pytest.raises(RuntimeError, match="exited with status 3 before the condition held"):
        kill_python_when("-c", "raise SystemExit(3)", condition=lambda: False, timeout=30)


def test_a_condition_that_never_holds_times_out():
    with pytest.raises(subprocess.TimeoutExpired):
        kill_python_when("-c", "import time; time.sleep(60)", condition=lambda: False, timeout=1)

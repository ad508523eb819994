from __future__ import annotations

import subprocess
import textwrap

import jax
import pytest

from spmd_guide import requested_device_count, use_cpu_devices
from spmd_guide.environment import run_python


def run_fresh(code: str, **env: str) -> subprocess.CompletedProcess[str]:
    """Run `code` in a new Python process whose JAX has not started yet."""
    return run_python("-W", "error", "-c", textwrap.dedent(code), env=env, timeout=120, check=False)


def test_this_process_has_the_requested_devices(cpu_devices):
    assert len(cpu_devices) == requested_device_count()
    assert jax.device_count() == requested_device_count()
    assert {device.platform for device in cpu_devices} == {"cpu"}


def test_calling_again_with_the_same_count_returns_the_same_devices(cpu_devices):
    assert use_cpu_devices(len(cpu_devices)) == cpu_devices


def test_a_different_count_after_start_is_refused_with_a_fix(cpu_devices):
    other = len(cpu_devices) + 1
    with pytest.raises(ValueError, match=r"Restart the Python process") as error:
        use_cpu_devices(other)
    assert f"use_cpu_devices({other})" in str(error.value)
    assert f"already running on {len(cpu_devices)} cpu device" in str(error.value)


@pytest.mark.once
@pytest.mark.parametrize("count", [1, 3, 8])
def test_a_fresh_process_gets_the_count_it_asks_for(count):
    result = run_fresh(
        f"""
        from spmd_guide import use_cpu_devices
        import jax
        devices = use_cpu_devices({count})
        print(len(devices), jax.device_count(), devices[0].platform)
        """
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == [str(count), str(count), "cpu"]


@pytest.mark.once
def test_the_environment_variable_sets_the_default_count():
    result = run_fresh(
        "from spmd_guide import use_cpu_devices; print(len(use_cpu_devices()))",
        JAX_NUM_CPU_DEVICES="5",
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "5"


@pytest.mark.once
def test_eight_devices_when_nothing_is_set():
    result = run_fresh("from spmd_guide import use_cpu_devices; print(len(use_cpu_devices()))")
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "8"


@pytest.mark.parametrize("bad", [0, -2, 2.5, "8", True])
def test_a_count_that_is_not_a_positive_integer_is_rejected(bad):
    with pytest.raises(ValueError, match="positive whole number"):
        use_cpu_devices(bad)


@pytest.mark.parametrize("raw", ["eight", "0", "-1"])
def test_a_bad_environment_variable_is_named_in_the_error(monkeypatch, raw):
    monkeypatch.setenv("JAX_NUM_CPU_DEVICES", raw)
    with pytest.raises(ValueError, match="JAX_NUM_CPU_DEVICES"):
        requested_device_count()

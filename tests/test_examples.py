"""The runnable examples work as their docstrings say, on a fresh process's 8 CPU devices."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import jax
import pytest

from spmd_guide.devices import environment_without_jax_settings

EXAMPLE = Path(__file__).parents[1] / "examples" / "distributed" / "sharding_spmd.py"

# Each example run starts its own JAX; doing that in each device-count pass adds nothing.
pytestmark = pytest.mark.skipif(
    jax.device_count() != 8, reason="the examples run once, in the 8-device pass"
)


def run_example(*args: str) -> subprocess.CompletedProcess[str]:
    env = environment_without_jax_settings()
    return subprocess.run(
        [sys.executable, "-W", "error", str(EXAMPLE), *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


@pytest.mark.parametrize("strategy", ["dp", "tp", "2d", "fsdp"])
def test_each_strategy_trains_on_eight_devices_without_warnings(strategy):
    result = run_example("--strategy", strategy, "--steps", "8")
    assert result.returncode == 0, result.stderr
    assert result.stderr == ""
    assert result.stdout.startswith("8 CPU devices\n")
    assert f"strategy '{strategy}'" in result.stdout
    per_device = re.search(r"per device: (.*)", result.stdout).group(1)
    assert len(per_device.split(", ")) == 8
    losses = [float(v) for v in re.findall(r"loss (\d+\.\d+)", result.stdout)]
    assert len(losses) >= 2 and losses[-1] < losses[0]


def test_the_mesh_flag_reshapes_the_mesh():
    result = run_example("--strategy", "2d", "--mesh", "2x4", "--steps", "2")
    assert result.returncode == 0, result.stderr
    assert "on mesh (data=2, model=4)" in result.stdout


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--mesh", "3x2"], "needs 6 devices but 8 are available"),
        (["--strategy", "tp", "--mesh", "8"], "shards over mesh axis 'model'"),
        (["--batch-size", "30"], "batch 30 is not divisible"),
        (["--mesh", "four"], "is not a shape"),
    ],
)
def test_bad_arguments_get_a_clear_error(args, message):
    result = run_example(*args)
    assert result.returncode == 2
    assert message in result.stderr
    assert "Traceback" not in result.stderr

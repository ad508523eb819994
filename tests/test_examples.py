"""The runnable examples work as their docstrings say, on a fresh process's 8 CPU devices."""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path

import pytest

from spmd_guide.environment import run_python

EXAMPLES = Path(__file__).parents[1] / "examples"
EXAMPLE = EXAMPLES / "distributed" / "sharding_spmd.py"
# What a reader copying an example into their own project has installed.
ALLOWED_IMPORTS = {"jax", "flax", "optax", "orbax", "numpy", *sys.stdlib_module_names}


@pytest.mark.parametrize("script", sorted(EXAMPLES.rglob("*.py")), ids=lambda p: p.name)
def test_examples_import_only_jax_flax_optax_numpy_and_the_standard_library(script):
    imported = set()
    for node in ast.walk(ast.parse(script.read_text())):
        if isinstance(node, ast.Import):
            imported |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0:
            imported.add(node.module.split(".")[0])
    assert imported, f"{script} imports nothing?"
    assert imported <= ALLOWED_IMPORTS, imported - ALLOWED_IMPORTS


def run_example(*args: str) -> subprocess.CompletedProcess[str]:
    return run_python("-W", "error", str(EXAMPLE), *args, check=False)


@pytest.mark.once
@pytest.mark.parametrize("strategy", ["dp", "tp", "2d", "fsdp"])
def test_each_strategy_trains_on_eight_devices_without_warnings(strategy):
    result = run_example("--strategy", strategy, "--steps", "8")
    assert result.returncode == 0, result.stderr
    assert result.stderr == ""
    assert result.stdout.startswith("8 CPU devices\n")
    assert f"strategy '{strategy}'" in result.stdout
    total = int(re.search(r"parameters: ([\d,]+) bytes", result.stdout).group(1).replace(",", ""))
    per_device = re.search(r"per device: (.*)", result.stdout).group(1).split(", ")
    held = [int(entry.split(":")[1].replace(",", "")) for entry in per_device]
    assert len(held) == 8 and len(set(held)) == 1
    # The share of the parameters each device holds: whole for dp; the large weights split
    # 8 ways for fsdp and tp, 2 ways (over 'model') for 2d on its default 4x2 mesh.
    largest_share = {"dp": 1.0, "fsdp": 0.15, "tp": 0.15, "2d": 0.55}[strategy]
    assert held[0] <= largest_share * total
    assert held[0] > {"dp": 0.99, "fsdp": 0.1, "tp": 0.1, "2d": 0.45}[strategy] * total
    losses = [float(v) for v in re.findall(r"loss (\d+\.\d+)", result.stdout)]
    assert len(losses) >= 2 and losses[-1] < losses[0]


@pytest.mark.once
def test_the_mesh_flag_reshapes_the_mesh():
    result = run_example("--strategy", "2d", "--mesh", "2x4", "--steps", "2")
    assert result.returncode == 0, result.stderr
    assert "on mesh (data=2, model=4)" in result.stdout


@pytest.mark.once
@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--mesh", "3x2"], "needs 6 devices but 8 are available"),
        (["--strategy", "tp", "--mesh", "8"], "strategy 'tp' uses mesh axes ('data', 'model')"),
        (["--batch-size", "30"], "batch 30 is not divisible"),
        (["--mesh", "four"], "is not a shape"),
    ],
)
def test_bad_arguments_get_a_clear_error(args, message):
    result = run_example(*args)
    assert result.returncode == 2
    assert message in result.stderr
    assert "Traceback" not in result.stderr

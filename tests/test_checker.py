"""The checker passes the references, and catches each known mistake with the right hint."""

from __future__ import annotations

import io
import subprocess
import sys
import textwrap

import jax
import pytest

from spmd_guide.checker import SolutionError, check, compare, load_solution
from spmd_guide.problems.catalog import PROBLEMS

# The checker starts its own processes for each device count; run these once.
pytestmark = pytest.mark.skipif(
    jax.device_count() != 8, reason="the checker runs its own device counts; once is enough"
)

IMPORTS = """
import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import Mesh, PartitionSpec as P
"""

WRONG = {
    "forgotten_psum": (
        "shard_map_psum",
        """
        def shard_map_psum(x, *, mesh=None):
            mesh = mesh or Mesh(np.array(jax.devices()[:1]), ("data",))
            per_block = jax.shard_map(
                jnp.sum, mesh=mesh, in_specs=P("data"), out_specs=P(), check_vma=False
            )
            return per_block(x)
        """,
        "psum was skipped",
    ),
    "wrong_axis_name": (
        "shard_map_psum",
        """
        def shard_map_psum(x, *, mesh=None):
            mesh = mesh or Mesh(np.array(jax.devices()[:1]), ("data",))
            body = lambda b: jax.lax.psum(jnp.sum(b), "batch")
            return jax.shard_map(body, mesh=mesh, in_specs=P("data"), out_specs=P())(x)
        """,
        "axis name is exactly the mesh's axis, 'data'",
    ),
    "wrong_output_shape": (
        "shard_map_vs_vmap",
        """
        def shard_map_vs_vmap(x, *, mesh=None):
            return jax.vmap(lambda r: jnp.sum(r ** 2))(x)
        """,
        "jnp.stack([sharded, vmapped])",
    ),
    "reinitialised_per_shard": (
        "shard_map_simulate",
        """
        import flax.linen as nn

        def shard_map_simulate(seed, x, num_shards, features):
            num_shards, features = int(num_shards), int(features)
            chunk = x.shape[0] // num_shards
            model = nn.Dense(features)
            keys = jax.random.split(jax.random.PRNGKey(int(seed)), num_shards)
            outs = []
            for i in range(num_shards):
                block = x[i * chunk:(i + 1) * chunk]
                outs.append(model.apply(model.init(keys[i], block), block))
            return jnp.concatenate(outs).reshape(-1)
        """,
        "chunks were computed with different parameters",
    ),
}


def write(tmp_path, name, body):
    path = tmp_path / f"{name}.py"
    path.write_text(IMPORTS + textwrap.dedent(body))
    return path


@pytest.mark.parametrize("problem", list(PROBLEMS))
def test_each_reference_passes_on_one_and_two_devices(tmp_path, problem):
    path = write(tmp_path, "reference", f"from spmd_guide.problems import {problem}\n")
    report = io.StringIO()
    assert check(problem, path, device_counts=(1, 2), out=report), report.getvalue()
    assert "PASSED" in report.getvalue()


@pytest.mark.parametrize("mistake", list(WRONG))
def test_each_known_mistake_fails_with_its_hint(tmp_path, mistake):
    problem, body, hint = WRONG[mistake]
    report = io.StringIO()
    assert not check(problem, write(tmp_path, mistake, body), device_counts=(1, 2), out=report)
    text = report.getvalue()
    assert "hint: " in text and hint in text, text
    assert "expected" in text and "inputs" in text
    if mistake == "forgotten_psum":
        # One device hides the mistake; two show it.
        assert "1 device: 4/4 cases passed" in text
        assert "2 devices: 1/4 cases passed" in text
        assert "It passes on one device" in text


def test_a_hanging_solution_times_out_with_an_explanation(tmp_path):
    path = write(tmp_path, "hang", "def shard_map_psum(x, *, mesh=None):\n    while True: pass\n")
    report = io.StringIO()
    assert not check("shard_map_psum", path, device_counts=(1,), case_timeout=3, out=report)
    assert (
        "timed out after 3 s in starting up" in report.getvalue()
        or "in case 1" in report.getvalue()
    )


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ("def shard_map_psum(x:\n", "does not parse"),
        ("import not_a_module_anywhere\n", "failed while importing: ModuleNotFoundError"),
        (
            "def total(x):\n    return x.sum()\n",
            "defines no function 'shard_map_psum' (it defines: total)",
        ),
    ],
)
def test_an_unusable_file_gets_a_clear_message(tmp_path, body, message):
    with pytest.raises(SolutionError, match=message.replace("(", r"\(").replace(")", r"\)")):
        load_solution(write(tmp_path, "broken", body), "shard_map_psum")


def test_a_missing_file_suggests_the_starter(tmp_path):
    with pytest.raises(SolutionError, match="starter shard_map_psum"):
        load_solution(tmp_path / "nope.py", "shard_map_psum")


def test_compare_names_the_first_differences():
    assert compare([1.0, 2.0], [1.0, 2.0]) == []
    assert compare([1.0, 2.0], [1.0]) == ["shape: expected (2,), got (1,)"]
    lines = compare([[1.0, 2.0], [3.0, 4.0]], [[1.0, 2.5], [3.0, 4.5]])
    assert lines[0] == "2 of 4 values differ; the first:"
    assert lines[1] == "  at (0, 1): expected 2, got 2.5"


def cli(*args, cwd=None):
    return subprocess.run(
        [sys.executable, "-m", "spmd_guide", *args], capture_output=True, text=True, cwd=cwd
    )


def test_the_command_line_checks_on_all_four_device_counts(tmp_path):
    path = write(tmp_path, "mine", "from spmd_guide.problems import shard_map_psum\n")
    result = cli("check", "shard_map_psum", str(path))
    assert result.returncode == 0, result.stdout + result.stderr
    for label in ("1 device:", "2 devices:", "4 devices:", "8 devices:"):
        assert f"{label} 4/4 cases passed" in result.stdout


def test_the_command_line_exits_1_on_a_wrong_or_broken_solution(tmp_path):
    problem, body, _ = WRONG["wrong_output_shape"]
    wrong = cli("check", problem, str(write(tmp_path, "wrong", body)), "--devices", "2")
    assert wrong.returncode == 1
    assert "2 devices: 0/4 cases passed" in wrong.stdout
    broken = cli("check", "shard_map_psum", str(write(tmp_path, "broken", "def f(:\n")))
    assert broken.returncode == 1
    assert "does not parse" in broken.stderr and "Traceback" not in broken.stderr
    bad_counts = cli("check", "shard_map_psum", str(tmp_path / "wrong.py"), "--devices", "0")
    assert bad_counts.returncode == 2 and "--devices" in bad_counts.stderr


def test_list_and_starter(tmp_path):
    listing = cli("list")
    assert listing.returncode == 0
    assert [line.split()[0] for line in listing.stdout.splitlines()] == list(PROBLEMS)
    made = cli("starter", "shard_map_vs_vmap", cwd=tmp_path)
    assert made.returncode == 0, made.stderr
    starter = (tmp_path / "shard_map_vs_vmap.py").read_text()
    assert "def shard_map_vs_vmap(x, *, mesh=None):" in starter
    assert "raise NotImplementedError" in starter
    again = cli("starter", "shard_map_vs_vmap", cwd=tmp_path)
    assert again.returncode == 2 and "exists" in again.stderr
    unknown = cli("starter", "nope", cwd=tmp_path)
    assert unknown.returncode == 2 and "shard_map_psum" in unknown.stderr


def test_the_starter_fails_the_check_with_a_hint(tmp_path):
    cli("starter", "shard_map_psum", cwd=tmp_path)
    report = io.StringIO()
    assert not check(
        "shard_map_psum", tmp_path / "shard_map_psum.py", device_counts=(1,), out=report
    )
    assert "NotImplementedError: replace the starter's body" in report.getvalue()

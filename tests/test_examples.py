"""The runnable examples work as their docstrings say, on a fresh process's 8 CPU devices."""

from __future__ import annotations

import ast
import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from process_output import stderr_beyond_timing

from spmd_guide.environment import run_python

EXAMPLES = Path(__file__).parents[1] / "examples"
EXAMPLE = EXAMPLES / "distributed" / "sharding_spmd.py"
# What a reader copying an example into their own project has installed.
ALLOWED_IMPORTS = {"jax", "flax", "optax", "orbax", "numpy", *sys.stdlib_module_names}
# An example about a loader needs the loader, as its page says; the checkpoint example takes
# its folder as Orbax's own path type, from etils, which orbax-checkpoint installs.
ALSO_ALLOWED = {"grain_per_process.py": {"grain", "array_record"}, "train_and_resume.py": {"etils"}}


@pytest.mark.parametrize("script", sorted(EXAMPLES.rglob("*.py")), ids=lambda p: p.name)
def test_examples_import_only_jax_flax_optax_numpy_and_the_standard_library(script):
    imported = set()
    for node in ast.walk(ast.parse(script.read_text())):
        if isinstance(node, ast.Import):
            imported |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0:
            imported.add(node.module.split(".")[0])
    assert imported, f"{script} imports nothing?"
    allowed = ALLOWED_IMPORTS | ALSO_ALLOWED.get(script.name, set())
    assert imported <= allowed, imported - allowed


def run_example(*args: str) -> subprocess.CompletedProcess[str]:
    return run_python("-W", "error", str(EXAMPLE), *args, check=False)


@pytest.fixture(scope="module")
def example():
    """The example loaded as a module, to call its ``main`` in this process on its 8 devices."""
    spec = importlib.util.spec_from_file_location("sharding_spmd", EXAMPLE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def call_main(example, capsys, *args: str) -> tuple[int, str, str]:
    """The exit status, output and error output of ``main(args)``, as the script would give."""
    try:
        status = example.main(list(args))
    except SystemExit as exit:  # argparse's own errors
        status = exit.code
    captured = capsys.readouterr()
    return status, captured.out, captured.err


@pytest.mark.once
def test_the_script_runs_in_a_fresh_process_and_the_mesh_flag_reshapes_the_mesh():
    result = run_example("--strategy", "2d", "--mesh", "2x4", "--steps", "2")
    assert result.returncode == 0, result.stderr
    assert result.stderr == ""
    assert result.stdout.startswith("8 CPU devices\n")
    assert "on mesh (data=2, model=4)" in result.stdout


# In this process (warnings are errors here too): the script's own start-up is tested above.
@pytest.mark.once
@pytest.mark.parametrize("strategy", ["dp", "tp", "2d", "fsdp"])
def test_each_strategy_trains_on_eight_devices_without_warnings(example, capsys, strategy):
    status, out, err = call_main(example, capsys, "--strategy", strategy, "--steps", "8")
    assert status == 0, err
    assert err == ""
    assert out.startswith("8 CPU devices\n")
    assert f"strategy '{strategy}'" in out
    total = int(re.search(r"parameters: ([\d,]+) bytes", out).group(1).replace(",", ""))
    per_device = re.search(r"per device: (.*)", out).group(1).split(", ")
    held = [int(entry.split(":")[1].replace(",", "")) for entry in per_device]
    assert len(held) == 8 and len(set(held)) == 1
    # The share of the parameters each device holds: whole for dp; the large weights split
    # 8 ways for fsdp and tp, 2 ways (over 'model') for 2d on its default 4x2 mesh.
    largest_share = {"dp": 1.0, "fsdp": 0.15, "tp": 0.15, "2d": 0.55}[strategy]
    assert held[0] <= largest_share * total
    assert held[0] > {"dp": 0.99, "fsdp": 0.1, "tp": 0.1, "2d": 0.45}[strategy] * total
    losses = [float(v) for v in re.findall(r"loss (\d+\.\d+)", out)]
    assert len(losses) >= 2 and losses[-1] < losses[0]


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
def test_bad_arguments_get_a_clear_error(example, capsys, args, message):
    status, _, err = call_main(example, capsys, *args)
    assert status == 2
    assert message in err
    assert "Traceback" not in err


# The multi-process examples, and a line each prints when started plainly, as the only process.
ALONE = {
    "multihost/global_computation.py": "process 0 of 1: 8 local devices, 8 global devices",
    "multihost/read_a_global_result.py": (
        "process 0: np.asarray(doubled) worked: this one process holds every shard"
    ),
    "multihost/hybrid_mesh.py": "mesh row: devices [0, 1, 2, 3, 4, 5, 6, 7], processes [0]",
    "multihost/per_process_batches.py": "process 0: loaded rows 0 to 31",
}


@pytest.fixture
def no_cluster(monkeypatch):
    """No variable of a launcher JAX detects, as for a plain `python script.py`."""
    for name in list(os.environ):
        if name.startswith(("SLURM_", "OMPI_", "PMIX_")) or name == "KUBERNETES_SERVICE_HOST":
            monkeypatch.delenv(name)


@pytest.mark.once
@pytest.mark.parametrize("script", sorted(ALONE), ids=lambda path: Path(path).name)
def test_a_multi_process_example_started_plainly_runs_alone(no_cluster, script):
    alone = run_python("-W", "error", str(EXAMPLES / script), devices=8, check=False)
    assert alone.returncode == 0, alone.stderr
    assert alone.stderr == ""
    assert ALONE[script] in alone.stdout.splitlines()


@pytest.mark.once
def test_a_job_described_without_a_coordinator_fails_at_once_instead_of_running_alone(
    no_cluster,
):
    script = EXAMPLES / "multihost" / "per_process_batches.py"
    env = {"JAX_NUM_PROCESSES": "2", "JAX_PROCESS_ID": "1"}
    partial = run_python(str(script), devices=4, env=env, timeout=60, check=False)
    assert partial.returncode == 1
    assert "ValueError: coordinator_address should be defined." in partial.stderr
    assert "or set JAX_COORDINATOR_ADDRESS, JAX_NUM_PROCESSES and JAX_PROCESS_ID" in (
        partial.stderr
    )
    assert "loaded rows" not in partial.stdout


PER_PROCESS = EXAMPLES / "multihost" / "per_process_batches.py"


def advised_counts(message: str) -> list[int]:
    """The row counts a refusal says to drop or pad to."""
    return [int(n) for n in re.findall(r"so that each holds (\d+)", message)]


@pytest.mark.once
def test_rows_its_devices_cannot_share_are_refused_with_counts_that_work(no_cluster):
    refused = run_python(str(PER_PROCESS), "--rows", "5", devices=8, check=False)
    assert refused.returncode == 1, refused.stderr
    assert "each process holds 5 rows, which its 8 devices cannot share evenly" in refused.stdout
    # Dropping to 0 rows is no fix, so only padding is offered.
    assert advised_counts(refused.stdout) == [8] and "drop" not in refused.stdout
    fixed = run_python(str(PER_PROCESS), "--rows", "8", devices=8, check=False)
    assert fixed.returncode == 0, fixed.stdout + fixed.stderr
    assert "global batch float32[8@data,3], equal to each process's 8 rows" in fixed.stdout


@pytest.mark.once
def test_uneven_rows_are_refused_with_counts_that_work():
    from spmd_guide.launch import run_launcher

    job = ("-n", "2", "--devices-per-process", "4", str(PER_PROCESS))
    refused, _ = run_launcher(*job, "--uneven", timeout=180, retry=False)
    assert refused.returncode != 0
    assert "they hold process 0: 16, process 1: 14" in refused.stdout
    refusal = next(line for line in refused.stdout.splitlines() if "they hold" in line)
    dropped, padded = advised_counts(refusal)
    assert (dropped, padded) == (12, 16)
    # Padding to 16 is the even run; dropping to 12 must work too.
    fixed, failed_attempt = run_launcher(*job, "--rows", str(dropped), timeout=180)
    assert fixed.returncode == 0, (fixed.stdout + fixed.stderr, failed_attempt)
    assert "global batch float32[24@data,3], equal to each process's 12 rows" in fixed.stdout


GRAIN = EXAMPLES / "multihost" / "grain_per_process.py"


@pytest.mark.once
def test_the_grain_example_refuses_more_steps_than_its_records_and_runs_the_most_it_names(
    no_cluster, tmp_path
):
    refused = run_python(
        "-W", "error", str(GRAIN), "--dir", str(tmp_path), "--steps", "17", devices=8, check=False
    )
    assert refused.returncode == 2, refused.stderr
    assert "17 steps of 16 records need 272, and the file holds 256" in refused.stderr
    assert "Traceback" not in refused.stderr
    most = int(re.search(r"train at most (\d+) steps", refused.stderr)[1])
    ran = run_python(
        "-W",
        "error",
        str(GRAIN),
        "--dir",
        str(tmp_path),
        "--steps",
        str(most),
        devices=8,
        check=False,
    )
    assert ran.returncode == 0, ran.stderr
    assert stderr_beyond_timing(ran.stderr) == ""
    assert f"process 0: step {most} records" in ran.stdout
    assert "process 0: read 256 records, exactly those it trained on: True" in ran.stdout


@pytest.mark.once
def test_the_grain_example_says_where_to_resume_from_when_there_is_nothing(no_cluster, tmp_path):
    refused = run_python(str(GRAIN), "--dir", str(tmp_path), "--resume", devices=8, check=False)
    assert refused.returncode == 2, refused.stderr
    assert "no checkpoint in" in refused.stderr and "start without --resume" in refused.stderr
    assert "Traceback" not in refused.stderr


@pytest.mark.once
def test_the_grain_example_refuses_a_bucket_address_and_says_what_to_give(no_cluster):
    refused = run_python(str(GRAIN), "--dir", "gs://bucket/run", devices=8, check=False)
    assert refused.returncode == 2, refused.stderr
    assert "'gs://bucket/run' is an address, not a folder" in refused.stderr
    assert "every process sees" in refused.stderr and "Traceback" not in refused.stderr


@pytest.mark.once
def test_the_grain_example_says_a_preemption_needs_a_job_of_several_processes(no_cluster, tmp_path):
    refused = run_python(
        str(GRAIN), "--dir", str(tmp_path), "--stop-signal-after", "1", devices=8, check=False
    )
    assert refused.returncode == 2, refused.stderr
    assert "--stop-signal-after needs a job of several processes" in refused.stderr
    assert "Traceback" not in refused.stderr


def test_only_the_load_dependent_notice_is_left_out_of_stderr():
    notice = (
        "WARNING:absl:Waiting for previous save to complete took 1.085417 seconds. If this number"
        " is high, consider checkpointing less frequently.\n"
    )
    assert stderr_beyond_timing(notice) == ""
    assert stderr_beyond_timing(notice + "UserWarning: x\n") == "UserWarning: x\n"
    assert stderr_beyond_timing("WARNING:absl:something else\n") == "WARNING:absl:something else\n"

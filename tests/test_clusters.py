"""The multi-process examples under Open MPI and a local SLURM cluster (`nox -s launchers`)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from spmd_guide import clusters
from spmd_guide.clusters import local_slurm, missing_programs, mpirun

pytestmark = pytest.mark.launchers

EXAMPLE = "examples/multihost/global_computation.py"
SBATCH = Path("examples/multihost/global_computation.sbatch")
CHECKPOINTS = "examples/checkpoints/train_and_resume.py"
# Each of the other multi-process examples, and a line every rank prints once it has joined.
JOINING = {
    "examples/multihost/read_a_global_result.py": "process {rank}: process_allgather: shape (16,)",
    "examples/multihost/hybrid_mesh.py": (
        "mesh row: devices [2048, 2049, 2050, 2051], processes [1]"
    ),
    "examples/multihost/per_process_batches.py": (
        "process {rank}: global batch float32[32@data,3], equal to the whole dataset"
    ),
}


def _reports(output: str, tag: str) -> dict[int, list[str]]:
    """Each process's lines, from output whose lines start with its tag (`tag` has one group)."""
    lines: dict[int, list[str]] = {}
    for line in output.splitlines():
        match = re.match(tag, line)
        if match:
            lines.setdefault(int(match.group(1)), []).append(line[match.end() :].strip())
    return lines


def _assert_two_processes_agree(lines: dict[int, list[str]]) -> None:
    assert sorted(lines) == [0, 1], lines
    for rank, said in lines.items():
        assert f"process {rank} of 2: 4 local devices, 8 global devices" in said, said
    results = {
        rank: [line for line in said if line.startswith("global result:")]
        for rank, said in lines.items()
    }
    assert results[0] == results[1] and len(results[0]) == 1, results


def test_mpirun_starts_processes_that_find_each_other():
    finished, outputs = mpirun(2, [sys.executable, EXAMPLE], devices_per_process=4)
    assert finished.returncode == 0, finished.stdout[-2000:] + finished.stderr[-2000:]
    _assert_two_processes_agree({rank: out.splitlines() for rank, out in outputs.items()})


def _assert_one_checkpoint_written_by_both(folder: Path) -> None:
    # Two processes that had each trained alone would both have written process 0's database.
    step_4 = folder / "4" / "model"
    for rank in (0, 1):
        assert any((step_4 / f"ocdbt.process_{rank}" / "d").iterdir()), rank


def test_mpirun_runs_the_checkpoint_example_as_one_job_writing_one_checkpoint(tmp_path):
    folder = tmp_path / "shared"
    command = [sys.executable, "-W", "error", CHECKPOINTS, "--dir", str(folder), "--steps", "4"]
    finished, outputs = mpirun(2, command, devices_per_process=4)
    assert finished.returncode == 0, finished.stdout[-2000:] + finished.stderr[-2000:]
    assert sorted(outputs) == [0, 1], outputs
    for rank, output in outputs.items():
        assert f"process {rank} of 2: 4 of 8 CPU devices" in output, output
    assert "checkpoints kept: [2, 4]" in outputs[0]
    assert "step" not in outputs[1]  # the log comes from process 0 only
    _assert_one_checkpoint_written_by_both(folder)


@pytest.mark.parametrize("script", sorted(JOINING), ids=lambda path: Path(path).name)
def test_mpirun_joins_the_other_multi_process_examples(script):
    finished, outputs = mpirun(2, [sys.executable, "-W", "error", script], devices_per_process=4)
    assert finished.returncode == 0, finished.stdout[-2000:] + finished.stderr[-2000:]
    assert sorted(outputs) == [0, 1], outputs
    for rank, output in outputs.items():
        assert JOINING[script].format(rank=rank) in output, output


def test_srun_and_sbatch_run_the_examples_on_a_local_slurm_cluster(tmp_path):
    with local_slurm() as slurm:
        ran = slurm.srun(2, ["python", EXAMPLE], devices_per_process=4)
        assert ran.returncode == 0, ran.stdout[-2000:] + ran.stderr[-2000:]
        _assert_two_processes_agree(_reports(ran.stdout, r"\s*(\d+): "))

        folder = tmp_path / "shared"
        command = ["python", "-W", "error", CHECKPOINTS, "--dir", str(folder), "--steps", "4"]
        trained = slurm.srun(2, command, devices_per_process=4)
        assert trained.returncode == 0, trained.stdout[-2000:] + trained.stderr[-2000:]
        for rank in (0, 1):
            assert f"{rank}: process {rank} of 2: 4 of 8 CPU devices" in trained.stdout
        assert "0: checkpoints kept: [2, 4]" in trained.stdout
        _assert_one_checkpoint_written_by_both(folder)

        submitted, output = slurm.sbatch(SBATCH, devices_per_process=4)
        assert submitted.returncode == 0, submitted.stdout + submitted.stderr
        assert re.fullmatch(r"Submitted batch job \d+\n", submitted.stdout), submitted.stdout
        results = [line for line in output.splitlines() if line.startswith("global result:")]
        assert len(results) == 2 and results[0] == results[1], output
        for rank in (0, 1):
            assert f"process {rank} of 2: 4 local devices, 8 global devices" in output, output


def test_the_slurm_daemons_are_stopped_even_when_the_body_fails():
    started: list[int] = []
    with pytest.raises(KeyError), local_slurm() as slurm:
        for name in ("slurmctld", "slurmd"):
            started.append(int((slurm.folder / f"{name}.pid").read_text()))
        assert not missing_programs()
        raise KeyError("the body failed")
    assert len(started) == 2
    for pid in started:
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)
    assert not slurm.folder.exists()


def test_a_missing_launcher_is_named_with_its_package(monkeypatch):
    monkeypatch.setattr(clusters, "_SEARCH_PATH", "/nonexistent")
    with pytest.raises(RuntimeError, match=r"mpirun not found: .*`apt-get install openmpi-bin`"):
        mpirun(2, ["true"], devices_per_process=1)
    with pytest.raises(RuntimeError, match="slurm-wlm"), local_slurm():
        pass


def test_a_job_that_outlives_its_timeout_is_stopped():
    with pytest.raises(subprocess.TimeoutExpired):
        mpirun(1, ["sleep", "30"], devices_per_process=1, timeout=2)
    # mpirun ended with the timeout: nothing of the job is left running.
    # Anchored: another process whose command line merely contains "sleep 30" is not the job's.
    left = subprocess.run(
        ["pgrep", "-f", "^sleep 30$"], capture_output=True, text=True, check=False
    )
    assert left.stdout == "", left.stdout

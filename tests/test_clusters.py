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


def test_srun_and_sbatch_run_the_example_on_a_local_slurm_cluster():
    with local_slurm() as slurm:
        ran = slurm.srun(2, ["python", EXAMPLE], devices_per_process=4)
        assert ran.returncode == 0, ran.stdout[-2000:] + ran.stderr[-2000:]
        _assert_two_processes_agree(_reports(ran.stdout, r"\s*(\d+): "))

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
    left = subprocess.run(["pgrep", "-f", "sleep 30"], capture_output=True, text=True, check=False)
    assert left.stdout == "", left.stdout

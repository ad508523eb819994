"""examples/checkpoints/train_and_resume.py saves, resumes on another device count, and refuses bad
input, each run in a fresh process with warnings as errors."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest
from process_output import stderr_beyond_timing

from spmd_guide.environment import kill_python_when, run_python
from spmd_guide.launch import run_launcher

SCRIPT = Path(__file__).parents[1] / "examples" / "checkpoints" / "train_and_resume.py"

pytestmark = pytest.mark.once


def run(*args: str, devices: int) -> subprocess.CompletedProcess[str]:
    return run_python("-W", "error", str(SCRIPT), *args, devices=devices, check=False)


def losses(stdout: str) -> dict[int, float]:
    return {int(s): float(v) for s, v in re.findall(r"step\s+(\d+)\s+loss (\d+\.\d+)", stdout)}


def test_a_run_saved_on_8_devices_resumes_on_4_as_if_never_stopped(tmp_path):
    saved = run("--dir", str(tmp_path / "run"), "--steps", "4", devices=8)
    assert saved.returncode == 0, saved.stderr
    assert stderr_beyond_timing(saved.stderr) == ""
    assert "checkpoints kept: [2, 4]" in saved.stdout
    assert sorted(p.name for p in (tmp_path / "run").iterdir()) == ["2", "4"]

    resumed = run("--dir", str(tmp_path / "run"), "--steps", "6", "--resume", devices=4)
    assert resumed.returncode == 0, resumed.stderr
    assert stderr_beyond_timing(resumed.stderr) == ""
    assert "restored step 4 onto 4 devices" in resumed.stdout
    assert digests(resumed.stdout, "restored") == {4: digests(saved.stdout, "saving")[4]}
    assert "each device holds (32, 512)" in resumed.stdout
    assert "checkpoints kept: [4, 6]" in resumed.stdout

    straight = run("--dir", str(tmp_path / "straight"), "--steps", "6", devices=8)
    assert straight.returncode == 0, straight.stderr
    assert sorted(losses(resumed.stdout)) == [5, 6]
    for step, loss in losses(resumed.stdout).items():
        assert loss == pytest.approx(losses(straight.stdout)[step], rel=1e-5), step
    assert losses(saved.stdout) == {s: losses(straight.stdout)[s] for s in (1, 2, 3, 4)}


def digests(stdout: str, verb: str) -> dict[int, str]:
    return {int(s): d for s, d in re.findall(rf"{verb} step (\d+).*state digest (\w+)", stdout)}


@pytest.mark.processes
def test_a_checkpoint_saved_by_two_processes_restores_in_one_bit_for_bit(tmp_path):
    job, failed_attempt = run_launcher(
        "-n",
        "2",
        "--devices-per-process",
        "4",
        str(SCRIPT),
        "--dir",
        "shared",
        "--steps",
        "4",
        cwd=tmp_path,
    )
    assert job.returncode == 0, (job.stdout, job.stderr, failed_attempt)
    for i in (0, 1):
        assert f"[{i}] process {i} of 2: 4 of 8 CPU devices" in job.stdout
    # Each process wrote a database of its own into the one checkpoint.
    step_4 = tmp_path / "shared" / "4" / "model"
    for i in (0, 1):
        assert any((step_4 / f"ocdbt.process_{i}" / "d").iterdir()), i

    one = run("--dir", str(tmp_path / "shared"), "--steps", "6", "--resume", devices=8)
    assert one.returncode == 0, one.stderr
    assert "restored step 4 onto 8 devices" in one.stdout
    assert digests(one.stdout, "restored") == {4: digests(job.stdout, "saving")[4]}


def test_a_save_killed_half_way_is_never_the_latest_checkpoint(tmp_path):
    folder = tmp_path / "run"

    def writing_step_4() -> bool:
        unfinished = folder / "4.orbax-checkpoint-tmp" / "model" / "ocdbt.process_0" / "d"
        return unfinished.is_dir() and any(unfinished.iterdir())

    killed = kill_python_when(
        "-W",
        "error",
        str(SCRIPT),
        "--dir",
        str(folder),
        "--steps",
        "6",
        condition=writing_step_4,
        devices=8,
    )
    assert killed.returncode == -9
    assert sorted(p.name for p in folder.iterdir()) == ["2", "4.orbax-checkpoint-tmp"]

    resumed = run("--dir", str(folder), "--steps", "6", "--resume", devices=8)
    assert resumed.returncode == 0, resumed.stderr
    assert "restored step 2 onto 8 devices" in resumed.stdout
    assert digests(resumed.stdout, "restored") == {2: digests(killed.stdout, "saving")[2]}
    assert sorted(p.name for p in folder.iterdir()) == ["4", "6"]


def test_resuming_from_a_missing_folder_says_to_run_without_resume(tmp_path):
    missing = run("--dir", str(tmp_path / "nothing"), "--resume", devices=8)
    assert missing.returncode == 2
    assert "no checkpoint folder" in missing.stderr
    assert "run without --resume first" in missing.stderr


def test_resuming_from_an_empty_folder_says_it_holds_no_checkpoint(tmp_path):
    empty = run("--dir", str(tmp_path), "--resume", devices=8)
    assert empty.returncode == 2
    assert "holds no checkpoint; run without --resume first" in empty.stderr


def test_a_device_count_that_cannot_split_the_model_is_refused(tmp_path):
    three = run("--dir", str(tmp_path / "run"), devices=3)
    assert three.returncode == 2
    assert "3 devices cannot split the 128-wide embed dimension" in three.stderr
    assert not (tmp_path / "run").exists()


def test_a_bucket_folder_is_kept_as_given_and_a_local_one_made_absolute(tmp_path, monkeypatch):
    import importlib.util

    spec = importlib.util.spec_from_file_location("train_and_resume", SCRIPT)
    assert spec is not None and spec.loader is not None
    example = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(example)
    monkeypatch.chdir(tmp_path)
    assert str(example.parse_args(["--dir", "gs://bucket/run"]).dir) == "gs://bucket/run"
    assert str(example.parse_args(["--dir", "s3://bucket/run"]).dir) == "s3://bucket/run"
    assert str(example.parse_args(["--dir", "run"]).dir) == str(tmp_path / "run")


def test_a_heartbeat_timeout_under_a_second_is_refused(tmp_path):
    refused = run("--dir", str(tmp_path), "--heartbeat-timeout", "0", devices=8)
    assert refused.returncode == 2
    assert "--heartbeat-timeout must be at least 1 second, got 0" in refused.stderr


def test_a_failing_process_dies_after_its_step_with_the_checkpoint_before_it_complete(tmp_path):
    folder = tmp_path / "run"
    failed = run("--dir", str(folder), "--steps", "6", "--fail-on", "0", "--fail-at-step", "3",
                 devices=8)  # fmt: skip
    assert failed.returncode == -9, failed.stderr  # SIGKILL: no message, no clean-up
    assert sorted(losses(failed.stdout)) == [1, 2, 3]
    assert (folder / "2" / "commit_success.txt").is_file()
    assert "checkpoints kept" not in failed.stdout


def test_a_failure_at_a_step_past_the_run_or_on_no_process_is_refused(tmp_path):
    late = run("--dir", str(tmp_path), "--steps", "4", "--fail-on", "1", "--fail-at-step", "4",
               devices=8)  # fmt: skip
    assert late.returncode == 2
    assert "--fail-at-step must be a step from 1 to 3 (before --steps), got 4" in late.stderr
    nobody = run("--dir", str(tmp_path), "--fail-on", "1", devices=8)
    assert nobody.returncode == 2
    assert "--fail-on 1: the job's processes are 0 to 0" in nobody.stderr

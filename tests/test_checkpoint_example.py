"""examples/checkpoints/train_and_resume.py saves, resumes on another device count, and refuses bad
input, each run in a fresh process with warnings as errors."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

from spmd_guide.environment import run_python

SCRIPT = Path(__file__).parents[1] / "examples" / "checkpoints" / "train_and_resume.py"

pytestmark = pytest.mark.once


def run(*args: str, devices: int) -> subprocess.CompletedProcess[str]:
    return run_python("-W", "error", str(SCRIPT), *args, devices=devices, check=False)


def losses(stdout: str) -> dict[int, float]:
    return {int(s): float(v) for s, v in re.findall(r"step\s+(\d+)\s+loss (\d+\.\d+)", stdout)}


def test_a_run_saved_on_8_devices_resumes_on_4_as_if_never_stopped(tmp_path):
    saved = run("--dir", str(tmp_path / "run"), "--steps", "4", devices=8)
    assert saved.returncode == 0, saved.stderr
    assert saved.stderr == ""
    assert "checkpoints kept: [2, 4]" in saved.stdout
    assert sorted(p.name for p in (tmp_path / "run").iterdir()) == ["2", "4"]

    resumed = run("--dir", str(tmp_path / "run"), "--steps", "6", "--resume", devices=4)
    assert resumed.returncode == 0, resumed.stderr
    assert resumed.stderr == ""
    assert "restored step 4 onto 4 devices" in resumed.stdout
    assert "each device holds (32, 512)" in resumed.stdout
    assert "checkpoints kept: [4, 6]" in resumed.stdout

    straight = run("--dir", str(tmp_path / "straight"), "--steps", "6", devices=8)
    assert straight.returncode == 0, straight.stderr
    assert sorted(losses(resumed.stdout)) == [5, 6]
    for step, loss in losses(resumed.stdout).items():
        assert loss == pytest.approx(losses(straight.stdout)[step], rel=1e-5), step
    assert losses(saved.stdout) == {s: losses(straight.stdout)[s] for s in (1, 2, 3, 4)}


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

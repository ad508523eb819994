"""The launcher runs a real multi-process JAX program, and fails fast and clearly when it must."""

from __future__ import annotations

import io
import subprocess
import sys
from pathlib import Path

import pytest

from spmd_guide.launch import launch, lines_by_process

ROOT = Path(__file__).parents[1]
EXAMPLE = ROOT / "examples" / "multihost" / "global_computation.py"

# The launcher starts processes of its own.
pytestmark = pytest.mark.once


def run_launcher(*args: str, timeout: float = 180) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "spmd_guide.launch", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=ROOT,
    )


@pytest.mark.processes
def test_two_processes_build_one_global_mesh_and_agree(tmp_path):
    report = tmp_path / "report.txt"
    result = run_launcher(
        "-n",
        "2",
        "--devices-per-process",
        "4",
        "--check-agree",
        "global result",
        str(EXAMPLE),
        "--output",
        str(report),
    )
    assert result.returncode == 0, result.stdout + result.stderr
    out = result.stdout
    for i in (0, 1):
        assert f"[{i}] process {i} of 2: 4 local devices, 8 global devices" in out
        assert f"[{i}] process {i}: local rows (8, 3), global array float32[16@data,3]" in out
    # 0..47 in 16 rows of 3: the sum is 1128 and the sum of squares 35720.
    assert "global result: sum of squares 35720.0, psum total 1128.0" in out
    assert "launch: all 2 processes agree" in out
    assert report.read_text() == "global result: sum of squares 35720.0, psum total 1128.0\n"
    assert "[1] process 0 wrote" not in out and "[0] process 0 wrote" in out


@pytest.mark.processes
def test_a_wrong_process_count_fails_clearly_within_the_timeout():
    result = run_launcher(
        "-n",
        "2",
        "--devices-per-process",
        "2",
        "--timeout",
        "60",
        str(EXAMPLE),
        "--num-processes",
        "3",
        "--init-timeout",
        "5",
    )
    assert result.returncode == 1
    assert "could not join 3 process(es)" in result.stdout
    # Ended by the failed join, not by the launcher's 60 s timeout, whose reason would say so.
    assert "exited with code 1; stopped all 2 processes" in result.stderr


def test_a_process_with_no_coordinator_fails_clearly(tmp_path):
    env_free = {"PATH": "/usr/bin:/bin"}
    result = subprocess.run(
        [
            sys.executable,
            str(EXAMPLE),
            "--coordinator-address",
            "127.0.0.1:9",
            "--num-processes",
            "2",
            "--process-id",
            "1",
            "--init-timeout",
            "3",
        ],
        capture_output=True,
        text=True,
        timeout=60,
        env=env_free,
    )
    assert result.returncode == 1
    assert (
        "could not join 2 process(es) through the coordinator at 127.0.0.1:9 within 3 s"
        in result.stderr
    )
    assert "Traceback" not in result.stderr


@pytest.mark.processes
def test_one_failing_process_stops_the_rest_at_once(tmp_path):
    script = tmp_path / "one_fails.py"
    script.write_text(
        "import os, sys, time\n"
        "if os.environ['JAX_PROCESS_ID'] == '1':\n"
        "    print('giving up'); sys.exit(3)\n"
        "time.sleep(600)\n"
    )
    out = io.StringIO()
    result = launch(
        [sys.executable, str(script)], num_processes=2, devices_per_process=1, out=out, timeout=60
    )
    assert result.returncode == 1
    # Stopped at process 1's exit: waiting on process 0's sleep would end in the 60 s timeout.
    assert result.reason == "process 1 exited with code 3"
    assert "[1] giving up" in out.getvalue()


@pytest.mark.processes
def test_keep_going_for_a_while_stops_the_others_that_long_after_a_failure(tmp_path):
    script = tmp_path / "one_fails.py"
    script.write_text(
        "import os, sys, time\n"
        "if os.environ['JAX_PROCESS_ID'] == '1':\n"
        "    sys.exit(3)\n"
        "time.sleep(600)\n"
    )
    result = launch(
        [sys.executable, str(script)],
        num_processes=2,
        devices_per_process=1,
        out=io.StringIO(),
        timeout=120,
        keep_going=True,
        keep_going_for=1,
    )
    # Stopped by the second after the failure, not by the 120 s timeout, whose reason differs.
    assert result.returncode == 1
    stopped = "stopped 1 s after process 1 exited with code 3; still running: process 0"
    assert result.reason == stopped


def test_a_negative_keep_going_for_is_refused():
    with pytest.raises(ValueError, match="--keep-going-for must be zero or more seconds, got -1"):
        launch(["true"], num_processes=1, devices_per_process=1, keep_going_for=-1)


@pytest.mark.processes
def test_keep_going_lets_the_others_finish_and_names_every_failure(tmp_path):
    script = tmp_path / "one_fails.py"
    script.write_text(
        "import os, sys, time\n"
        "if os.environ['JAX_PROCESS_ID'] == '1':\n"
        "    sys.exit(3)\n"
        "time.sleep(1)\n"
        "print('finished')\n"
    )
    out = io.StringIO()
    result = launch(
        [sys.executable, str(script)],
        num_processes=3,
        devices_per_process=1,
        out=out,
        keep_going=True,
    )
    assert result.returncode == 1
    assert result.reason == "process 1 exited with code 3"
    assert "[0] finished" in out.getvalue() and "[2] finished" in out.getvalue()


@pytest.mark.processes
def test_a_process_that_fails_part_way_is_outlived_by_the_others(tmp_path):
    from spmd_guide.launch import launch_and_lose

    script = tmp_path / "counts.py"
    script.write_text(
        "import os, signal, time\n"
        "for i in range(20):\n"
        "    print(os.environ['JAX_PROCESS_ID'], i, flush=True)\n"
        "    if i == 3 and os.environ['JAX_PROCESS_ID'] == '1':\n"
        "        os.kill(os.getpid(), signal.SIGKILL)\n"
        "    time.sleep(0.05)\n"
    )
    result, ended = launch_and_lose(
        [sys.executable, str(script)],
        num_processes=2,
        devices_per_process=1,
        victim=1,
        timeout=60,
    )
    assert result.reason == "process 1 exited with code -9"
    assert result.outputs[0][-1] == "0 19" and result.outputs[1][-1] == "1 3"
    assert list(ended) == [0] and ended[0] > 0  # ended on its own, after the loss


@pytest.mark.processes
def test_losing_a_process_says_when_another_ends_first_or_none_ends(tmp_path):
    from spmd_guide.launch import launch_and_lose

    first_ends = tmp_path / "first_ends.py"
    first_ends.write_text(
        "import os, time\nif os.environ['JAX_PROCESS_ID'] == '1':\n    time.sleep(600)\n"
    )
    with pytest.raises(RuntimeError, match="a process ended before process 1"):
        launch_and_lose(
            [sys.executable, str(first_ends)], num_processes=2, devices_per_process=1, victim=1
        )
    never_ends = tmp_path / "never_ends.py"
    never_ends.write_text("import time\ntime.sleep(600)\n")
    with pytest.raises(TimeoutError, match="process 0 never ended"):
        launch_and_lose(
            [sys.executable, str(never_ends)],
            num_processes=1,
            devices_per_process=1,
            victim=0,
            timeout=1,
        )


@pytest.mark.processes
def test_a_hung_run_times_out(tmp_path):
    script = tmp_path / "hangs.py"
    script.write_text("import time\ntime.sleep(600)\n")
    result = launch(
        [sys.executable, str(script)],
        num_processes=2,
        devices_per_process=1,
        timeout=2,
        out=io.StringIO(),
    )
    assert result.returncode == 1
    assert result.reason.startswith("timed out after 2 s; still running: process 0, 1")


@pytest.mark.processes
def test_each_process_is_told_how_to_join(tmp_path):
    script = tmp_path / "env.py"
    script.write_text(
        "import os\n"
        "print(os.environ['JAX_PROCESS_ID'], os.environ['JAX_NUM_PROCESSES'],"
        " os.environ['JAX_NUM_CPU_DEVICES'], os.environ['JAX_COORDINATOR_ADDRESS'].split(':')[0])\n"
    )
    result = launch(
        [sys.executable, str(script)], num_processes=3, devices_per_process=2, out=io.StringIO()
    )
    assert result.returncode == 0
    assert {i: lines for i, lines in result.outputs.items()} == {
        i: [f"{i} 3 2 127.0.0.1"] for i in range(3)
    }


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["-n", "0", "x.py"], "no such script"),
        (["-n", "0", str(EXAMPLE)], "need at least one process"),
        (["--timeout", "0", str(EXAMPLE)], "--timeout must be positive"),
    ],
)
def test_bad_arguments_are_refused(args, message):
    result = run_launcher(*args, timeout=60)
    assert result.returncode == 2
    assert message in result.stderr


def test_the_output_is_gathered_by_process_without_the_runtime_log():
    output = "\n".join(
        [
            "[1] process 1 starts",
            "[0] process 0 starts",
            "[0] [Gloo] Rank 0 is connected to 1 peer ranks.",
            "[1] I0000 00:00:1 coordination",
            "[10] process 10 starts",
            "[0] process 0 ends",
            "launch: all 3 processes agree: done",
        ]
    )
    assert lines_by_process(output) == [
        "[0] process 0 starts",
        "[0] process 0 ends",
        "[1] process 1 starts",
        "[10] process 10 starts",
        "launch: all 3 processes agree: done",
    ]


def test_a_gloo_line_that_lands_inside_a_printed_one_is_taken_out():
    gloo = (
        "[Gloo] Rank 3 is connected to 7 peer ranks. Expected number of connected peer ranks is : 7"
    )
    output = "\n".join([f"[0] process 0 of 2: 4 local devices{gloo}", "[0] ", f"[1] {gloo}"])
    assert lines_by_process(output) == ["[0] process 0 of 2: 4 local devices"]


def test_gloo_messages_split_over_lines_by_another_thread_are_taken_out():
    # What one process printed during a build: a second thread's message landed inside the first.
    output = "\n".join(
        [
            "[1] process 1: local rows (8, 3), global array float32[16@data,3]",
            "[1] [Gloo] Rank 1 is connected to [Gloo] Rank 1 is connected to 7 peer ranks. "
            "Expected number of connected peer ranks is : 7",
            "[1] 7 peer ranks. Expected number of connected peer ranks is : 7",
            "[1] global result: sum of squares 35720.0, psum total 1128.0",
        ]
    )
    assert lines_by_process(output) == [
        "[1] process 1: local rows (8, 3), global array float32[16@data,3]",
        "[1] global result: sum of squares 35720.0, psum total 1128.0",
    ]


def test_a_gloo_message_cut_before_its_number_is_taken_out_with_the_number():
    # What one process printed during a build: the count went to a line of its own.
    output = "\n".join(
        [
            "[1] Expected number of connected peer ranks is : ",
            "[1] 1",
            "[1] process 1: step 0 done",
            "[0] 12 batches",
        ]
    )
    assert lines_by_process(output) == ["[0] 12 batches", "[1] process 1: step 0 done"]


READING = ROOT / "examples" / "multihost" / "read_a_global_result.py"


@pytest.mark.processes
def test_a_sharded_result_is_unreadable_but_gathered_or_replicated_in_every_process():
    result = run_launcher("-n", "2", "--devices-per-process", "4", str(READING))
    assert result.returncode == 0, result.stdout + result.stderr
    for i in (0, 1):
        assert (
            f"[{i}] process {i}: np.asarray(doubled) raised RuntimeError: Fetching value for "
            "`jax.Array` that spans non-addressable"
        ) in result.stdout
        # Twice the numbers 0 to 15.
        assert f"[{i}] process {i}: process_allgather: shape (16,), sum 240" in result.stdout
        assert f"[{i}] process {i}: replicated result: sum 240" in result.stdout


HYBRID = ROOT / "examples" / "multihost" / "hybrid_mesh.py"


@pytest.mark.processes
def test_a_psum_over_the_local_axis_stays_inside_each_process():
    result = run_launcher("-n", "2", "--devices-per-process", "4", str(HYBRID))
    assert result.returncode == 0, result.stdout + result.stderr
    groups = "replica_groups=mesh['process'=2,'local'=4]"
    for i, local_sum in ((0, 4.0), (1, 8.0)):
        local = f"psum over local: {groups} {{'local'}}; this process's blocks now hold"
        across = f"psum over process: {groups} {{'process'}}; this process's blocks now hold"
        assert f"[{i}] {local} [{local_sum}]" in result.stdout
        assert f"[{i}] {across} [3.0]" in result.stdout


BATCHES = ROOT / "examples" / "multihost" / "per_process_batches.py"


@pytest.mark.processes
def test_each_process_loads_its_rows_and_uneven_rows_are_refused_on_every_process():
    even = run_launcher("-n", "2", "--devices-per-process", "4", str(BATCHES))
    assert even.returncode == 0, even.stdout + even.stderr
    for i in (0, 1):
        assert (
            f"[{i}] process {i}: global batch float32[32@data,3], equal to the whole dataset"
            in (even.stdout)
        )
    uneven = run_launcher("-n", "2", "--devices-per-process", "4", str(BATCHES), "--uneven")
    assert uneven.returncode != 0
    refusal = (
        "they hold process 0: 16, process 1: 14; "
        "drop rows so that each holds 12, or pad them so that each holds 16"
    )
    assert refusal in uneven.stdout, uneven.stdout + uneven.stderr

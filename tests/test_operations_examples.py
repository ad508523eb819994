"""examples/operations: a job of two processes that hangs, is stopped, and is kept from hanging,
run under the repository's launcher (`nox -s multihost`) and Open MPI (`nox -s launchers`)."""

from __future__ import annotations

import re
import sys

import pytest

from spmd_guide import timing
from spmd_guide.environment import run_python
from spmd_guide.launch import run_launcher

UNEVEN = "examples/operations/uneven_steps.py"
PROGRESS = re.compile(r"^\s*[\d.]+ s  process (\d): (.*)$", re.MULTILINE)


def _launched(*flags: str, retry: bool = True) -> tuple[int, dict[int, list[str]], str]:
    job = ("-n", "2", "--devices-per-process", "4", "--timeout", "120", UNEVEN, *flags)
    result, _ = run_launcher(*job, timeout=180, retry=retry)
    said: dict[int, list[str]] = {0: [], 1: []}
    for line in result.stdout.splitlines():
        if match := PROGRESS.match(line.partition("] ")[2]):
            said[int(match.group(1))].append(match.group(2))
    return result.returncode, said, result.stdout


def _assert_hung_where_expected(stacks: dict[int, str]) -> None:
    # Each process printed its stacks at the deadline: process 0 inside its third step (at the
    # first line that reads its result), process 1 waiting to shut down.
    assert all("Timeout (0:00:10)!" in stack for stack in stacks.values()), stacks
    assert "in __float__" in stacks[0] and "uneven_steps.py" in stacks[0], stacks
    assert "in shutdown" in stacks[1] and "__float__" not in stacks[1], stacks


@pytest.mark.processes
def test_a_process_short_of_data_hangs_the_job_until_the_deadline_prints_each_stack():
    code, said, output = _launched("--short-on", "1", "--deadline", "10", retry=False)
    assert code != 0
    assert [line.split(",")[0] for line in said[0]] == ["3 batches", "step 0 done", "step 1 done"]
    assert said[1][-1].startswith("finished")
    by_process = {
        p: "\n".join(line for line in output.splitlines() if line.startswith(f"[{p}] "))
        for p in (0, 1)
    }
    _assert_hung_where_expected(by_process)


@pytest.mark.processes
def test_agreeing_on_the_steps_lets_every_process_finish_with_the_same_weights():
    code, said, output = _launched("--short-on", "1", "--agree-on-steps")
    assert code == 0, output
    assert said[0][0].startswith("2 batches") and said[1][0].startswith("2 batches")
    assert said[0][-1] == said[1][-1] and said[0][-1].startswith("finished, weights ")


@pytest.mark.processes
def test_different_programs_run_apart_unless_the_processes_compare_them():
    code, said, output = _launched("--extra-term-on", "1")
    assert code == 0, output
    assert said[0][-1] != said[1][-1]  # the replicated weights differ between processes
    code, said, output = _launched("--extra-term-on", "1", "--check-programs", retry=False)
    assert code != 0
    assert said[0][-1] == "stopping: processes [1] run another program than this one"
    assert said[1][-1] == "stopping: processes [0] run another program than this one"


@pytest.mark.launchers
def test_mpirun_runs_the_hanging_job_and_its_deadline_stops_it():
    from spmd_guide.clusters import mpirun

    command = [sys.executable, UNEVEN, "--short-on", "1", "--deadline", "10"]
    finished, outputs = mpirun(2, command, devices_per_process=4)
    assert finished.returncode != 0
    assert "step 1 done" in outputs[0] and "finished" in outputs[1], outputs
    # mpirun merges the processes' standard errors, their stacks interleaved: each is found
    # there, as the process that printed it.
    stacks = finished.stderr
    assert stacks.count("Timeout (0:00:10)!") == 2, stacks
    assert "in __float__" in stacks and "in shutdown" in stacks, stacks


STRAGGLER = "examples/operations/straggler.py"


def _waits_in_the_all_reduce(trace_dir) -> dict[int, float]:
    """Milliseconds the first device of each process spent in its last step's all-reduce."""
    from spmd_guide.analysis import trace_timeline

    waits = {}
    for process in (0, 1):
        (first, *_) = trace_timeline(str(trace_dir / f"process_{process}")).values()
        waits[process] = sum(
            (o.end_us - o.start_us) / 1e3 for o in first if o.name.startswith("all-reduce")
        )
    return waits


@pytest.mark.processes
def test_the_traces_show_which_process_the_others_wait_for(tmp_path):
    job = ("-n", "2", "--devices-per-process", "4", "--timeout", "120", STRAGGLER)
    result, failed = run_launcher(*job, "--trace-dir", str(tmp_path), "--slow", "1", timeout=180)
    assert result.returncode == 0, (result.stdout + result.stderr, failed)
    times = dict(re.findall(r"process (\d): step seconds ([\d., ]+);", result.stdout))
    assert sorted(times) == ["0", "1"], result.stdout
    for t in times["1"].split(", "):  # the slow process's steps each include its 1 s on the host
        timing.after_timer("straggler test: the slow process's step", float(t), 1.0)
    waits = _waits_in_the_all_reduce(tmp_path)
    check = "straggler test: the fast process's wait over the slow one's"
    timing.ratio_above(check, waits[0], waits[1], 2)


@pytest.mark.launchers
def test_mpirun_profiles_every_process_of_the_job(tmp_path):
    from spmd_guide.clusters import mpirun

    command = [sys.executable, STRAGGLER, "--trace-dir", str(tmp_path), "--slow", "0"]
    finished, outputs = mpirun(2, command, devices_per_process=4)
    assert finished.returncode == 0, finished.stdout[-2000:] + finished.stderr[-2000:]
    assert all(f"process {rank}: step seconds" in outputs[rank] for rank in (0, 1)), outputs
    waits = _waits_in_the_all_reduce(tmp_path)
    check = "straggler under mpirun: the fast process's wait over the slow one's"
    timing.ratio_above(check, waits[1], waits[0], 2)


CACHE = "examples/operations/compile_cache.py"
CACHE_REPORT = re.compile(
    r"process (\d): (\d+) layers traced and lowered in [\d.]+ s, (compiled|read from the cache)"
)


def _cache_outcomes(output: str) -> dict[int, str]:
    return {int(p): outcome for p, _, outcome in CACHE_REPORT.findall(output)}


@pytest.mark.processes
def test_a_restart_reads_process_0s_compile_from_the_shared_folder(tmp_path):
    job = ("-n", "2", "--devices-per-process", "4", "--timeout", "120", CACHE)
    outcomes = []
    for _ in range(2):
        result, failed = run_launcher(*job, "--cache-dir", str(tmp_path), timeout=180)
        assert result.returncode == 0, (result.stdout + result.stderr, failed)
        outcomes.append(_cache_outcomes(result.stdout))
    assert outcomes[0] == {0: "compiled", 1: "compiled"}
    # Process 0 alone writes; on XLA:CPU process 1's key is its own, and is never written.
    assert outcomes[1] == {0: "read from the cache", 1: "compiled"}
    assert len(list(tmp_path.iterdir())) == 1


@pytest.mark.launchers
def test_mpirun_shares_one_cache_folder_between_its_processes(tmp_path):
    from spmd_guide.clusters import mpirun

    command = [sys.executable, CACHE, "--cache-dir", str(tmp_path), "--explain", "--layers", "4"]
    outcomes = []
    for _ in range(2):
        finished, outputs = mpirun(2, command, devices_per_process=4)
        assert finished.returncode == 0, finished.stdout[-2000:] + finished.stderr[-2000:]
        outcomes.append(_cache_outcomes(outputs[0] + outputs[1]))
    assert outcomes == [{0: "compiled", 1: "compiled"}, {0: "read from the cache", 1: "compiled"}]
    assert "Not writing persistent cache entry since process_id != 0" in finished.stderr


@pytest.mark.once
def test_alone_a_changed_program_misses_and_the_same_one_hits(tmp_path):
    def outcome(*flags: str) -> str:
        result = run_python(CACHE, "--cache-dir", str(tmp_path), *flags, devices=1)
        return _cache_outcomes(result.stdout)[0]

    assert [outcome(), outcome(), outcome("--layers", "3"), outcome("--layers", "3")] == [
        "compiled", "read from the cache", "compiled", "read from the cache",
    ]  # fmt: skip


LIVE = "examples/operations/live_devices.py"
LIVE_LINE = re.compile(r"^\[(\d)\] process \d: (.*)$", re.MULTILINE)


def _live(*flags: str, timeout: int = 60) -> tuple[str, dict[int, list[str]]]:
    job = ("-n", "2", "--devices-per-process", "4", "--keep-going", "--timeout", str(timeout))
    result, _ = run_launcher(*job, LIVE, *flags, timeout=timeout + 60, retry=False)
    said: dict[int, list[str]] = {0: [], 1: []}
    for p, line in LIVE_LINE.findall(result.stdout):
        said[int(p)].append(line)
    return result.stderr, said


@pytest.mark.processes
def test_the_processes_left_carry_on_to_the_weights_of_a_run_that_lost_none():
    _, whole = _live()
    assert whole[0][-1] == whole[1][-1] and whole[0][-1].startswith("finished, weights ")
    stderr, said = _live("--fail-on", "1", "--fail-at-step", "2")
    assert "step 2: the devices of process [1] failed; again without them" in said[0], said
    assert "step 2 on 4 devices" in "\n".join(said[0])
    assert said[0][-1] == whole[0][-1], (said, whole)
    assert "process 1 exited with code 1" in stderr


@pytest.mark.launchers
def test_mpirun_runs_the_live_devices_job_to_a_clean_end():
    from spmd_guide.clusters import mpirun

    finished, outputs = mpirun(2, [sys.executable, LIVE], devices_per_process=4)
    assert finished.returncode == 0, finished.stdout[-2000:] + finished.stderr[-2000:]
    last = [outputs[rank].strip().splitlines()[-1] for rank in (0, 1)]
    assert last[0] == last[1].replace("process 1", "process 0") and "finished" in last[0]


@pytest.mark.once
def test_the_live_devices_job_started_alone_says_it_needs_several_processes():
    alone = run_python(LIVE, devices=4, check=False)
    assert alone.returncode == 2
    assert "needs a job of several processes" in alone.stderr and "Traceback" not in alone.stderr


@pytest.mark.once
@pytest.mark.parametrize(
    "script, args, message",
    [
        (UNEVEN, ["--deadline", "0"], "--deadline must be a positive number of seconds"),
        (STRAGGLER, ["--trace-dir", "t", "--delay", "-1"], "--delay must be zero or more seconds"),
        (CACHE, ["--cache-dir", "c", "--layers", "0"], "--layers must be at least 1, got 0"),
        (
            LIVE,
            ["--fail-on", "1", "--fail-at-step", "6"],
            "--fail-at-step must be a step from 0 to 5, got 6",
        ),
    ],
    ids=["deadline", "delay", "layers", "fail-at-step"],
)
def test_an_argument_out_of_range_is_refused_before_anything_runs(script, args, message):
    # Refused while parsing: the folders named are never made.
    refused = run_python(script, *args, devices=1, check=False)
    assert refused.returncode == 2
    assert message in refused.stderr

"""Check a learner's solution to a practice problem on 1, 2, 4 and 8 CPU devices.

JAX fixes its device count at start-up, so each device count has processes of its own: the
reference's (:mod:`spmd_guide.practice.reference_worker`), which makes the cases and the
expected answers and exits, and the solution's (:mod:`spmd_guide.practice.solution_runner`),
which imports nothing of this package and runs the learner's function on the inputs this
process sends it, one request at a time. This process judges what comes back against the
problem's requirements, picks hints and reports. It never imports the solution. The solution's
own output goes to a file and is shown, trimmed; each request has a time limit; and both
processes' groups are killed at the end.
"""

from __future__ import annotations

import ast
import contextlib
import json
import math
import os
import secrets
import select
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

import numpy as np

from spmd_guide.environment import (
    CHECKED_DEVICE_COUNTS,
    cpu_devices_env,
    environment_without_jax_settings,
)
from spmd_guide.practice.catalog import get_problem
from spmd_guide.practice.problem import Failure, Outcome, Problem
from spmd_guide.practice.protocol import decode, is_mesh

DEVICE_COUNTS = CHECKED_DEVICE_COUNTS
"""The device counts a solution is checked on; the problems' cases are written for these."""

CASE_TIMEOUT = 60.0
"""Seconds one case (or importing the solution) may take by default."""

START_TIMEOUT = 180.0
"""Seconds the processes may take to start JAX and compute the expected answers."""

OUTPUT_LIMIT = 20 * 2**20
"""Bytes a solution may print before the checker stops it."""

SHOWN_OUTPUT_LINES = 5
"""Lines of a solution's own output shown in the report, from the end."""

SHOWN_FAILURES = 2
"""Failing cases shown in full for each device count."""

SHOWN_MESSAGE = 240
"""Characters of an exception's message shown in the report."""


QUICK_COMPILE = {"XLA_FLAGS": "--xla_backend_optimization_level=0"}
"""Settings of the checker's processes: the cases' programs are tiny, so LLVM's optimisations
take longer than they save (a fifth of the time of checking the test suite's solutions), and
they change nothing the checker reads from a compiled program, which XLA fixes before them."""


class UsageError(Exception):
    """The checker was asked for something it cannot do: the message says what to change."""


@dataclass
class CaseReport:
    """One case on one device count, judged."""

    number: int
    outcome: Outcome
    failures: list[Failure]
    hint: str | None = None

    @property
    def passed(self) -> bool:
        return not self.failures


@dataclass
class DeviceRun:
    """One solution's cases on one device count, or why they could not all run."""

    devices: int
    expected_cases: int = 0
    cases: list[CaseReport] = field(default_factory=list)
    failure: str = ""
    hint: str | None = None
    notes: list[str] = field(default_factory=list)
    output: list[str] = field(default_factory=list)

    @property
    def passed(self) -> bool:
        return (
            not self.failure
            and self.expected_cases > 0
            and len(self.cases) == self.expected_cases
            and all(case.passed for case in self.cases)
        )


@dataclass
class Report:
    """A solution checked on every device count asked for."""

    problem: Problem
    path: Path
    runs: list[DeviceRun]

    @property
    def passed(self) -> bool:
        return all(run.passed for run in self.runs)

    def failed_requirements(self) -> set[str]:
        """The keys of the requirements some case did not meet."""
        return {f.key for run in self.runs for case in run.cases for f in case.failures}

    def text(self, shown_path: str | None = None) -> str:
        """The report a learner reads."""
        shown = shown_path or str(self.path)
        counts = [run.devices for run in self.runs]
        lines = [f"Checking {self.problem.name} from {shown} on {_devices(counts)}"]
        for run in self.runs:
            lines += ["", *_run_lines(run)]
        failed = [run.devices for run in self.runs if not run.passed]
        lines.append("")
        if not failed:
            lines.append(f"PASSED: every case on {_devices(counts)}.")
        else:
            lines.append(f"FAILED on {_devices(failed)}.")
            split = any(
                case.outcome.case_mesh is not None
                and math.prod(case.outcome.case_mesh["axes"].values()) > 1
                for run in self.runs
                for case in run.cases
            )
            if 1 in counts and 1 not in failed and split:
                lines.append(
                    "It passes on one device: the mistake only shows when the data is really split."
                )
        return "\n".join(lines)


def check(
    name: str,
    path: str | os.PathLike[str],
    *,
    device_counts: Sequence[int] = DEVICE_COUNTS,
    case_timeout: float = CASE_TIMEOUT,
) -> Report:
    """Check the solution in the file ``path`` to problem ``name``.

    Raises:
        UsageError: for an unknown problem, a path that is not a file, device counts other
            than 1, 2, 4 and 8, or a time limit that is not positive.
    """
    (report,) = check_many([(name, path)], device_counts=device_counts, case_timeout=case_timeout)
    return report


def check_many(
    jobs: Sequence[tuple[str, str | os.PathLike[str]]],
    *,
    device_counts: Sequence[int] = DEVICE_COUNTS,
    case_timeout: float = CASE_TIMEOUT,
) -> list[Report]:
    """Check several solutions, sharing one pair of processes per device count.

    Faster than one :func:`check` each, since JAX starts once per device count; but the
    solutions share a process, so one that ends or hangs it stops the ones after it. For
    trusted solutions, such as a test suite's.
    """
    counts = _valid_counts(device_counts)
    if not case_timeout > 0:
        raise UsageError(f"the time limit must be a positive number of seconds, got {case_timeout}")
    problems = [(get_problem_or_usage_error(name), _valid_file(path)) for name, path in jobs]
    unusable = {path: _syntax_error(path) for _, path in problems}
    runnable = [(p, path) for p, path in problems if unusable[path] is None]
    workers = max(1, min(len(counts), os.cpu_count() or 1))
    with ThreadPoolExecutor(max_workers=workers) as pool:
        by_count = list(pool.map(lambda count: _run_worker(runnable, count, case_timeout), counts))
    reports = []
    for problem, path in problems:
        failure = unusable[path]
        if failure is not None:
            runs = [DeviceRun(count, failure=failure) for count in counts]
        else:
            index = runnable.index((problem, path))
            runs = [runs_for_count[index] for runs_for_count in by_count]
        reports.append(Report(problem, path, runs))
    return reports


def get_problem_or_usage_error(name: str) -> Problem:
    try:
        return get_problem(name)
    except ValueError as error:
        raise UsageError(str(error)) from None


def check_in_process(name: str, function: Callable[..., Any]) -> list[CaseReport]:
    """Judge ``function`` on problem ``name``'s cases in this process, on its devices.

    For the pages' own checks of their solutions; a learner's file goes through :func:`check`.
    """
    import jax

    from spmd_guide.practice import protocol, reference_worker, solution_runner

    problem = get_problem(name)
    reports = []
    for number, case in enumerate(problem.make_cases(jax.device_count()), start=1):
        expected = json.loads(json.dumps(reference_worker.expected_case(problem, case)))
        request = {
            "args": expected["args"],
            "kwargs": expected["kwargs"],
            "jit": problem.jit,
            "trace": problem.traced and case.raises is None,
            "as_given": problem.traced_as_given,
            "compile": problem.compiled,
        }
        answered = json.loads(json.dumps(solution_runner._run(function, request, protocol)))
        reports.append(_judged(problem, number, _outcome(expected, answered)))
    return reports


def _valid_counts(device_counts: Sequence[int]) -> list[int]:
    counts = list(device_counts)
    wrong = [c for c in counts if c not in DEVICE_COUNTS]
    if not counts or wrong:
        raise UsageError(
            f"device counts {', '.join(map(str, wrong)) or '(none)'}: the problems are written "
            f"for {', '.join(map(str, DEVICE_COUNTS))} devices; choose from those"
        )
    return sorted(set(counts))


def _valid_file(path: str | os.PathLike[str]) -> Path:
    path = Path(path)
    if path.is_dir():
        raise UsageError(f"{path} is a folder; give the Python file that holds your solution")
    if not path.is_file():
        raise UsageError(
            f"{path}: no such file. Write one with: python -m spmd_guide starter PROBLEM"
        )
    return path.resolve()


def _syntax_error(path: Path) -> str | None:
    """Why the file cannot even be parsed, found without running any of it."""
    try:
        ast.parse(path.read_bytes(), filename=str(path))
    except SyntaxError as error:
        return f"your file does not parse: {error.msg} at line {error.lineno}: " + (
            (error.text or "").strip()
        )
    except (OSError, ValueError) as error:
        return f"your file cannot be read: {error}"
    return None


def _run_worker(
    jobs: list[tuple[Problem, Path]], devices: int, case_timeout: float
) -> list[DeviceRun]:
    runs = [DeviceRun(devices) for _ in jobs]
    if not jobs:
        return runs
    env = environment_without_jax_settings()
    env.update(cpu_devices_env(devices))
    env.update(QUICK_COMPILE)
    names = list(dict.fromkeys(problem.name for problem, _ in jobs))
    with tempfile.TemporaryFile() as output, tempfile.TemporaryFile() as reference_output:
        reference = _Process(
            [sys.executable, "-m", "spmd_guide.practice.reference_worker", "--channel", "{out}"],
            names,
            env,
            reference_output,
        )
        runner = _Process(
            [sys.executable, "-I", "-u", str(RUNNER), "--requests", "{in}", "--channel", "{out}"],
            [],
            env,
            output,
            requests=True,
        )
        session = _Session(jobs, runs, case_timeout, runner, output)
        try:
            expected = _expected_cases(reference, names)
            if isinstance(expected, str):
                session.fail_all(expected)
            else:
                session.run(expected)
        finally:
            reference.stop()
            runner.stop()
        session.attach_output()
    return runs


RUNNER = Path(__file__).with_name("solution_runner.py")
"""The script the solution's process runs; it imports nothing of :mod:`spmd_guide`."""


class _Process:
    """A child process in a session of its own, with a channel it writes JSON lines to and,
    for the solution's process, a pipe it reads requests from."""

    def __init__(
        self,
        command: list[str],
        arguments: list[str],
        env: dict[str, str],
        output: IO[bytes],
        *,
        requests: bool = False,
    ) -> None:
        read_end, write_end = os.pipe()
        passed = [write_end]
        self.requests: int | None = None
        request_read = None
        if requests:
            request_read, self.requests = os.pipe()
            os.set_blocking(self.requests, False)
            passed.append(request_read)
        command = [
            part.replace("{out}", str(write_end)).replace("{in}", str(request_read))
            for part in command
        ]
        self.process = subprocess.Popen(
            [*command, *arguments],
            stdin=subprocess.DEVNULL,
            stdout=output,
            stderr=subprocess.STDOUT,
            env=env,
            pass_fds=tuple(passed),
            start_new_session=True,
        )
        for fd in passed:
            os.close(fd)
        self.channel = read_end
        self.buffer = b""
        self.output = output

    def line(self, timeout: float, watch_output: bool = False) -> bytes | None:
        """The next line from the channel; None when the process closed it.

        Raises:
            TimeoutError: if no whole line came within ``timeout`` seconds.
            OverflowError: if ``watch_output`` and the process printed too much, or if it
                wrote an endless line to the channel.
        """
        deadline = time.monotonic() + timeout
        while b"\n" not in self.buffer:
            if len(self.buffer) > OUTPUT_LIMIT:
                raise OverflowError("channel")
            if watch_output and self.output.seek(0, os.SEEK_END) > OUTPUT_LIMIT:
                raise OverflowError("output")
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise TimeoutError
            ready, _, _ = select.select([self.channel], [], [], min(remaining, 0.5))
            if not ready:
                continue
            chunk = os.read(self.channel, 1 << 16)
            if not chunk:
                if self.buffer:
                    line, self.buffer = self.buffer, b""
                    return line
                return None
            self.buffer += chunk
        line, self.buffer = self.buffer.split(b"\n", 1)
        return line

    def send(self, message: dict[str, Any], timeout: float) -> None:
        """Write one request line, waiting at most ``timeout`` seconds for room in the pipe.

        Raises:
            TimeoutError: if the process stopped reading.
            BrokenPipeError: if it closed its end.
        """
        assert self.requests is not None
        data = (json.dumps(message) + "\n").encode()
        deadline = time.monotonic() + timeout
        while data:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise TimeoutError
            _, ready, _ = select.select([], [self.requests], [], min(remaining, 0.5))
            if ready:
                data = data[os.write(self.requests, data) :]

    def stop(self) -> None:
        """Kill the process and everything it started, and wait (up to 2 s) until the kill
        has reached them all."""
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.process.pid, signal.SIGKILL)
        self.process.wait()
        deadline = time.monotonic() + 2
        while time.monotonic() < deadline and _group_alive(self.process.pid):
            time.sleep(0.02)
        os.close(self.channel)
        if self.requests is not None:
            os.close(self.requests)


def _group_alive(group: int) -> bool:
    """Whether a process of ``group`` is still running (not merely waiting to be reaped)."""
    proc = Path("/proc")
    if not proc.is_dir():
        return False
    for entry in proc.iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[2]) == group and fields[0] != "Z":
            return True
    return False


def _expected_cases(reference: _Process, names: list[str]) -> dict[str, list[Any]] | str:
    """Every problem's cases from the reference's process, or why they did not come."""
    found: dict[str, list[Any]] = {}
    try:
        while len(found) < len(names):
            line = reference.line(START_TIMEOUT)
            if line is None:
                break
            message = json.loads(line)
            found[str(message["problem"])] = list(message["cases"])
    except TimeoutError:
        return (
            f"the checker's own start-up (JAX and the expected answers) took more than "
            f"{START_TIMEOUT:.0f} s. That is this machine, not your solution: try again, or "
            "check fewer device counts at once (--devices)"
        )
    if len(found) < len(names):
        reference.process.wait()
        reference.output.seek(0)
        tail = reference.output.read()[-2000:].decode("utf-8", errors="replace").splitlines()
        return (
            f"the checker's reference process exited with code {reference.process.returncode}: "
            + " | ".join(tail[-3:])
        )
    return found


class _Session:
    """The parent's side of one solution process: requests, replies, and what they mean."""

    def __init__(
        self,
        jobs: list[tuple[Problem, Path]],
        runs: list[DeviceRun],
        case_timeout: float,
        runner: _Process,
        output: IO[bytes],
    ) -> None:
        self.jobs = jobs
        self.runs = runs
        self.case_timeout = case_timeout
        self.runner = runner
        self.output = output
        self.output_marks: dict[int, int] = {}

    def run(self, expected: dict[str, list[Any]]) -> None:
        try:
            ready = self.runner.line(START_TIMEOUT)
        except TimeoutError:
            self.fail_all(f"the checker's solution process did not start in {START_TIMEOUT:.0f} s")
            return
        if ready is None or "ready" not in json.loads(ready):
            self.fail_all("the checker's solution process did not start: " + self._tail())
            return
        for number, (problem, path) in enumerate(self.jobs):
            run = self.runs[number]
            cases = expected[problem.name]
            run.expected_cases = len(cases)
            self.output_marks[number] = self.output.seek(0, os.SEEK_END)
            reply = self._ask(number, {"load": str(path), "name": problem.name, "number": number})
            if reply is None:
                return
            if "load_failed" in reply:
                self._load_failed(number, reply)
            else:
                for index, case in enumerate(cases):
                    request = {
                        "run": True,
                        "args": case["args"],
                        "kwargs": case["kwargs"],
                        "jit": problem.jit,
                        "trace": problem.traced and case["raises"] is None,
                        "as_given": problem.traced_as_given,
                        "compile": problem.compiled,
                    }
                    reply = self._ask(number, request, f"case {index + 1}")
                    if reply is None:
                        return
                    run.cases.append(_judged(problem, index + 1, _outcome(case, reply)))
            reply = self._ask(number, {"finish": True}, "finishing")
            if reply is None:
                return
            self._notes(run, reply)
        self._no_more_messages()

    def _ask(self, number: int, request: dict[str, Any], phase: str = "") -> dict[str, Any] | None:
        """Send ``request`` and return its reply; None (the runs marked failed) when the
        process hangs, ends, floods its output or sends anything but that one reply."""
        phase = phase or "importing your file"
        request["id"] = secrets.token_hex(8)
        try:
            self.runner.send(request, self.case_timeout)
            line = self.runner.line(self.case_timeout, watch_output=True)
        except TimeoutError:
            self._timed_out(number, phase)
            return None
        except BrokenPipeError:
            line = None
        except OverflowError as overflow:
            if str(overflow) == "output":
                self._fail(
                    number,
                    f"your code printed more than {OUTPUT_LIMIT // 2**20} MB, so the checker "
                    "stopped it: remove the print (or logging) inside loops",
                )
            else:
                self._tampered(number)
            return None
        if line is None:
            self._ended(number, phase)
            return None
        try:
            reply = json.loads(line)
            if not isinstance(reply, dict) or reply.get("id") != request["id"]:
                raise ValueError
        except ValueError:
            self._tampered(number)
            return None
        return reply

    def _no_more_messages(self) -> None:
        """After the last reply, the channel must close with nothing more on it."""
        if self.runner.requests is not None:
            os.close(self.runner.requests)
            self.runner.requests = None
        try:
            extra = self.runner.line(self.case_timeout)
        except (TimeoutError, OverflowError):
            extra = b"?"
        if extra is not None:
            self._tampered(len(self.jobs) - 1, every=True)

    def _notes(self, run: DeviceRun, reply: dict[str, Any]) -> None:
        changed = [str(name) for name in reply.get("changed_environment", ())]
        if changed:
            run.notes.append(
                f"your file sets {', '.join(changed)}: delete that line. The checker sets up "
                "JAX's devices itself, before your file is loaded, so it has no effect here"
            )
        if int(reply.get("threads", 0)):
            run.notes.append(
                f"your code left {int(reply['threads'])} thread(s) running; the checker "
                "stopped them"
            )

    def _load_failed(self, number: int, message: dict[str, Any]) -> None:
        run = self.runs[number]
        kind = message["load_failed"]
        name = self.jobs[number][0].name
        if kind == "exit":
            run.failure = (
                f"your file called {message['message']} while being imported: remove it (the "
                "checker imports your file, then calls your function)"
            )
        elif kind == "missing":
            defined = ", ".join(map(str, message["defined"])) or "nothing"
            run.failure = (
                f"your file defines no function {name!r} (it defines: {defined}). Start from: "
                f"python -m spmd_guide starter {name}"
            )
        elif kind == "syntax":
            run.failure = f"your file does not parse: {message['message']}"
        else:
            error_type = str(message["error_type"])
            text = str(message["message"])
            run.failure = f"importing your file raised {error_type}: {text}"
            problem = self.jobs[number][0]
            run.hint = problem.hint_for(
                Outcome(inputs="", expected=None, error_type=error_type, error_message=text)
            )

    def fail_all(self, failure: str) -> None:
        for run in self.runs:
            run.failure = run.failure or failure

    def _fail(self, number: int, failure: str, hint: str | None = None) -> None:
        """The run ``number`` failed so; the solutions after it never ran."""
        self.runs[number].failure = failure
        self.runs[number].hint = hint
        for later in self.runs[number + 1 :]:
            later.failure = later.failure or (
                "not run: an earlier solution in the same check stopped the solution's process"
            )

    def _tampered(self, number: int, every: bool = False) -> None:
        failure = (
            "the checker received messages it never asked for: a solution must not write to the "
            "checker's file descriptors or change how its process answers"
        )
        if every:
            self.fail_all(failure)
        else:
            self._fail(number, failure)

    def _timed_out(self, number: int, phase: str) -> None:
        if phase == "importing your file":
            self._fail(
                number,
                f"importing your file took more than {self.case_timeout:g} s: code at the top "
                "level of the file loops or waits (an endless loop, input(), a long sleep)",
                "move that code into the function, or delete it",
            )
        else:
            self._fail(
                number,
                f"{phase} took more than {self.case_timeout:g} s",
                "a shard_map that hangs usually has a collective that not every device reaches "
                "(one inside a branch only some devices take); otherwise a loop never ends",
            )

    def _ended(self, number: int, phase: str) -> None:
        process = self.runner.process
        with contextlib.suppress(subprocess.TimeoutExpired):
            process.wait(timeout=5)
        code = process.returncode
        if code is not None and code < 0:
            how = f"was killed by {signal.Signals(-code).name}"
        else:
            how = f"exited with code {code}"
        self._fail(
            number,
            f"the process {how} while {phase}, before every case was reported",
            "your code ended the process: os._exit, a crash in a native library, or XLA "
            "aborting a collective that not every device reached"
            if phase != "importing your file"
            else "your file ends the process when it is imported (os._exit?): remove that",
        )

    def _tail(self) -> str:
        return " | ".join(self._output_lines(0)[-3:])

    def attach_output(self) -> None:
        marks = sorted(self.output_marks.items(), key=lambda item: item[1])
        for position, (number, start) in enumerate(marks):
            end = marks[position + 1][1] if position + 1 < len(marks) else None
            self.runs[number].output = self._output_lines(start, end)

    def _output_lines(self, start: int, end: int | None = None) -> list[str]:
        self.output.seek(start)
        data = self.output.read() if end is None else self.output.read(end - start)
        text = data[-64 * 1024 :].decode("utf-8", errors="replace")
        return [line[:160] for line in text.splitlines() if line.strip()]


def _outcome(expected: dict[str, Any], answered: dict[str, Any]) -> Outcome:
    args = decode(expected["args"])
    kwargs = decode(expected["kwargs"])
    case_mesh = next((v for v in (*args, *kwargs.values()) if is_mesh(v)), None)
    return Outcome(
        inputs=str(expected["inputs"]),
        expected=decode(expected["expected"]),
        args=args,
        kwargs=kwargs,
        raises=expected.get("raises"),
        exercises=expected.get("exercises"),
        expected_layout=expected.get("expected_layout"),
        value=decode(answered["value"]) if "value" in answered else None,
        dtype=answered.get("dtype"),
        returned=answered.get("returned"),
        layout=answered.get("layout"),
        sharding=answered.get("sharding"),
        error_type=answered.get("error_type"),
        error_classes=tuple(str(c) for c in answered.get("error_classes", ())),
        error_message=str(answered.get("error_message", "")),
        raised_in_solution=bool(answered.get("raised_in_solution")),
        program=answered.get("program"),
        trace_error=answered.get("trace_error"),
        ahead_of_time=tuple(str(c) for c in answered.get("ahead_of_time", ())),
        case_mesh=case_mesh,
    )


def _judged(problem: Problem, number: int, outcome: Outcome) -> CaseReport:
    failures = problem.judge(outcome)
    hint = problem.hint_for(outcome, failures) if failures else None
    return CaseReport(number, outcome, failures, hint)


def _run_lines(run: DeviceRun) -> list[str]:
    label = _devices([run.devices])
    lines = []
    if run.failure:
        lines.append(f"{label}: could not finish: {run.failure}")
        if run.hint:
            lines.append(f"  hint: {run.hint}")
    if run.cases or not run.failure:
        passed = sum(case.passed for case in run.cases)
        total = run.expected_cases or len(run.cases)
        if not run.failure:
            lines.append(f"{label}: {passed}/{total} cases passed")
        else:
            lines.append(f"  {passed} of {total} cases had passed")
    shown_failures = [case for case in run.cases if not case.passed][:SHOWN_FAILURES]
    for case in shown_failures:
        outcome = case.outcome
        lines.append(f"  case {case.number}: inputs {outcome.inputs}")
        if outcome.raises:
            lines.append(f"    expected  {outcome.raises} raised by your function")
        else:
            lines.append(f"    expected  {_show(outcome.expected)}")
        if outcome.error_type:
            message = outcome.error_message or "(no message)"
            if len(message) > SHOWN_MESSAGE:
                message = message[:SHOWN_MESSAGE] + " ..."
            lines.append(f"    raised    {outcome.error_type}: {message}")
        elif outcome.value is not None:
            lines.append(f"    got       {_show(outcome.value)}")
        for failure in case.failures:
            lines.append(f"    not met: {failure.key}: {_plain_text(failure.text)}")
            details = failure.lines
            if outcome.error_type and not outcome.raises:
                # The error is shown above; what remains is why tracing failed, if it did.
                details = tuple(line for line in details if not line.startswith("raised "))
            lines += [f"      {line}" for line in details]
        if case.hint:
            lines.append(f"    hint: {case.hint}")
    hidden = sum(not case.passed for case in run.cases) - len(shown_failures)
    if hidden > 0:
        lines.append(f"  ({hidden} more failing case(s) not shown)")
    lines += [f"  note: {note}" for note in run.notes]
    if run.output:
        shown = run.output[-SHOWN_OUTPUT_LINES:]
        lines.append(f"  your code printed {len(run.output)} line(s); the last {len(shown)}:")
        lines += [f"    | {line}" for line in shown]
    return lines


def _plain_text(markdown: str) -> str:
    return markdown.replace("`", "")


def _show(value: Any) -> str:
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k!r}: {_show(v)}" for k, v in value.items()) + "}"
    if value is None:
        return "None"
    array = np.asarray(value)
    if array.ndim == 0:
        return (
            f"{array.dtype}[] {array.item():.6g}"
            if array.dtype.kind in "fc"
            else (f"{array.dtype}[] {array.item()}")
        )
    body = np.array2string(array, precision=4, threshold=12, edgeitems=3, max_line_width=200)
    return f"{array.dtype}{list(array.shape)} {' '.join(body.split())}"


def _devices(counts: list[int]) -> str:
    words = [str(c) for c in counts]
    joined = words[0] if len(words) == 1 else ", ".join(words[:-1]) + " and " + words[-1]
    return f"{joined} {'device' if counts == [1] else 'devices'}"

"""Check a learner's solution to a practice problem on 1, 2, 4 and 8 CPU devices.

JAX fixes its device count at start-up, so each device count runs in a worker process of its
own (:mod:`spmd_guide.practice.worker`). The worker sends the expected answers before it loads
the solution, then what the solution returned; this process judges, picks hints and reports.
It never imports the solution. The solution's own output goes to a file and is shown, trimmed;
each phase has a time limit; and the worker's whole process group is killed at the end.
"""

from __future__ import annotations

import ast
import contextlib
import json
import os
import selectors
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
from spmd_guide.practice.problem import Outcome, Problem
from spmd_guide.practice.protocol import decode, is_mesh

DEVICE_COUNTS = CHECKED_DEVICE_COUNTS
"""The device counts a solution is checked on; the problems' cases are written for these."""

CASE_TIMEOUT = 60.0
"""Seconds one case (or importing the solution) may take by default."""

START_TIMEOUT = 180.0
"""Seconds the worker may take to start JAX and compute the expected answers."""

OUTPUT_LIMIT = 20 * 2**20
"""Bytes a solution may print before the checker stops it."""

SHOWN_OUTPUT_LINES = 5
"""Lines of a solution's own output shown in the report, from the end."""

SHOWN_FAILURES = 2
"""Failing cases shown in full for each device count."""

SHOWN_MESSAGE = 240
"""Characters of an exception's message shown in the report."""


class UsageError(Exception):
    """The checker was asked for something it cannot do: the message says what to change."""


@dataclass
class CaseReport:
    """One case on one device count, judged."""

    number: int
    outcome: Outcome
    problems: list[str]
    hint: str | None = None

    @property
    def passed(self) -> bool:
        return not self.problems


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
            if 1 in counts and 1 not in failed:
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
    """Check several solutions, sharing one worker per device count.

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

    from spmd_guide.practice import worker

    problem = get_problem(name)
    source = Path(function.__code__.co_filename)
    reports = []
    for number, case in enumerate(problem.make_cases(jax.device_count()), start=1):
        expected = json.loads(json.dumps(worker._expected(problem, case)))
        answered = json.loads(json.dumps(worker._run(function, case, source, problem)))
        outcome = _outcome(expected, answered)
        reports.append(_judged(problem, number, outcome))
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
    read_end, write_end = os.pipe()
    with tempfile.TemporaryFile() as output:
        process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "spmd_guide.practice.worker",
                "--channel",
                str(write_end),
                *(f"{problem.name}={path}" for problem, path in jobs),
            ],
            stdin=subprocess.DEVNULL,
            stdout=output,
            stderr=subprocess.STDOUT,
            env=env,
            pass_fds=(write_end,),
            start_new_session=True,
        )
        os.close(write_end)
        session = _Session(jobs, runs, case_timeout, output)
        try:
            session.follow(read_end, process)
        finally:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
            process.wait()
            os.close(read_end)
        session.finish(process.returncode)
        session.attach_output()
    return runs


class _Session:
    """The parent's side of one worker: what it has been told, and what it makes of it."""

    def __init__(
        self,
        jobs: list[tuple[Problem, Path]],
        runs: list[DeviceRun],
        case_timeout: float,
        output: IO[bytes],
    ) -> None:
        self.jobs = jobs
        self.runs = runs
        self.case_timeout = case_timeout
        self.output = output
        self.expected: dict[int, list[dict[str, Any]]] = {}
        self.trusted = True
        self.job: int | None = None
        self.phase = "starting JAX"
        self.done = False
        self.reported: set[tuple[int, int]] = set()
        self.output_marks: dict[int, int] = {}

    def follow(self, fd: int, process: subprocess.Popen[bytes]) -> None:
        selector = selectors.DefaultSelector()
        selector.register(fd, selectors.EVENT_READ)
        buffer = b""
        deadline = time.monotonic() + START_TIMEOUT
        try:
            while not self.done:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    self._timed_out()
                    return
                if self.output.seek(0, os.SEEK_END) > OUTPUT_LIMIT:
                    self._fail(
                        f"your code printed more than {OUTPUT_LIMIT // 2**20} MB, so the checker "
                        "stopped it: remove the print (or logging) inside loops",
                    )
                    return
                if not selector.select(timeout=min(remaining, 0.5)):
                    continue
                chunk = os.read(fd, 1 << 16)
                if not chunk:
                    return
                buffer += chunk
                *lines, buffer = buffer.split(b"\n")
                for line in lines:
                    if not self._receive(line):
                        return
                    deadline = time.monotonic() + (
                        START_TIMEOUT if self.trusted else self.case_timeout
                    )
                if len(buffer) > OUTPUT_LIMIT:
                    self._tampered()
                    return
        finally:
            selector.close()

    def _receive(self, line: bytes) -> bool:
        try:
            message = json.loads(line)
            return self._handle(message)
        except (ValueError, KeyError, TypeError, IndexError):
            if self.trusted:
                raise
            self._tampered()
            return False

    def _handle(self, message: dict[str, Any]) -> bool:
        if self.trusted:
            if "started" in message:
                self.phase = "computing the expected answers"
            elif "expected" in message:
                number = message["expected"]
                self.expected[number] = message["cases"]
                self.runs[number].expected_cases = len(message["cases"])
            elif "trusted_end" in message:
                self.trusted = False
            return True
        if "loading" in message:
            self.job = self._job_number(message["loading"])
            self.phase = "importing your file"
            self.output_marks[self.job] = self.output.tell()
        elif "load_failed" in message:
            self._load_failed(message)
            self.job = None
        elif "loaded" in message:
            self.phase = "case 1"
        elif "running" in message:
            number, index = message["running"]
            self.phase = f"case {int(index) + 1}"
        elif "case" in message:
            number, index = message["case"]
            key = (self._job_number(number), int(index))
            if key in self.reported or not 0 <= key[1] < len(self.expected[key[0]]):
                self._tampered()
                return False
            self.reported.add(key)
            outcome = _outcome(self.expected[key[0]][key[1]], message)
            problem = self.jobs[key[0]][0]
            self.runs[key[0]].cases.append(_judged(problem, key[1] + 1, outcome))
        elif "finished" in message:
            run = self.runs[self._job_number(message["finished"])]
            changed = [str(name) for name in message["changed_environment"]]
            if changed:
                run.notes.append(
                    f"your file sets {', '.join(changed)}: delete that line. The checker sets up "
                    "JAX's devices itself, before your file is loaded, so it has no effect here"
                )
            if int(message["threads"]):
                run.notes.append(
                    f"your code left {int(message['threads'])} thread(s) running; the checker "
                    "stopped them"
                )
            self.job = None
        elif "done" in message:
            if self._unfinished():
                self._tampered()
                return False
            self.done = True
        else:
            raise KeyError("unknown message")
        return True

    def _job_number(self, raw: Any) -> int:
        number = int(raw)
        if not 0 <= number < len(self.jobs):
            raise IndexError(number)
        return number

    def _load_failed(self, message: dict[str, Any]) -> None:
        number = self._job_number(message["load_failed"])
        run = self.runs[number]
        kind = message["kind"]
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

    def _fail(self, failure: str, hint: str | None = None) -> None:
        for number in self._unfinished():
            if not self.runs[number].failure:
                self.runs[number].failure = (
                    failure
                    if number == self._current()
                    else ("not run: an earlier solution in the same check stopped the worker")
                )
                if number == self._current():
                    self.runs[number].hint = hint

    def _current(self) -> int | None:
        if self.job is not None:
            return self.job
        unfinished = self._unfinished()
        return unfinished[0] if unfinished else None

    def _unfinished(self) -> list[int]:
        return [
            n
            for n, run in enumerate(self.runs)
            if not run.failure and (run.expected_cases == 0 or len(run.cases) < run.expected_cases)
        ]

    def _tampered(self) -> None:
        self._fail(
            "the checker's private channel received messages it never sent: a solution must not "
            "write to the checker's file descriptors or change its modules"
        )

    def _timed_out(self) -> None:
        if self.trusted:
            self._fail(
                f"the checker's own start-up (JAX and the expected answers) took more than "
                f"{START_TIMEOUT:.0f} s. That is this machine, not your solution: try again, or "
                "check fewer device counts at once (--devices)"
            )
        elif self.phase == "importing your file":
            self._fail(
                f"importing your file took more than {self.case_timeout:g} s: code at the top "
                "level of the file loops or waits (an endless loop, input(), a long sleep)",
                "move that code into the function, or delete it",
            )
        else:
            self._fail(
                f"{self.phase} took more than {self.case_timeout:g} s",
                "a shard_map that hangs usually has a collective that not every device reaches "
                "(one inside a branch only some devices take); otherwise a loop never ends",
            )

    def finish(self, returncode: int) -> None:
        if self.done:
            return
        if returncode < 0:
            how = f"was killed by {signal.Signals(-returncode).name}"
        else:
            how = f"exited with code {returncode}"
        if self.trusted:
            tail = " | ".join(self._output_lines(0)[-3:])
            self._fail(f"the checker's worker {how} while {self.phase}: {tail}")
            return
        self._fail(
            f"the process {how} while {self.phase}, before every case was reported",
            "your code ended the process: os._exit, a crash in a native library, or XLA "
            "aborting a collective that not every device reached"
            if self.phase != "importing your file"
            else "your file ends the process when it is imported (os._exit?): remove that",
        )

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
    value = decode(answered["value"]) if "value" in answered else None
    args = decode(expected["args"])
    kwargs = decode(expected["kwargs"])
    case_mesh = next((v for v in (*args, *kwargs.values()) if is_mesh(v)), None)
    primitives = answered.get("primitives")
    return Outcome(
        inputs=str(expected["inputs"]),
        expected=decode(expected["expected"]),
        expected_type=expected.get("expected_type"),
        args=args,
        kwargs=kwargs,
        raises=expected.get("raises"),
        expect_type=bool(expected.get("expect_type")),
        value=value,
        returned=answered.get("returned"),
        type=answered.get("type"),
        error_type=answered.get("error_type"),
        error_message=str(answered.get("error_message", "")),
        raised_in_solution=bool(answered.get("raised_in_solution")),
        primitives=frozenset(primitives) if primitives is not None else None,
        trace_error=answered.get("trace_error"),
        meshes=tuple(answered.get("meshes", ())),
        case_mesh=case_mesh,
    )


def _judged(problem: Problem, number: int, outcome: Outcome) -> CaseReport:
    problems = problem.judge(outcome)
    hint = problem.hint_for(outcome) if problems else None
    return CaseReport(number, outcome, problems, hint)


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
        if not outcome.error_type or outcome.raises:
            lines += [f"    {line}" for line in case.problems]
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

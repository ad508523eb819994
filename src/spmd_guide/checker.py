"""Check a learner's solution to a practice problem on 1, 2, 4 and 8 CPU devices.

The checker runs each device count in its own process, since JAX fixes the count at start-up.
That worker imports the solution file, runs the problem's cases one by one, and reports each as
a line of JSON; the parent enforces a time limit per case, so a hung collective is reported as
such, and prints what a learner can act on: the inputs, expected and got, where they differ,
and a hint when the failure looks like a known mistake.
"""

from __future__ import annotations

import importlib.util
import json
import os
import selectors
import subprocess
import sys
import time
import traceback
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from spmd_guide.devices import environment_without_jax_settings

DEVICE_COUNTS = (1, 2, 4, 8)
"""The device counts a solution is checked on."""

CASE_TIMEOUT = 60.0
"""Seconds one case may take before the checker gives up on it."""

START_TIMEOUT = 180.0
"""Seconds a worker may take to start JAX and import the solution."""


class SolutionError(Exception):
    """The solution file cannot be used: missing, not importable, or lacking the function."""


@dataclass
class CaseResult:
    """The outcome of one case on one device count."""

    index: int
    inputs: str
    passed: bool
    expected: str = ""
    got: str = ""
    differences: list[str] = field(default_factory=list)
    error: str = ""
    hint: str | None = None


@dataclass
class DeviceRun:
    """All cases on one device count, or why they could not run."""

    devices: int
    results: list[CaseResult] = field(default_factory=list)
    failure: str = ""

    @property
    def passed(self) -> bool:
        return not self.failure and all(r.passed for r in self.results)


def load_solution(path: str | os.PathLike[str], name: str):
    """Import the function ``name`` from the Python file at ``path``.

    Raises:
        SolutionError: if the file is missing, fails to import, or has no callable ``name``;
            the message says which and how to fix it, without a traceback dump.
    """
    path = Path(path)
    if not path.is_file():
        raise SolutionError(
            f"{path}: no such file. Write one with: python -m spmd_guide starter {name}"
        )
    spec = importlib.util.spec_from_file_location(f"_solution_{path.stem}", path)
    if spec is None or spec.loader is None:
        raise SolutionError(f"{path}: not a Python file that can be imported")
    module = importlib.util.module_from_spec(spec)
    try:
        spec.loader.exec_module(module)
    except SyntaxError as error:
        where = f"line {error.lineno}: {(error.text or '').strip()}"
        raise SolutionError(f"{path} does not parse: {error.msg} at {where}") from None
    except Exception as error:
        line = _last_line_in(path, error)
        raise SolutionError(
            f"{path} failed while importing: {type(error).__name__}: {error}{line}"
        ) from None
    function = getattr(module, name, None)
    if not callable(function):
        defined = sorted(
            n
            for n, v in vars(module).items()
            if callable(v)
            and not n.startswith("_")
            and getattr(v, "__module__", "") == module.__name__
        )
        raise SolutionError(
            f"{path} defines no function {name!r} (it defines: {', '.join(defined) or 'nothing'}). "
            f"Start from: python -m spmd_guide starter {name}"
        )
    return function


def compare(expected: Any, got: Any, *, rtol: float = 1e-5, atol: float = 1e-5) -> list[str]:
    """How ``got`` differs from ``expected``: empty when they agree in shape and values."""
    expected = np.asarray(expected)
    try:
        got = np.asarray(got, dtype=np.float64)
    except (TypeError, ValueError):
        return [f"got a {type(got).__name__}, not an array of numbers"]
    if got.shape != expected.shape:
        return [f"shape: expected {expected.shape}, got {got.shape}"]
    close = np.isclose(got, expected, rtol=rtol, atol=atol)
    if close.all():
        return []
    if expected.size == 1:
        return [f"off by {(got - expected).item():+.6g}"]
    wrong = np.argwhere(~close)
    lines = [f"{len(wrong)} of {expected.size} values differ; the first:"]
    for position in wrong[:5]:
        index = tuple(int(i) for i in position)
        lines.append(f"  at {index}: expected {expected[index]:.6g}, got {got[index]:.6g}")
    return lines


def run_cases(name: str, function) -> list[CaseResult]:
    """Run problem ``name``'s cases on this process's devices, comparing with the reference."""
    from spmd_guide.problems.catalog import get_problem

    return list(_iter_cases(get_problem(name), function))


def _iter_cases(problem, function):
    import jax

    devices = jax.device_count()
    for index, case in enumerate(problem.make_cases(devices), start=1):
        expected = np.asarray(problem.reference(*case.args, **case.kwargs))
        error = None
        got = None
        try:
            got = function(*case.args, **case.kwargs)
            got = np.asarray(jax.device_get(got))
        except Exception as caught:
            error = caught
        result = CaseResult(
            index=index, inputs=case.describe(), passed=False, expected=_show(expected)
        )
        if error is not None:
            result.error = f"{type(error).__name__}: {_first_lines(str(error))}"
        else:
            result.got = _show(got)
            result.differences = compare(expected, got)
            result.passed = not result.differences
        if not result.passed:
            result.hint = problem.diagnose(case, expected, got, error, devices)
        yield result


def check(
    name: str,
    path: str | os.PathLike[str],
    *,
    device_counts: tuple[int, ...] = DEVICE_COUNTS,
    case_timeout: float = CASE_TIMEOUT,
    out=None,
) -> bool:
    """Check the solution in ``path`` to problem ``name``, printing a report to ``out``.

    Returns True when every case passes on every device count.

    Raises:
        ValueError: for an unknown problem name.
        SolutionError: if the file cannot be loaded (checked before any worker starts).
    """
    from spmd_guide.problems.catalog import get_problem

    out = out or sys.stdout
    problem = get_problem(name)
    load_solution(path, problem.name)
    counts = _plural_devices(list(device_counts))
    print(f"Checking {problem.name} from {path} on {counts}", file=out)
    # The device counts are independent processes: run as many at once as there are cores.
    workers = max(1, min(len(device_counts), os.cpu_count() or 1))
    with ThreadPoolExecutor(max_workers=workers) as pool:
        runs = list(
            pool.map(
                lambda count: _run_worker(problem.name, Path(path), count, case_timeout),
                device_counts,
            )
        )
    for run in runs:
        _report(run, out)
    failed = [run.devices for run in runs if not run.passed]
    if failed:
        print(f"\nFAILED on {_plural_devices(failed)}.", file=out)
        if 1 not in failed:
            print(
                "It passes on one device: the mistake only shows when the data is really split.",
                file=out,
            )
    else:
        print(f"\nPASSED: every case on {counts}.", file=out)
    return not failed


def _run_worker(name: str, path: Path, devices: int, case_timeout: float) -> DeviceRun:
    env = environment_without_jax_settings()
    env.update(
        {"JAX_PLATFORMS": "cpu", "JAX_NUM_CPU_DEVICES": str(devices), "PYTHONUNBUFFERED": "1"}
    )
    process = subprocess.Popen(
        [sys.executable, "-m", "spmd_guide.checker", "--worker", name, str(path)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
        text=True,
    )
    run = DeviceRun(devices)
    selector = selectors.DefaultSelector()
    selector.register(process.stdout, selectors.EVENT_READ)
    deadline = time.monotonic() + START_TIMEOUT
    try:
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0 or not selector.select(timeout=remaining):
                where = f"case {len(run.results) + 1}" if run.results else "starting up"
                run.failure = (
                    f"timed out after {case_timeout:.0f} s in {where}. A shard_map that hangs "
                    "usually has a collective that not every device reaches (a psum under a "
                    "condition that differs between devices), or loops forever"
                )
                break
            line = process.stdout.readline()
            if not line:
                break
            message = json.loads(line)
            if "fatal" in message:
                run.failure = message["fatal"]
                break
            if "case" in message:
                run.results.append(CaseResult(**message["case"]))
            # Started, or one case done: the next case has its own time limit.
            deadline = time.monotonic() + case_timeout
    finally:
        process.kill()
        stderr = process.communicate()[1]
        selector.close()
    if not run.failure and not run.results:
        tail = "\n".join(stderr.strip().splitlines()[-5:])
        run.failure = (
            f"the check process ended without reporting (exit {process.returncode}): {tail}"
        )
    return run


def _report(run: DeviceRun, out) -> None:
    label = _plural_devices([run.devices])
    if run.failure:
        print(f"\n{label}: could not finish: {run.failure}", file=out)
        return
    passed = sum(r.passed for r in run.results)
    print(f"\n{label}: {passed}/{len(run.results)} cases passed", file=out)
    for result in run.results:
        if result.passed:
            continue
        print(f"  case {result.index}: inputs {result.inputs}", file=out)
        print(f"    expected  {result.expected}", file=out)
        if result.error:
            print(f"    raised    {result.error}", file=out)
        else:
            print(f"    got       {result.got}", file=out)
            for line in result.differences:
                print(f"    {line}", file=out)
        if result.hint:
            print(f"    hint: {result.hint}", file=out)


def _worker(name: str, path: str) -> int:
    """Run in the child process: report each case as a line of JSON on stdout."""
    import warnings

    import jax

    def emit(message: dict) -> None:
        print(json.dumps(message), flush=True)

    warnings.simplefilter("ignore")
    # Keep JAX's own frames in tracebacks: the hints look for where an error came from.
    jax.config.update("jax_traceback_filtering", "off")
    jax.devices()
    try:
        function = load_solution(path, name)
    except SolutionError as error:
        emit({"fatal": str(error)})
        return 0
    from spmd_guide.problems.catalog import get_problem

    emit({"ready": True})

    try:
        for result in _iter_cases(get_problem(name), function):
            emit({"case": result.__dict__})
    except Exception as error:  # the reference or a case failed: a bug in the checker
        emit({"fatal": f"the checker itself failed: {type(error).__name__}: {error}"})
    return 0


def _show(value: Any) -> str:
    array = np.asarray(value)
    if array.ndim == 0:
        return f"{array.dtype}[] {array.item():.6g}"
    body = np.array2string(array, precision=4, threshold=12, edgeitems=3, max_line_width=200)
    return f"{array.dtype}{list(array.shape)} {' '.join(body.split())}"


def _first_lines(text: str, count: int = 3) -> str:
    lines = [line for line in text.strip().splitlines() if line.strip()]
    shown = " ".join(lines[:count])
    return shown + (" ..." if len(lines) > count else "") if shown else "(no message)"


def _last_line_in(path: Path, error: BaseException) -> str:
    frames = [f for f in traceback.extract_tb(error.__traceback__) if Path(f.filename) == path]
    return f" (line {frames[-1].lineno}: {frames[-1].line})" if frames else ""


def _plural_devices(counts: list[int]) -> str:
    words = [str(c) for c in counts]
    joined = words[0] if len(words) == 1 else ", ".join(words[:-1]) + " and " + words[-1]
    noun = "device" if counts == [1] else "devices"
    return f"{joined} {noun}"


if __name__ == "__main__":
    if len(sys.argv) == 4 and sys.argv[1] == "--worker":
        sys.exit(_worker(sys.argv[2], sys.argv[3]))
    sys.exit("usage: python -m spmd_guide check PROBLEM FILE")

"""Start a multi-process JAX program on this machine, as a cluster scheduler would.

    python -m spmd_guide.launch -n 2 --devices-per-process 4 SCRIPT [ARGS...]

starts ``n`` copies of ``SCRIPT``, each told through the environment how to join the others:
``JAX_COORDINATOR_ADDRESS`` (127.0.0.1 and a free port), ``JAX_NUM_PROCESSES`` and
``JAX_PROCESS_ID``, plus ``JAX_NUM_CPU_DEVICES`` and CPU collectives over Gloo. Their output is
forwarded line by line, prefixed with the process id. The launcher fails as soon as any process
fails (with ``--keep-going``, once every process has ended, as a scheduler that leaves the other
processes running would; with ``--keep-going-for S``, at most S seconds after the first failure),
never waits longer than ``--timeout``, and stops every process it started on the way out, Ctrl-C
included.
"""

from __future__ import annotations

import argparse
import io
import os
import re
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TextIO

from spmd_guide.environment import cpu_devices_env, environment_without_jax_settings, run_python

DEFAULT_TIMEOUT = 300.0

RUNTIME_LOG_PREFIXES = ("[Gloo]", "I0000", "W0000", "E0000")
"""How the lines that Gloo and JAX's runtime log while processes connect begin."""


@dataclass
class LaunchResult:
    """How a launch ended: its exit code, a reason when it failed, and each process's output."""

    returncode: int
    reason: str = ""
    outputs: dict[int, list[str]] = field(default_factory=dict)


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing is listening on right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def process_env(process_id: int, num_processes: int, devices: int, port: int) -> dict[str, str]:
    """The environment that tells one process how to join the others."""
    env = environment_without_jax_settings()
    env.update(
        {
            "JAX_COORDINATOR_ADDRESS": f"127.0.0.1:{port}",
            "JAX_NUM_PROCESSES": str(num_processes),
            "JAX_PROCESS_ID": str(process_id),
            **cpu_devices_env(devices),
            "JAX_CPU_COLLECTIVES_IMPLEMENTATION": "gloo",
            "PYTHONUNBUFFERED": "1",
        }
    )
    return env


def launch(
    command: Sequence[str],
    *,
    num_processes: int,
    devices_per_process: int,
    timeout: float = DEFAULT_TIMEOUT,
    out: TextIO | None = None,
    keep_going: bool = False,
    keep_going_for: float | None = None,
) -> LaunchResult:
    """Run ``command`` as ``num_processes`` cooperating processes; see the module docstring.
    With ``keep_going``, a failed process leaves the others running, for at most
    ``keep_going_for`` seconds if given.

    Raises:
        ValueError: if a count is not positive, the timeout is not positive, or
            ``keep_going_for`` is negative.
    """
    _check_arguments(num_processes, devices_per_process, timeout)
    if keep_going_for is not None and keep_going_for < 0:
        raise ValueError(f"--keep-going-for must be zero or more seconds, got {keep_going_for}")
    result = LaunchResult(returncode=0, outputs={i: [] for i in range(num_processes)})
    group = _ProcessGroup(result, out or sys.stdout)
    try:
        group.start(command, num_processes, devices_per_process)
        result.returncode, result.reason = group.wait(
            timeout, keep_going=keep_going, keep_going_for=keep_going_for
        )
    except KeyboardInterrupt:
        result.returncode, result.reason = 130, "interrupted"
    finally:
        group.stop()
    if result.reason:
        print(f"launch: {result.reason}; stopped all {num_processes} processes", file=sys.stderr)
    return result


def launch_and_lose(
    command: Sequence[str],
    *,
    num_processes: int,
    devices_per_process: int,
    victim: int,
    timeout: float = DEFAULT_TIMEOUT,
) -> tuple[LaunchResult, dict[int, float]]:
    """Run ``command`` as :func:`launch` does with ``keep_going``, for a job that loses process
    ``victim`` part way: the command makes it fail (as the checkpoint example's ``--fail-on``
    does), at a point of its own run, so that the loss lands at the same step on every run
    however busy the machine. Returns the result, whose outputs the launcher did not print, and
    the seconds after the victim ended at which each other process ended (absent: it was still
    running when ``timeout`` passed, counted from the start, and was stopped).

    Raises:
        RuntimeError: if another process ends before the victim; the message holds the outputs.
        TimeoutError: if the victim has not ended within ``timeout`` seconds.
    """
    _check_arguments(num_processes, devices_per_process, timeout)
    result = LaunchResult(returncode=0, outputs={i: [] for i in range(num_processes)})
    group = _ProcessGroup(result, io.StringIO())
    deadline = time.monotonic() + timeout
    ended: dict[int, float] = {}
    others = [i for i in range(num_processes) if i != victim]
    try:
        group.start(command, num_processes, devices_per_process)
        while group.processes[victim].poll() is None:
            if any(group.processes[i].poll() is not None for i in others):
                raise RuntimeError(f"a process ended before process {victim}: {result.outputs}")
            if time.monotonic() > deadline:
                raise TimeoutError(f"process {victim} never ended; outputs: {result.outputs}")
            time.sleep(0.01)
        lost = time.monotonic()
        while len(ended) < len(others) and time.monotonic() < deadline:
            for i in others:
                if i not in ended and group.processes[i].poll() is not None:
                    ended[i] = time.monotonic() - lost
            time.sleep(0.05)
        result.returncode, result.reason = group.wait(0, keep_going=True)
    finally:
        group.stop()
    return result, ended


def _check_arguments(num_processes: int, devices_per_process: int, timeout: float) -> None:
    if num_processes < 1 or devices_per_process < 1:
        raise ValueError(
            f"need at least one process and one device each, got -n {num_processes} and "
            f"--devices-per-process {devices_per_process}"
        )
    if timeout <= 0:
        raise ValueError(f"--timeout must be positive, got {timeout}")


class _ProcessGroup:
    """The processes of one launch, with a thread per process forwarding its output."""

    def __init__(self, result: LaunchResult, out: TextIO) -> None:
        self.result = result
        self.out = out
        self.lock = threading.Lock()
        self.processes: list[subprocess.Popen[str]] = []
        self.readers: list[threading.Thread] = []

    def start(self, command: Sequence[str], num_processes: int, devices: int) -> None:
        port = free_port()
        for process_id in range(num_processes):
            process = subprocess.Popen(
                list(command),
                env=process_env(process_id, num_processes, devices, port),
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                text=True,
            )
            self.processes.append(process)
            assert process.stdout is not None
            reader = threading.Thread(
                target=self._forward, args=(process_id, process.stdout), daemon=True
            )
            reader.start()
            self.readers.append(reader)

    def _forward(self, process_id: int, stream: TextIO) -> None:
        for line in stream:
            line = line.rstrip("\n")
            with self.lock:
                self.result.outputs[process_id].append(line)
                print(f"[{process_id}] {line}", file=self.out, flush=True)

    def wait(
        self, timeout: float, *, keep_going: bool = False, keep_going_for: float | None = None
    ) -> tuple[int, str]:
        """Poll until every process succeeds, one fails (with ``keep_going``, every process has
        ended, or ``keep_going_for`` seconds have passed since the first failure), or ``timeout``
        passes: (code, reason)."""
        deadline = time.monotonic() + timeout
        first_failure: float | None = None
        while True:
            codes = [p.poll() for p in self.processes]
            failed = [(i, c) for i, c in enumerate(codes) if c not in (None, 0)]
            if failed and (not keep_going or None not in codes):
                return 1, "; ".join(f"process {i} exited with code {c}" for i, c in failed)
            if all(c == 0 for c in codes):
                return 0, ""
            if failed and first_failure is None:
                first_failure = time.monotonic()
            if (
                first_failure is not None
                and keep_going_for is not None
                and time.monotonic() > first_failure + keep_going_for
            ):
                running = [str(i) for i, c in enumerate(codes) if c is None]
                i, c = failed[0]
                return 1, (
                    f"stopped {keep_going_for:g} s after process {i} exited with code {c}; "
                    f"still running: process {', '.join(running)}"
                )
            if time.monotonic() > deadline:
                running = [str(i) for i, c in enumerate(codes) if c is None]
                return 1, (
                    f"timed out after {timeout:g} s; still running: process "
                    f"{', '.join(running)}. A process that waits for peers which never come "
                    "(a wrong process count, or a coordinator that is not up) looks like this"
                )
            time.sleep(0.05)

    def stop(self) -> None:
        """Kill what still runs, then collect every process and the rest of its output."""
        for process in self.processes:
            if process.poll() is None:
                process.kill()
        for process in self.processes:
            process.wait()
        for reader in self.readers:
            reader.join(timeout=5)
        for process in self.processes:
            if process.stdout is not None:
                process.stdout.close()


def run_launcher(
    *args: str, timeout: float = DEFAULT_TIMEOUT, retry: bool = True, cwd: Path | None = None
) -> tuple[subprocess.CompletedProcess[str], subprocess.CompletedProcess[str] | None]:
    """Run ``python -m spmd_guide.launch *args`` in a child process: (result, failed first try).

    With ``retry``, a failed launch is run once more and the first attempt returned beside the
    second: processes meeting over loopback can lose a race for the coordinator's port on a busy
    machine, and a second failure is a real one. ``cwd`` is as for :func:`run_python`.
    """
    first = run_python("-m", "spmd_guide.launch", *args, timeout=timeout, check=False, cwd=cwd)
    if first.returncode == 0 or not retry:
        return first, None
    second = run_python("-m", "spmd_guide.launch", *args, timeout=timeout, check=False, cwd=cwd)
    return second, first


# Gloo writes its connection message to C++'s standard output piece by piece, and the pieces of
# messages from two threads can interleave before the buffer is flushed; so each piece is taken
# out with the number it carries, wherever it landed.
_GLOO_LOG_PIECES = re.compile(
    r"\[Gloo\] Rank \d*"
    r"| ?is connected to \d*"
    r"|\d* ?peer ranks\. ?"
    r"|Expected number of connected peer ranks is : \d*"
)


def without_gloo_log(line: str) -> str:
    """``line`` less any of Gloo's connection messages, or pieces of them, in it.

    Gloo's C++ logging shares a process's standard output with Python's prints, and on a busy
    machine one of its messages can land inside a printed line, or be split over two lines by
    another thread's message.
    """
    return _GLOO_LOG_PIECES.sub("", line)


def lines_by_process(output: str) -> list[str]:
    """The launcher's ``[id] line`` output grouped by process, without the runtime's log lines.

    Processes print concurrently, so the raw order varies from run to run; each process's own
    lines keep the order it printed them in, and the launcher's own lines come last.
    """
    by_process: dict[int, list[str]] = {}
    launcher = []
    # A process whose Gloo message was cut after "is : ": its next line starts with the number.
    cut_before_number: set[str] = set()
    for line in output.splitlines():
        prefix, _, text = line.partition("] ")
        if prefix.startswith("[") and prefix[1:].isdigit():
            if prefix in cut_before_number:
                cut_before_number.discard(prefix)
                text = text.lstrip("0123456789")
            if text.rstrip().endswith("connected peer ranks is :"):
                cut_before_number.add(prefix)
            text = without_gloo_log(text)
            if text.strip() and not text.startswith(RUNTIME_LOG_PREFIXES):
                by_process.setdefault(int(prefix[1:]), []).append(f"{prefix}] {text}")
        else:
            launcher.append(line)
    return [line for i in sorted(by_process) for line in by_process[i]] + launcher


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m spmd_guide.launch",
        description="Run a JAX script as several cooperating processes on this machine.",
    )
    parser.add_argument("-n", "--num-processes", type=int, default=2)
    parser.add_argument("--devices-per-process", type=int, default=4)
    parser.add_argument(
        "--timeout", type=float, default=DEFAULT_TIMEOUT, help="seconds (default: 300)"
    )
    parser.add_argument(
        "--keep-going",
        action="store_true",
        help="when a process fails, let the others run on until they end (or --timeout)",
    )
    parser.add_argument(
        "--keep-going-for",
        type=float,
        metavar="SECONDS",
        help="as --keep-going, but stop the others this many seconds after the first failure",
    )
    parser.add_argument(
        "--check-agree",
        metavar="PREFIX",
        help="fail unless every process prints the same line starting with PREFIX",
    )
    parser.add_argument("script")
    parser.add_argument("args", nargs=argparse.REMAINDER)
    args = parser.parse_args(argv)
    if not os.path.isfile(args.script):
        parser.error(f"no such script: {args.script}")
    try:
        result = launch(
            [sys.executable, args.script, *args.args],
            num_processes=args.num_processes,
            devices_per_process=args.devices_per_process,
            timeout=args.timeout,
            keep_going=args.keep_going or args.keep_going_for is not None,
            keep_going_for=args.keep_going_for,
        )
    except ValueError as error:
        parser.error(str(error))
    if result.returncode or not args.check_agree:
        return result.returncode
    return check_agreement(result.outputs, args.check_agree)


def check_agreement(outputs: dict[int, list[str]], prefix: str) -> int:
    """0 if every process printed the same lines starting with ``prefix``, else 1 (and say so)."""
    found = {i: [line for line in lines if line.startswith(prefix)] for i, lines in outputs.items()}
    distinct = {tuple(lines) for lines in found.values()}
    if any(not lines for lines in found.values()) or len(distinct) != 1:
        print(f"launch: the processes do not agree on {prefix!r}: {found}", file=sys.stderr)
        return 1
    print(f"launch: all {len(found)} processes agree: {found[0][0]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

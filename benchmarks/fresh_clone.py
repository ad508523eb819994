"""Benchmark a fresh clone's first `nox -s docs`: the install, every page executed, every TPU plan.

    nox -s bench            (or: python benchmarks/fresh_clone.py)

It clones the repository's committed HEAD into a temporary folder and follows the README there:
`python -m pip install "nox[uv]"` into a virtual environment of its own, then `nox -s docs`, whose
session environment uv makes (from the machine's package caches, as a contributor's second clone
would find them). Nothing of this working tree is reused: no environment, no executed page, no
kept TPU plan. It prints the whole run's time, nox's install included, how long the planner's
TPU steps took (the build compiles them before any page), and each page's execution time from
the build's log, slowest first; it exits 1 if a target is missed:
the whole run under 480 s, every page under 45 s, and no warning in the log repeated page after
page (a line that mentions a warning, seen more than 3 times).
"""

from __future__ import annotations

import re
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
EXECUTED = re.compile(r"docs/(\S+)\.md: Executed notebook in ([\d.]+) seconds")
PLANNER_STEPS = re.compile(r"planner steps: (.*)")
TARGETS = {"whole run": 480.0, "slowest page": 45.0}


def main() -> int:
    with tempfile.TemporaryDirectory(prefix="spmd-guide-fresh-clone-") as tmp:
        clone = Path(tmp) / "spmd-guide"
        subprocess.run(["git", "clone", "--quiet", str(ROOT), str(clone)], check=True)
        head = subprocess.run(
            ["git", "-C", str(clone), "log", "-1", "--format=%h %s"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        runner = Path(tmp) / "nox-runner"
        start = time.perf_counter()
        subprocess.run([sys.executable, "-m", "venv", str(runner)], check=True)
        subprocess.run(
            [runner / "bin" / "python", "-m", "pip", "install", "--quiet", "nox[uv]"], check=True
        )
        command = [
            runner / "bin" / "python",
            "-m",
            "nox",
            "--envdir",
            Path(tmp) / "nox",
            "-s",
            "docs",
        ]
        result = subprocess.run(command, cwd=clone, capture_output=True, text=True)
        seconds = time.perf_counter() - start
    log = result.stdout + result.stderr
    if result.returncode:
        sys.exit(f"`nox -s docs` failed in a fresh clone of {head}:\n{log[-4000:]}")
    pages = {page: float(t) for page, t in EXECUTED.findall(log)}
    slowest = max(pages.items(), key=lambda item: item[1])
    print(f"a fresh clone of {head}: `nox -s docs`, install included, in {seconds:.0f} s")
    for line in PLANNER_STEPS.findall(log):
        print(f"the planner's steps, compiled before the pages: {line}")
    print("| page | seconds |")
    print("| --- | ---: |")
    for page, page_seconds in sorted(pages.items(), key=lambda item: -item[1])[:8]:
        print(f"| {page} | {page_seconds:.1f} |")
    print(f"({len(pages)} pages executed; the 8 slowest shown)")
    measured = {"whole run": seconds, "slowest page": slowest[1]}
    missed = [name for name, value in measured.items() if value >= TARGETS[name]]
    for name, value in measured.items():
        print(f"{'MISS' if name in missed else 'ok  '} {name}: {value:.0f} s (< {TARGETS[name]:g})")
    warnings = Counter(line.strip() for line in log.splitlines() if "warn" in line.lower())
    repeated = {line: count for line, count in warnings.items() if count > 3}
    for line, count in repeated.items():
        print(f"MISS a warning repeated {count} times: {line[:200]}")
    if not repeated:
        print("ok   no warning repeated in the log")
    return 1 if missed or repeated else 0


if __name__ == "__main__":
    sys.exit(main())

"""Benchmark the docs build: cold, unchanged, after a prose edit, after a library edit.

    nox -s bench            (or: python benchmarks/docs_build.py, with the docs dependencies)

The build runs on a copy of docs/, src/, examples/ and requirements/ in a temporary directory,
so the working tree and its docs/_build are never touched. For each case it reports the wall
time and which pages were executed, and it compares the cold build with the execution floor:
the sum of the pages' own execution times. It exits 1 if a target is missed:

- a rebuild with nothing changed takes under 10% of the cold build;
- a prose edit re-executes nothing;
- the cold build takes at most 1.5 times the execution floor (the pages' own times, and the
  planner's steps, which the build compiles before any page runs);
- an edit in spmd_guide re-executes every page (their outputs may depend on it);
- the largest page is under 1 MB of HTML.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from spmd_guide.environment import DEFAULT_DEVICE_COUNT, cpu_devices_env

ROOT = Path(__file__).resolve().parents[1]
EXECUTED = re.compile(r"(\S+\.md): Executed notebook in ([\d.]+) seconds")
PLANNER_STEPS = re.compile(r"planner steps: .*\(([\d.]+) s with start-up\)")


@dataclass
class Case:
    name: str
    seconds: float
    executed: dict[str, float]
    planner_steps: float = 0.0
    """Seconds the build spent compiling the planner's steps before the pages ran."""

    @property
    def floor(self) -> float:
        """The execution floor: the pages' own times, and the planner's steps run before them."""
        return sum(self.executed.values()) + self.planner_steps


def build(workdir: Path, jobs: str) -> Case:
    env = {**os.environ, **cpu_devices_env(DEFAULT_DEVICE_COUNT)}
    docs, out = workdir / "docs", workdir / "docs" / "_build"
    command = [
        sys.executable,
        "-m",
        "sphinx",
        "-W",
        "-n",
        "-j",
        jobs,
        "-b",
        "html",
        "-d",
        str(out / "doctrees"),
        str(docs),
        str(out / "html"),
    ]
    start = time.perf_counter()
    result = subprocess.run(command, env=env, capture_output=True, text=True)
    seconds = time.perf_counter() - start
    if result.returncode:
        sys.exit(f"the build failed:\n{result.stdout[-3000:]}\n{result.stderr[-3000:]}")
    executed = {
        str(Path(path).relative_to(docs)): float(t)
        for path, t in EXECUTED.findall(result.stdout + result.stderr)
    }
    log = result.stdout + result.stderr
    planner_steps = sum(float(t) for t in PLANNER_STEPS.findall(log))
    return Case("", seconds, executed, planner_steps)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("-j", "--jobs", default="auto", help="sphinx-build -j (default: auto)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="spmd-guide-bench-") as tmp:
        work = Path(tmp)
        for part in ("docs", "src", "requirements", "examples"):
            shutil.copytree(ROOT / part, work / part, ignore=shutil.ignore_patterns("_build"))
        cases = run_cases(work, args.jobs)
        largest, largest_size = largest_page(work / "docs" / "_build" / "html")
    print_table(cases)
    print(f"largest page: {largest}, {largest_size / 1e6:.2f} MB of HTML")
    print()
    checks = targets(cases, largest_size)
    for text, ok in checks:
        print(f"{'ok  ' if ok else 'MISS'} {text}")
    return 0 if all(ok for _, ok in checks) else 1


def run_cases(work: Path, jobs: str) -> list[Case]:
    """Build the copy in `work` four times: cold, unchanged, after a prose and a library edit."""
    edits = {
        "cold build": None,
        "rebuild, nothing changed": None,
        "prose edit in one page": lambda: _append(
            work / "docs" / "tutorial" / "sharded-computation.md", "\nOne more sentence of prose.\n"
        ),
        "edit in spmd_guide": lambda: _append(
            work / "src" / "spmd_guide" / "meshes.py", "\n# an edit\n"
        ),
    }
    cases = []
    for name, edit in edits.items():
        if edit:
            edit()
        case = build(work, jobs)
        case.name = name
        cases.append(case)
        print(f"  {name}: {case.seconds:.1f} s, {len(case.executed)} page(s) executed", flush=True)
    return cases


def largest_page(html: Path) -> tuple[str, int]:
    """The biggest HTML page of the built site, relative to it, and its size in bytes."""
    page = max(html.rglob("*.html"), key=lambda p: p.stat().st_size)
    return str(page.relative_to(html)), page.stat().st_size


def print_table(cases: list[Case]) -> None:
    floor = cases[0].floor
    print()
    print("| case | seconds | pages executed |")
    print("| --- | ---: | ---: |")
    for case in cases:
        print(f"| {case.name} | {case.seconds:.1f} | {len(case.executed)} |")
    print(
        f"| execution floor (the cold build's page times, and {cases[0].planner_steps:.0f} s of "
        f"the planner's steps before them) | {floor:.1f} | |"
    )
    print()


def targets(cases: list[Case], largest_size: int) -> list[tuple[str, bool]]:
    """Each target of the module docstring: what was measured, and whether it was met."""
    cold, unchanged, prose, library = cases
    floor = cold.floor
    return [
        (
            f"no-change rebuild: {unchanged.seconds / cold.seconds:.1%} of the cold build (< 10%)",
            unchanged.seconds < 0.10 * cold.seconds,
        ),
        (f"a prose edit executed {len(prose.executed)} page(s) (0)", not prose.executed),
        (
            f"the cold build is {cold.seconds / floor:.2f}x the execution floor (<= 1.5x)",
            cold.seconds <= 1.5 * floor,
        ),
        (
            f"a library edit re-executed {len(library.executed)} of {len(cold.executed)} pages",
            len(library.executed) == len(cold.executed),
        ),
        (f"the largest page is {largest_size / 1e6:.2f} MB (< 1 MB)", largest_size < 1_000_000),
    ]


def _append(path: Path, text: str) -> None:
    path.write_text(path.read_text() + text)


if __name__ == "__main__":
    sys.exit(main())

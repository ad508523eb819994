"""Benchmark the practice checker: every problem's reference, checked as a learner would.

    nox -s bench            (or: python benchmarks/practice_check.py, with the package installed)

Each reference is written to a file and checked with ``python -m spmd_guide check`` on 1, 2, 4
and 8 CPU devices, the command a learner runs. It prints one line per problem and exits 1 if
any check fails or takes longer than the target: 30 s of wall time on 2 cores.
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
import time
from pathlib import Path

from spmd_guide.environment import environment_without_jax_settings
from spmd_guide.practice import PROBLEMS
from spmd_guide.practice.catalog import reference_source

TARGET_SECONDS = 30.0


def main() -> int:
    missed = []
    print(f"{'problem':<22} {'seconds':>8}  result")
    with tempfile.TemporaryDirectory(prefix="spmd-guide-practice-") as tmp:
        for name in PROBLEMS:
            solution = Path(tmp) / f"{name}.py"
            solution.write_text(reference_source(name))
            start = time.perf_counter()
            result = subprocess.run(
                [sys.executable, "-m", "spmd_guide", "check", name, str(solution)],
                capture_output=True,
                text=True,
                env=environment_without_jax_settings(),
            )
            seconds = time.perf_counter() - start
            ok = result.returncode == 0 and seconds <= TARGET_SECONDS
            verdict = "passed" if result.returncode == 0 else "FAILED"
            print(f"{name:<22} {seconds:8.1f}  {verdict}{'' if ok else '  (missed target)'}")
            if not ok:
                missed.append(name)
                print(result.stdout[-2000:], result.stderr[-2000:], sep="\n")
    print(f"target: each check within {TARGET_SECONDS:g} s; missed: {', '.join(missed) or 'none'}")
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main())

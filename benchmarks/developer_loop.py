"""Benchmark the commands a contributor runs most: `nox -s tests`, `nox -s docs` again, and the
sessions that start processes and launchers (`nox -s multihost`, `nox -s launchers`).

    nox -s bench            (or: python benchmarks/developer_loop.py, with nox installed)

Both run in this working tree on the README's path: nox installed with plain pip, so session
environments are made with virtualenv and pip, never uv. They live in their own folder under the
system's temporary directory (kept between runs), so the developer's .nox is left alone.

- `nox -s tests`: its environment is prepared first (`--install-only`), then two runs are
  timed: the first starts with an empty compilation cache, as after a fresh clone; the second
  is every run after it, where programs the tests compiled before are loaded from the cache.
- `nox -s docs`: run once to bring its environment and the site up to date, then timed again
  with nothing changed, which must skip the install and re-execute no page.

- `nox -s multihost` and `nox -s launchers`: each prepared first, then timed once. The tests
  that start several processes live in these sessions, not in `nox -s tests`.

It prints the times and exits 1 if a target is missed: each run of the tests under 120 s, the
no-change docs run under 15 s, the multi-process example under 60 s and the launchers under 120 s.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from spmd_guide.environment import COMPILATION_CACHE_FOLDER

ROOT = Path(__file__).resolve().parents[1]
ENVDIR = Path(tempfile.gettempdir()) / "spmd-guide-bench-nox"
TARGETS = {
    "nox -s tests (empty compilation cache)": 120.0,
    "nox -s tests (again)": 120.0,
    "nox -s docs (nothing changed)": 15.0,
    "nox -s multihost": 60.0,
    "nox -s launchers": 120.0,
}


def nox(*args: str) -> float:
    """Run nox with pip-made environments; the seconds it took. Exits if the session fails."""
    command = [
        sys.executable,
        "-m",
        "nox",
        "--force-venv-backend",
        "virtualenv",
        "--envdir",
        str(ENVDIR),
        *args,
    ]
    start = time.perf_counter()
    result = subprocess.run(command, cwd=ROOT, capture_output=True, text=True)
    seconds = time.perf_counter() - start
    if result.returncode:
        sys.exit(
            f"`nox {' '.join(args)}` failed:\n{result.stdout[-3000:]}\n{result.stderr[-3000:]}"
        )
    return seconds


def main() -> int:
    nox("-s", "tests", "--install-only")
    shutil.rmtree(ENVDIR / "tests" / COMPILATION_CACHE_FOLDER, ignore_errors=True)
    times = {
        "nox -s tests (empty compilation cache)": nox("-s", "tests"),
        "nox -s tests (again)": nox("-s", "tests"),
    }
    nox("-s", "docs")
    times["nox -s docs (nothing changed)"] = nox("-s", "docs")
    for session in ("multihost", "launchers"):
        nox("-s", session, "--install-only")
        times[f"nox -s {session}"] = nox("-s", session)
    print("| command | seconds | target |")
    print("| --- | ---: | ---: |")
    for name, seconds in times.items():
        print(f"| {name} | {seconds:.1f} | < {TARGETS[name]:g} |")
    missed = [name for name, seconds in times.items() if seconds >= TARGETS[name]]
    print(f"missed: {', '.join(missed) or 'none'}")
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main())

"""Run the pages that time things or start processes, again and again, on a fully loaded machine.

    nox -s stress           (or: python benchmarks/stress.py, with the docs and test dependencies)

A build must never fail because the machine was busy. This script starts two CPU-bound processes
(on a 2-core machine, the cores are then fully taken before the pages start their own work), and
with them running executes each page below, in a fresh kernel started as the docs build starts
one, --runs times in a row (5 unless given), and the tests that assert a time, as many times.

It reports each page's and each test file's failures, and for each timing check
(``spmd_guide.timing``) the tightest value seen against its bound:

- a ratio check passes the target when the smallest ratio seen is at least 5 times its bound;
- a timer check (a time that includes a wait the program sets itself, which no load shortens)
  is reported with its smallest value, for the record.

Exits 1 if a page or test failed, or a ratio check missed its 5x margin.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
sys.path.insert(0, str(DOCS / "_ext"))

from kernel_environment import prepare_ipython_dir  # noqa: E402

from spmd_guide.environment import COMPILE_ONLY_LIBTPU_ENV, DEFAULT_DEVICE_COUNT, cpu_devices_env  # noqa: E402
from spmd_guide.timing import LOG_VARIABLE  # noqa: E402

# Every page that starts a job of several processes or waits on a deadline, a timeout or another
# process; the pages that read a profile (strategies, collective-matmul) read only the order of
# instructions on one thread, which load does not change.
PAGES = (
    "patterns/multihost",
    "patterns/multihost-data",
    "patterns/grain-data",
    "patterns/hangs",
    "patterns/compile-cache",
    "patterns/lost-process",
    "guide/checkpoints-multiprocess",
    "guide/checkpoint-matrix",
    "troubleshooting-processes",
)
# The tests that assert a time, through spmd_guide.timing.
TESTS = (
    "tests/test_operations_examples.py::test_the_traces_show_which_process_the_others_wait_for",
    "tests/test_operations_examples.py::test_mpirun_profiles_every_process_of_the_job",
    # And those that wait on a deadline or a kill, or give a solution a time limit.
    "tests/test_operations_examples.py::"
    "test_a_process_short_of_data_hangs_the_job_until_the_deadline_prints_each_stack",
    "tests/test_operations_examples.py::test_mpirun_runs_the_hanging_job_and_its_deadline_stops_it",
    "tests/test_launch.py::test_a_process_that_fails_part_way_is_outlived_by_the_others",
    "tests/test_launch.py::test_keep_going_for_a_while_stops_the_others_that_long_after_a_failure",
    "tests/test_practice_checker.py::test_a_solution_that_breaks_the_process_fails_clearly",
)
MARGIN = 5
PAGE_TIMEOUT_SECONDS = 600
# Busy until its parent, this script, is gone: a stress run stopped from outside leaves no load.
HOG = "import os\nparent = os.getppid()\nwhile os.getppid() == parent:\n    pass\n"


def execute_page(doc: str, env: dict[str, str]) -> str | None:
    """Execute docs/<doc>.md as the build does; None if it ran through, else the error."""
    import jupytext
    from nbclient import NotebookClient
    from nbclient.exceptions import CellExecutionError

    page = DOCS / f"{doc}.md"
    notebook = jupytext.read(page)
    os.environ.update(env)  # the kernel inherits this process's environment
    client = NotebookClient(
        notebook,
        timeout=PAGE_TIMEOUT_SECONDS,
        kernel_name="python3",
        resources={"metadata": {"path": str(page.parent)}},
    )
    try:
        client.execute()
    except CellExecutionError as error:
        return str(error)[-3000:]
    except Exception as error:  # a dead kernel or a timeout: a failure of the page all the same
        return f"{type(error).__name__}: {error}"[-3000:]
    return None


def run_tests(env: dict[str, str]) -> str | None:
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *TESTS],
        cwd=ROOT,
        env={**os.environ, **env},
        capture_output=True,
        text=True,
    )
    return None if done.returncode == 0 else (done.stdout + done.stderr)[-3000:]


def report(failures: dict[str, list[str]], runs: int, log: Path) -> bool:
    ok = True
    print(f"\n{'page or tests':46} failures (target 0)")
    for name, errors in failures.items():
        print(f"{name:46} {len(errors)} of {runs}")
        ok &= not errors
    seen: dict[tuple[str, str], list[tuple[float, float]]] = defaultdict(list)  # (value, bound)
    if log.exists():
        for line in log.read_text().splitlines():
            record = json.loads(line)
            seen[record["check"], record["kind"]].append((record["observed"], record["bound"]))
    print(f"\n{'timing check':70} {'n':>3} {'tightest':>9} {'bound':>7} {'margin':>7}")
    for (check, kind), values in sorted(seen.items()):
        observed, bound = min(values, key=lambda pair: pair[0] / pair[1])
        margin = observed / bound
        if kind == "ratio":
            verdict = "ok" if margin >= MARGIN else f"MISSED (target {MARGIN}x)"
            ok &= margin >= MARGIN
        else:
            verdict = "a timer the program sets: load only lengthens it"
        print(f"{check:70} {len(values):3} {observed:9.3f} {bound:7.2f} {margin:6.1f}x  {verdict}")
    return ok


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=5, help="times each page runs (default 5)")
    parser.add_argument("--hogs", type=int, default=2, help="CPU-bound processes (default 2)")
    parser.add_argument("pages", nargs="*", default=list(PAGES), help="pages, as docs/<page>.md")
    args = parser.parse_args()
    if args.runs < 1 or args.hogs < 0:
        parser.error("--runs must be at least 1 and --hogs at least 0")
    unknown = [doc for doc in args.pages if not (DOCS / f"{doc}.md").is_file()]
    if unknown:
        parser.error(f"no such page: {', '.join(unknown)} (name them as docs/<page>.md less .md)")

    scratch = Path(tempfile.mkdtemp(prefix="spmd-guide-stress-"))
    log = scratch / "timing.jsonl"
    env = {
        **cpu_devices_env(DEFAULT_DEVICE_COUNT),
        **COMPILE_ONLY_LIBTPU_ENV,
        "IPYTHONDIR": str(prepare_ipython_dir(scratch / "ipython")),
        LOG_VARIABLE: str(log),
    }
    hogs = [subprocess.Popen([sys.executable, "-c", HOG]) for _ in range(args.hogs)]
    failures: dict[str, list[str]] = {doc: [] for doc in args.pages}
    failures["tests that assert a time"] = []
    started = time.monotonic()
    try:
        for run in range(1, args.runs + 1):
            for doc in args.pages:
                began = time.monotonic()
                error = execute_page(doc, env)
                verdict = "passed" if error is None else "FAILED"
                print(f"run {run}: {doc} {verdict} in {time.monotonic() - began:.0f} s", flush=True)
                if error is not None:
                    failures[doc].append(error)
                    print(error, flush=True)
            error = run_tests(env)
            print(f"run {run}: tests {'passed' if error is None else 'FAILED'}", flush=True)
            if error is not None:
                failures["tests that assert a time"].append(error)
                print(error, flush=True)
    finally:
        for hog in hogs:
            hog.kill()
            hog.wait()
    took = time.monotonic() - started
    print(f"\n{args.runs} runs beside {args.hogs} CPU-bound processes in {took:.0f} s")
    return 0 if report(failures, args.runs, log) else 1


if __name__ == "__main__":
    sys.exit(main())

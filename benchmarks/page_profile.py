"""Time each cell of a page, to find what makes a page slow.

    .nox/docs/bin/python benchmarks/page_profile.py patterns/zero [guide/planner ...] [--top 8]

Each page runs alone in a fresh kernel started as the docs build starts one (8 CPU devices), and
its slowest cells are listed with their first line. The docs build's own figure for a page is the
total; this says where inside the page the seconds go.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
sys.path.insert(0, str(DOCS / "_ext"))

from kernel_environment import prepare_ipython_dir  # noqa: E402

from spmd_guide.environment import COMPILE_ONLY_LIBTPU_ENV, DEFAULT_DEVICE_COUNT, cpu_devices_env  # noqa: E402

LISTEN = """
import collections as _collections, jax as _jax
_event_seconds = _collections.Counter()
_event_counts = _collections.Counter()
def _note(event, seconds, **_):
    _event_seconds[event] += seconds
    _event_counts[event] += 1
_jax.monitoring.register_event_duration_secs_listener(_note)
"""
REPORT = """
for _event, _seconds in _event_seconds.most_common(6):
    print(f"  {_seconds:6.1f} s  {_event_counts[_event]:4} x {_event}")
"""


def cell_seconds(cell: dict) -> float:
    timing = cell.get("metadata", {}).get("execution", {})
    start, end = timing.get("iopub.execute_input"), timing.get("shell.execute_reply")
    if not (start and end):
        return 0.0
    return (datetime.fromisoformat(end) - datetime.fromisoformat(start)).total_seconds()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("pages", nargs="+", help="pages, as docs/<page>.md less .md")
    parser.add_argument("--top", type=int, default=8, help="cells listed per page (default 8)")
    parser.add_argument(
        "--jax-events",
        action="store_true",
        help="also sum the page's JAX durations (tracing, lowering, compiling) by event",
    )
    args = parser.parse_args()
    unknown = [doc for doc in args.pages if not (DOCS / f"{doc}.md").is_file()]
    if unknown:
        parser.error(f"no such page: {', '.join(unknown)} (name them as docs/<page>.md less .md)")

    import jupytext
    import nbformat
    from nbclient import NotebookClient

    scratch = Path(tempfile.mkdtemp(prefix="spmd-guide-profile-"))
    os.environ.update(
        {
            **cpu_devices_env(DEFAULT_DEVICE_COUNT),
            **COMPILE_ONLY_LIBTPU_ENV,
            "IPYTHONDIR": str(prepare_ipython_dir(scratch / "ipython")),
        }
    )
    for doc in args.pages:
        page = DOCS / f"{doc}.md"
        notebook = jupytext.read(page)
        if args.jax_events:
            notebook.cells.insert(0, nbformat.v4.new_code_cell(LISTEN))
            notebook.cells.append(nbformat.v4.new_code_cell(REPORT))
        client = NotebookClient(
            notebook,
            timeout=600,
            kernel_name="python3",
            record_timing=True,
            resources={"metadata": {"path": str(page.parent)}},
        )
        began = time.monotonic()
        client.execute()
        total = time.monotonic() - began
        cells = [
            (cell_seconds(cell), n, cell.source.strip().splitlines()[0][:70])
            for n, cell in enumerate(notebook.cells)
            if cell.cell_type == "code" and cell.source.strip()
        ]
        in_cells = sum(seconds for seconds, _, _ in cells)
        print(f"\n{doc}: {total:.1f} s ({in_cells:.1f} s in cells, the rest kernel start-up)")
        for seconds, n, first in sorted(cells, reverse=True)[: args.top]:
            print(f"  {seconds:6.1f} s  cell {n:3}  {first}")
        if args.jax_events:
            print(notebook.cells[-1].outputs[0]["text"].rstrip())
    return 0


if __name__ == "__main__":
    sys.exit(main())

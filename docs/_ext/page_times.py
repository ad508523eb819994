"""The build's last lines: each page that ran slowly, and how long the build took.

At the end of a build this extension logs one line for each page executed in that build that
took longer than :data:`SLOW_SECONDS` (pages read from the execution cache are not counted), then
one line with the build's total time, the number of pages executed and the slowest of them. The
budget these lines watch is one minute a page on a fresh clone; see ``nox -s bench``.
"""

from __future__ import annotations

import time
from typing import Any

from myst_nb.sphinx_ import NbMetadataCollector
from sphinx.application import Sphinx
from sphinx.config import Config
from sphinx.util import logging

logger = logging.getLogger(__name__)

SLOW_SECONDS = 45.0
"""A page slower than this is named at the end of the build: it nears the 60 s budget."""

_started: dict[str, float] = {}


def _note_start(app: Sphinx, config: Config) -> None:
    _started["wall"], _started["epoch"] = time.perf_counter(), time.time()


def executed_this_build(app: Sphinx) -> dict[str, float]:
    """Seconds each page executed in this build took, by document name."""
    times = {}
    for docname in app.env.found_docs:
        data = NbMetadataCollector.get_exec_data(app.env, docname)  # type: ignore[arg-type]
        if data and data.get("runtime") is not None and data["mtime"] >= _started["epoch"]:
            times[docname] = float(data["runtime"])
    return times


def _report(app: Sphinx, exception: Exception | None) -> None:
    if exception is not None or "wall" not in _started:
        return
    times = executed_this_build(app)
    for docname, seconds in sorted(times.items(), key=lambda item: -item[1]):
        if seconds > SLOW_SECONDS:
            logger.info(f"slow page: {docname} ran {seconds:.0f} s (over {SLOW_SECONDS:g} s)")
    slowest = max(times.items(), key=lambda item: item[1], default=None)
    total = time.perf_counter() - _started["wall"]
    summary = f"built in {total:.0f} s; {len(times)} pages executed"
    if slowest:
        summary += f", the slowest {slowest[0]} in {slowest[1]:.0f} s"
    logger.info(summary)


def setup(app: Sphinx) -> dict[str, Any]:
    app.connect("config-inited", _note_start)
    app.connect("build-finished", _report)
    return {"parallel_read_safe": True, "parallel_write_safe": True}

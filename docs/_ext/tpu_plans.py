"""The planner page's compiles, run before any page executes.

The planner page compares its formulas with what the TPU compiler planned for eight training
steps of models of up to billions of parameters; compiling one takes 24 to 49 s on two cores.
Run inside the page, they would make it the build's one page of minutes on a fresh clone; so
would its thirty CPU compiles, a few seconds each, beside the other pages. Before the pages are
read, this extension compiles both, in two processes side by side, which keeps both cores busy
(sharing the programs among two processes instead saved nothing): ``python -m
spmd_guide.planner tpu TPU_FOLDER`` and ``... cpu CPU_FOLDER``. Each keeps its results under
a fingerprint of the lowered program, the target and
the versions: the TPU's in the folder that ``SPMD_GUIDE_TPU_PLANS`` names, kept between builds,
and the CPU's in the folder that ``SPMD_GUIDE_CPU_PLANS`` names, emptied and compiled again
every build. The page, executed in the
same build, lowers the same programs and reads the results. Nothing runs unless the planner page
is to be read with execution on. Run beside the pages instead, at a lower priority, the compiles
made a fresh clone's build slower (612 s against 583 s on 2 cores) and pushed other pages over a
minute: the pages leave too little of two cores idle. The folder defaults to ``tpu-plans``
beside the build's HTML (``nox -s docs`` keeps it with the session's environment instead, so
``--fresh`` keeps it).
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from sphinx.application import Sphinx
from sphinx.environment import BuildEnvironment
from sphinx.errors import ExtensionError
from sphinx.util import logging

logger = logging.getLogger(__name__)

READERS = {"guide/planner"}
"""The pages that read the plans."""

COMMAND = [sys.executable, "-m", "spmd_guide.planner"]
"""What compiles the steps, given the folder to keep them in."""


def _compile_before_reading(app: Sphinx, env: BuildEnvironment, docnames: list[str]) -> None:
    if app.config.nb_execution_mode == "off" or not READERS & set(docnames):
        return
    folder = os.environ.setdefault(
        "SPMD_GUIDE_TPU_PLANS", str(Path(app.doctreedir).parent / "tpu-plans")
    )
    # The CPU's plans are compiled again every build, into the build's own folder.
    cpu_folder = os.environ.setdefault(
        "SPMD_GUIDE_CPU_PLANS", str(Path(app.doctreedir).parent / "cpu-plans")
    )
    started = time.perf_counter()
    logger.info("compiling the planner page's steps (minutes, unless the TPU's are kept)…")
    running = [
        subprocess.Popen(
            [*COMMAND, target, target_folder],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for target, target_folder in (("tpu", folder), ("cpu", cpu_folder))
    ]
    finished = []
    try:
        for process in running:
            finished.append(process.communicate(timeout=1800))
    except subprocess.TimeoutExpired as slow:
        raise ExtensionError("compiling the planner page's steps took over 30 minutes") from slow
    finally:
        for process in running:
            process.kill()  # one that is still running, after a timeout
            process.communicate()
    for process, (_, stderr) in zip(running, finished, strict=True):
        if process.returncode:
            raise ExtensionError(
                f"compiling the planner page's steps failed (exit {process.returncode}):\n"
                f"{stderr[-3000:]}"
            )
    reports = [stdout.strip() for stdout, _ in finished]
    logger.info(
        f"planner steps: {'; '.join(reports)} "
        f"({time.perf_counter() - started:.0f} s with start-up, side by side)"
    )


def setup(app: Sphinx) -> dict[str, Any]:
    app.connect("env-before-read-docs", _compile_before_reading)
    return {"parallel_read_safe": True, "parallel_write_safe": True}

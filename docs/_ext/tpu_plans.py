"""The planner page's compiles, run before any page executes.

The planner page compares its formulas with what the TPU compiler planned for eight training
steps of models of up to billions of parameters, 10 to 100 s a compile on two cores, and with
what the CPU compiler planned for thirty-three, a few seconds each. Run inside the page, they
would make it the build's one page of minutes on a fresh clone. Before the pages are read, this
extension runs ``python -m spmd_guide.planner TPU_FOLDER CPU_FOLDER``, which shares the programs
among two processes (each compiler keeps about one core busy; :func:`spmd_guide.planner.
compile_checks`). The results are kept under a fingerprint of the lowered program, the target and
the versions: the TPU's in the folder that ``SPMD_GUIDE_TPU_PLANS`` names, kept between builds,
and the CPU's in the folder that ``SPMD_GUIDE_CPU_PLANS`` names, emptied and compiled again
every build. The page, executed in the same build, lowers the same programs and reads the
results. Nothing runs unless the planner page is to be read with execution on. Run beside the
pages instead, at a lower priority, the compiles made a fresh clone's build slower (612 s against
583 s on 2 cores) and pushed other pages over a minute: the pages leave too little of two cores
idle. The TPU folder defaults to ``tpu-plans`` beside the build's HTML (``nox -s docs`` keeps it
with the session's environment instead, so ``--fresh`` keeps it).
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
    try:
        finished = subprocess.run(
            [*COMMAND, folder, cpu_folder], capture_output=True, text=True, timeout=1800
        )
    except subprocess.TimeoutExpired as slow:
        raise ExtensionError("compiling the planner page's steps took over 30 minutes") from slow
    if finished.returncode:
        raise ExtensionError(
            f"compiling the planner page's steps failed (exit {finished.returncode}):\n"
            f"{finished.stderr[-3000:]}"
        )
    logger.info(
        f"planner steps: {finished.stdout.strip()} "
        f"({time.perf_counter() - started:.0f} s with start-up)"
    )


def setup(app: Sphinx) -> dict[str, Any]:
    app.connect("env-before-read-docs", _compile_before_reading)
    return {"parallel_read_safe": True, "parallel_write_safe": True}

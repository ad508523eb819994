"""The planner page's TPU compiles, run beside the other pages, and the planner page read last.

The planner page compares its formulas with what the TPU compiler planned for seventeen training
steps of billion-parameter models; compiling one takes 20 to 40 s on two cores. Run inside the
page, they would make it the build's one page of minutes on a fresh clone. Instead, when the
planner page is to be read with execution on, this extension

- starts ``python -m spmd_guide.planner FOLDER`` at a lower priority (``nice``) as the build
  begins reading, so the compiles use what the other pages leave of the machine; each result is
  kept in the folder that ``SPMD_GUIDE_TPU_PLANS`` names, under a fingerprint of the lowered
  program, the slice and the versions, and nothing is compiled that the folder already holds;
- moves the planner page to the end of the pages to read, and before reading it waits for the
  compiles to finish (the log says how long), so the page, executed in the same build, lowers
  the same programs and reads their results.

The folder defaults to ``tpu-plans`` beside the build's HTML (``nox -s docs`` keeps it with the
session's environment instead, so that ``--fresh`` keeps it).
"""

from __future__ import annotations

import os
import shlex
import signal
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

READER = "guide/planner"
"""The page that reads the plans."""

COMMAND = [sys.executable, "-m", "spmd_guide.planner"]
"""What compiles the steps, given the folder to keep them in."""

TIMEOUT_SECONDS = 1800

_compiling: dict[str, Any] = {}


def _log_files(app: Sphinx) -> tuple[Path, Path]:
    build = Path(app.doctreedir).parent
    return build / "tpu-plans.log", build / "tpu-plans.exit"


def _start(app: Sphinx, env: BuildEnvironment, docnames: list[str]) -> None:
    if app.config.nb_execution_mode == "off" or READER not in docnames:
        return
    docnames.remove(READER)
    docnames.append(READER)
    folder = os.environ.setdefault(
        "SPMD_GUIDE_TPU_PLANS", str(Path(app.doctreedir).parent / "tpu-plans")
    )
    log, exit_file = _log_files(app)
    log.parent.mkdir(parents=True, exist_ok=True)
    exit_file.unlink(missing_ok=True)
    # The exit status goes to a file: the worker process that reads the planner page is not
    # this process's parent of the compiler, and cannot wait for it.
    command = f"nice -n 10 {shlex.join([*COMMAND, folder])}"
    script = f"{command} > {shlex.quote(str(log))} 2>&1; echo $? > {shlex.quote(str(exit_file))}"
    _compiling["process"] = subprocess.Popen(["sh", "-c", script], start_new_session=True)
    logger.info("compiling the planner page's TPU steps beside the other pages…")


def _wait_before_the_planner(app: Sphinx, docname: str, source: list[str]) -> None:
    if docname != READER or app.config.nb_execution_mode == "off":
        return
    if "process" not in _compiling:
        return  # nothing started: the page compiles what it does not find kept
    log, exit_file = _log_files(app)
    started = time.perf_counter()
    while not exit_file.exists():
        if time.perf_counter() - started > TIMEOUT_SECONDS:
            raise ExtensionError(
                f"the planner page's TPU compiles did not finish in {TIMEOUT_SECONDS} s; "
                f"their log is {log}"
            )
        time.sleep(0.5)
    status = exit_file.read_text().strip()
    output = log.read_text(errors="replace").strip()
    if status != "0":
        raise ExtensionError(
            f"compiling the planner page's TPU steps failed (exit {status}):\n{output[-3000:]}"
        )
    last_line = output.splitlines()[-1] if output else ""
    waited = time.perf_counter() - started
    logger.info(f"planner TPU steps: {last_line}; the planner page waited {waited:.0f} s for them")


def _reap(app: Sphinx, exception: Exception | None) -> None:
    process = _compiling.pop("process", None)
    if process is None:
        return
    if process.poll() is None:  # the build stopped before the planner page: stop compiling too
        os.killpg(process.pid, signal.SIGTERM)
    process.wait()


def setup(app: Sphinx) -> dict[str, Any]:
    app.connect("env-before-read-docs", _start)
    app.connect("source-read", _wait_before_the_planner)
    app.connect("build-finished", _reap)
    return {"parallel_read_safe": True, "parallel_write_safe": True}

"""The site's JavaScript formulas, run here in V8 (through ``mini-racer``), so that the numbers
the build checks are the numbers a reader's browser shows (the planner's, the explorer's)."""

from __future__ import annotations

import atexit
import functools
from pathlib import Path
from typing import Any


@functools.cache
def context(script: Path, owner: str) -> Any:
    """A V8 context that has run ``script``, one per script for the process's life; ``owner``
    names what runs it, for the error when the script is missing.

    Raises:
        FileNotFoundError: if ``script`` is not there (the package runs it from a clone).
    """
    from py_mini_racer import MiniRacer

    if not script.is_file():
        raise FileNotFoundError(
            f"the formulas are not at {script}: {owner} runs them from a clone of the "
            "repository, with the package installed from it (pip install -e .)"
        )
    runner = MiniRacer()
    # An open context's V8 threads keep the interpreter from exiting.
    atexit.register(runner.close)
    runner.eval(script.read_text())
    return runner

"""Run one page's visible cells, top to bottom, as a reader who copied them would.

    python copied_pages/run_visible_cells.py docs/patterns/fsdp.md

The cells run in one IPython shell, so a cell's last expression and ``%`` magics behave as in a
notebook. The process must not be able to import ``spmd_guide``: a reader does not have it.
Exits 0 when every cell ran, 1 naming the first cell that raised.
"""

from __future__ import annotations

import importlib.util
import sys
import warnings
from pathlib import Path

from IPython.core.interactiveshell import InteractiveShell
from visible_cells import visible_cells


def main(page: Path) -> int:
    if importlib.util.find_spec("spmd_guide") is not None:
        print(
            "spmd_guide is importable here, so this run would not show what a reader's copy "
            "needs; run it in an environment without this repository's package "
            "(`nox -s copied-pages` makes one)",
            file=sys.stderr,
        )
        return 2
    # As in the docs build: a deprecated call in a page's code is an error, IPython's own are not.
    warnings.filterwarnings("error", category=DeprecationWarning)
    warnings.filterwarnings(
        "default", category=DeprecationWarning, module=r"(IPython|traitlets)(\.|$)"
    )
    shell = InteractiveShell.instance()
    for number, code in enumerate(visible_cells(page), 1):
        result = shell.run_cell(code)
        error = result.error_before_exec or result.error_in_exec
        if error is not None:
            first_line = code.strip().splitlines()[0]
            print(
                f"{page}: visible cell {number} (starting {first_line!r}) raised "
                f"{type(error).__name__}: {error}",
                file=sys.stderr,
            )
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(Path(sys.argv[1]).resolve()))

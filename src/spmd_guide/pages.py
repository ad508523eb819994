"""Another page's code, for a page that builds on it.

A page whose measurements need an earlier page's program runs, in a hidden cell, exactly the code
a reader copies from that page: its visible cells, chosen by the rule ``nox -s copied-pages``
applies (``copied_pages/visible_cells.py``, read here from the checkout), so the program is
written once, on the page that teaches it.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
_RULE = ROOT / "copied_pages" / "visible_cells.py"


def _visible_cells_module() -> ModuleType:
    spec = importlib.util.spec_from_file_location("visible_cells", _RULE)
    if spec is None or spec.loader is None:
        raise FileNotFoundError(f"{_RULE} is missing: run from a checkout of the repository")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _page(doc: str) -> Path:
    page = DOCS / f"{doc}.md"
    if not page.is_file():
        raise FileNotFoundError(
            f"no page {doc!r}: {page} does not exist; name it as in the toctree"
        )
    return page


def visible_code(doc: str) -> list[str]:
    """The code of each visible cell of the page ``doc`` (``"patterns/pipeline-schedules"``), in
    page order, as a reader would copy it.

    Raises:
        FileNotFoundError: if there is no ``docs/<doc>.md``.
    """
    cells: list[str] = _visible_cells_module().visible_cells(_page(doc))
    return cells


def run_page(doc: str, namespace: dict[str, Any], *, hidden_too: bool = False) -> None:
    """Run the page ``doc``'s visible cells in ``namespace`` (a notebook's ``globals()``), so that
    what they define is defined there; with ``hidden_too``, its hidden cells as well, in page
    order (its checks and the helpers they define), leaving out only cells meant to raise.

    Raises:
        FileNotFoundError: if there is no ``docs/<doc>.md``.
    """
    rule = _visible_cells_module()
    if hidden_too:
        codes = [code for tags, code in rule.cells(_page(doc)) if "raises-exception" not in tags]
    else:
        codes = visible_code(doc)
    for number, code in enumerate(codes, 1):
        exec(compile(code, f"<{doc}, cell {number}>", "exec"), namespace)

"""One mode on the path: after the first tour, a page that makes a mesh with Auto axes says why.

The first tour (``tutorial/``) introduces Explicit, Auto and Manual axes, and its first page says
which to use; every later page of the path shards with Explicit axes, JAX's default, unless it
truly needs Auto ones, and then says why in one line that begins "**Why Auto axes here:**",
before the cell that first makes such a mesh.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

DOCS = Path(__file__).resolve().parents[1] / "docs"
sys.path.insert(0, str(DOCS / "_ext"))

import course  # noqa: E402

# Reads the pages as text; runs no JAX.
pytestmark = pytest.mark.once

WHY = "**Why Auto axes here:**"
PAGES = [
    page.doc
    for page in course.load_course().path
    if not page.doc.startswith(("tutorial/", "problems/"))
]
_CELL = re.compile(r"^```\{code-cell\}.*?^```", re.M | re.S)


def first_auto_mesh_and_reason(text: str) -> tuple[int | None, int | None]:
    """Where the page's first code cell that names ``AxisType.Auto`` starts, and where its
    "Why Auto axes here" line starts (None for either that is not there)."""
    cell = next((m.start() for m in _CELL.finditer(text) if "AxisType.Auto" in m.group()), None)
    reason = text.find(WHY)
    return cell, None if reason < 0 else reason


@pytest.mark.parametrize("page", PAGES)
def test_a_page_after_the_tour_says_why_it_uses_auto_axes(page):
    cell, reason = first_auto_mesh_and_reason((DOCS / f"{page}.md").read_text(encoding="utf-8"))
    if cell is None:
        return
    assert reason is not None, f"{page} makes an Auto mesh: say why in a line {WHY!r}"
    assert reason < cell, f"{page}: say why it uses Auto axes before the cell that makes them"


def test_the_reason_finder_reads_a_page_as_the_test_expects():
    cell = (
        "```{code-cell} ipython3\nmesh = jax.make_mesh((8,), ('x',), axis_types=(AxisType.Auto,))"
    )
    cell += "\n```\n"
    assert first_auto_mesh_and_reason("# T\n\n" + cell) == (5, None)
    page = f"# T\n\n{WHY} the lesson is the compiler's choice.\n\n" + cell
    cell_at, reason_at = first_auto_mesh_and_reason(page)
    assert reason_at is not None and cell_at is not None and reason_at < cell_at
    assert first_auto_mesh_and_reason("# T\n\n```{code-cell} ipython3\nx = 1\n```\n") == (
        None,
        None,
    )


def test_the_first_tours_first_page_says_which_mode_to_use_in_one_paragraph():
    text = (DOCS / "tutorial/sharded-computation.md").read_text(encoding="utf-8")
    answer = re.search(
        r"^\(tutorial-which-mode\)=\n(?P<paragraph>Which to use: .+?)\n\n", text, re.M | re.S
    )
    assert answer, "tutorial/sharded-computation must answer 'which mode to use' in one paragraph"
    for mode in ("Explicit axes", "Auto axes", "jax.shard_map"):
        assert mode in answer["paragraph"], mode

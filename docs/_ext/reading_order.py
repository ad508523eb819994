"""Pages read in parallel one at a time, the longest first.

Pages execute while Sphinx reads them. In a parallel build Sphinx cuts the sorted list of pages
into a few long runs (17 pages each for 62 pages on 2 cores) and gives each worker a run at a
time, so the pages of one folder, which are often the slow ones together, share a worker while
the other finishes early and waits. This extension gives each worker one page at a time instead,
the pages with the most code first: a worker that finishes takes the next page, and the build's
end waits at most for one short page. The count of code lines stands for a page's time because a
fresh clone has no earlier build to time; it is a rough guide, and ordering is all it changes.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from sphinx import builders
from sphinx.application import Sphinx
from sphinx.environment import BuildEnvironment

CODE_CELL = re.compile(r"^```\{code-cell\}[^\n]*\n(.*?)^```", re.MULTILINE | re.DOTALL)

make_chunks_of_sphinx = builders.make_chunks


def code_lines(source: str) -> int:
    """How many lines a MyST page's code cells hold."""
    return sum(len(cell.splitlines()) for cell in CODE_CELL.findall(source))


def one_page_per_task(arguments: Sequence[str], nproc: int, maxbatch: int = 10) -> list[Any]:
    return [[argument] for argument in arguments]


def _order_and_split(app: Sphinx, env: BuildEnvironment, docnames: list[str]) -> None:
    if app.parallel <= 1:
        return

    def lines(docname: str) -> int:
        path = Path(env.doc2path(docname))
        return code_lines(path.read_text(encoding="utf-8")) if path.suffix == ".md" else 0

    docnames.sort(key=lambda docname: (-lines(docname), docname))
    builders.make_chunks = one_page_per_task


def _restore(app: Sphinx, env: BuildEnvironment) -> None:
    # Writing is quick and Sphinx's own runs suit it.
    builders.make_chunks = make_chunks_of_sphinx


def setup(app: Sphinx) -> dict[str, Any]:
    app.connect("env-before-read-docs", _order_and_split)
    app.connect("env-updated", _restore)
    return {"parallel_read_safe": True, "parallel_write_safe": True}

"""A cell's printed lines once, in the page and in the executed notebook beside it.

With ``nb_merge_streams`` myst-nb shows a cell's consecutive prints as one block. It merges them
into the first output in place, and then writes the executed notebook, whose first output now
holds every line while the later outputs are still there: the notebook under
``_build/jupyter_execute`` (and anything made from it) repeated the tail of each such cell's
output. This extension has the merge work on a copy, and fails the build if an executed notebook
still has a cell whose stream output ends with the text of the stream output after it.
"""

from __future__ import annotations

import copy
import itertools
from pathlib import Path
from typing import Any

import myst_nb.core.render
import nbformat
from sphinx.application import Sphinx
from sphinx.errors import ExtensionError

_merge_in_place = myst_nb.core.render.coalesce_streams


def _merge_a_copy(outputs: list[Any]) -> list[Any]:
    return _merge_in_place(copy.deepcopy(outputs))


def repeated_tails(notebook: Any) -> list[int]:
    """The code cells (by index) whose stream output ends with the next stream output's text."""
    found = []
    for index, cell in enumerate(notebook.cells):
        streams = [out for out in cell.get("outputs", []) if out.output_type == "stream"]
        for first, second in itertools.pairwise(streams):
            text = second.text
            longer = len(first.text) > len(text) and first.text.endswith(text)
            if first.name == second.name and text.strip() and longer:
                found.append(index)
                break
    return found


def _check_executed_notebooks(app: Sphinx, exception: Exception | None) -> None:
    if exception is not None:
        return
    folder = Path(app.outdir).parent / "jupyter_execute"
    problems = []
    for docname in sorted(app.env.found_docs):
        path = folder / f"{docname}.ipynb"
        if path.is_file() and (cells := repeated_tails(nbformat.read(path, as_version=4))):
            problems.append(f"{path.relative_to(folder)}: cells {cells}")
    if problems:
        raise ExtensionError(
            "executed notebooks repeat the end of a cell's printed output in a second output "
            "(merged streams written back into the notebook): " + "; ".join(problems)
        )


def setup(app: Sphinx) -> dict[str, Any]:
    myst_nb.core.render.coalesce_streams = _merge_a_copy
    app.connect("build-finished", _check_executed_notebooks)
    return {"parallel_read_safe": True, "parallel_write_safe": True}

"""Offer each page's source for download, as MyST Markdown and, for notebooks, as .ipynb.

Sphinx already copies every source into ``_sources/`` (kept with its own ``.md`` suffix, see
``html_sourcelink_suffix`` in conf.py). This extension writes a Jupyter notebook beside each
MyST notebook's source, converted with Jupytext (code and text only: outputs are made by running
it), and puts links to both at the top of the page.
"""

from __future__ import annotations

from pathlib import Path

import jupytext
from sphinx.application import Sphinx
from sphinx.util import logging

logger = logging.getLogger(__name__)


def _is_notebook(source: Path) -> bool:
    head = source.read_text(encoding="utf-8")[:400]
    return head.startswith("---") and "kernelspec:" in head


def add_links(app: Sphinx, pagename: str, templatename: str, context: dict, doctree) -> None:
    if doctree is None or "body" not in context:
        return
    source = Path(app.env.doc2path(pagename))
    if source.suffix != ".md":
        return
    root = context["pathto"]("_sources/", 1)
    links = [f'<a href="{root}{pagename}.md" download>.md</a>']
    if _is_notebook(source):
        links.append(f'<a href="{root}{pagename}.ipynb" download>.ipynb</a>')
    context["body"] = (
        '<p class="source-downloads">Download this page: '
        + " · ".join(links)
        + "</p>\n"
        + context["body"]
    )


def write_notebooks(app: Sphinx, exception: Exception | None) -> None:
    if exception is not None or app.builder.format != "html":
        return
    out = Path(app.outdir) / "_sources"
    for docname in app.env.found_docs:
        source = Path(app.env.doc2path(docname))
        if source.suffix == ".md" and _is_notebook(source):
            target = out / f"{docname}.ipynb"
            target.parent.mkdir(parents=True, exist_ok=True)
            jupytext.write(jupytext.read(source), target, fmt="ipynb")


def setup(app: Sphinx) -> dict:
    app.connect("html-page-context", add_links)
    app.connect("build-finished", write_notebooks)
    return {"parallel_read_safe": True, "parallel_write_safe": True}

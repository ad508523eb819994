"""Fail the build on a figure a screen reader cannot describe.

Every figure a page draws is meant to come from ``spmd_guide.figures``, whose inline SVG is
labelled (``role="img"`` and ``aria-label``) by the alt text the page wrote. This transform, run
when a page is read, fails the build on an SVG output without that label, and on an image output
(a PNG from matplotlib's ``plt.show()``, say) with no alt text, naming the page and what to use.
"""

from __future__ import annotations

import re

from docutils import nodes
from sphinx.application import Sphinx
from sphinx.errors import ExtensionError
from sphinx.transforms import SphinxTransform

SVG_TAG = re.compile(r"<svg\b[^>]*>")
LABELLED = re.compile(
    r'\brole="img"[^>]*\baria-label="[^"]{20,}"|\baria-label="[^"]{20,}"[^>]*\brole="img"'
)
FIX = "draw it with spmd_guide.figures, whose to_svg() takes the alt text"


def check(page: str, document: nodes.document) -> None:
    """Raise if ``document`` holds an SVG output without its label or a cell's image without
    alt text."""
    for node in document.findall(nodes.raw):
        if "html" not in node.get("format", ""):
            continue
        for tag in SVG_TAG.findall(node.astext()):
            if not LABELLED.search(tag):
                raise ExtensionError(
                    f'{page}: an SVG output has no role="img" and alt text '
                    f"(aria-label of 20 characters or more): {FIX}"
                )
    for image in document.findall(nodes.image):
        if not image.get("alt"):
            raise ExtensionError(
                f"{page}: an image ({image.get('uri', '')}) has no alt text: {FIX}"
            )


class FigureAltText(SphinxTransform):
    default_priority = 500

    def apply(self) -> None:
        check(self.env.docname, self.document)


def setup(app: Sphinx) -> dict:
    app.add_transform(FigureAltText)
    return {"parallel_read_safe": True, "parallel_write_safe": True}

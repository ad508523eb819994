"""Write the execution statistics table's status as words.

myst-nb marks each page's run with an emoji, which shows as an empty box where no emoji font
is installed; the table says "passed" or "failed" instead.
"""

from __future__ import annotations

from docutils import nodes
from sphinx.application import Sphinx
from sphinx.transforms.post_transforms import SphinxPostTransform

WORDS = {"✅": "passed", "❌": "failed"}


class StatusInWords(SphinxPostTransform):
    # After myst-nb fills in the table (8), before references are resolved (10).
    default_priority = 9

    def run(self, **kwargs) -> None:
        for table in self.document.findall(nodes.table):
            for text in list(table.findall(nodes.Text)):
                if text.astext() in WORDS:
                    text.parent.replace(text, nodes.Text(WORDS[text.astext()]))


def setup(app: Sphinx) -> dict:
    app.add_post_transform(StatusInWords)
    return {"parallel_read_safe": True, "parallel_write_safe": True}

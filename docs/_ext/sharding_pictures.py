"""Make the sharding pictures of ``jax.debug.visualize_array_sharding`` fit the site.

In a notebook the picture is rich's HTML: a ``<pre>`` with a fixed inline style, and one
``<span>`` per tile with a background colour from matplotlib's tab20b map and black or white
text. This transform, run when a page is read:

- swaps the inline style of the ``<pre>`` for the class ``sharding-picture`` and the width of
  its widest line, so the site's stylesheet decides its font size (small enough to fit a
  phone), its overflow (it scrolls inside its own box) and its colours in dark mode;
- paints the tiles in the site's one palette (``spmd_guide.figures.DEVICE_COLOURS``, in the
  order the picture's colours first appear) instead of matplotlib's, and gives each tile the
  text colour, black or white, with the higher WCAG contrast against the tile (JAX picks it
  by a brightness threshold, which leaves white text on its lighter tiles: 2.5:1 on
  ``#9c9ede``, where black gives 8.4:1);
- fails the build on a picture with no device label in it, which says nothing to a reader.
"""

from __future__ import annotations

import html
import re
from pathlib import Path

from docutils import nodes
from sphinx.application import Sphinx
from sphinx.errors import ExtensionError
from sphinx.transforms import SphinxTransform

from spmd_guide.figures import DEVICE_COLOURS

RICH_PRE = re.compile(r'^<pre style="white-space:pre;overflow-x:auto;[^"]*">')
TILE_STYLE = re.compile(r'style="([^"]*background-color: (#[0-9a-fA-F]{6})[^"]*)"')
TEXT_COLOUR = re.compile(r"(?<![-\w])(color|text-decoration-color): #[0-9a-fA-F]{6}")
DEVICE_LABEL = re.compile(r"\b(CPU|GPU|TPU) \d")


def _luminance(hex_colour: str) -> float:
    def channel(value: int) -> float:
        c = value / 255
        return c / 12.92 if c <= 0.04045 else ((c + 0.055) / 1.055) ** 2.4

    r, g, b = (int(hex_colour[i : i + 2], 16) for i in (1, 3, 5))
    return 0.2126 * channel(r) + 0.7152 * channel(g) + 0.0722 * channel(b)


def legible_text_colour(background: str) -> str:
    """Black or white, whichever contrasts more with `background` ('#rrggbb')."""
    lum = _luminance(background)
    on_black = (lum + 0.05) / 0.05
    on_white = 1.05 / (lum + 0.05)
    return "#000000" if on_black >= on_white else "#ffffff"


def _recolour(match: re.Match, palette: dict[str, str]) -> str:
    style, background = match.group(1), match.group(2)
    ours = palette.setdefault(
        background.lower(), DEVICE_COLOURS[len(palette) % len(DEVICE_COLOURS)]
    )
    style = style.replace(background, ours)
    text = legible_text_colour(ours)
    # `color` and `text-decoration-color` both follow the text.
    style = TEXT_COLOUR.sub(rf"\1: {text}", style)
    return f'style="{style}"'


def restyle(picture: str) -> str:
    text = html.unescape(re.sub(r"<[^>]+>", "", picture))
    columns = max(len(line) for line in text.splitlines())
    # The stylesheet sizes the font from --columns so the widest line fits a phone's column.
    picture = RICH_PRE.sub(
        f'<pre class="sharding-picture" style="--columns: {columns}">', picture, count=1
    )
    palette: dict[str, str] = {}
    return TILE_STYLE.sub(lambda match: _recolour(match, palette), picture)


class ShardingPictures(SphinxTransform):
    default_priority = 500

    def apply(self) -> None:
        for node in self.document.findall(nodes.raw):
            if "text_html" not in node.get("classes", []) or not RICH_PRE.match(node.astext()):
                continue
            html = node.astext()
            if not DEVICE_LABEL.search(re.sub(r"<[^>]+>", "", html)):
                raise ExtensionError(
                    f"{self.env.docname}: a sharding picture has no device label in it (its "
                    "tiles are too small for their text); draw a smaller array with the same "
                    "layout, or pass a larger `scale=` to jax.debug.visualize_array_sharding"
                )
            node.children = [nodes.Text(restyle(html))]


def _palette_stylesheet(app: Sphinx) -> None:
    """The palette as CSS variables, ``--spmd-device-0`` to ``-7``, for what the site's scripts
    draw (the planner's bars, the explorer's blocks): one palette across the site, stated once."""
    folder = Path(app.doctreedir).parent / "palette"
    folder.mkdir(parents=True, exist_ok=True)
    lines = "".join(f"  --spmd-device-{k}: {c};\n" for k, c in enumerate(DEVICE_COLOURS))
    (folder / "palette.css").write_text(f":root {{\n{lines}}}\n", encoding="utf-8")
    app.config.html_static_path.append(str(folder))
    app.add_css_file("palette.css")


def setup(app: Sphinx) -> dict:
    app.add_transform(ShardingPictures)
    app.connect("builder-inited", _palette_stylesheet)
    return {"parallel_read_safe": True, "parallel_write_safe": True}

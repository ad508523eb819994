"""Figures drawn from a page's own data, as inline SVG that follows the site's light and dark
themes.

A figure is drawn with matplotlib and shown as an :class:`SvgFigure`, whose HTML is the SVG
itself, inside the page: its text and lines are drawn in the site's foreground colours (CSS
variables, so they change with the theme), its background is transparent, it keeps its natural
size unless the column is narrower, and it is labelled for screen readers by its alt text.
"""

from __future__ import annotations

import io
import itertools
import math
import re
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import jax
import numpy as np
from jax.sharding import NamedSharding
from matplotlib import rc_context
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import Rectangle

INK = "#010203"
"""The colour to draw text and lines in; it becomes the site's foreground colour."""
MUTED_INK = "#040506"
"""The colour for secondary text and lines; it becomes the site's secondary foreground colour."""
PAGE = "#070809"
"""The colour of the page behind a figure; it becomes the site's background colour."""
_THEMED = {
    INK: "var(--color-foreground-primary)",
    MUTED_INK: "var(--color-foreground-secondary)",
    PAGE: "var(--color-background-primary)",
}
TEXT_POINTS = 8.0
"""The size of a figure's words (titles, row labels, legends), in points."""
SMALL_POINTS = 7.5
"""The size of the smallest text a figure draws (a scale's values, a label inside a box), in
points; at a phone's column width a figure is drawn at about 1.28 px a point, about 9.6 px."""

DEVICE_COLOURS = (
    "#3b6fb6",
    "#b86e1f",
    "#3f9a5a",
    "#c8463f",
    "#8a62b8",
    "#1f8a8a",
    "#c25e9f",
    "#7f8c2e",
)
"""One colour per device, each with a contrast of at least 3 to 1 against both the light and
the dark page."""

PATTERNS = ("////", "\\\\\\\\", "xxxx", "----", "||||", "++++", "--//", "||\\\\")
"""One hatch per device colour, drawn over a box that carries no label of its own and over its
legend entry, and as the hatch of a hatched box in that colour: boxes whose colours differ differ
in pattern too, so a reader who cannot tell the colours apart can still match a box to its
legend. Lines only: dots and circles each write hundreds of kilobytes of SVG."""

WIDTH_INCHES = 3.7
"""The widest a figure is drawn, so that it fits a phone's 390 px column at its natural size."""
_WIDEST_POINTS = (WIDTH_INCHES + 0.25) * 72
"""The widest a saved figure may be: its drawing and the margin saving it adds."""
CELL_INCHES = 0.18
"""The side of one value's square in a collective's figure."""

_NAME = re.compile(r"[a-z][a-z0-9-]*")
_IDS = itertools.count()
"""Numbers the boxes a figure draws, so that the ids inside its SVG say what each box is;
restarted for each figure, so that the same data draws the same SVG."""


def _luminance(colour: str) -> float:
    """WCAG's relative luminance of a ``#rrggbb`` colour."""
    channels = [int(colour[k : k + 2], 16) / 255 for k in (1, 3, 5)]
    linear = [c / 12.92 if c <= 0.03928 else ((c + 0.055) / 1.055) ** 2.4 for c in channels]
    return 0.2126 * linear[0] + 0.7152 * linear[1] + 0.0722 * linear[2]


def contrast(a: str, b: str) -> float:
    """WCAG's contrast ratio of two ``#rrggbb`` colours, from 1 to 21."""
    light, dark = sorted((_luminance(a), _luminance(b)), reverse=True)
    return (light + 0.05) / (dark + 0.05)


_BLACK = "#000001"
"""Black as matplotlib writes it out: pure black it leaves unstated, for the page to fill."""


def label_ink(colour: str) -> str:
    """Black or white, whichever reads better on a box of ``colour``."""
    return max((_BLACK, "#ffffff"), key=lambda ink: contrast(ink, colour))


@dataclass(frozen=True)
class SvgFigure:
    """A figure as inline SVG, shown in a notebook or a built page by its HTML."""

    name: str
    """Unique on its page, since every id inside the SVG begins with it."""
    alt: str
    """What the figure shows, for readers who cannot see it."""
    svg: str = field(repr=False)

    def _repr_html_(self) -> str:
        return f'<figure class="spmd-figure" id="figure-{self.name}">{self.svg}</figure>'

    def __repr__(self) -> str:
        return f"[figure: {self.alt}]"


def new_figure(width_inches: float, height_inches: float) -> Figure:
    """A blank figure with a transparent background, to draw in :data:`INK` and
    :data:`MUTED_INK` and show with :func:`to_svg`; at most :data:`WIDTH_INCHES` wide, it fits a
    phone's column at its natural size."""
    return Figure(figsize=(width_inches, height_inches), facecolor="none")


def to_svg(figure: Figure, *, name: str, alt: str) -> SvgFigure:
    """``figure`` as an :class:`SvgFigure`.

    Raises:
        ValueError: if ``name`` is not a lower-case id (letters, digits, hyphens), or ``alt`` is
            empty.
    """
    if not _NAME.fullmatch(name):
        raise ValueError(
            f"figure name {name!r} is not a lower-case id such as 'psum-before-after': it "
            "prefixes the SVG's ids, which must be unique on the page"
        )
    if not alt.strip():
        raise ValueError(f"figure {name!r} has no alt text: say what it shows")
    out = io.StringIO()
    # Glyphs as paths: the text looks the same everywhere and stays out of the search index.
    # A fixed salt keeps the ids the same from build to build.
    with rc_context({"svg.fonttype": "path", "svg.hashsalt": name}):
        figure.savefig(
            out, format="svg", transparent=True, bbox_inches="tight", metadata={"Date": None}
        )
    svg = out.getvalue()
    svg = svg[svg.index("<svg") :]
    drawn = re.search(r'<svg [^>]*?width="([\d.]+)pt"', svg)
    width = float(drawn.group(1)) if drawn else 0.0
    if width > _WIDEST_POINTS:
        raise ValueError(
            f"figure {name!r} is drawn {width / 72:.2f} in wide, wider than a phone's column "
            f"({WIDTH_INCHES} in), so its text would shrink below a legible size: shorten its "
            "longest text"
        )
    svg = re.sub(r"<metadata>.*?</metadata>\s*", "", svg, flags=re.S)
    # matplotlib's own stylesheet (`*{stroke-linejoin: round; ...}`) would restyle the page.
    svg = re.sub(r"<defs>\s*<style[^>]*>.*?</style>\s*</defs>\s*", "", svg, flags=re.S)
    svg = re.sub(r'\bid="([^"]+)"', rf'id="{name}-\1"', svg)
    svg = re.sub(r'(href="#|url\(#)([^")]+)', rf"\1{name}-\2", svg)
    for colour, themed in _THEMED.items():
        svg = svg.replace(colour, themed)
    alt_attribute = alt.replace("&", "&amp;").replace('"', "&quot;").replace("<", "&lt;")
    # Drawn at its natural size, and shrunk with its aspect kept where the column is narrower
    # (the stylesheet's max-width and the viewBox): its text keeps one size across figures.
    svg = re.sub(
        r'<svg ([^>]*?)width="([^"]*)" height="[^"]*"',
        rf'<svg \1width="\2" role="img" aria-label="{alt_attribute}"',
        svg,
        count=1,
    )
    return SvgFigure(name, alt, svg)


# Everything below is drawn in cell units: one unit is CELL_INCHES, and a figure at most
# WIDTH_CELLS wide fits a phone's column.
WIDTH_CELLS = WIDTH_INCHES / CELL_INCHES
_CHAR_CELLS = 0.36
"""About the width of one character of 8-point text, in cells, for laying out labels."""


@dataclass(frozen=True)
class Mark:
    """How a box is painted: in one of :data:`DEVICE_COLOURS` (by index, modulo their number),
    or in :data:`MUTED_INK` where ``colour`` is ``None`` (what belongs to no device); solid or
    hatched; and what it is, in ``label``'s words drawn inside it (a device, a microbatch, a
    chunk), so that colour is never all that tells boxes apart."""

    colour: int | None
    hatched: bool = False
    label: str = ""


NOTHING = Mark(None, label="\u2205")
"""In a :func:`grid`'s row: draw nothing in this column (as opposed to ``None``, which draws the
small dot of an idle step)."""


def _canvas(width: float, height: float) -> tuple[Figure, Axes]:
    """A figure ``width`` by ``height`` cells, its y axis pointing down."""
    global _IDS
    _IDS = itertools.count()
    figure = new_figure(width * CELL_INCHES, height * CELL_INCHES)
    axes = figure.add_axes((0, 0, 1, 1))
    axes.set_xlim(0, width)
    axes.set_ylim(height, 0)
    axes.set_axis_off()
    return figure, axes


def _text_cells(text: str, points: float = TEXT_POINTS) -> float:
    return len(text) * _CHAR_CELLS * points / TEXT_POINTS


def _fill(mark: Mark) -> str:
    return MUTED_INK if mark.colour is None else DEVICE_COLOURS[mark.colour % len(DEVICE_COLOURS)]


def _label_fits(label: str, width: float, height: float) -> bool:
    return bool(label) and _text_cells(label, SMALL_POINTS) + 0.15 <= width and height >= 0.55


def _box(
    axes: Axes,
    left: float,
    top: float,
    width: float,
    height: float,
    mark: Mark,
    *,
    key: bool = False,
    labelled_by: str = "",
) -> bool:
    """Paint a box, with its label inside where it fits; returns whether it is labelled.

    In the SVG each box is a group whose id says what reads it: ``key-N-P`` for a legend's
    swatch, ``mark-N-P-labelled`` for a box that carries its label (or is part of one that does:
    ``labelled_by``), ``mark-N-P-plain`` for one that a legend must explain; ``P`` names its
    pattern (``pK`` for ``PATTERNS[K]`` over the colour, drawn in a group of its own,
    ``pattern-N``; ``hK`` for a hatched box, whose hatch is ``PATTERNS[K]``; ``h`` for a hatched
    box in the muted ink; ``pn`` for none). A label's group is
    ``label-N-on-RRGGBB`` (or ``-on-page`` on the page's colour), so that a test can measure the
    label's contrast against what is behind it."""
    n = next(_IDS)
    colour = _fill(mark)
    labelled = bool(labelled_by) or _label_fits(mark.label, width, height)
    # A solid box in a device's colour that no label names also carries its colour's pattern.
    hatch = None
    if not labelled and not mark.hatched and mark.colour is not None:
        hatch = mark.colour % len(PATTERNS)
    if mark.hatched and mark.colour is not None:
        # A hatched box's hatch is its colour's pattern, in its colour, so that hatched boxes
        # of different colours differ in pattern too.
        pattern = f"h{mark.colour % len(PATTERNS)}"
    else:
        pattern = f"p{hatch}" if hatch is not None else "h" if mark.hatched else "pn"
    gid = (
        f"key-{n}-{pattern}" if key else f"mark-{n}-{pattern}-{'labelled' if labelled else 'plain'}"
    )
    if mark.hatched:
        axes.add_patch(
            Rectangle(
                (left, top),
                width,
                height,
                facecolor="none",
                edgecolor=colour,
                hatch="////" if mark.colour is None else PATTERNS[mark.colour % len(PATTERNS)],
                lw=0.8,
                gid=gid,
            )
        )
    else:
        axes.add_patch(Rectangle((left, top), width, height, color=colour, lw=0, gid=gid))
    if hatch is not None:
        axes.add_patch(
            Rectangle(
                (left, top),
                width,
                height,
                facecolor="none",
                edgecolor="none",
                hatch=PATTERNS[hatch],
                hatchcolor=label_ink(colour),
                lw=0,
                gid=f"pattern-{n}",
            )
        )
    if labelled and not labelled_by:
        _label(
            axes,
            left + width / 2,
            top + height / 2,
            mark.label,
            on=None if mark.hatched else colour,
        )
    return labelled


def _label(axes: Axes, x: float, y: float, words: str, *, on: str | None) -> None:
    """``words`` centred at ``x``, ``y``: on a box of colour ``on`` in the ink that reads best
    there (the page's own colour on the muted ink, in either theme), or, where ``on`` is ``None``
    (a hatched or open box), in the page's ink on a patch of the page's colour."""
    extra: dict[str, Any] = {}
    if on is None:
        ink, behind = INK, "page"
        extra["bbox"] = {"boxstyle": "square,pad=0.08", "facecolor": PAGE, "edgecolor": "none"}
    elif on in _THEMED:
        ink, behind = PAGE, "themed"
    else:
        ink, behind = label_ink(on), on[1:]
    axes.text(
        x,
        y,
        words,
        color=ink,
        fontsize=SMALL_POINTS,
        ha="center",
        va="center",
        gid=f"label-{next(_IDS)}-on-{behind}",
        **extra,
    )


def _legend(axes: Axes, entries: Sequence[tuple[Mark, str]], top: float, width: float) -> float:
    """Each entry's box and words, wrapped to ``width``; returns where the legend ends."""
    left = 0.0
    for mark, words in entries:
        needed = 1.4 + _text_cells(words) + 0.8
        if left > 0 and left + needed > width:
            left, top = 0.0, top + 1.3
        _box(axes, left, top, 0.9, 0.9, mark, key=True)
        axes.text(left + 1.3, top + 0.45, words, color=INK, fontsize=TEXT_POINTS, va="center")
        left += needed
    return top + 1.3 if entries else top


def _unexplained(plain: Sequence[Mark], legend: Sequence[tuple[Mark, str]]) -> list[Mark]:
    """The unlabelled marks whose colour and fill no legend entry shows."""
    keys = {(_fill(mark), mark.hatched) for mark, _ in legend}
    return [mark for mark in plain if (_fill(mark), mark.hatched) not in keys]


def _row_labels(axes: Axes, labels: Sequence[str], tops: Sequence[float], right: float) -> None:
    for label, top in zip(labels, tops, strict=True):
        axes.text(
            right, top + 0.45, label, color=MUTED_INK, fontsize=TEXT_POINTS, ha="right", va="center"
        )


_LETTERS = "abcdefghijklmnopqrstuvwxyz"


@dataclass(frozen=True)
class Movement:
    """Where each value of a collective's result came from."""

    before: list[list[frozenset[int]]]
    """For each device, for each value it holds before the collective, the device it is on."""
    after: list[list[frozenset[int]]]
    """For each device, for each value it holds after, the devices whose values it adds up."""
    origins: list[list[frozenset[tuple[int, int]]]]
    """For each device, for each value it holds after, the values it adds up, each as (device,
    place in that device's block before, in row-major order)."""


def value_name(origins: frozenset[tuple[int, int]]) -> str:
    """A value's name in a collective's figure: ``3b`` for device 3's value b (its second),
    ``Σb`` for a sum of several devices' values b, ``Σ`` for any other sum, ``0`` for zero."""
    if not origins:
        return "0"
    if len(origins) == 1:
        device, place = next(iter(origins))
        return f"{device}{_LETTERS[place]}"
    places = {place for _, place in origins}
    return "\u03a3" + (_LETTERS[next(iter(places))] if len(places) == 1 else "")


def movement(function: Callable[[jax.Array], jax.Array], x: jax.Array) -> Movement:
    """Trace where each value of ``function(x)`` comes from, for a ``function`` that only moves
    and adds values (as a collective does) and an ``x`` split over a mesh with no two devices
    holding the same part. ``function`` runs once per value of ``x``, on ``x``'s layout with a
    one in that value's place and zeros elsewhere, and a value of the result comes from every
    value whose run leaves it non-zero. Devices are numbered in the mesh's order.

    Raises:
        ValueError: if ``x`` is not laid out on a mesh, two devices hold the same part of it, or
            a device holds more values than a figure can name (26).
    """
    if not isinstance(x.sharding, NamedSharding):
        raise ValueError(
            "x has no mesh: place it with jax.device_put(x, NamedSharding(mesh, spec))"
        )
    devices = list(x.sharding.mesh.devices.flat)
    parts = x.sharding.devices_indices_map(x.shape)
    if len({str(parts[d]) for d in devices}) < len(devices):
        raise ValueError(
            f"x's layout {x.sharding.spec} gives some devices the same part; split it so that "
            "each device holds its own"
        )
    shard_shape = x.sharding.shard_shape(x.shape)
    size = int(np.prod(shard_shape))
    if size > len(_LETTERS):
        raise ValueError(
            f"each device holds {size} values of x, more than the {len(_LETTERS)} a figure can "
            "name: draw a smaller array"
        )
    run = jax.jit(function)

    def held(array: jax.Array) -> list[np.ndarray]:
        by_device = {shard.device: np.asarray(shard.data) for shard in array.addressable_shards}
        return [by_device[d].reshape(-1) for d in devices]

    reached: dict[tuple[int, int], list[np.ndarray]] = {}
    for marked in range(len(devices)):
        for place in range(size):
            one = np.zeros(size, x.dtype)
            one[place] = 1
            buffers = [
                jax.device_put(
                    (one if d == marked else np.zeros(size, x.dtype)).reshape(shard_shape), device
                )
                for d, device in enumerate(devices)
            ]
            ones = jax.make_array_from_single_device_arrays(x.shape, x.sharding, buffers)
            reached[marked, place] = [values != 0 for values in held(run(ones))]
    first = next(iter(reached.values()))
    origins = [
        [
            frozenset(origin for origin, hits in reached.items() if hits[owner][i])
            for i in range(first[owner].size)
        ]
        for owner in range(len(devices))
    ]
    after = [[frozenset(d for d, _ in values) for values in row] for row in origins]
    before = [[frozenset({d})] * size for d in range(len(devices))]
    return Movement(before, after, origins)


def describe(title: str, moved: Movement) -> str:
    """Alt text: what each device holds before and after, each value by its name (see
    :func:`value_name`)."""
    devices = len(moved.after)
    before = [
        ", ".join(value_name(frozenset({(d, k)})) for k in range(len(values)))
        for d, values in enumerate(moved.before)
    ]
    after = [", ".join(value_name(values) for values in row) for row in moved.origins]
    if len(set(after)) == 1:
        what = f"every device holds {after[0]}"
    else:
        what = "; ".join(f"device {d} holds {text}" for d, text in enumerate(after))
    return (
        f"{title}, each value named by the device it starts on and its place there (3b is "
        "device 3's value b), a sum as Σ: "
        f"before, device 0 holds {before[0]}, and each of the {devices} devices its own; "
        f"after, {what}."
    )


def _value(axes: Axes, left: float, top: float, origins: frozenset[tuple[int, int]]) -> None:
    """One value as a box: a value from one device in that device's colour, a sum outlined,
    over a band striped with the colours of the devices it adds up; named inside."""
    name = value_name(origins)
    if len(origins) == 1:
        device = next(iter(origins))[0]
        _box(axes, left, top, 0.9, 0.9, Mark(device, label=name))
        return
    n = next(_IDS)
    axes.add_patch(
        Rectangle(
            (left + 0.03, top + 0.03),
            0.84,
            0.84,
            fill=False,
            edgecolor=MUTED_INK,
            lw=0.6,
            gid=f"outline-{n}",
        )
    )
    devices = sorted({device for device, _ in origins})
    for k, device in enumerate(devices):
        _box(
            axes,
            left + k * 0.9 / len(devices),
            top + 0.68,
            0.9 / len(devices),
            0.22,
            Mark(device),
            labelled_by=name,
        )
    _label(axes, left + 0.45, top + 0.36, name, on=None)


def collective(
    name: str, title: str, function: Callable[[jax.Array], jax.Array], x: jax.Array
) -> tuple[SvgFigure, Movement]:
    """Every device's values before and after ``function``, each named and coloured by where
    it came from (see :func:`movement` and :func:`value_name`): side by side where both fit the
    width, else one above the other."""
    moved = movement(function, x)
    devices = len(moved.after)
    blocks = (
        [
            [frozenset({(d, k)}) for k in range(len(values))]
            for d, values in enumerate(moved.before)
        ],
        moved.origins,
    )
    widths = [max(len(values) for values in rows) for rows in blocks]
    labels, gap = 2.6, 1.5  # in cells: the device numbers' column, the space between panels
    side_by_side = (labels + sum(widths) + gap) <= WIDTH_CELLS
    if side_by_side:
        origins = [(0.0, 0.0), (widths[0] + gap, 0.0)]
        extent = (labels + sum(widths) + gap, devices + 1.2)
    else:
        origins = [(0.0, 0.0), (0.0, devices + 1.5)]
        extent = (labels + max(widths), 2 * devices + 2.7)
    if extent[0] > WIDTH_CELLS:
        raise ValueError(
            f"a device holds {max(widths)} values after {title!r}, more than fit a phone's "
            "column: draw a smaller array"
        )
    figure, axes = _canvas(*extent)
    for (left, top), rows, label in zip(origins, blocks, ("before", "after"), strict=True):
        axes.text(left, top + 0.6, label, color=INK, fontsize=TEXT_POINTS + 1, va="center")
        for device, values in enumerate(rows):
            for k, sources in enumerate(values):
                _value(axes, left + k, top + 1.2 + device, sources)
        if left == 0.0:
            axes.text(
                -0.4,
                top + 0.6,
                "device",
                color=MUTED_INK,
                fontsize=TEXT_POINTS,
                ha="right",
                va="center",
            )
            for device in range(devices):
                axes.text(
                    -0.4,
                    top + 1.65 + device,
                    str(device),
                    color=MUTED_INK,
                    fontsize=TEXT_POINTS,
                    ha="right",
                    va="center",
                )
    axes.set_xlim(-labels, extent[0] - labels)
    axes.set_ylim(extent[1], 0)
    axes.set_axis_off()
    return to_svg(figure, name=name, alt=describe(title, moved)), moved


def grid(
    name: str,
    alt: str,
    rows: Sequence[Sequence[Mark | None]],
    *,
    row_labels: Sequence[str],
    column_title: str,
    legend: Sequence[tuple[Mark, str]] = (),
) -> SvgFigure:
    """A row of boxes per ``rows`` entry, one column per step (a schedule's ticks, a ring's
    passes), each box painted by its :class:`Mark` with its label inside, a small dot where it
    is ``None`` (an idle step) and nothing where it is :data:`NOTHING`. Columns too many for
    labelled boxes across a phone's column wrap into bands, one above the other.

    Raises:
        ValueError: if ``row_labels`` does not name every row, or a box has neither a label that
            fits it nor a ``legend`` entry in its colour.
    """
    if len(row_labels) != len(rows):
        raise ValueError(f"{len(rows)} rows but {len(row_labels)} row labels: name every row")
    columns = max(len(row) for row in rows)
    labels = max(_text_cells(label) for label in row_labels) + 0.6
    widest = max(
        (_text_cells(m.label, SMALL_POINTS) for row in rows for m in row if m and m is not NOTHING),
        default=0.0,
    )
    smallest = max(0.7, (widest + 0.25) / 0.9)
    per_band = max(1, min(columns, int((WIDTH_CELLS - labels) // smallest)))
    bands = math.ceil(columns / per_band)
    per_band = math.ceil(columns / bands)
    size = min(1.0, (WIDTH_CELLS - labels) / per_band)
    band_height = 1.4 + len(rows) * size + 0.4
    figure, axes = _canvas(WIDTH_CELLS, bands * band_height + 4)
    plain: list[Mark] = []
    for band in range(bands):
        first = band * per_band
        top0 = band * band_height
        title = (
            column_title
            if bands == 1
            else f"{column_title} ({first + 1}\u2013{min(columns, first + per_band)})"
        )
        axes.text(labels, top0 + 0.5, title, color=MUTED_INK, fontsize=TEXT_POINTS, va="center")
        tops = [top0 + 1.4 + r * size for r in range(len(rows))]
        _row_labels(axes, row_labels, tops, labels - 0.4)
        for top, row in zip(tops, rows, strict=True):
            for column, mark in enumerate(row[first : first + per_band]):
                left = labels + column * size
                if mark is NOTHING:
                    continue
                if mark is None:
                    axes.add_patch(
                        Rectangle(
                            (left + 0.3 * size, top + 0.3 * size),
                            0.3 * size,
                            0.3 * size,
                            color=MUTED_INK,
                            lw=0,
                        )
                    )
                elif not _box(axes, left, top, 0.9 * size, 0.9 * size, mark):
                    plain.append(mark)
    unexplained = _unexplained(plain, legend)
    if unexplained:
        raise ValueError(
            f"figure {name!r}: boxes {sorted({str(m) for m in unexplained})[:3]} have no label "
            "that fits and no legend entry: label them or add legend=[(mark, words)]"
        )
    end = _legend(axes, legend, bands * band_height + 0.2, WIDTH_CELLS)
    axes.set_ylim(end, 0)
    figure.set_size_inches(WIDTH_INCHES, end * CELL_INCHES)
    return to_svg(figure, name=name, alt=alt)


def schedule_chart(name: str, title: str, steps: Any, *, idle: int, backward: int) -> SvgFigure:
    """What each stage of a pipeline ran, tick by tick, from its record: ``steps`` is
    (stages, ticks, 3) of (kind, microbatch, chunk), a kind being ``idle``, ``backward`` or a
    forward. A row per stage, or per chunk where a stage holds several (stage s's chunk v is the
    model's chunk v * stages + s); each box numbered and coloured by its microbatch, solid for a
    forward and hatched for a backward; a dot where the stage is idle (in its first chunk's row)."""
    steps = np.asarray(steps)
    stages, ticks = steps.shape[:2]
    chunks = int(steps[..., 2].max()) + 1

    def box(kind: int, m: int) -> Mark | None:
        return None if kind == idle else Mark(int(m), hatched=kind == backward, label=str(m))

    rows, row_labels = [], []
    for s in range(stages):
        for v in range(chunks):
            # An idle tick is the stage's, drawn once, in its first chunk's row.
            rows.append(
                [
                    box(k, m) if (k == idle and v == 0) or (k != idle and c == v) else NOTHING
                    for k, m, c in steps[s]
                ]
            )
            row_labels.append(f"stage {s}" + (f", chunk {v * stages + s}" if chunks > 1 else ""))

    def ran(s: int) -> str:
        return " ".join(
            f"{'B' if k == backward else 'F'}{m}"
            + (f" (chunk {c * stages + s})" if chunks > 1 else "")
            for k, m, c in steps[s]
            if k != idle
        )

    idles = [int((steps[s, :, 0] == idle).sum()) for s in range(stages)]
    alt = f"{title}, {stages} stages, {ticks} ticks: " + "; ".join(
        f"stage {s} runs {ran(s)} and idles {idles[s]} ticks" for s in range(stages)
    )
    return grid(
        name,
        alt,
        rows,
        row_labels=row_labels,
        column_title=f"{title}: tick \u2192   \u25aa idle",
        legend=[
            (Mark(None, label="3"), "forward of microbatch 3"),
            (Mark(None, hatched=True, label="3"), "its backward"),
        ],
    )


def _nice_step(largest: float, ticks: int = 4) -> float:
    raw = largest / ticks
    power = 10.0 ** math.floor(math.log10(raw))
    return float(next(m * power for m in (1, 2, 2.5, 5, 10) if m * power >= raw))


def _axis(axes: Axes, left: float, width: float, top: float, largest: float, unit: str) -> None:
    """A scale from 0 to ``largest`` under the bars: a line, ticks and their values."""
    step = _nice_step(largest)
    axes.add_line(Line2D([left, left + width], [top, top], color=MUTED_INK, lw=0.6))
    value = 0.0
    while value <= largest * 1.0001:
        x = left + width * value / largest
        axes.add_line(Line2D([x, x], [top, top + 0.3], color=MUTED_INK, lw=0.6))
        axes.text(
            x,
            top + 0.9,
            f"{value:g}",
            color=MUTED_INK,
            fontsize=SMALL_POINTS,
            ha="center",
            va="center",
        )
        value += step
    axes.text(
        left + width,
        top + 1.9,
        unit,
        color=MUTED_INK,
        fontsize=SMALL_POINTS,
        ha="right",
        va="center",
    )


def bars(
    name: str,
    alt: str,
    values: Mapping[str, Mapping[str, float]],
    *,
    unit: str,
    parts: Mapping[str, Mark],
    limit: tuple[str, float] | None = None,
    refused: Collection[str] = (),
) -> SvgFigure:
    """One horizontal bar per entry of ``values``, stacked from its parts in the order of
    ``parts`` (which also says how each part is painted), on a scale in ``unit``; ``limit`` draws
    a labelled line at a value (a device's memory, a capacity). A bar named in ``refused`` is
    a compile that was refused: its parts are what the refusal states, a dashed outline carries
    it on to the limit (it needs more than that), and the word "refused" ends it.

    Raises:
        ValueError: if a bar has a part that ``parts`` does not paint, or a negative part, or
            ``refused`` names a bar there is not.
    """
    unknown_bars = set(refused) - set(values)
    if unknown_bars:
        raise ValueError(f"refused= names bars {sorted(unknown_bars)} that values= does not have")
    for bar, stacked in values.items():
        unknown = set(stacked) - set(parts)
        if unknown:
            raise ValueError(f"bar {bar!r} has parts {sorted(unknown)} that parts= does not paint")
        if any(v < 0 for v in stacked.values()):
            raise ValueError(f"bar {bar!r} has a negative part: {dict(stacked)}")
    totals = [sum(stacked.values()) for stacked in values.values()]
    largest = max([*totals, limit[1] if limit else 0.0])
    if largest <= 0:
        raise ValueError("every bar is empty: there is nothing to draw")
    labels = max(_text_cells(bar) for bar in values) + 0.6
    width = (
        WIDTH_CELLS
        - labels
        - 1.0
        - (_text_cells("refused", SMALL_POINTS) + 0.4 if refused else 0.0)
    )
    top = 1.6 if limit else 0.2
    figure, axes = _canvas(WIDTH_CELLS, top + 1.4 * len(values) + 10)
    tops = [top + 1.4 * k for k in range(len(values))]
    _row_labels(axes, list(values), tops, labels - 0.4)
    for (bar, stacked), bar_top in zip(values.items(), tops, strict=True):
        left = labels
        for part, mark in parts.items():
            length = width * stacked.get(part, 0.0) / largest
            if length > 0:
                _box(axes, left, bar_top, length, 1.0, mark)
                left += length
        if bar in refused:
            needed = labels + width * limit[1] / largest if limit else left
            if needed > left:
                axes.add_patch(
                    Rectangle(
                        (left, bar_top + 0.05),
                        needed - left,
                        0.9,
                        fill=False,
                        edgecolor=MUTED_INK,
                        lw=0.8,
                        ls=(0, (2, 2)),
                    )
                )
            axes.text(
                max(left, needed) + 0.3,
                bar_top + 0.5,
                "refused",
                color=INK,
                fontsize=SMALL_POINTS,
                va="center",
            )
    bottom = tops[-1] + 1.4
    if limit:
        x = labels + width * limit[1] / largest
        axes.add_line(Line2D([x, x], [top - 0.3, bottom], color=INK, lw=0.8, ls=(0, (3, 2))))
        axes.text(x, top - 0.7, limit[0], color=INK, fontsize=SMALL_POINTS, ha="right", va="bottom")
    _axis(axes, labels, width, bottom, largest, unit)
    # A part no bar has would be a legend entry keying nothing.
    drawn = [
        (mark, part)
        for part, mark in parts.items()
        if any(v.get(part, 0) > 0 for v in values.values())
    ]
    end = _legend(axes, drawn, bottom + 2.6, WIDTH_CELLS)
    axes.set_ylim(end, 0)
    figure.set_size_inches(WIDTH_INCHES, end * CELL_INCHES)
    return to_svg(figure, name=name, alt=alt)


def timeline(
    name: str,
    alt: str,
    lanes: Mapping[str, Sequence[tuple[float, float, str]]],
    *,
    kinds: Mapping[str, Mark],
    unit: str,
) -> SvgFigure:
    """One lane per entry of ``lanes`` (a device, a thread), each ``(start, end, kind)`` drawn
    as a box along a shared time scale in ``unit``, painted as ``kinds`` says. A box is at least
    a sliver wide, so that an instruction too short for the scale still shows.

    Raises:
        ValueError: if an interval's kind is not in ``kinds``, or it ends before it starts.
    """
    for lane, intervals in lanes.items():
        for start, end, kind in intervals:
            if kind not in kinds:
                raise ValueError(f"lane {lane!r} has kind {kind!r}, which kinds= does not paint")
            if end < start:
                raise ValueError(f"lane {lane!r}: an interval ends ({end}) before it starts")
    first = min(start for intervals in lanes.values() for start, _, _ in intervals)
    last = max(end for intervals in lanes.values() for _, end, _ in intervals)
    if last <= first:
        raise ValueError("every interval is empty: there is no time to draw")
    labels = max(_text_cells(lane) for lane in lanes) + 0.6
    width = WIDTH_CELLS - labels - 1.0
    figure, axes = _canvas(WIDTH_CELLS, 1.2 * len(lanes) + 10)
    tops = [0.2 + 1.2 * k for k in range(len(lanes))]
    _row_labels(axes, list(lanes), tops, labels - 0.4)
    span = last - first
    for top, intervals in zip(tops, lanes.values(), strict=True):
        for start, end, kind in intervals:
            length = max(width * (end - start) / span, 0.08)
            _box(axes, labels + width * (start - first) / span, top, length, 0.9, kinds[kind])
    bottom = tops[-1] + 1.2
    _axis(axes, labels, width, bottom, span, unit)
    end = _legend(axes, [(mark, kind) for kind, mark in kinds.items()], bottom + 2.6, WIDTH_CELLS)
    axes.set_ylim(end, 0)
    figure.set_size_inches(WIDTH_INCHES, end * CELL_INCHES)
    return to_svg(figure, name=name, alt=alt)


def _tiles(value: Any) -> tuple[tuple[int, int], list[tuple[tuple[slice, slice], list[int]]]]:
    """``value``'s shape as rows by columns, and each distinct part with the devices holding
    it, devices numbered in the mesh's order."""
    shape = tuple(value.shape)
    if len(shape) not in (1, 2):
        raise ValueError(
            f"an array of shape {shape} cannot be drawn flat: pass a 1- or 2-dimensional view"
        )
    sharding = value.sharding
    order = {device: k for k, device in enumerate(sharding.mesh.devices.flat)}
    holders: dict[tuple[tuple[int, int, int], ...], list[int]] = {}
    for device, index in sharding.devices_indices_map(shape).items():
        key = tuple(part.indices(size) for part, size in zip(index, shape, strict=True))
        holders.setdefault(key, []).append(order[device])
    rows_columns = (1, shape[0]) if len(shape) == 1 else (shape[0], shape[1])
    parts = []
    for key, devices in holders.items():
        spans = [slice(start, stop) for start, stop, _ in key]
        if len(spans) == 1:
            spans = [slice(0, 1), *spans]
        parts.append(((spans[0], spans[1]), sorted(devices)))
    return rows_columns, parts


def _layout_words(label: str, value: Any) -> str:
    spec = value.sharding.spec
    _, parts = _tiles(value)
    copies = len(parts[0][1])
    shape = "x".join(map(str, value.shape))
    split = [
        f"{'rows' if dim == 0 and len(value.shape) == 2 else 'columns' if dim == 1 else 'elements'}"
        f" over {'+'.join(axes) if isinstance(axes, tuple) else axes}"
        for dim, axes in enumerate(spec)
        if axes is not None
    ]
    if not split:
        return f"{label} ({shape}) whole on every device"
    held = f", each part on {copies} devices" if copies > 1 else ""
    return f"{label} ({shape}) split, {' and '.join(split)}{held}"


def _holders(devices: Sequence[int]) -> str:
    """Devices' numbers, a run of three or more as its ends joined by a dash: 0-3 (drawn with an
    en dash), 0,4."""
    if len(devices) > 2 and list(devices) == list(range(devices[0], devices[-1] + 1)):
        return f"{devices[0]}\u2013{devices[-1]}"
    return ",".join(map(str, devices))


def layouts(name: str, title: str, arrays: Mapping[str, Any]) -> SvgFigure:
    """Each of ``arrays`` (a ``jax.Array``, or anything with a shape and a ``NamedSharding``)
    as a rectangle of its shape, cut into the parts its layout makes, each part in the colour of
    the device holding it, or drawn as a stack of copies, one in each holder's colour, and
    numbered by its holders (a legend names the colours where a part is too small). Devices
    are coloured by their position in the mesh (modulo the 8 colours). Not to scale between
    arrays; within one, rows and columns keep their proportion up to 8 to 1 for a wide array
    and 3 to 1 for a tall one.
    """
    if not arrays:
        raise ValueError("no arrays to draw")
    drawn = []
    for label, value in arrays.items():
        if not isinstance(getattr(value, "sharding", None), NamedSharding):
            raise ValueError(f"{label!r} has no NamedSharding: place it on a mesh first")
        (rows, columns), parts = _tiles(value)
        aspect = min(max(columns / rows, 1 / 3), 8.0)
        box_width = min(9.0, 4.5 * aspect) if aspect >= 1 else 4.5 * aspect
        # A vector is drawn as a band tall enough to show its copies.
        box_height = max(box_width / aspect, 2.0 if len(value.shape) == 1 else 0.0)
        drawn.append((label, value, rows, columns, parts, box_width, box_height))
    # Left to right, wrapping to the next line where the column ends.
    placed, left, top, line_height = [], 0.0, 0.0, 0.0
    for item in drawn:
        caption = _text_cells(item[0]) + 0.5
        needed = max(item[5], caption) + 1.2
        if left > 0 and left + needed > WIDTH_CELLS:
            left, top, line_height = 0.0, top + line_height + 2.6, 0.0
        placed.append((item, left, top))
        left += needed
        line_height = max(line_height, item[6])
    height = top + line_height + 2.6
    figure, axes = _canvas(WIDTH_CELLS, height + 4)
    plain: list[Mark] = []
    for (label, value, rows, columns, parts, box_width, box_height), left, top in placed:
        axes.text(left, top + 0.6, label, color=INK, fontsize=TEXT_POINTS, va="center")
        body = top + 1.3
        for (row_span, column_span), devices in parts:
            x0 = left + box_width * column_span.start / columns
            y0 = body + box_height * row_span.start / rows
            w = box_width * (column_span.stop - column_span.start) / columns
            h = box_height * (row_span.stop - row_span.start) / rows
            # Copies of one part as a stack of cards, the first holder's in front, the others
            # showing at its upper right edge: unlike stripes, never mistaken for a split.
            copies = len(devices)
            step = min(0.25, 0.45 * min(w, h) / (copies - 1)) if copies > 1 else 0.0
            card_w, card_h = w - 0.12 - (copies - 1) * step, h - 0.12 - (copies - 1) * step
            front = Mark(devices[0], label=_holders(devices))
            named = _label_fits(front.label, card_w, card_h)
            for k in reversed(range(copies)):
                mark = front if k == 0 else Mark(devices[k])
                _box(
                    axes,
                    x0 + 0.06 + k * step,
                    y0 + 0.06 + (copies - 1 - k) * step,
                    card_w,
                    card_h,
                    mark,
                    labelled_by=front.label if named and k > 0 else "",
                )
                if not named:
                    plain.append(Mark(devices[k]))
        shape = "\u00d7".join(map(str, value.shape))
        axes.text(
            left,
            body + box_height + 0.6,
            shape,
            color=MUTED_INK,
            fontsize=SMALL_POINTS,
            va="center",
        )
    # Parts too small for their devices' numbers are told apart by a legend.
    devices = sorted({m.colour for m in plain if m.colour is not None})
    legend = [(Mark(d), f"device {d}") for d in devices]
    end = _legend(axes, legend, height + 0.2, WIDTH_CELLS)
    axes.set_ylim(end, 0)
    figure.set_size_inches(WIDTH_INCHES, end * CELL_INCHES)
    words = "; ".join(_layout_words(label, value) for label, value in arrays.items())
    alt = (
        f"{title}, not to scale between arrays: {words}. Each part is drawn in the colour of the "
        "device holding it and numbered by it, a part held by several devices as a stack of "
        "copies in their colours, numbered by all of them."
    )
    return to_svg(figure, name=name, alt=alt)


def mesh(
    name: str,
    alt: str,
    devices: Sequence[Sequence[int]],
    *,
    group_of: Mapping[int, int],
    axis_names: tuple[str, str],
    links: tuple[str, str],
    group: str = "group",
) -> SvgFigure:
    """A two-axis mesh as it is laid out: ``devices`` row by row, each device numbered and in
    the colour of its group (its process, its host: ``group`` says which, for the legend),
    joined to its neighbours by a solid line where both are in one group and a dashed one where
    the link crosses groups. ``axis_names`` names the rows'
    and the columns' axes, ``links`` the two kinds of link (within a group, across groups).

    Raises:
        ValueError: if a device has no group.
    """
    missing = {d for row in devices for d in row} - set(group_of)
    if missing:
        raise ValueError(f"devices {sorted(missing)} have no group in group_of")
    rows, columns = len(devices), max(len(row) for row in devices)
    left0 = 3.0
    side = gap = min(1.6, (WIDTH_CELLS - left0) / (2 * columns))
    figure, axes = _canvas(WIDTH_CELLS, rows * (side + gap) + 8)
    axes.text(
        left0, 0.5, f"{axis_names[1]} \u2192", color=MUTED_INK, fontsize=TEXT_POINTS, va="center"
    )
    axes.text(
        0.0,
        1.6 + side / 2,
        f"{axis_names[0]}\n\u2193",
        color=MUTED_INK,
        fontsize=TEXT_POINTS,
        va="top",
    )

    def centre(r: int, c: int) -> tuple[float, float]:
        return left0 + c * (side + gap) + side / 2, 1.4 + r * (side + gap) + side / 2

    def link(a: tuple[int, int], b: tuple[int, int]) -> None:
        (xa, ya), (xb, yb) = centre(*a), centre(*b)
        same = group_of[devices[a[0]][a[1]]] == group_of[devices[b[0]][b[1]]]
        axes.add_line(
            Line2D(
                [xa, xb],
                [ya, yb],
                color=INK if same else MUTED_INK,
                lw=1.6 if same else 1.0,
                ls="-" if same else (0, (3, 2)),
                zorder=0,
            )
        )

    for r, row in enumerate(devices):
        for c, device in enumerate(row):
            if c + 1 < len(row):
                link((r, c), (r, c + 1))
            if r + 1 < rows and c < len(devices[r + 1]):
                link((r, c), (r + 1, c))
            x, y = centre(r, c)
            _box(
                axes,
                x - side / 2,
                y - side / 2,
                side,
                side,
                Mark(group_of[device], label=str(device)),
            )
    top = (
        _legend(
            axes,
            [(Mark(g), f"{group} {g}") for g in sorted(set(group_of.values()))],
            1.4 + rows * (side + gap) - 0.2,
            WIDTH_CELLS,
        )
        + 0.4
    )
    for k, (words, same) in enumerate(zip(links, (True, False), strict=True)):
        y = top + 1.2 * k
        axes.add_line(
            Line2D(
                [0, 2.0],
                [y, y],
                color=INK if same else MUTED_INK,
                lw=1.6 if same else 1.0,
                ls="-" if same else (0, (3, 2)),
            )
        )
        axes.text(2.6, y, words, color=INK, fontsize=TEXT_POINTS, va="center")
    end = top + 1.2 * len(links)
    axes.set_ylim(end, 0)
    figure.set_size_inches(WIDTH_INCHES, end * CELL_INCHES)
    return to_svg(figure, name=name, alt=alt)

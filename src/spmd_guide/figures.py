"""Figures drawn from a page's own data, as inline SVG that follows the site's light and dark
themes.

A figure is drawn with matplotlib and shown as an :class:`SvgFigure`, whose HTML is the SVG
itself, inside the page: its text and lines are drawn in the site's foreground colours (CSS
variables, so they change with the theme), its background is transparent, it keeps its natural
size unless the column is narrower, and it is labelled for screen readers by its alt text.
"""

from __future__ import annotations

import io
import math
import re
from collections.abc import Callable, Mapping, Sequence
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
_THEMED = {
    INK: "var(--color-foreground-primary)",
    MUTED_INK: "var(--color-foreground-secondary)",
}

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

WIDTH_INCHES = 3.7
"""The widest a figure is drawn, so that it fits a phone's 390 px column at its natural size."""
CELL_INCHES = 0.18
"""The side of one value's square in a collective's figure."""

_NAME = re.compile(r"[a-z][a-z0-9-]*")


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


@dataclass(frozen=True)
class Movement:
    """Where each value of a collective's result came from."""

    before: list[list[frozenset[int]]]
    """For each device, for each value it holds before the collective, the device it is on."""
    after: list[list[frozenset[int]]]
    """For each device, for each value it holds after, the devices whose values it adds up."""


def movement(function: Callable[[jax.Array], jax.Array], x: jax.Array) -> Movement:
    """Trace where each value of ``function(x)`` comes from, for a ``function`` that only moves
    and adds values (as a collective does) and an ``x`` split over a mesh with no two devices
    holding the same part. ``function`` runs once per device, on ``x``'s layout with ones in
    that device's part and zeros elsewhere, and a value of the result comes from every device
    whose run leaves it non-zero. Devices are numbered in the mesh's order.

    Raises:
        ValueError: if ``x`` is not laid out on a mesh, or two devices hold the same part of it.
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
    run = jax.jit(function)

    def held(array: jax.Array) -> list[np.ndarray]:
        by_device = {shard.device: np.asarray(shard.data) for shard in array.addressable_shards}
        return [by_device[d].reshape(-1) for d in devices]

    shard_shape = x.sharding.shard_shape(x.shape)
    reached = []
    for marked in devices:
        buffers = [
            jax.device_put(np.full(shard_shape, float(d == marked), x.dtype), d) for d in devices
        ]
        ones = jax.make_array_from_single_device_arrays(x.shape, x.sharding, buffers)
        reached.append([values != 0 for values in held(run(ones))])
    after = [
        [
            frozenset(k for k in range(len(devices)) if reached[k][owner][i])
            for i in range(reached[0][owner].size)
        ]
        for owner in range(len(devices))
    ]
    before = [[frozenset({d})] * int(np.prod(shard_shape)) for d in range(len(devices))]
    return Movement(before, after)


def _cell(axes: Axes, left: float, bottom: float, sources: frozenset[int]) -> None:
    """One value, as a square in the colour of each device it comes from, side by side."""
    if not sources:
        axes.add_patch(Rectangle((left, bottom), 0.9, 0.9, fill=False, edgecolor=MUTED_INK, lw=0.5))
        return
    width = 0.9 / len(sources)
    for k, device in enumerate(sorted(sources)):
        colour = DEVICE_COLOURS[device % len(DEVICE_COLOURS)]
        axes.add_patch(Rectangle((left + k * width, bottom), width, 0.9, color=colour, lw=0))


def describe(title: str, moved: Movement) -> str:
    """Alt text: what each device holds before and after, by where each value came from."""
    devices = len(moved.after)

    def origin(sources: frozenset[int]) -> str:
        if len(sources) == devices:
            return f"summed over all {devices} devices"
        if len(sources) == 1:
            return f"from device {next(iter(sources))}"
        return "summed over devices " + ", ".join(map(str, sorted(sources)))

    def held(values: list[frozenset[int]]) -> str:
        runs: list[tuple[int, frozenset[int]]] = []
        for sources in values:
            if runs and runs[-1][1] == sources:
                runs[-1] = (runs[-1][0] + 1, sources)
            else:
                runs.append((1, sources))
        return ", ".join(f"{n} {'value' if n == 1 else 'values'} {origin(s)}" for n, s in runs)

    after = [held(values) for values in moved.after]
    if len(set(after)) == 1:
        what = f"every device holds {after[0]}"
    else:
        what = "; ".join(f"device {d} holds {text}" for d, text in enumerate(after))
    before = len(moved.before[0])
    return (
        f"{title}: before, each of {devices} devices holds {before} value(s) of its own; "
        f"after, {what}."
    )


def collective(
    name: str, title: str, function: Callable[[jax.Array], jax.Array], x: jax.Array
) -> tuple[SvgFigure, Movement]:
    """Every device's values before and after ``function``, each coloured by the device it
    came from, or striped with every device it is summed from (see :func:`movement`): side by
    side where both fit the width, else one above the other."""
    moved = movement(function, x)
    devices = len(moved.after)
    widths = [max(len(values) for values in blocks) for blocks in (moved.before, moved.after)]
    labels, gap = 2.6, 1.5  # in cells: the device numbers' column, the space between panels
    side_by_side = (labels + sum(widths) + gap) * CELL_INCHES <= WIDTH_INCHES
    if side_by_side:
        origins = [(0.0, 0.0), (widths[0] + gap, 0.0)]
        extent = (labels + sum(widths) + gap, devices + 1.2)
    else:
        origins = [(0.0, devices + 1.5), (0.0, 0.0)]
        extent = (labels + max(widths), 2 * devices + 2.7)
    figure = new_figure(extent[0] * CELL_INCHES, extent[1] * CELL_INCHES)
    axes = figure.add_axes((0, 0, 1, 1))
    for (left, bottom), blocks, label in zip(
        origins, (moved.before, moved.after), ("before", "after"), strict=True
    ):
        axes.text(left, bottom + devices + 0.2, label, color=INK, fontsize=9)
        for device, values in enumerate(blocks):
            for k, sources in enumerate(values):
                _cell(axes, left + k, bottom + devices - 1 - device, sources)
        if left == 0.0:
            axes.text(
                -0.4, bottom + devices + 0.2, "device", color=MUTED_INK, fontsize=8, ha="right"
            )
            for device in range(devices):
                axes.text(
                    -0.4,
                    bottom + devices - 0.55 - device,
                    str(device),
                    color=MUTED_INK,
                    fontsize=8,
                    ha="right",
                    va="center",
                )
    axes.set_xlim(-labels, extent[0] - labels)
    axes.set_ylim(-0.2, extent[1] - 0.2)
    axes.set_axis_off()
    return to_svg(figure, name=name, alt=describe(title, moved)), moved


# Everything below is drawn in cell units: one unit is CELL_INCHES, and a figure at most
# WIDTH_CELLS wide fits a phone's column.
WIDTH_CELLS = WIDTH_INCHES / CELL_INCHES
_CHAR_CELLS = 0.36
"""About the width of one character of 8-point text, in cells, for laying out labels."""


@dataclass(frozen=True)
class Mark:
    """How a box is painted: in one of :data:`DEVICE_COLOURS` (by index, modulo their number),
    or in :data:`MUTED_INK` where ``colour`` is ``None`` (what belongs to no device); solid or
    hatched."""

    colour: int | None
    hatched: bool = False


def _canvas(width: float, height: float) -> tuple[Figure, Axes]:
    """A figure ``width`` by ``height`` cells, its y axis pointing down."""
    figure = new_figure(width * CELL_INCHES, height * CELL_INCHES)
    axes = figure.add_axes((0, 0, 1, 1))
    axes.set_xlim(0, width)
    axes.set_ylim(height, 0)
    axes.set_axis_off()
    return figure, axes


def _box(axes: Axes, left: float, top: float, width: float, height: float, mark: Mark) -> None:
    colour = MUTED_INK if mark.colour is None else DEVICE_COLOURS[mark.colour % len(DEVICE_COLOURS)]
    if mark.hatched:
        axes.add_patch(
            Rectangle(
                (left, top), width, height, facecolor="none", edgecolor=colour, hatch="////", lw=0.8
            )
        )
    else:
        axes.add_patch(Rectangle((left, top), width, height, color=colour, lw=0))


def _text_cells(text: str) -> float:
    return len(text) * _CHAR_CELLS


def _legend(axes: Axes, entries: Sequence[tuple[Mark, str]], top: float, width: float) -> float:
    """Each entry's box and words, wrapped to ``width``; returns where the legend ends."""
    left = 0.0
    for mark, words in entries:
        needed = 1.4 + _text_cells(words) + 0.8
        if left > 0 and left + needed > width:
            left, top = 0.0, top + 1.3
        _box(axes, left, top, 0.9, 0.9, mark)
        axes.text(left + 1.3, top + 0.45, words, color=INK, fontsize=8, va="center")
        left += needed
    return top + 1.3 if entries else top


def _row_labels(axes: Axes, labels: Sequence[str], tops: Sequence[float], right: float) -> None:
    for label, top in zip(labels, tops, strict=True):
        axes.text(right, top + 0.45, label, color=MUTED_INK, fontsize=8, ha="right", va="center")


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
    passes), each box painted by its :class:`Mark` and left empty where it is ``None``.

    Raises:
        ValueError: if ``row_labels`` does not name every row.
    """
    if len(row_labels) != len(rows):
        raise ValueError(f"{len(rows)} rows but {len(row_labels)} row labels: name every row")
    columns = max(len(row) for row in rows)
    labels = max(_text_cells(label) for label in row_labels) + 0.6
    size = min(1.0, (WIDTH_CELLS - labels) / columns)
    figure, axes = _canvas(WIDTH_CELLS, len(rows) * size + 4)
    axes.text(labels, 0.5, column_title, color=MUTED_INK, fontsize=8, va="center")
    tops = [1.4 + r * size for r in range(len(rows))]
    _row_labels(axes, row_labels, tops, labels - 0.4)
    for top, row in zip(tops, rows, strict=True):
        for column, mark in enumerate(row):
            if mark is None:
                axes.add_patch(
                    Rectangle(
                        (labels + column * size + 0.3 * size, top + 0.3 * size),
                        0.3 * size,
                        0.3 * size,
                        color=MUTED_INK,
                        lw=0,
                    )
                )
            else:
                _box(axes, labels + column * size, top, 0.9 * size, 0.9 * size, mark)
    end = _legend(axes, legend, tops[-1] + size + 0.6, WIDTH_CELLS)
    axes.set_ylim(end, 0)
    figure.set_size_inches(WIDTH_INCHES, end * CELL_INCHES)
    return to_svg(figure, name=name, alt=alt)


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
        axes.text(x, top + 0.9, f"{value:g}", color=MUTED_INK, fontsize=7, ha="center", va="center")
        value += step
    axes.text(left + width, top + 1.9, unit, color=MUTED_INK, fontsize=7, ha="right", va="center")


def bars(
    name: str,
    alt: str,
    values: Mapping[str, Mapping[str, float]],
    *,
    unit: str,
    parts: Mapping[str, Mark],
    limit: tuple[str, float] | None = None,
) -> SvgFigure:
    """One horizontal bar per entry of ``values``, stacked from its parts in the order of
    ``parts`` (which also says how each part is painted), on a scale in ``unit``; ``limit`` draws
    a labelled line at a value (a device's memory, a capacity).

    Raises:
        ValueError: if a bar has a part that ``parts`` does not paint, or a negative part.
    """
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
    width = WIDTH_CELLS - labels - 1.0
    top = 1.6 if limit else 0.2
    figure, axes = _canvas(WIDTH_CELLS, top + 1.4 * len(values) + 10)
    tops = [top + 1.4 * k for k in range(len(values))]
    _row_labels(axes, list(values), tops, labels - 0.4)
    for bar_top, stacked in zip(tops, values.values(), strict=True):
        left = labels
        for part, mark in parts.items():
            length = width * stacked.get(part, 0.0) / largest
            if length > 0:
                _box(axes, left, bar_top, length, 1.0, mark)
                left += length
    bottom = tops[-1] + 1.4
    if limit:
        x = labels + width * limit[1] / largest
        axes.add_line(Line2D([x, x], [top - 0.3, bottom], color=INK, lw=0.8, ls=(0, (3, 2))))
        axes.text(x, top - 0.7, limit[0], color=INK, fontsize=7, ha="right", va="bottom")
    _axis(axes, labels, width, bottom, largest, unit)
    end = _legend(axes, [(mark, part) for part, mark in parts.items()], bottom + 2.6, WIDTH_CELLS)
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


def layouts(name: str, title: str, arrays: Mapping[str, Any]) -> SvgFigure:
    """Each of ``arrays`` (a ``jax.Array``, or anything with a shape and a ``NamedSharding``)
    as a rectangle of its shape, cut into the parts its layout makes, each part in the colour of
    the device holding it, or drawn as a stack of copies, one in each holder's colour. Devices
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
    figure, axes = _canvas(WIDTH_CELLS, height)
    for (label, value, rows, columns, parts, box_width, box_height), left, top in placed:
        axes.text(left, top + 0.6, label, color=INK, fontsize=8, va="center")
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
            for k in reversed(range(copies)):
                _box(
                    axes,
                    x0 + 0.06 + k * step,
                    y0 + 0.06 + (copies - 1 - k) * step,
                    card_w,
                    card_h,
                    Mark(devices[k]),
                )
        shape = "\u00d7".join(map(str, value.shape))
        axes.text(left, body + box_height + 0.6, shape, color=MUTED_INK, fontsize=7, va="center")
    words = "; ".join(_layout_words(label, value) for label, value in arrays.items())
    alt = (
        f"{title}, not to scale between arrays: {words}. Each part is drawn in the colour of the "
        "device holding it, a part held by several devices as a stack of copies in their colours."
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
) -> SvgFigure:
    """A two-axis mesh as it is laid out: ``devices`` row by row, each device in the colour of
    its group (its process, its host), joined to its neighbours by a solid line where both are
    in one group and a dashed one where the link crosses groups. ``axis_names`` names the rows'
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
    axes.text(left0, 0.5, f"{axis_names[1]} \u2192", color=MUTED_INK, fontsize=8, va="center")
    axes.text(
        0.0, 1.6 + side / 2, f"{axis_names[0]}\n\u2193", color=MUTED_INK, fontsize=8, va="top"
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
            _box(axes, x - side / 2, y - side / 2, side, side, Mark(group_of[device]))
            # Beside the box's lower corner, clear of the links that leave its sides' middles.
            axes.text(
                x + side / 2 + 0.15, y + side / 2, str(device), color=INK, fontsize=7, va="bottom"
            )
    top = 1.4 + rows * (side + gap) + 0.4
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
        axes.text(2.6, y, words, color=INK, fontsize=8, va="center")
    end = top + 1.2 * len(links)
    axes.set_ylim(end, 0)
    figure.set_size_inches(WIDTH_INCHES, end * CELL_INCHES)
    return to_svg(figure, name=name, alt=alt)

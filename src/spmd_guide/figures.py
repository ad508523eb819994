"""Figures drawn from a page's own data, as inline SVG that follows the site's light and dark
themes.

A figure is drawn with matplotlib and shown as an :class:`SvgFigure`, whose HTML is the SVG
itself, inside the page: its text and lines are drawn in the site's foreground colours (CSS
variables, so they change with the theme), its background is transparent, it keeps its natural
size unless the column is narrower, and it is labelled for screen readers by its alt text.
"""

from __future__ import annotations

import io
import re
from collections.abc import Callable
from dataclasses import dataclass, field

import jax
import numpy as np
from jax.sharding import NamedSharding
from matplotlib import rc_context
from matplotlib.axes import Axes
from matplotlib.figure import Figure
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

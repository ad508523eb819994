from __future__ import annotations

import re

import jax
import jax.numpy as jnp
import pytest
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P

from spmd_guide import figures, make_mesh


@pytest.fixture
def ring(cpu_devices):
    if len(cpu_devices) < 2:
        pytest.skip("a collective needs at least 2 devices")
    return make_mesh((len(cpu_devices),), ("x",), devices=cpu_devices)


def _rows(mesh, per_device=2):
    n = mesh.shape["x"]
    return jax.device_put(
        jnp.arange(n * per_device, dtype=jnp.float32).reshape(n, per_device),
        NamedSharding(mesh, P("x")),
    )


def _each(mesh, f):
    return lambda a: jax.shard_map(f, mesh=mesh, in_specs=P("x"), out_specs=P("x"))(a)


def test_a_sum_comes_from_every_device_and_a_shift_from_the_one_before(ring):
    n = ring.shape["x"]
    summed = figures.movement(_each(ring, lambda b: jax.lax.psum(b, "x")), _rows(ring))
    assert summed.before == [[frozenset({d})] * 2 for d in range(n)]
    assert summed.after == [[frozenset(range(n))] * 2] * n
    pairs = [(d, (d + 1) % n) for d in range(n)]
    shifted = figures.movement(_each(ring, lambda b: jax.lax.ppermute(b, "x", pairs)), _rows(ring))
    assert shifted.after == [[frozenset({(d - 1) % n})] * 2 for d in range(n)]
    assert "every device holds Σa, Σb." in figures.describe("psum", summed)
    assert f"device 0 holds {n - 1}a, {n - 1}b;" in figures.describe("ring", shifted)


def test_all_to_all_is_drawn_as_the_transpose_it_is(ring):
    n = ring.shape["x"]
    swap = lambda a: jax.shard_map(  # noqa: E731
        lambda rows: jax.lax.all_to_all(rows, "x", split_axis=1, concat_axis=0, tiled=True),
        mesh=ring,
        in_specs=P("x"),
        out_specs=P(None, "x"),
    )(a)
    swapped = figures.movement(swap, _rows(ring, per_device=n))
    # Device d ends with value d of every device, not the same values everywhere.
    assert swapped.origins == [[frozenset({(k, d)}) for k in range(n)] for d in range(n)]
    assert [figures.value_name(v) for v in swapped.origins[1]] == [f"{k}b" for k in range(n)]
    gathered = figures.movement(
        _each(ring, lambda b: jax.lax.all_gather(b, "x", tiled=True)[None]), _rows(ring)
    )
    assert len({tuple(row) for row in gathered.origins}) == 1


def test_a_value_is_named_by_where_it_starts_or_as_a_sum():
    assert figures.value_name(frozenset({(3, 1)})) == "3b"
    assert figures.value_name(frozenset({(0, 2), (1, 2)})) == "Σc"
    assert figures.value_name(frozenset({(0, 0), (1, 1)})) == "Σ"
    assert figures.value_name(frozenset()) == "0"


def test_every_device_colour_carries_a_legible_label():
    for colour in figures.DEVICE_COLOURS:
        assert figures.contrast(figures.label_ink(colour), colour) >= 4.5, colour


def test_movement_refuses_a_value_not_split_over_a_mesh(ring):
    whole = jax.device_put(jnp.ones((4, 2)), NamedSharding(ring, P()))
    with pytest.raises(ValueError, match="gives some devices the same part"):
        figures.movement(lambda a: a * 2, whole)
    with pytest.raises(ValueError, match="x has no mesh"):
        figures.movement(lambda a: a * 2, jnp.ones(4))


def test_a_figure_is_inline_svg_labelled_themed_and_with_ids_of_its_own(ring):
    psum = _each(ring, lambda b: jax.lax.psum(b, "x"))
    first, _ = figures.collective("first", "psum", psum, _rows(ring))
    second, _ = figures.collective("second", "psum", psum, _rows(ring))
    html = first._repr_html_()
    assert html.startswith('<figure class="spmd-figure" id="figure-first"><svg ')
    assert f'aria-label="{first.alt}"' in html and first.alt.startswith("psum, each value")
    assert "<?xml" not in html and "<metadata" not in html and "Date" not in html
    assert figures.INK not in html and "var(--color-foreground-primary)" in html
    ids = re.findall(r'\bid="([^"]+)"', html + second._repr_html_())
    assert len(ids) == len(set(ids)), "two figures on one page share an id"
    assert all(i.startswith(("first-", "second-", "figure-")) for i in ids)
    for reference in re.findall(r'(?:href="#|url\(#)([^")]+)', html):
        assert reference in ids
    # The same data draws the same SVG: pages rebuild without spurious changes.
    assert figures.collective("first", "psum", psum, _rows(ring))[0].svg == first.svg


@pytest.mark.parametrize(
    ("name", "alt", "message"),
    [("Psum Figure", "x", "not a lower-case id"), ("psum", "  ", "no alt text")],
)
def test_a_figure_without_a_usable_name_or_alt_text_is_refused(name, alt, message):
    with pytest.raises(ValueError, match=message):
        figures.to_svg(figures.new_figure(1.0, 1.0), name=name, alt=alt)


def _fills(svg):
    return set(re.findall(r"fill: (#[0-9a-f]{6}|var\([^)]*\))", svg))


def test_a_grid_paints_and_labels_each_mark_and_names_each_row():
    rows = [
        [figures.Mark(0, label="0"), None, figures.Mark(1, hatched=True, label="1")],
        [None, figures.Mark(2, label="2"), figures.NOTHING],
    ]
    drawn = figures.grid(
        "schedule", "a schedule", rows, row_labels=["stage 0", "stage 1"], column_title="tick"
    )
    fills = _fills(drawn.svg)
    assert {figures.DEVICE_COLOURS[0], figures.DEVICE_COLOURS[2]} <= fills
    # The hatched mark is drawn as a pattern in its colour, not as a fill.
    assert "<pattern" in drawn.svg and figures.DEVICE_COLOURS[1] in drawn.svg
    # Each box carries its label, in an ink that reads on its colour (or on the page's colour).
    assert len(re.findall(r'id="schedule-mark-\d+-\w+-labelled"', drawn.svg)) == 3
    on = re.findall(r'id="schedule-label-\d+-on-(\w+)"', drawn.svg)
    assert sorted(on) == sorted(
        [figures.DEVICE_COLOURS[0][1:], "page", figures.DEVICE_COLOURS[2][1:]]
    )
    with pytest.raises(ValueError, match="name every row"):
        figures.grid("schedule", "a schedule", rows, row_labels=["stage 0"], column_title="tick")


def test_a_grid_box_needs_a_label_or_a_legend_entry():
    rows = [[figures.Mark(0), figures.Mark(1)]]
    with pytest.raises(ValueError, match="no label that fits and no legend entry"):
        figures.grid("colours", "colours alone", rows, row_labels=["a"], column_title="step")
    legend = [(figures.Mark(0), "first"), (figures.Mark(1), "second")]
    drawn = figures.grid(
        "colours", "keyed", rows, row_labels=["a"], column_title="step", legend=legend
    )
    assert len(re.findall(r'id="colours-key-\d+-\w+"', drawn.svg)) == 2
    # The two colours differ by pattern too, in the boxes and in the legend that keys them.
    assert sorted(re.findall(r'id="colours-mark-\d+-(\w+)-plain"', drawn.svg)) == ["p0", "p1"]
    assert sorted(re.findall(r'id="colours-key-\d+-(\w+)"', drawn.svg)) == ["p0", "p1"]
    assert len(re.findall(r'id="colours-pattern-\d+"', drawn.svg)) == 4
    hatched = [[figures.Mark(0, hatched=True), figures.Mark(1, hatched=True)]]
    keyed = [(figures.Mark(0, hatched=True), "first"), (figures.Mark(1, hatched=True), "second")]
    drawn = figures.grid(
        "hatched", "keyed", hatched, row_labels=["a"], column_title="step", legend=keyed
    )
    assert sorted(re.findall(r'id="hatched-mark-\d+-(\w+)-plain"', drawn.svg)) == ["h0", "h1"]


def test_a_long_schedule_wraps_into_bands_of_legible_boxes():
    rows = [[figures.Mark(t % 8, label=str(t % 8)) for t in range(48)]] * 2
    drawn = figures.grid(
        "long", "long", rows, row_labels=["stage 0", "stage 1"], column_title="tick"
    )
    # Every one of the 96 boxes keeps its number, in bands that say which columns they show.
    assert len(re.findall(r'id="long-mark-\d+-\w+-labelled"', drawn.svg)) == 96
    assert "(1\u201324)" in drawn.alt or "<!-- tick (1\u201324) -->" in drawn.svg


def test_a_figure_wider_than_a_phone_column_is_refused():
    with pytest.raises(ValueError, match="wider than a phone's column"):
        figures.grid(
            "wide",
            "wide",
            [[figures.Mark(0, label="0")]],
            row_labels=["a"],
            column_title="a title far too long to fit beside the row labels of a phone's column",
        )


def test_bars_refuse_parts_they_cannot_paint_and_nothing_to_draw():
    parts = {"kept": figures.Mark(0)}
    drawn = figures.bars(
        "memory", "bytes", {"a": {"kept": 2.0}}, unit="MB", parts=parts, limit=("16", 16.0)
    )
    assert figures.DEVICE_COLOURS[0] in _fills(drawn.svg)
    with pytest.raises(ValueError, match=r"parts \['lost'\] that parts= does not paint"):
        figures.bars("memory", "bytes", {"a": {"lost": 1.0}}, unit="MB", parts=parts)
    with pytest.raises(ValueError, match="negative part"):
        figures.bars("memory", "bytes", {"a": {"kept": -1.0}}, unit="MB", parts=parts)
    with pytest.raises(ValueError, match="nothing to draw"):
        figures.bars("memory", "bytes", {"a": {"kept": 0.0}}, unit="MB", parts=parts)


def test_a_refused_bar_reaches_past_the_limit_and_says_refused():
    parts = {"temporaries": figures.Mark(1, hatched=True)}
    values = {"fits": {"temporaries": 8.0}, "no remat": {"temporaries": 4.0}}
    drawn = figures.bars(
        "fit", "two", values, unit="GiB", parts=parts, limit=("16", 16.0), refused=["no remat"]
    )
    assert drawn.svg.count("<!-- refused -->") == 1 and "stroke-dasharray" in drawn.svg
    with pytest.raises(ValueError, match=r"refused= names bars \['other'\]"):
        figures.bars("fit", "two", values, unit="GiB", parts=parts, refused=["other"])


def test_a_timeline_refuses_unknown_kinds_and_backward_intervals():
    kinds = {"compute": figures.Mark(0), "all-reduce": figures.Mark(3)}
    lanes = {"device 0": [(0.0, 1.0, "compute"), (1.0, 1.5, "all-reduce")]}
    drawn = figures.timeline("steps", "a step", lanes, kinds=kinds, unit="ms")
    assert {figures.DEVICE_COLOURS[0], figures.DEVICE_COLOURS[3]} <= _fills(drawn.svg)
    with pytest.raises(ValueError, match="kind 'send', which kinds= does not paint"):
        figures.timeline("steps", "a step", {"d": [(0.0, 1.0, "send")]}, kinds=kinds, unit="ms")
    with pytest.raises(ValueError, match="ends"):
        figures.timeline("steps", "a step", {"d": [(2.0, 1.0, "compute")]}, kinds=kinds, unit="ms")


def test_layouts_colour_each_part_by_its_devices_and_say_how_it_is_split(ring):
    n = ring.shape["x"]
    split = jax.device_put(jnp.ones((2 * n, 3)), NamedSharding(ring, P("x")))
    whole = jax.device_put(jnp.ones(5), NamedSharding(ring, P()))
    drawn = figures.layouts("placed", "Two arrays", {"rows": split, "bias": whole})
    assert drawn.alt.startswith("Two arrays, not to scale between arrays: rows (")
    assert "split, rows over x" in drawn.alt and "bias (5) whole on every device" in drawn.alt
    # Every device's colour appears: as the owner of a part, and among the bias's copies.
    assert {figures.DEVICE_COLOURS[d % 8] for d in range(n)} <= _fills(drawn.svg)
    with pytest.raises(ValueError, match="cannot be drawn flat"):
        figures.layouts(
            "placed",
            "3-D",
            {"cube": jax.device_put(jnp.ones((n, 2, 2)), NamedSharding(ring, P("x")))},
        )
    with pytest.raises(ValueError, match="no NamedSharding"):
        figures.layouts("placed", "numpy", {"host": jnp.ones(3).__array__()})


def test_a_mesh_joins_neighbours_solid_within_a_group_and_dashed_across():
    drawn = figures.mesh(
        "hybrid",
        "two processes",
        [[0, 1], [2, 3]],
        group_of={0: 0, 1: 0, 2: 1, 3: 1},
        axis_names=("process", "local"),
        links=("within", "across"),
    )
    assert {figures.DEVICE_COLOURS[0], figures.DEVICE_COLOURS[1]} <= _fills(drawn.svg)
    assert "stroke-dasharray" in drawn.svg
    # Each device is numbered in its box, and a legend says what its colour means.
    assert len(re.findall(r'id="hybrid-mark-\d+-\w+-labelled"', drawn.svg)) == 4
    assert "<!-- group 1 -->" in drawn.svg
    with pytest.raises(ValueError, match=r"devices \[3\] have no group"):
        figures.mesh(
            "hybrid",
            "x",
            [[0, 1], [2, 3]],
            group_of={0: 0, 1: 0, 2: 1},
            axis_names=("a", "b"),
            links=("in", "out"),
        )

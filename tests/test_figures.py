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
    assert "every device holds 2 values summed over all" in figures.describe("psum", summed)
    assert f"device 0 holds 2 values from device {n - 1}" in figures.describe("ring", shifted)


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
    assert f'aria-label="{first.alt}"' in html and first.alt.startswith("psum: before")
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

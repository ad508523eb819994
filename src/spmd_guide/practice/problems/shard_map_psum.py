"""Problem: the global sum of a sharded vector, with ``shard_map`` and ``psum``."""

from __future__ import annotations

# solution
import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import Mesh, NamedSharding
from jax.sharding import PartitionSpec as P


def shard_map_psum(x, *, mesh=None):
    """The sum of all elements of the 1-D array ``x``, computed block by block.

    Each device sums its block of ``x``; ``jax.lax.psum`` over the mesh axis ``'data'`` adds
    those partial sums and leaves the same total on every device, so ``out_specs=P()``.

    Args:
        x: a 1-D array of float32.
        mesh: a mesh with an axis ``'data'``; by default, a mesh of one device.
    """
    if mesh is None:
        mesh = Mesh(np.array(jax.devices()[:1]), ("data",))
    x = jnp.asarray(x)
    size = mesh.shape["data"]
    if x.shape[0] % size:
        raise ValueError(
            f"x has length {x.shape[0]}, which does not divide over {size} devices; pad it "
            f"with zeros to a multiple of {size}"
        )

    def block_total(block):
        return jax.lax.psum(jnp.sum(block), "data")

    total = jax.shard_map(block_total, mesh=mesh, in_specs=P("data"), out_specs=P())
    return total(jax.device_put(x, NamedSharding(mesh, P("data"))))


# end solution

from spmd_guide.practice.cases import kind, normal, one_axis_meshes
from spmd_guide.practice.problem import COLLECTIVES, Case, ErrorHint, Problem, ResultHint
from spmd_guide.practice.requirements import (
    EXPLICIT_MESHES,
    GIVEN_MESH,
    TRACEABLE,
    Layout,
    Program,
    Refuses,
    Returns,
    combined_inside,
    enters_as,
    every,
    uses,
)


def _cases(devices: int) -> list[Case]:
    cases = [Case((np.array([4.0, -1.0, 2.5], np.float32),))]
    for seed, mesh in enumerate(one_axis_meshes(devices, "data")):
        x = normal(40 + seed, 4 * mesh.shape["data"])
        cases.append(Case((x,), {"mesh": mesh}, exercises=kind(mesh)))
    cases.append(
        Case((np.ones(8 * devices, np.float32),), {"mesh": one_axis_meshes(devices, "data")[0]})
    )
    if devices > 1:
        cases.append(
            Case(
                (np.ones(devices + 1, np.float32),),
                {"mesh": one_axis_meshes(devices, "data")[0]},
                raises="ValueError",
                exercises="uneven",
            )
        )
    return cases


def _block(o) -> int:
    return len(o.args[0]) // o.case_mesh["axes"]["data"]


def _parts(o) -> tuple[int, np.ndarray]:
    mesh = o.kwargs.get("mesh")
    parts = mesh["axes"]["data"] if mesh else 1
    return parts, np.asarray(o.args[0], np.float64).reshape(parts, -1).sum(axis=1)


def _partials_stacked(o) -> bool:
    parts, partials = _parts(o)
    return (
        parts > 1
        and np.shape(o.value) == partials.shape
        and np.allclose(o.value, partials, rtol=1e-4)
    )


def _first_partial(o) -> bool:
    parts, partials = _parts(o)
    return parts > 1 and np.shape(o.value) == () and np.isclose(o.value, partials[0], rtol=1e-4)


def _times(o, factor) -> bool:
    parts, _ = _parts(o)
    return (
        parts > 1
        and np.shape(o.value) == ()
        and np.isclose(o.value, o.expected * factor(parts), rtol=1e-4)
        and not np.isclose(o.expected, 0)
    )


PROBLEM = Problem(
    reference=shard_map_psum,
    title="shard_map with a psum collective",
    difficulty="easy",
    teaches="collectives: psum across devices, and why out_specs=P() follows it",
    lesson=("combined",),
    make_cases=_cases,
    requirements=(
        Returns("result", "It returns the total of `x`, a scalar (shape `()`)."),
        Program(
            "blocks",
            "Each device sums only its own block: a `jax.shard_map` over `'data'` receives `x` "
            "in 1-D blocks of `len(x) / n` elements, n the size of `'data'`.",
            test=every(uses("shard_map"), enters_as(lambda o: {"x": (_block(o),)})),
        ),
        Program(
            "combined",
            "The devices' partial sums are combined inside the `shard_map`, with a collective "
            "over `'data'` (`jax.lax.psum`, say), so that every device hands back the whole "
            "total, a scalar, and `out_specs=P()` is true.",
            test=combined_inside(sorted(COLLECTIVES), lambda o: ()),
        ),
        Layout(
            "layout",
            "The total is the same on every device of the mesh: laid out as `P()`.",
            spec=P(),
        ),
        Refuses(
            "uneven",
            "If `len(x)` does not divide over the `'data'` axis, it raises a `ValueError` that "
            "says how to pad.",
        ),
        EXPLICIT_MESHES,
        GIVEN_MESH,
        TRACEABLE,
    ),
    hints=(
        ResultHint(
            _partials_stacked,
            "these are the per-device partial sums, stacked by out_specs=P('data'): add them "
            "with jax.lax.psum(local, 'data') and return with out_specs=P()",
        ),
        ResultHint(
            _first_partial,
            "this is the first device's partial sum only, so the psum was skipped (with "
            "check_vma=False, shard_map took device 0's value): add jax.lax.psum(local, 'data')",
        ),
        ResultHint(
            lambda o: _times(o, lambda parts: 1 / parts),
            "the total came out divided by the number of devices: jax.lax.pmean averages, "
            "jax.lax.psum adds",
        ),
        ResultHint(
            lambda o: _times(o, lambda parts: parts),
            "the total came out once per device too large: the value was already the same on "
            "every device when psum added it up again. psum the per-block sums, once",
        ),
        ErrorHint(
            "ValueError",
            r"out_specs which require replication",
            "out_specs=P() says every device ends with the same value, but JAX's types say "
            "the value still differs between devices: add the block sums with "
            "jax.lax.psum(local, 'data'), whose result is the same everywhere (all_gather's is "
            "too only with to='invarying')",
        ),
        ResultHint(
            lambda o: np.shape(o.value) != (),
            "return a scalar (shape ()), the one total",
        ),
    ),
)

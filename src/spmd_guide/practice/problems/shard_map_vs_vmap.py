"""Problem: per-row sums of squares, once with ``shard_map`` and once with ``vmap``."""

from __future__ import annotations

# solution
import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import Mesh, NamedSharding
from jax.sharding import PartitionSpec as P


def shard_map_vs_vmap(x, *, mesh=None):
    """Per-row sums of squares of ``x``, by ``shard_map`` and by ``vmap``, stacked.

    The ``shard_map`` path splits the rows over the mesh axis ``'data'``; each device maps
    ``sum(row ** 2)`` over its own rows with ``jax.vmap``, and ``out_specs=P('data')`` joins the
    blocks back in order. The ``vmap`` path maps the same function over all rows at once.

    Args:
        x: an array of shape (B, d).
        mesh: a mesh with an axis ``'data'``; by default, a mesh of one device.
    """
    if mesh is None:
        mesh = Mesh(np.array(jax.devices()[:1]), ("data",))
    x = jnp.asarray(x)
    size = mesh.shape["data"]
    if x.shape[0] % size:
        raise ValueError(
            f"B = {x.shape[0]} rows do not divide over {size} devices; pad x to a "
            f"multiple of {size} rows"
        )

    def row_sum_of_squares(row):
        return jnp.sum(row**2)

    per_block = jax.shard_map(
        jax.vmap(row_sum_of_squares), mesh=mesh, in_specs=P("data"), out_specs=P("data")
    )
    # Placing x first makes the same call work on Auto and Explicit meshes.
    sharded = per_block(jax.device_put(x, NamedSharding(mesh, P("data"))))
    vmapped = jax.vmap(row_sum_of_squares)(x)
    return jnp.stack([sharded, vmapped])


# end solution

from spmd_guide.practice.cases import kind, normal, one_axis_meshes
from spmd_guide.practice.problem import Case, ErrorHint, Problem, ResultHint
from spmd_guide.practice.requirements import (
    EXPLICIT_MESHES,
    GIVEN_MESH,
    TRACEABLE,
    Program,
    Refuses,
    Returns,
    enters_as,
    every,
    uses,
)


def _cases(devices: int) -> list[Case]:
    cases = [Case((normal(20, 3, 2),))]
    for seed, mesh in enumerate(one_axis_meshes(devices, "data")):
        rows = 2 * mesh.shape["data"] + (0 if seed % 2 else 2 * mesh.shape["data"])
        cases.append(Case((normal(21 + seed, rows, 5),), {"mesh": mesh}, exercises=kind(mesh)))
    if devices > 1:
        cases.append(
            Case(
                (normal(30, devices + 1, 2),),
                {"mesh": one_axis_meshes(devices, "data")[0]},
                raises="ValueError",
                exercises="uneven",
            )
        )
    return cases


def _size(o) -> int:
    return o.case_mesh["axes"]["data"]


def _rows(o) -> int:
    return np.shape(o.expected)[1]


PROBLEM = Problem(
    reference=shard_map_vs_vmap,
    title="shard_map vs vmap",
    difficulty="easy",
    teaches="in_specs and out_specs, and vmap inside a shard_map body",
    lesson=("blocks",),
    make_cases=_cases,
    requirements=(
        Returns(
            "result",
            "It returns an array of shape (2, B): row 0 the `shard_map` path's per-row sums of "
            "squares, row 1 the `vmap` path's.",
        ),
        Program(
            "blocks",
            "The `shard_map` path gives each device only its own rows: a `jax.shard_map` over "
            "`'data'` receives `x` in blocks of B / n rows, n the size of `'data'`.",
            test=every(
                uses("shard_map"),
                enters_as(lambda o: {"x": (len(o.args[0]) // _size(o), o.args[0].shape[1])}),
            ),
        ),
        Refuses(
            "uneven",
            "If B does not divide over the `'data'` axis, it raises a `ValueError` that says "
            "how to pad.",
        ),
        EXPLICIT_MESHES,
        GIVEN_MESH,
        TRACEABLE,
    ),
    hints=(
        ErrorHint(
            "ValueError",
            r"out_specs entry which is too long",
            "the shard_map body returned one number per device, not one per row: map the "
            "per-row function over the block's rows with jax.vmap inside the body",
        ),
        ResultHint(
            lambda o: np.shape(o.value) == (_rows(o),),
            "return both results stacked, jnp.stack([sharded, vmapped]), of shape (2, B)",
        ),
        ResultHint(
            lambda o: (
                _rows(o) != 2
                and np.shape(o.value) == (_rows(o), 2)
                and np.allclose(np.asarray(o.value).T, o.expected, rtol=1e-4)
            ),
            "stack along axis 0, not 1: the result should be (2, B), one row per method",
        ),
        ResultHint(
            lambda o: (
                np.allclose(o.value[1], o.expected[1], rtol=1e-4)
                and not np.allclose(o.value[0], o.expected[0], rtol=1e-4)
            ),
            "the vmap row is right but the shard_map row is not: in_specs and out_specs "
            "should both be P('data'), and each device maps the function over its own rows",
        ),
    ),
)

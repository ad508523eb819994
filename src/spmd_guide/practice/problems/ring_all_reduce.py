"""Problem: an all-reduce built from ``ppermute``: a ring reduce-scatter, then a ring all-gather."""

from __future__ import annotations

# solution
import jax
import jax.numpy as jnp
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P


def ring_all_reduce(x, *, mesh):
    """Every device's row of ``x`` replaced by the sum of all rows, using only ``ppermute``.

    ``x`` has one row per device along the mesh axis ``'data'``. Each device cuts its row into
    as many chunks as there are devices. In the reduce-scatter half, for n - 1 steps, each
    device sends one chunk to its right-hand neighbour and adds the chunk it receives from its
    left; afterwards device i holds the full sum of chunk i + 1 (mod n). In the all-gather
    half, n - 1 more steps pass those finished chunks around the ring. This is the
    bandwidth-optimal all-reduce: each device sends 2 (n - 1) / n of its row in all.

    Args:
        x: an array of shape (n, m), n the size of the ``'data'`` axis and m divisible by n.
        mesh: a mesh with an axis ``'data'``.

    """
    n = mesh.shape["data"]
    right = [(i, (i + 1) % n) for i in range(n)]

    def ring(row):
        chunks = row.reshape(n, -1)
        me = jax.lax.axis_index("data")
        # Reduce-scatter: at step s, send the partial sum of chunk (me - s) and add the
        # received partial sum into chunk (me - s - 1).
        for step in range(n - 1):
            sent = jnp.take(chunks, (me - step) % n, axis=0)
            received = jax.lax.ppermute(sent, "data", right)
            index = (me - step - 1) % n
            chunks = chunks.at[index].add(received)
        # Device me now holds the total of chunk (me + 1) % n; pass the totals around.
        for step in range(n - 1):
            sent = jnp.take(chunks, (me + 1 - step) % n, axis=0)
            received = jax.lax.ppermute(sent, "data", right)
            chunks = chunks.at[(me - step) % n].set(received)
        return chunks.reshape(1, -1)

    summed = jax.shard_map(ring, mesh=mesh, in_specs=P("data"), out_specs=P("data"))
    return summed(jax.device_put(x, NamedSharding(mesh, P("data"))))


# end solution

import numpy as np

from spmd_guide.practice.cases import kind, normal, one_axis_meshes
from spmd_guide.practice.problem import COLLECTIVES, Case, Problem, ResultHint
from spmd_guide.practice.requirements import (
    EXPLICIT_MESHES,
    GIVEN_MESH,
    TRACEABLE,
    Layout,
    Program,
    Returns,
    every,
    forbids,
    uses,
)


def _cases(devices: int) -> list[Case]:
    cases = []
    for seed, mesh in enumerate(one_axis_meshes(devices, "data")):
        n = mesh.shape["data"]
        cases.append(Case((normal(100 + seed, n, 3 * n),), {"mesh": mesh}, exercises=kind(mesh)))
    return cases


def _chunk_of(index: tuple[int, ...], o) -> str:
    row, column = index
    chunk = column // (np.shape(o.expected)[1] // len(o.expected))
    return f"row {row}, held by position {row} of 'data', chunk {chunk}"


def _chunks_right(o) -> np.ndarray:
    """For each device and chunk, whether that chunk of its row is the right total."""
    n = len(o.expected)
    got = np.asarray(o.value).reshape(n, n, -1)
    want = np.asarray(o.expected).reshape(n, n, -1)
    return np.isclose(got, want, rtol=1e-4, atol=1e-5).all(axis=2)


def _half_done(o) -> bool:
    """Right after the reduce-scatter: each device has exactly one finished chunk."""
    right = _chunks_right(o)
    return len(right) > 2 and (right.sum(axis=1) == 1).all()


def _row_totals_off(o) -> bool:
    return not np.allclose(np.sum(o.value, axis=1), np.sum(o.expected, axis=1), rtol=1e-4)


PROBLEM = Problem(
    reference=ring_all_reduce,
    title="A ring all-reduce from ppermute",
    difficulty="medium",
    teaches="what psum does on the wire: a ring reduce-scatter and all-gather of ppermutes",
    lesson=("ppermute_only",),
    make_cases=_cases,
    requirements=(
        Returns(
            "result",
            "It returns an array of shape (n, m) whose every row is `x.sum(axis=0)`.",
            locate=lambda index, o: _chunk_of(index, o),
        ),
        Program(
            "ppermute_only",
            "Devices exchange data only with `jax.lax.ppermute`, inside a `jax.shard_map` over "
            "`'data'`: no `psum`, `all_gather`, `psum_scatter`, `all_to_all`, `pmax` or `pmin`.",
            test=every(uses("shard_map", "ppermute"), forbids(*(COLLECTIVES - {"ppermute"}))),
        ),
        Layout(
            "layout",
            "The result stays split over `'data'` by rows, each device holding its own row: "
            "laid out as `P('data')`.",
            spec=P("data"),
        ),
        EXPLICIT_MESHES,
        GIVEN_MESH,
        TRACEABLE,
    ),
    hints=(
        ResultHint(
            _half_done,
            "each device has one finished chunk and partial sums elsewhere: that is the "
            "reduce-scatter half. Pass the finished chunks on around the ring, n - 1 more "
            "ppermute steps, setting (not adding) what arrives",
        ),
        ResultHint(
            _row_totals_off,
            "some contributions were added twice or never: n devices need exactly n - 1 "
            "steps in each half, and at step s each device sends the chunk it added into at "
            "step s - 1",
        ),
    ),
)

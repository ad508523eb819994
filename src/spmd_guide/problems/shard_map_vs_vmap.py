"""Problem: per-row sums of squares, once with ``shard_map`` and once with ``vmap``."""

from __future__ import annotations

import jax
import jax.numpy as jnp
from jax.sharding import Mesh
from jax.sharding import PartitionSpec as P

from spmd_guide.problems._mesh import AXIS, data_mesh, split_over_data


def _row_sum_of_squares(row: jax.Array) -> jax.Array:
    return jnp.sum(row**2)


def shard_map_vs_vmap(x: jax.Array, *, mesh: Mesh | None = None) -> jax.Array:
    """Per-row sums of squares of ``x``, by ``shard_map`` and by ``vmap``, stacked.

    The ``shard_map`` path splits the rows over the ``'data'`` axis; each device maps
    ``sum(row ** 2)`` over its own rows with ``vmap``, and ``out_specs=P('data')`` joins the
    blocks back in order. The ``vmap`` path maps the same function over all rows at once. No
    collective is needed: every row's answer depends on that row only.

    Args:
        x: a 2-D array of shape (B, d), B dividing over the mesh's ``'data'`` axis.
        mesh: a mesh with an axis ``'data'``; by default, one device.

    Returns:
        An array of shape (2, B), with the ``shard_map`` results in row 0 and the ``vmap``
        results in row 1.

    Raises:
        ValueError: if ``x`` is not 2-D, the mesh has no ``'data'`` axis, or B does not divide
            over it.
    """
    x = jnp.asarray(x)
    if x.ndim != 2:
        raise ValueError(f"x must be 2-D, of shape (B, d); got shape {x.shape}")
    mesh = data_mesh(mesh)
    per_block = jax.shard_map(
        jax.vmap(_row_sum_of_squares), mesh=mesh, in_specs=P(AXIS), out_specs=P(AXIS)
    )
    sharded = per_block(split_over_data(x, mesh))
    vmapped = jax.vmap(_row_sum_of_squares)(x)
    return jnp.stack([jax.device_get(sharded), vmapped], axis=0)

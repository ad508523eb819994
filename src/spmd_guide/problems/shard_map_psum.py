"""Problem: the global sum of a sharded vector, with ``shard_map`` and ``psum``."""

from __future__ import annotations

import jax
import jax.numpy as jnp
from jax.sharding import Mesh
from jax.sharding import PartitionSpec as P

from spmd_guide.problems._mesh import AXIS, data_mesh, split_over_data


def shard_map_psum(x: jax.Array, *, mesh: Mesh | None = None) -> jax.Array:
    """The sum of all elements of the 1-D array ``x``, computed shard by shard.

    Each device sums its block of ``x``; ``jax.lax.psum`` over the ``'data'`` axis adds those
    partial sums, leaving the same total on every device, so ``out_specs=P()``.

    Args:
        x: a 1-D array whose length divides over the mesh's ``'data'`` axis.
        mesh: a mesh with an axis ``'data'``; by default, one device.

    Returns:
        The total of ``x``, a scalar.

    Raises:
        ValueError: if ``x`` is not 1-D, the mesh has no ``'data'`` axis, or the length of ``x``
            does not divide over it.
    """
    x = jnp.asarray(x)
    if x.ndim != 1:
        raise ValueError(f"x must be 1-D, got shape {x.shape}; flatten it with x.reshape(-1)")
    mesh = data_mesh(mesh)

    def block_total(block):
        return jax.lax.psum(jnp.sum(block), AXIS)

    total = jax.shard_map(block_total, mesh=mesh, in_specs=P(AXIS), out_specs=P())
    return total(split_over_data(x, mesh))

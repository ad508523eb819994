"""Data parallelism: the batch split over devices, the parameters replicated.

Each device computes gradients on its slice of the batch; averaging them across devices gives
the gradient of the whole batch, so every device applies the same update and the replicas stay
identical. :func:`step_shard_map` writes that average as a ``pmean``; :func:`step_jit` leaves
``jax.jit`` to insert it.
"""

from __future__ import annotations

import jax
from jax.sharding import Mesh, NamedSharding
from jax.sharding import PartitionSpec as P

from spmd_guide.parallel.mlp import Params, loss, sgd_step


def step_shard_map(params: Params, x, y, mesh: Mesh, lr: float, axis: str = "data") -> Params:
    """One SGD step with the gradient all-reduce written out: ``pmean`` over ``axis``."""

    def per_device(params, x_block, y_block):
        # The parameters arrive replicated ("invariant" over the axis). Differentiating with
        # respect to an invariant value makes JAX sum the gradient over devices by itself;
        # marking them varying first keeps each device's own gradient, for pmean to average.
        own = jax.lax.pcast(params, axis, to="varying")
        grads = jax.grad(loss)(own, x_block, y_block)
        # Each block's loss is a mean over its rows; the mean of equal-sized block means is
        # the mean over the whole batch, so pmean gives the full-batch gradient.
        grads = jax.lax.pmean(grads, axis)
        return jax.tree.map(lambda p, g: p - lr * g, params, grads)

    step = jax.shard_map(per_device, mesh=mesh, in_specs=(P(), P(axis), P(axis)), out_specs=P())
    params, x, y = place(params, x, y, mesh, axis)
    return jax.jit(step)(params, x, y)


def place(params: Params, x, y, mesh: Mesh, axis: str = "data"):
    """Parameters replicated and the batch split over ``axis``, as data parallelism keeps them.

    Placing inputs first lets the same code run on meshes with Auto or Explicit axes.
    """
    batch = NamedSharding(mesh, P(axis))
    params = jax.device_put(params, NamedSharding(mesh, P()))
    return params, jax.device_put(x, batch), jax.device_put(y, batch)


def step_jit(params: Params, x, y, mesh: Mesh, lr: float, axis: str = "data") -> Params:
    """The same step as one-device code under ``jax.jit``, with the batch placed over ``axis``."""
    params, x, y = place(params, x, y, mesh, axis)
    step = jax.jit(sgd_step, static_argnums=3, out_shardings=NamedSharding(mesh, P()))
    return step(params, x, y, lr)

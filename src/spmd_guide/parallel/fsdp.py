"""Fully sharded data parallelism, by hand: parameters stored split, gathered to be used.

Every device stores 1/n of each weight matrix (its rows) and a slice of the batch. To compute,
it all-gathers the full weights, runs forward and backward on its slice, and reduce-scatters
the gradients: each device receives the sum of everyone's gradients for the rows it stores, and
updates only those. Biases are small and stay replicated, averaged with ``pmean``.
"""

from __future__ import annotations

import jax
from jax.sharding import Mesh, NamedSharding
from jax.sharding import PartitionSpec as P

from spmd_guide.parallel.mlp import Params, loss

SHARDED = ("w1", "w2")
"""The parameters FSDP stores split by rows; the rest are replicated."""


def param_specs(params: Params, axis: str = "data") -> dict[str, P]:
    """Row-split specs for the weight matrices, replicated specs for the biases."""
    return {name: P(axis) if name in SHARDED else P() for name in params}


def shard_params(params: Params, mesh: Mesh, axis: str = "data") -> Params:
    """Place ``params`` as FSDP stores them.

    Raises:
        ValueError: if a weight's row count does not divide over the axis.
    """
    size = mesh.shape[axis]
    for name in SHARDED:
        rows = params[name].shape[0]
        if rows % size:
            raise ValueError(
                f"{name} has {rows} rows, which do not split over the {size} devices of axis "
                f"{axis!r}; choose layer sizes divisible by {size}"
            )
    specs = param_specs(params, axis)
    return {name: jax.device_put(p, NamedSharding(mesh, specs[name])) for name, p in params.items()}


def step(params: Params, x, y, mesh: Mesh, lr: float, axis: str = "data") -> Params:
    """One SGD step on FSDP-sharded ``params``; returns them sharded the same way."""
    n = mesh.shape[axis]
    specs = param_specs(params, axis)

    def per_device(local_params, x_block, y_block):
        # An all-gather's result counts as varying over the axis, so each device's gradient
        # for it stays its own. The replicated biases must be marked varying for the same
        # effect; otherwise JAX would sum their gradients over devices by itself.
        full = {
            name: jax.lax.all_gather(p, axis, tiled=True)
            if name in SHARDED
            else jax.lax.pcast(p, axis, to="varying")
            for name, p in local_params.items()
        }
        grads = jax.grad(loss)(full, x_block, y_block)
        local_grads = {
            # Sum everyone's gradient for the rows this device stores, then average over the
            # n equal slices of the batch.
            name: jax.lax.psum_scatter(g, axis, scatter_dimension=0, tiled=True) / n
            if name in SHARDED
            else jax.lax.pmean(g, axis)
            for name, g in grads.items()
        }
        return jax.tree.map(lambda p, g: p - lr * g, local_params, local_grads)

    sharded_step = jax.shard_map(
        per_device, mesh=mesh, in_specs=(specs, P(axis), P(axis)), out_specs=specs
    )
    batch = NamedSharding(mesh, P(axis))
    return jax.jit(sharded_step)(params, jax.device_put(x, batch), jax.device_put(y, batch))

"""Tensor parallelism for a two-layer MLP, Megatron-style: one all-reduce per block.

``w1`` is split by columns and ``w2`` by rows over the ``model`` axis. Each device computes a
slice of the hidden layer from the whole input (no communication: relu acts elementwise on its
slice), multiplies it by the matching rows of ``w2`` to get a partial output, and a single
``psum`` adds the partial outputs. The second bias is added once, after the sum.
"""

from __future__ import annotations

import jax
from jax.sharding import Mesh, NamedSharding
from jax.sharding import PartitionSpec as P

from spmd_guide.parallel.mlp import Params


def param_specs(axis: str = "model") -> dict[str, P]:
    """Column-split ``w1`` and ``b1``, row-split ``w2``, replicated ``b2``."""
    return {"w1": P(None, axis), "b1": P(axis), "w2": P(axis, None), "b2": P()}


def shard_params(params: Params, mesh: Mesh, axis: str = "model") -> Params:
    """Place ``params`` for :func:`forward`.

    Raises:
        ValueError: if the hidden size does not split over the axis.
    """
    hidden, size = params["w1"].shape[1], mesh.shape[axis]
    if hidden % size:
        raise ValueError(
            f"the hidden size {hidden} does not split over the {size} devices of axis {axis!r}; "
            f"choose a hidden size divisible by {size}"
        )
    specs = param_specs(axis)
    return {name: jax.device_put(p, NamedSharding(mesh, specs[name])) for name, p in params.items()}


def forward(params: Params, x, mesh: Mesh, axis: str = "model"):
    """The MLP's output for ``x`` (replicated), computed with the weights split over ``axis``."""

    def per_device(p, x):
        hidden_slice = jax.nn.relu(x @ p["w1"] + p["b1"])
        partial = hidden_slice @ p["w2"]
        return jax.lax.psum(partial, axis) + p["b2"]

    sharded = jax.shard_map(per_device, mesh=mesh, in_specs=(param_specs(axis), P()), out_specs=P())
    return jax.jit(sharded)(params, jax.device_put(x, NamedSharding(mesh, P())))

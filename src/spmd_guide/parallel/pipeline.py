"""Pipeline parallelism: one layer per device, microbatches passed along with ``ppermute``.

A stack of S square layers is split so that device s holds layer s. The batch is cut into M
microbatches. At each of M + S - 1 ticks, every device applies its layer to the activation it
holds and passes the result to the next device with a ring ``ppermute``; device 0 takes in a
fresh microbatch, and the last device's results are the outputs (the GPipe schedule, forward
only). A device is idle while the pipeline fills and drains: the *bubble*, a fraction
(S - 1) / (M + S - 1) of all device-ticks.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import Mesh, NamedSharding
from jax.sharding import PartitionSpec as P


def init_layers(stages: int, width: int, *, seed: int = 0) -> jax.Array:
    """``stages`` weight matrices of shape (width, width), stacked: shape (stages, width, width)."""
    rng = np.random.default_rng(seed)
    return jnp.asarray(rng.normal(size=(stages, width, width)) / np.sqrt(width), jnp.float32)


def layer(w: jax.Array, x: jax.Array) -> jax.Array:
    """One stage: ``tanh(x @ w)``."""
    return jnp.tanh(x @ w)


def sequential(layers: jax.Array, x: jax.Array) -> jax.Array:
    """All layers in order, on one device: the reference."""
    for w in layers:
        x = layer(w, x)
    return x


def bubble_fraction(stages: int, microbatches: int) -> float:
    """The share of device-ticks a GPipe forward pass leaves idle: (S - 1) / (M + S - 1)."""
    return (stages - 1) / (microbatches + stages - 1)


def forward(layers: jax.Array, x: jax.Array, mesh: Mesh, microbatches: int, axis: str = "stage"):
    """Run ``x`` through ``layers`` as a pipeline over ``axis``; return outputs and busy ticks.

    Returns:
        ``(outputs, busy)``: outputs equal to ``sequential(layers, x)``, and for each device the
        number of ticks on which it worked on a real microbatch.

    Raises:
        ValueError: if the layer count differs from the axis size, or the batch does not split
            into ``microbatches``.
    """
    stages = mesh.shape[axis]
    if layers.shape[0] != stages:
        raise ValueError(
            f"{layers.shape[0]} layers cannot be placed one per device on the {stages} devices "
            f"of axis {axis!r}; use {stages} layers or a mesh of {layers.shape[0]} devices"
        )
    if x.shape[0] % microbatches:
        raise ValueError(
            f"a batch of {x.shape[0]} does not split into {microbatches} microbatches; choose a "
            f"microbatch count that divides it"
        )
    chunks = x.reshape(microbatches, x.shape[0] // microbatches, *x.shape[1:])
    ring = [(s, (s + 1) % stages) for s in range(stages)]

    def per_device(w, chunks):
        w = w[0]
        stage = jax.lax.axis_index(axis)
        held = jnp.zeros_like(chunks[0])
        outputs = jnp.zeros_like(chunks)
        busy = jnp.zeros((), jnp.int32)
        for tick in range(microbatches + stages - 1):
            incoming = chunks[min(tick, microbatches - 1)]
            result = layer(w, jnp.where(stage == 0, incoming, held))
            working = (tick - stage >= 0) & (tick - stage < microbatches)
            busy = busy + working.astype(jnp.int32)
            done = tick - (stages - 1)
            if done >= 0:
                is_last = stage == stages - 1
                outputs = outputs.at[done].set(jnp.where(is_last, result, outputs[done]))
            held = jax.lax.ppermute(result, axis, ring)
        # Only the last stage holds real outputs; a masked psum hands them to every device.
        outputs = jax.lax.psum(jnp.where(stage == stages - 1, outputs, 0.0), axis)
        return outputs, busy[None]

    run = jax.shard_map(per_device, mesh=mesh, in_specs=(P(axis), P()), out_specs=(P(), P(axis)))
    layers = jax.device_put(layers, NamedSharding(mesh, P(axis)))
    chunks = jax.device_put(chunks, NamedSharding(mesh, P()))
    outputs, busy = jax.jit(run)(layers, chunks)
    return outputs.reshape(x.shape[0], *outputs.shape[2:]), busy

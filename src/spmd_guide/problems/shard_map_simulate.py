"""Problem: simulate a data-parallel ``shard_map`` of a Flax Dense layer with a Python loop."""

from __future__ import annotations

import flax.linen as nn
import jax
import jax.numpy as jnp


def _as_int(value: float, name: str) -> int:
    as_int = int(value)
    if as_int != value or as_int < 0:
        raise ValueError(f"{name} must be a whole number, got {value!r}")
    return as_int


def shard_map_simulate(seed: float, x: jax.Array, num_shards: float, features: float) -> jax.Array:
    """Apply one ``nn.Dense(features)`` to ``x`` in ``num_shards`` chunks, as devices would.

    ``seed``, ``num_shards`` and ``features`` arrive as floats and are cast to int. The layer is
    initialised once, with ``jax.random.PRNGKey(seed)``, on the first ``(N // num_shards,
    in_dim)`` chunk; every chunk is then applied with those same parameters, as every device of
    a data-parallel ``shard_map`` holds the same replicated parameters. The outputs are joined
    on axis 0, which is what ``out_specs=P('data', None)`` does, and flattened.

    Args:
        seed: the PRNG seed, a float.
        x: a 2-D array of shape (N, in_dim), N divisible by ``num_shards``.
        num_shards: how many chunks (simulated devices), a float.
        features: the Dense layer's output size, a float.

    Returns:
        A 1-D array of length ``N * features``.

    Raises:
        ValueError: if ``x`` is not 2-D, a count is not a positive whole number, or N does not
            divide into ``num_shards`` chunks.
    """
    seed = _as_int(seed, "seed")
    num_shards = _as_int(num_shards, "num_shards")
    features = _as_int(features, "features")
    if num_shards < 1 or features < 1:
        raise ValueError(
            f"num_shards and features must be at least 1, got {num_shards}, {features}"
        )
    x = jnp.asarray(x)
    if x.ndim != 2:
        raise ValueError(f"x must be 2-D, of shape (N, in_dim); got shape {x.shape}")
    if x.shape[0] % num_shards:
        raise ValueError(
            f"N = {x.shape[0]} rows do not split into {num_shards} equal chunks; pad x to "
            f"{-(-x.shape[0] // num_shards) * num_shards} rows or choose a num_shards dividing N"
        )
    chunk = x.shape[0] // num_shards
    model = nn.Dense(features)
    first_chunk = jax.lax.dynamic_slice_in_dim(x, 0, chunk, axis=0)
    params = model.init(jax.random.PRNGKey(seed), first_chunk)
    outputs = [
        model.apply(params, jax.lax.dynamic_slice_in_dim(x, i * chunk, chunk, axis=0))
        for i in range(num_shards)
    ]
    return jnp.concatenate(outputs, axis=0).reshape(-1)

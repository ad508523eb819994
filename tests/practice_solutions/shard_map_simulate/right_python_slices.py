"""Expected: pass

Plain slicing and a list comprehension instead of jnp.split.
"""

import flax.linen as nn
import jax
import jax.numpy as jnp


def shard_map_simulate(seed, x, num_shards, features):
    n, k = int(num_shards), int(features)
    if len(x) % n:
        raise ValueError(f"{len(x)} rows do not split into {n} chunks: pad x")
    rows = len(x) // n
    layer = nn.Dense(k)
    params = layer.init(jax.random.key(int(seed)), x[:rows])
    return jnp.concatenate(
        [layer.apply(params, x[i * rows : (i + 1) * rows]) for i in range(n)]
    ).ravel()

"""Expected: fails result
Hint: computed with different parameters
"""

import flax.linen as nn
import jax
import jax.numpy as jnp


def shard_map_simulate(seed, x, num_shards, features):
    n, k = int(num_shards), int(features)
    if len(x) % n:
        raise ValueError("pad x")
    rows = len(x) // n
    layer = nn.Dense(k)
    keys = jax.random.split(jax.random.PRNGKey(int(seed)), n)
    outs = []
    for i in range(n):
        chunk = x[i * rows : (i + 1) * rows]
        outs.append(layer.apply(layer.init(keys[i], chunk), chunk))
    return jnp.concatenate(outs).reshape(-1)

"""Expected: fails result
Hint: cast them with int() first
"""

import flax.linen as nn
import jax
import jax.numpy as jnp


def shard_map_simulate(seed, x, num_shards, features):
    rows = len(x) // num_shards
    layer = nn.Dense(features)
    params = layer.init(jax.random.PRNGKey(seed), x[:rows])
    return jnp.concatenate([layer.apply(params, c) for c in jnp.split(x, num_shards)]).reshape(-1)

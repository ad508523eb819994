"""Expected: pass

The chunks as one array of shape (num_shards, rows, d), and the layer vmapped over them: one
product per chunk, as the devices would run it, written as a batch.
"""

import flax.linen as nn
import jax


def shard_map_simulate(seed, x, num_shards, features):
    n, k = int(num_shards), int(features)
    chunks = x.reshape(n, len(x) // n, x.shape[1])
    layer = nn.Dense(k)
    params = layer.init(jax.random.PRNGKey(int(seed)), chunks[0])
    return jax.vmap(lambda chunk: layer.apply(params, chunk))(chunks).reshape(-1)

"""Expected: pass

`jax.lax.map` over the chunks: a loop whose body applies the layer to one chunk.
"""

import flax.linen as nn
import jax


def shard_map_simulate(seed, x, num_shards, features):
    n, k = int(num_shards), int(features)
    chunks = x.reshape(n, len(x) // n, x.shape[1])
    layer = nn.Dense(k)
    params = layer.init(jax.random.PRNGKey(int(seed)), chunks[0])
    return jax.lax.map(lambda chunk: layer.apply(params, chunk), chunks).reshape(-1)

"""Expected: pass

`jax.lax.scan` over the chunks, stacking each chunk's outputs.
"""

import flax.linen as nn
import jax


def shard_map_simulate(seed, x, num_shards, features):
    n, k = int(num_shards), int(features)
    chunks = x.reshape(n, len(x) // n, x.shape[1])
    layer = nn.Dense(k)
    params = layer.init(jax.random.PRNGKey(int(seed)), chunks[0])
    _, outputs = jax.lax.scan(
        lambda carry, chunk: (carry, layer.apply(params, chunk)), None, chunks
    )
    return outputs.reshape(-1)

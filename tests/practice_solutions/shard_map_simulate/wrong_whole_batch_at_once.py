"""Expected: fails chunks

Initialises on the first chunk as asked, but then applies the layer to all of x in one call:
the same numbers, but no device ever works on a chunk of its own.
"""

import flax.linen as nn
import jax


def shard_map_simulate(seed, x, num_shards, features):
    n, k = int(num_shards), int(features)
    rows = len(x) // n
    layer = nn.Dense(k)
    params = layer.init(jax.random.PRNGKey(int(seed)), x[:rows])
    return layer.apply(params, x).reshape(-1)

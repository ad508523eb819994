"""Expected: fails traceable

Converts x with np.asarray to cut it with np.split: fine on the NumPy input of an eager call,
but jax.make_jaxpr passes a traced array, which NumPy cannot convert.
"""

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np


def shard_map_simulate(seed, x, num_shards, features):
    n, k = int(num_shards), int(features)
    chunks = np.split(np.asarray(x), n)
    layer = nn.Dense(k)
    params = layer.init(jax.random.PRNGKey(int(seed)), chunks[0])
    return jnp.concatenate([layer.apply(params, c) for c in chunks]).reshape(-1)

"""Expected: pass

Names the weights' layouts once, as NamedShardings, and reuses them.
"""

import jax
import jax.numpy as jnp
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P


def megatron_mlp(x, w1, w2, *, mesh):
    columns, rows, replicated = P(None, "model"), P("model", None), P()

    def body(x, a, b):
        return jax.lax.psum(jnp.maximum(x @ a, 0.0) @ b, "model")

    args = [
        jax.device_put(v, NamedSharding(mesh, s))
        for v, s in ((x, replicated), (w1, columns), (w2, rows))
    ]
    return jax.shard_map(
        body, mesh=mesh, in_specs=(replicated, columns, rows), out_specs=replicated
    )(*args)

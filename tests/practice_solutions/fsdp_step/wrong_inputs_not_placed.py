"""Expected: fails explicit_mesh

Hands the NumPy inputs straight to the shard_map. On a mesh with Auto axes shard_map splits
them itself; on one with Explicit axes it wants them already laid out as in_specs says.
"""

import jax
import jax.numpy as jnp
from jax.sharding import PartitionSpec as P


def fsdp_step(params, x, y, *, mesh, lr):
    n = mesh.shape["data"]

    def loss(p, x, y):
        return jnp.mean((jnp.tanh(x @ p["w1"]) @ p["w2"] - y) ** 2)

    def step(shards, x, y):
        def sharded_loss(shards):
            full = {k: jax.lax.all_gather(v, "data", axis=0, tiled=True) for k, v in shards.items()}
            return loss(full, x, y)

        grads = jax.grad(sharded_loss)(shards)
        return {k: shards[k] - lr * grads[k] / n for k in shards}

    spec = P("data", None)
    f = jax.shard_map(step, mesh=mesh, in_specs=spec, out_specs=spec)
    return f(params, x, y)

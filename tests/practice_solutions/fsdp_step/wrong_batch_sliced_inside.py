"""Expected: fails stored_split

Shards the weights but gives every device the whole batch (in_specs=P()), and each device cuts
out its own rows with axis_index. The numbers are right, but every device stores the whole batch.
"""

import jax
import jax.numpy as jnp
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P


def fsdp_step(params, x, y, *, mesh, lr):
    n = mesh.shape["data"]
    rows = x.shape[0] // n

    def loss(p, x, y):
        return jnp.mean((jnp.tanh(x @ p["w1"]) @ p["w2"] - y) ** 2)

    def step(shards, x, y):
        start = jax.lax.axis_index("data") * rows
        xb = jax.lax.dynamic_slice_in_dim(x, start, rows)
        yb = jax.lax.dynamic_slice_in_dim(y, start, rows)

        def sharded_loss(shards):
            full = {k: jax.lax.all_gather(v, "data", axis=0, tiled=True) for k, v in shards.items()}
            return loss(full, xb, yb)

        grads = jax.grad(sharded_loss)(shards)
        return {k: shards[k] - lr * grads[k] / n for k in shards}

    spec = P("data", None)
    shards = jax.device_put(params, NamedSharding(mesh, spec))
    x, y = jax.device_put((x, y), NamedSharding(mesh, P()))
    f = jax.shard_map(step, mesh=mesh, in_specs=(spec, P(), P()), out_specs=spec)
    return f(shards, x, y)

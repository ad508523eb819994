"""Expected: fails given_mesh

Builds its own mesh over the first devices instead of using the mesh argument. When mesh
spans only some of the devices, the step runs, and its answer lives, on the wrong ones (so
layout fails there too).
"""

import jax
import jax.numpy as jnp
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P


def fsdp_step(params, x, y, *, mesh, lr):
    n = mesh.shape["data"]
    mine = jax.make_mesh((n,), ("data",), devices=jax.devices()[:n])

    def loss(p, x, y):
        return jnp.mean((jnp.tanh(x @ p["w1"]) @ p["w2"] - y) ** 2)

    def step(shards, x, y):
        def sharded_loss(shards):
            full = {k: jax.lax.all_gather(v, "data", axis=0, tiled=True) for k, v in shards.items()}
            return loss(full, x, y)

        grads = jax.grad(sharded_loss)(shards)
        return {k: shards[k] - lr * grads[k] / n for k in shards}

    spec = P("data", None)
    put = lambda v: jax.device_put(v, NamedSharding(mine, spec))  # noqa: E731
    f = jax.shard_map(step, mesh=mine, in_specs=spec, out_specs=spec)
    return f({k: put(v) for k, v in params.items()}, put(x), put(y))

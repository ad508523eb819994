"""Expected: fails gather_and_scatter

Takes the gradient with respect to the gathered weights, psums the whole gradient and keeps
its own rows. The numbers are right, but every device receives the whole summed gradient
where a reduce-scatter would send each only its rows.
"""

import jax
import jax.numpy as jnp
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P


def fsdp_step(params, x, y, *, mesh, lr):
    n = mesh.shape["data"]

    def loss(p, x, y):
        return jnp.mean((jnp.tanh(x @ p["w1"]) @ p["w2"] - y) ** 2)

    def step(shards, x, y):
        full = {k: jax.lax.all_gather(v, "data", axis=0, tiled=True) for k, v in shards.items()}
        grads = jax.lax.psum(jax.grad(loss)(full, x, y), "data")
        me = jax.lax.axis_index("data")
        new = {}
        for k, shard in shards.items():
            rows = shard.shape[0]
            own = jax.lax.dynamic_slice_in_dim(grads[k], me * rows, rows, axis=0)
            new[k] = shard - lr * own / n
        return new

    spec = P("data", None)
    put = lambda v: jax.device_put(v, NamedSharding(mesh, spec))  # noqa: E731
    f = jax.shard_map(step, mesh=mesh, in_specs=spec, out_specs=spec)
    return f({k: put(v) for k, v in params.items()}, put(x), put(y))

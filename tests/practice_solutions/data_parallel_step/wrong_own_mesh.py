"""Expected: fails given_mesh

Builds its own mesh over the first devices instead of using the mesh argument. When mesh
spans only some of the devices, the step runs, and its answer lives, on the wrong ones (so
layout fails there too).
"""

import jax
import jax.numpy as jnp
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P


def data_parallel_step(params, x, y, *, mesh, lr):
    n = mesh.shape["data"]
    mine = jax.make_mesh((n,), ("data",), devices=jax.devices()[:n])

    def loss(params, x, y):
        return jnp.mean((x @ params["w"] + params["b"] - y) ** 2)

    def step(params, x, y):
        own = jax.lax.pcast(params, "data", to="varying")
        grads = jax.lax.pmean(jax.grad(loss)(own, x, y), "data")
        return jax.tree.map(lambda p, g: p - lr * g, params, grads)

    params = jax.device_put(params, NamedSharding(mine, P()))
    split = NamedSharding(mine, P("data"))
    f = jax.shard_map(step, mesh=mine, in_specs=(P(), P("data"), P("data")), out_specs=P())
    return f(params, jax.device_put(x, split), jax.device_put(y, split))

"""Expected: fails explicit_mesh

Hands the NumPy inputs straight to the shard_map. On a mesh with Auto axes shard_map splits
them itself; on one with Explicit axes it wants them already laid out as in_specs says.
"""

import jax
import jax.numpy as jnp
from jax.sharding import PartitionSpec as P


def data_parallel_step(params, x, y, *, mesh, lr):
    def loss(params, x, y):
        return jnp.mean((x @ params["w"] + params["b"] - y) ** 2)

    def step(params, x, y):
        own = jax.lax.pcast(params, "data", to="varying")
        grads = jax.lax.pmean(jax.grad(loss)(own, x, y), "data")
        return jax.tree.map(lambda p, g: p - lr * g, params, grads)

    f = jax.shard_map(step, mesh=mesh, in_specs=(P(), P("data"), P("data")), out_specs=P())
    return f(params, x, y)

"""Expected: fails split_batch

Passes the whole batch to every device (in_specs=P()) and has each device cut out its own
rows with axis_index. The numbers are right, but every device holds the whole batch.
"""

import jax
import jax.numpy as jnp
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P


def data_parallel_step(params, x, y, *, mesh, lr):
    rows = x.shape[0] // mesh.shape["data"]

    def loss(params, x, y):
        return jnp.mean((x @ params["w"] + params["b"] - y) ** 2)

    def step(params, x, y):
        start = jax.lax.axis_index("data") * rows
        xb = jax.lax.dynamic_slice_in_dim(x, start, rows)
        yb = jax.lax.dynamic_slice_in_dim(y, start, rows)
        own = jax.lax.pcast(params, "data", to="varying")
        grads = jax.lax.pmean(jax.grad(loss)(own, xb, yb), "data")
        return jax.tree.map(lambda p, g: p - lr * g, params, grads)

    whole = NamedSharding(mesh, P())
    params, x, y = jax.device_put((params, x, y), whole)
    f = jax.shard_map(step, mesh=mesh, in_specs=(P(), P(), P()), out_specs=P())
    return f(params, x, y)

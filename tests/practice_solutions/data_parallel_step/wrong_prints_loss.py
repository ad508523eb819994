"""Expected: fails jit

Logs the loss with print(float(...)) inside the step. That works when the function runs
eagerly, but under jax.jit the loss is a traced value with no number yet.
"""

import jax
import jax.numpy as jnp
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P


def data_parallel_step(params, x, y, *, mesh, lr):
    def loss(params, x, y):
        return jnp.mean((x @ params["w"] + params["b"] - y) ** 2)

    def step(params, x, y):
        own = jax.lax.pcast(params, "data", to="varying")
        grads = jax.lax.pmean(jax.grad(loss)(own, x, y), "data")
        return jax.tree.map(lambda p, g: p - lr * g, params, grads)

    print(f"loss before the step: {float(loss(params, x, y)):.4f}")
    params = jax.device_put(params, NamedSharding(mesh, P()))
    split = NamedSharding(mesh, P("data"))
    f = jax.shard_map(step, mesh=mesh, in_specs=(P(), P("data"), P("data")), out_specs=P())
    return f(params, jax.device_put(x, split), jax.device_put(y, split))

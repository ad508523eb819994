"""Expected: pass"""

import jax
import jax.numpy as jnp
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P


def fsdp_step(params, x, y, *, mesh, lr):
    n = mesh.shape["data"]

    def forward(w1, w2, x):
        return jnp.tanh(x @ w1) @ w2

    def step(w1_rows, w2_rows, x, y):
        w1 = jax.lax.all_gather(w1_rows, "data", axis=0, tiled=True)
        w2 = jax.lax.all_gather(w2_rows, "data", axis=0, tiled=True)
        g1, g2 = jax.grad(lambda a, b: jnp.mean((forward(a, b, x) - y) ** 2), argnums=(0, 1))(
            w1, w2
        )
        # Sum each gradient over the devices and keep this device's rows; then average.
        g1 = jax.lax.psum_scatter(g1, "data", scatter_dimension=0, tiled=True) / n
        g2 = jax.lax.psum_scatter(g2, "data", scatter_dimension=0, tiled=True) / n
        return w1_rows - lr * g1, w2_rows - lr * g2

    spec = NamedSharding(mesh, P("data", None))
    w1, w2, x, y = (jax.device_put(v, spec) for v in (params["w1"], params["w2"], x, y))
    f = jax.shard_map(step, mesh=mesh, in_specs=P("data", None), out_specs=P("data", None))
    new_w1, new_w2 = f(w1, w2, x, y)
    return {"w1": new_w1, "w2": new_w2}

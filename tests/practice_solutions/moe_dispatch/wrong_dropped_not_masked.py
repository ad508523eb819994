"""Expected: fails result
Hint: the dropped ones are not zeros
"""

import jax
import jax.numpy as jnp
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P


def moe_dispatch(tokens, experts, weights, *, mesh, capacity):
    n = mesh.shape["expert"]

    def body(x, e, w):
        onehot = jax.nn.one_hot(e, n, dtype=jnp.int32)
        slot = (jnp.cumsum(onehot, axis=0) * onehot).sum(axis=1) - 1
        buf = jnp.zeros((n, capacity, x.shape[1]), x.dtype).at[e, slot].set(x, mode="drop")
        buf = jax.lax.all_to_all(buf, "expert", 0, 0, tiled=True)
        buf = jax.lax.all_to_all(jnp.tanh(buf @ w[0]), "expert", 0, 0, tiled=True)
        return buf[e, jnp.minimum(slot, capacity - 1)]

    put = lambda a: jax.device_put(a, NamedSharding(mesh, P("expert")))  # noqa: E731
    f = jax.shard_map(body, mesh=mesh, in_specs=P("expert"), out_specs=P("expert"))
    return f(put(tokens), put(experts), put(weights))

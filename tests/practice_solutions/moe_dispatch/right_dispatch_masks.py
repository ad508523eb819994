"""Expected: pass"""

import jax
import jax.numpy as jnp
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P


def moe_dispatch(tokens, experts, weights, *, mesh, capacity):
    n = mesh.shape["expert"]

    def body(x, e, w):
        t = x.shape[0]
        same = e[:, None] == e[None, :]
        earlier = jnp.tril(jnp.ones((t, t), bool), k=-1)
        slot = jnp.sum(same & earlier, axis=1)  # earlier tokens of this device for the same expert
        # dispatch[t, e, c] is 1 when token t goes to expert e in slot c (all zeros if dropped).
        dispatch = jax.nn.one_hot(e, n)[:, :, None] * jax.nn.one_hot(slot, capacity)[:, None, :]
        outgoing = jnp.einsum("tec,td->ecd", dispatch, x)
        received = jax.lax.all_to_all(outgoing, "expert", split_axis=0, concat_axis=0, tiled=True)
        results = jax.lax.all_to_all(jnp.tanh(received @ w[0]), "expert", 0, 0, tiled=True)
        return jnp.einsum("tec,ecd->td", dispatch, results)

    sharding = NamedSharding(mesh, P("expert"))
    f = jax.shard_map(body, mesh=mesh, in_specs=P("expert"), out_specs=P("expert"))
    return f(*(jax.device_put(a, sharding) for a in (tokens, experts, weights)))

"""Expected: fails ring"""

import jax
import jax.numpy as jnp
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P


def ring_attention(q, k, v, *, mesh):
    def body(q, k, v):
        k = jax.lax.all_gather(k, "seq", tiled=True)
        v = jax.lax.all_gather(v, "seq", tiled=True)
        return jax.nn.softmax(q @ k.T / jnp.sqrt(q.shape[1]), axis=-1) @ v

    sh = NamedSharding(mesh, P("seq"))
    return jax.shard_map(body, mesh=mesh, in_specs=P("seq"), out_specs=P("seq"))(
        jax.device_put(q, sh), jax.device_put(k, sh), jax.device_put(v, sh)
    )

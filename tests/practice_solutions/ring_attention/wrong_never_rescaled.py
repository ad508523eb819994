"""Expected: fails result
Hint: multiply the running sum and the weighted values by exp(old_max - new_max)
"""

import jax
import jax.numpy as jnp
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P


def ring_attention(q, k, v, *, mesh):
    n = mesh.shape["seq"]

    def body(q, k, v):
        m = jnp.full((q.shape[0],), -jnp.inf)
        denom = jnp.zeros((q.shape[0],))
        acc = jnp.zeros_like(q)
        for _ in range(n):
            s = q @ k.T / jnp.sqrt(q.shape[1])
            m = jnp.maximum(m, s.max(axis=1))
            p = jnp.exp(s - m[:, None])
            denom = denom + p.sum(axis=1)
            acc = acc + p @ v
            k = jax.lax.ppermute(k, "seq", [(j, (j + 1) % n) for j in range(n)])
            v = jax.lax.ppermute(v, "seq", [(j, (j + 1) % n) for j in range(n)])
        return acc / denom[:, None]

    sh = NamedSharding(mesh, P("seq"))
    return jax.shard_map(body, mesh=mesh, in_specs=P("seq"), out_specs=P("seq"))(
        jax.device_put(q, sh), jax.device_put(k, sh), jax.device_put(v, sh)
    )

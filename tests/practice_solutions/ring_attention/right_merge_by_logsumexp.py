"""Expected: pass"""

import jax
import jax.numpy as jnp
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P


def ring_attention(q, k, v, *, mesh):
    n = mesh.shape["seq"]
    backwards = [(i, (i - 1) % n) for i in range(n)]

    def body(q, k, v):
        # Keep each block's normalised output and its log-sum-exp; merge them as they come.
        out, lse = None, None
        for step in range(n):
            s = q @ k.T / jnp.sqrt(q.shape[1])
            block_lse = jax.nn.logsumexp(s, axis=1)
            block_out = jnp.exp(s - block_lse[:, None]) @ v
            if out is None:
                out, lse = block_out, block_lse
            else:
                merged = jnp.logaddexp(lse, block_lse)
                out = (
                    out * jnp.exp(lse - merged)[:, None]
                    + block_out * jnp.exp(block_lse - merged)[:, None]
                )
                lse = merged
            if step < n - 1:
                k, v = jax.lax.ppermute((k, v), "seq", backwards)
        return out

    sh = NamedSharding(mesh, P("seq"))
    return jax.shard_map(body, mesh=mesh, in_specs=P("seq"), out_specs=P("seq"))(
        jax.device_put(q, sh), jax.device_put(k, sh), jax.device_put(v, sh)
    )

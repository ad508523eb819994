"""Expected: fails ring
Hint: your program has no ppermute; your program uses all_gather

Every device gathers all the keys and values, then walks them block by block with an online
softmax: no device holds whole rows of scores and the numbers are right, but each device holds
the whole sequence's keys and values, which the ring exists to avoid.
"""

import jax
import jax.numpy as jnp
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P


def ring_attention(q, k, v, *, mesh):
    def body(q, k, v):
        keys = jax.lax.all_gather(k, "seq")
        values = jax.lax.all_gather(v, "seq")
        out, lse = None, None
        for block_k, block_v in zip(keys, values, strict=True):
            s = q @ block_k.T / jnp.sqrt(q.shape[1])
            block_lse = jax.nn.logsumexp(s, axis=1)
            block_out = jnp.exp(s - block_lse[:, None]) @ block_v
            if out is None:
                out, lse = block_out, block_lse
            else:
                merged = jnp.logaddexp(lse, block_lse)
                out = (
                    out * jnp.exp(lse - merged)[:, None]
                    + block_out * jnp.exp(block_lse - merged)[:, None]
                )
                lse = merged
        return out

    sh = NamedSharding(mesh, P("seq"))
    return jax.shard_map(body, mesh=mesh, in_specs=P("seq"), out_specs=P("seq"))(
        jax.device_put(q, sh), jax.device_put(k, sh), jax.device_put(v, sh)
    )

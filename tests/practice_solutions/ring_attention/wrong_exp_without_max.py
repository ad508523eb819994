"""Expected: fails result

The online softmax adds up exp(scores) directly, never subtracting a running maximum. That is
fine for small scores, but scores in the hundreds overflow float32 and the output turns to NaN.
"""

import jax
import jax.numpy as jnp
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P


def ring_attention(q, k, v, *, mesh):
    devices = mesh.shape["seq"]
    to_next = [(i, (i + 1) % devices) for i in range(devices)]
    scale = q.shape[-1] ** -0.5

    def per_device(q, k, v):
        running_sum = jnp.zeros(q.shape[:1])
        weighted = jnp.zeros_like(q)
        for step in range(devices):
            p = jnp.exp((q @ k.T) * scale)
            running_sum = running_sum + p.sum(axis=1)
            weighted = weighted + p @ v
            if step < devices - 1:
                k, v = jax.lax.ppermute((k, v), "seq", to_next)
        return weighted / running_sum[:, None]

    split = NamedSharding(mesh, P("seq"))
    q, k, v = (jax.device_put(a, split) for a in (q, k, v))
    return jax.shard_map(per_device, mesh=mesh, in_specs=P("seq"), out_specs=P("seq"))(q, k, v)

"""Expected: fails traceable
Hint: a Python `if`

The ring runs under its own jax.jit, and the function then checks the result for NaN with a
Python if. Called eagerly that works, but a Python if cannot branch on a traced array's value.
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
        running_max = jnp.full(q.shape[:1], -jnp.inf)
        running_sum = jnp.zeros(q.shape[:1])
        weighted = jnp.zeros_like(q)
        for step in range(devices):
            scores = (q @ k.T) * scale
            new_max = jnp.maximum(running_max, scores.max(axis=1))
            rescale = jnp.exp(running_max - new_max)
            p = jnp.exp(scores - new_max[:, None])
            running_sum = running_sum * rescale + p.sum(axis=1)
            weighted = weighted * rescale[:, None] + p @ v
            running_max = new_max
            if step < devices - 1:
                k, v = jax.lax.ppermute((k, v), "seq", to_next)
        return weighted / running_sum[:, None]

    split = NamedSharding(mesh, P("seq"))
    q, k, v = (jax.device_put(a, split) for a in (q, k, v))
    ring = jax.jit(jax.shard_map(per_device, mesh=mesh, in_specs=P("seq"), out_specs=P("seq")))
    out = ring(q, k, v)
    if jnp.isnan(out).any():
        raise ValueError("the ring produced NaN")
    return out

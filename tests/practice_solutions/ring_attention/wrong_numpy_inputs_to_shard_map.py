"""Expected: fails explicit_mesh
Hint: place it first with jax.device_put

q, k and v go into the shard_map as the NumPy arrays they arrive as. On Auto axes shard_map
splits them itself; on Explicit axes it refuses inputs not already laid out as P('seq').
"""

import jax
import jax.numpy as jnp
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

    return jax.shard_map(per_device, mesh=mesh, in_specs=P("seq"), out_specs=P("seq"))(q, k, v)

"""Expected: fails traceable
Hint: used as a Python number

The number of experts is read from the data with int(experts.max()) + 1. That works on a NumPy
array, but a traced array has no value to convert, so the function cannot be traced.
"""

import jax
import jax.numpy as jnp
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P


def moe_dispatch(tokens, experts, weights, *, mesh, capacity):
    n = int(experts.max()) + 1

    def per_device(tokens, experts, own_weight):
        chosen = jax.nn.one_hot(experts, n, dtype=jnp.int32)
        # A token's position among this device's tokens for the same expert: 0, 1, 2, ...
        slot = (jnp.cumsum(chosen, axis=0) * chosen).sum(axis=1) - 1
        kept = slot < capacity
        outgoing = jnp.zeros((n, capacity, tokens.shape[1]), tokens.dtype)
        outgoing = outgoing.at[experts, slot].set(tokens, mode="drop")
        received = jax.lax.all_to_all(outgoing, "expert", 0, 0, tiled=True)
        processed = jnp.tanh(received @ own_weight[0])
        returned = jax.lax.all_to_all(processed, "expert", 0, 0, tiled=True)
        combined = returned[experts, jnp.minimum(slot, capacity - 1)]
        return jnp.where(kept[:, None], combined, 0.0)

    def place(value):
        return jax.device_put(value, NamedSharding(mesh, P("expert")))

    layer = jax.shard_map(per_device, mesh=mesh, in_specs=P("expert"), out_specs=P("expert"))
    return layer(place(tokens), place(experts), place(weights))

"""Expected: fails explicit_mesh
Hint: place it first with jax.device_put

The NumPy inputs are handed to the shard_map as they are. Auto axes split them quietly, but on
Explicit axes shard_map refuses inputs that are not already laid out as P('expert').
"""

import jax
import jax.numpy as jnp
from jax.sharding import PartitionSpec as P


def moe_dispatch(tokens, experts, weights, *, mesh, capacity):
    n = mesh.shape["expert"]

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

    layer = jax.shard_map(per_device, mesh=mesh, in_specs=P("expert"), out_specs=P("expert"))
    return layer(tokens, experts, weights)

"""Expected: fails all_to_all

Tokens never travel: every device receives all of the experts' weights and applies each of its
tokens' experts itself. The numbers are right, but no all_to_all dispatches anything.
"""

import jax
import jax.numpy as jnp
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P


def moe_dispatch(tokens, experts, weights, *, mesh, capacity):
    n = mesh.shape["expert"]

    def per_device(tokens, experts, all_weights):
        chosen = jax.nn.one_hot(experts, n, dtype=jnp.int32)
        # A token's position among this device's tokens for the same expert: 0, 1, 2, ...
        slot = (jnp.cumsum(chosen, axis=0) * chosen).sum(axis=1) - 1
        kept = slot < capacity
        processed = jnp.tanh(jnp.einsum("td,tde->te", tokens, all_weights[experts]))
        return jnp.where(kept[:, None], processed, 0.0)

    def place(value, spec):
        return jax.device_put(value, NamedSharding(mesh, spec))

    layer = jax.shard_map(
        per_device, mesh=mesh, in_specs=(P("expert"), P("expert"), P()), out_specs=P("expert")
    )
    return layer(place(tokens, P("expert")), place(experts, P("expert")), place(weights, P()))

"""Expected: fails combined
Hint: joined outside the shard_map

Each device's partial sum handed back with out_specs=P('data'), and the total taken outside the
shard_map: the number is right, but no collective combined the devices' sums.
"""

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import Mesh, NamedSharding
from jax.sharding import PartitionSpec as P


def shard_map_psum(x, *, mesh=None):
    mesh = mesh or Mesh(np.array(jax.devices()[:1]), ("data",))
    if len(x) % mesh.shape["data"]:
        raise ValueError(f"{len(x)} values do not divide over 'data': pad x with zeros")
    x = jax.device_put(x, NamedSharding(mesh, P("data")))

    def partial_sum(block):
        return jnp.sum(block, keepdims=True)

    partials = jax.shard_map(partial_sum, mesh=mesh, in_specs=P("data"), out_specs=P("data"))(x)
    return jnp.sum(partials)

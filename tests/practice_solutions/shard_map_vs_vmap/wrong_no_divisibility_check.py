"""Expected: fails uneven

Never checks that the rows divide over 'data', so on uneven input the error comes from inside
JAX instead of a ValueError of its own that says how to pad.
"""

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import Mesh, NamedSharding
from jax.sharding import PartitionSpec as P


def shard_map_vs_vmap(x, *, mesh=None):
    mesh = mesh or Mesh(np.array(jax.devices()[:1]), ("data",))
    f = jax.vmap(lambda r: jnp.sum(r**2))
    xs = jax.device_put(x, NamedSharding(mesh, P("data")))
    sharded = jax.shard_map(f, mesh=mesh, in_specs=P("data"), out_specs=P("data"))(xs)
    return jnp.stack([sharded, f(x)])

"""Expected: fails result
Hint: stack along axis 0, not 1
"""

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import Mesh, NamedSharding
from jax.sharding import PartitionSpec as P


def shard_map_vs_vmap(x, *, mesh=None):
    mesh = mesh or Mesh(np.array(jax.devices()[:1]), ("data",))
    if x.shape[0] % mesh.shape["data"]:
        raise ValueError("pad x")
    f = jax.vmap(lambda r: jnp.sum(r**2))
    xs = jax.device_put(x, NamedSharding(mesh, P("data")))
    sharded = jax.shard_map(f, mesh=mesh, in_specs=P("data"), out_specs=P("data"))(xs)
    return jnp.stack([sharded, f(xs)], axis=1)

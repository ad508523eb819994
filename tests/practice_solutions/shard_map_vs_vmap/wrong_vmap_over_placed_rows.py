"""Expected: fails blocks

Places x split over 'data' and calls the vmapped function on it, trusting the placement to
make it a shard_map: the numbers are right, but no shard_map ever hands a device its rows.
"""

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import Mesh, NamedSharding
from jax.sharding import PartitionSpec as P


def shard_map_vs_vmap(x, *, mesh=None):
    mesh = mesh or Mesh(np.array(jax.devices()[:1]), ("data",))
    if x.shape[0] % mesh.shape["data"]:
        raise ValueError("pad the rows of x to a multiple of the device count")
    f = jax.vmap(lambda r: jnp.sum(r**2))
    xs = jax.device_put(x, NamedSharding(mesh, P("data")))
    return jnp.stack([f(xs), f(x)])

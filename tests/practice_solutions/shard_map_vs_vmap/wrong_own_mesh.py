"""Expected: fails given_mesh

Only reads the size of the mesh it is given and builds its own over the first devices, so on
a mesh of the last half of the devices the shard_map runs elsewhere.
"""

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import Mesh, NamedSharding
from jax.sharding import PartitionSpec as P


def shard_map_vs_vmap(x, *, mesh=None):
    n = mesh.shape["data"] if mesh is not None else 1
    mesh = Mesh(np.array(jax.devices()[:n]), ("data",))
    if x.shape[0] % n:
        raise ValueError("pad the rows of x to a multiple of the device count")
    f = jax.vmap(lambda r: jnp.sum(r**2))
    xs = jax.device_put(x, NamedSharding(mesh, P("data")))
    sharded = jax.shard_map(f, mesh=mesh, in_specs=P("data"), out_specs=P("data"))(xs)
    return jnp.stack([sharded, f(xs)])

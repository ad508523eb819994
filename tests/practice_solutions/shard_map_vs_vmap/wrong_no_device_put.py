"""Expected: fails explicit_mesh

Passes the NumPy input to the shard_map as it came: that works on Auto axes, but on Explicit
axes shard_map wants x already laid out as P('data').
"""

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import Mesh
from jax.sharding import PartitionSpec as P


def shard_map_vs_vmap(x, *, mesh=None):
    mesh = mesh or Mesh(np.array(jax.devices()[:1]), ("data",))
    if x.shape[0] % mesh.shape["data"]:
        raise ValueError("pad the rows of x to a multiple of the device count")
    f = jax.vmap(lambda r: jnp.sum(r**2))
    sharded = jax.shard_map(f, mesh=mesh, in_specs=P("data"), out_specs=P("data"))(x)
    return jnp.stack([sharded, f(x)])

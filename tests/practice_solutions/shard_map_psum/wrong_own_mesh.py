"""Expected: fails given_mesh

Builds a fresh mesh over the first devices instead of using the mesh argument: same size, same
total, but on a mesh over the last half of the devices the sum runs on the wrong ones.
"""

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import Mesh, NamedSharding
from jax.sharding import PartitionSpec as P


def shard_map_psum(x, *, mesh=None):
    n = mesh.shape["data"] if mesh is not None else 1
    mesh = Mesh(np.array(jax.devices()[:n]), ("data",))
    if len(x) % n:
        raise ValueError("pad x with zeros to a multiple of the device count")

    def body(b):
        return jax.lax.psum(jnp.sum(b), "data")

    x = jax.device_put(x, NamedSharding(mesh, P("data")))
    return jax.shard_map(body, mesh=mesh, in_specs=P("data"), out_specs=P())(x)

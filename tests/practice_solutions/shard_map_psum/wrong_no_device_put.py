"""Expected: fails explicit_mesh

Hands the NumPy input straight to the shard_map without placing it on the mesh first: fine on
Auto axes, but on Explicit axes shard_map refuses an input not already laid out as P('data').
"""

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import Mesh
from jax.sharding import PartitionSpec as P


def shard_map_psum(x, *, mesh=None):
    mesh = mesh or Mesh(np.array(jax.devices()[:1]), ("data",))
    if len(x) % mesh.shape["data"]:
        raise ValueError("pad x with zeros to a multiple of the device count")

    def body(b):
        return jax.lax.psum(jnp.sum(b), "data")

    return jax.shard_map(body, mesh=mesh, in_specs=P("data"), out_specs=P())(x)

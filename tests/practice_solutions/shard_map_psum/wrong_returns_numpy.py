"""Expected: fails layout

Right total, but it hands it back as a NumPy number with np.asarray, so it is no longer an
array on the mesh's devices (and np.asarray cannot run on a traced value either).
"""

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import Mesh, NamedSharding
from jax.sharding import PartitionSpec as P


def shard_map_psum(x, *, mesh=None):
    mesh = mesh or Mesh(np.array(jax.devices()[:1]), ("data",))
    if len(x) % mesh.shape["data"]:
        raise ValueError("pad x with zeros to a multiple of the device count")

    def body(b):
        return jax.lax.psum(jnp.sum(b), "data")

    x = jax.device_put(x, NamedSharding(mesh, P("data")))
    total = jax.shard_map(body, mesh=mesh, in_specs=P("data"), out_specs=P())(x)
    return np.asarray(total)

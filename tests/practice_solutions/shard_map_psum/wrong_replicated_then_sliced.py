"""Expected: fails blocks

Gives every device all of x (in_specs=P()) and has each slice out its own part by axis_index:
the total is right, but each device received the whole vector, not only its block.
"""

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import Mesh, NamedSharding
from jax.sharding import PartitionSpec as P


def shard_map_psum(x, *, mesh=None):
    mesh = mesh or Mesh(np.array(jax.devices()[:1]), ("data",))
    n = mesh.shape["data"]
    if len(x) % n:
        raise ValueError("pad x with zeros to a multiple of the device count")
    size = len(x) // n

    def body(whole):
        mine = jax.lax.dynamic_slice(whole, (jax.lax.axis_index("data") * size,), (size,))
        return jax.lax.psum(jnp.sum(mine), "data")

    x = jax.device_put(x, NamedSharding(mesh, P()))
    return jax.shard_map(body, mesh=mesh, in_specs=P(), out_specs=P())(x)

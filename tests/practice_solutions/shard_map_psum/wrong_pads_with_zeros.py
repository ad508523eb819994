"""Expected: fails uneven

Pads x with zeros when it does not divide over the devices: the total is unchanged, but the
statement asks to refuse such input with a ValueError that says how to pad.
"""

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import Mesh, NamedSharding
from jax.sharding import PartitionSpec as P


def shard_map_psum(x, *, mesh=None):
    mesh = mesh or Mesh(np.array(jax.devices()[:1]), ("data",))
    x = jnp.pad(jnp.asarray(x), (0, -len(x) % mesh.shape["data"]))

    def body(b):
        return jax.lax.psum(jnp.sum(b), "data")

    x = jax.device_put(x, NamedSharding(mesh, P("data")))
    return jax.shard_map(body, mesh=mesh, in_specs=P("data"), out_specs=P())(x)

"""Expected: fails traceable

Guards against NaN input with a Python if on jnp.isnan(x).any(): fine when called eagerly, but
a traced value has no True or False, so jax.make_jaxpr cannot trace it.
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
    if jnp.isnan(x).any():
        raise ValueError("x has NaN values")
    f = jax.vmap(lambda r: jnp.sum(r**2))
    xs = jax.device_put(x, NamedSharding(mesh, P("data")))
    sharded = jax.shard_map(f, mesh=mesh, in_specs=P("data"), out_specs=P("data"))(xs)
    return jnp.stack([sharded, f(xs)])

"""Expected: fails traceable

Checks its answer against x.sum() with float(), which works when called eagerly but not on the
traced values jax.make_jaxpr passes in.
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

    xs = jax.device_put(x, NamedSharding(mesh, P("data")))
    total = jax.shard_map(body, mesh=mesh, in_specs=P("data"), out_specs=P())(xs)
    if abs(float(total) - float(jnp.sum(x))) > 1e-3:
        raise RuntimeError("the psum disagrees with x.sum()")
    return total

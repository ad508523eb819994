"""Expected: pass

jax.reshard instead of device_put, and the row function inline.
"""

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import Mesh, NamedSharding
from jax.sharding import PartitionSpec as P


def shard_map_vs_vmap(x, *, mesh=None):
    mesh = mesh if mesh is not None else Mesh(np.array(jax.devices()[:1]), ("data",))
    if x.shape[0] % mesh.shape["data"]:
        raise ValueError("pad the rows of x to a multiple of the device count")
    rows = jax.device_put(jnp.asarray(x), NamedSharding(mesh, P("data")))
    per_row = jax.vmap(lambda r: (r * r).sum())
    sharded = jax.shard_map(per_row, mesh=mesh, in_specs=P("data"), out_specs=P("data"))(rows)
    return jnp.stack([sharded, per_row(rows)])

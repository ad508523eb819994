"""Expected: fails given_mesh

Builds its own mesh of the same shape over jax.devices(), with the axis names 'rows' and
'cols' from its notes, instead of using the mesh argument. The numbers and layout come out
right, but the shard_map does not run on the mesh it was given.
"""

import jax
import numpy as np
from jax.sharding import Mesh, NamedSharding
from jax.sharding import PartitionSpec as P


def matmul_2d(x, w, *, mesh):
    grid = np.array(jax.devices()).reshape(mesh.devices.shape)
    mine = Mesh(grid, ("rows", "cols"))

    def body(x_block, w_rows):
        return jax.lax.psum(x_block @ w_rows, "cols")

    x = jax.device_put(x, NamedSharding(mine, P("rows", "cols")))
    w = jax.device_put(w, NamedSharding(mine, P("cols", None)))
    f = jax.shard_map(
        body, mesh=mine, in_specs=(P("rows", "cols"), P("cols", None)), out_specs=P("rows", None)
    )
    return f(x, w)

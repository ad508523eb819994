"""Expected: fails blocks

Splits only the batch: each device gets whole rows of x and all of w, and no psum is needed.
The numbers are right, but the contraction is never split over 'model', so every device in a
row of the mesh does the same work.
"""

import jax
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P


def matmul_2d(x, w, *, mesh):
    def body(x_rows, w):
        return x_rows @ w

    x = jax.device_put(x, NamedSharding(mesh, P("data", None)))
    w = jax.device_put(w, NamedSharding(mesh, P()))
    f = jax.shard_map(body, mesh=mesh, in_specs=(P("data", None), P()), out_specs=P("data", None))
    return f(x, w)

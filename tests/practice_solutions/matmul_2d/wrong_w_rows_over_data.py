"""Expected: fails result
Hint: the blocks of x and w do not line up

Splits the rows of w over 'data' while the columns of x go over 'model', so a device's block
of x and its rows of w have different lengths and cannot be multiplied.
"""

import jax
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P


def matmul_2d(x, w, *, mesh):
    def body(x_block, w_rows):
        return jax.lax.psum(x_block @ w_rows, "model")

    x = jax.device_put(x, NamedSharding(mesh, P("data", "model")))
    w = jax.device_put(w, NamedSharding(mesh, P("data", None)))
    f = jax.shard_map(
        body, mesh=mesh, in_specs=(P("data", "model"), P("data", None)), out_specs=P("data", None)
    )
    return f(x, w)

"""Expected: fails result

Written for a 2x2 mesh: the block height of w is hard-coded as half its rows.
"""

import jax
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P


def matmul_2d(x, w, *, mesh):
    rows_per_block = w.shape[0] // 2

    def body(x_block, w_all):
        start = jax.lax.axis_index("model") * rows_per_block
        w_rows = jax.lax.dynamic_slice_in_dim(w_all, start, x_block.shape[1], axis=0)
        return jax.lax.psum(x_block @ w_rows, "model")

    x = jax.device_put(x, NamedSharding(mesh, P("data", "model")))
    w = jax.device_put(w, NamedSharding(mesh, P()))
    f = jax.shard_map(
        body, mesh=mesh, in_specs=(P("data", "model"), P()), out_specs=P("data", None)
    )
    return f(x, w)

"""Expected: pass

Slices w inside the body with axis_index and the axis size read from the mesh.
"""

import jax
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P


def matmul_2d(x, w, *, mesh):
    columns = mesh.shape["model"]
    rows_per_block = w.shape[0] // columns

    def body(x_block, w_all):
        start = jax.lax.axis_index("model") * rows_per_block
        w_rows = jax.lax.dynamic_slice_in_dim(w_all, start, rows_per_block, axis=0)
        return jax.lax.psum(x_block @ w_rows, "model")

    x = jax.device_put(x, NamedSharding(mesh, P("data", "model")))
    w = jax.device_put(w, NamedSharding(mesh, P()))
    f = jax.shard_map(
        body, mesh=mesh, in_specs=(P("data", "model"), P()), out_specs=P("data", None)
    )
    return f(x, w)

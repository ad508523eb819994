"""Expected: fails explicit_mesh

Hands the NumPy inputs straight to the shard_map. On a mesh with Auto axes shard_map splits
them itself; on one with Explicit axes it wants them already laid out as in_specs says.
"""

import jax
from jax.sharding import PartitionSpec as P


def matmul_2d(x, w, *, mesh):
    def body(x_block, w_rows):
        return jax.lax.psum(x_block @ w_rows, "model")

    f = jax.shard_map(
        body, mesh=mesh, in_specs=(P("data", "model"), P("model", None)), out_specs=P("data", None)
    )
    return f(x, w)

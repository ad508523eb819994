"""Expected: fails layout

Lays the product out whole on every device (P()) before returning it. The numbers are right,
but the statement asks for the rows split over 'data'.
"""

import jax
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P


def matmul_2d(x, w, *, mesh):
    def body(x_block, w_rows):
        return jax.lax.psum(x_block @ w_rows, "model")

    x = jax.device_put(x, NamedSharding(mesh, P("data", "model")))
    w = jax.device_put(w, NamedSharding(mesh, P("model", None)))
    f = jax.shard_map(
        body, mesh=mesh, in_specs=(P("data", "model"), P("model", None)), out_specs=P("data", None)
    )
    return jax.device_put(f(x, w), NamedSharding(mesh, P()))

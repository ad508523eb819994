"""Expected: fails result
Hint: psum over 'model', the axis the contraction is split over
"""

import jax
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P


def matmul_2d(x, w, *, mesh):
    def body(xb, wb):
        return jax.lax.psum(xb @ wb, "data")

    x = jax.device_put(x, NamedSharding(mesh, P("data", "model")))
    w = jax.device_put(w, NamedSharding(mesh, P("model", None)))
    f = jax.shard_map(
        body, mesh=mesh, in_specs=(P("data", "model"), P("model", None)), out_specs=P("data", None)
    )
    return f(x, w)

"""Expected: fails ppermute_only

Right numbers from the built-in collective; the problem is to build it from ppermute.
"""

import jax
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P


def ring_all_reduce(x, *, mesh):
    def body(row):
        return jax.lax.psum(row, "data")

    x = jax.device_put(x, NamedSharding(mesh, P("data")))
    return jax.shard_map(body, mesh=mesh, in_specs=P("data"), out_specs=P("data"))(x)

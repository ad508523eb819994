"""Expected: fails layout

b left whole, so the product is split by rows only.
"""

import jax
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P


def no_traffic_matmul(a, b, *, mesh):
    return jax.device_put(a, NamedSharding(mesh, P("x", None))) @ jax.device_put(
        b, NamedSharding(mesh, P())
    )

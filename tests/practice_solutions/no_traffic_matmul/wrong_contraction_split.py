"""Expected: fails own_blocks

The contraction split over 'y' on both sides and the sum asked for as P('x', 'y'): the layout is
right, but the partial sums must be added up across 'y'.
"""

import jax
import jax.numpy as jnp
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P


def no_traffic_matmul(a, b, *, mesh):
    a = jax.device_put(a, NamedSharding(mesh, P("x", "y")))
    b = jax.device_put(b, NamedSharding(mesh, P("y", None)))
    return jnp.matmul(a, b, out_sharding=NamedSharding(mesh, P("x", "y")))

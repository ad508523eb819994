"""Expected: fails result

The einsum's output written "ki": the product comes back transposed, (K, I).
"""

import jax
import jax.numpy as jnp
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P


def no_traffic_matmul(a, b, *, mesh):
    rows = jax.device_put(a, NamedSharding(mesh, P("x", None)))
    columns = jax.device_put(b, NamedSharding(mesh, P(None, "y")))
    return jnp.einsum("ij,jk->ki", rows, columns)

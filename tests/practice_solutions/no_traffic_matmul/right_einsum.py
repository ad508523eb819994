"""Expected: pass

The same layouts through einsum, with the product's layout named though JAX would infer it.
"""

import jax
import jax.numpy as jnp
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P


def no_traffic_matmul(a, b, *, mesh):
    rows = jax.device_put(a, NamedSharding(mesh, P("x")))
    columns = jax.device_put(b, NamedSharding(mesh, P(None, "y")))
    return jnp.einsum("ij,jk->ik", rows, columns, out_sharding=NamedSharding(mesh, P("x", "y")))

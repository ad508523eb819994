"""Expected: fails result
Hint: a bare P(...) means nothing without a mesh
"""

import jax
import jax.numpy as jnp
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P


def explicit_matmul(x, w, *, mesh):
    x = jax.device_put(x, NamedSharding(mesh, P("data", "model")))
    w = jax.device_put(w, NamedSharding(mesh, P("model", None)))
    return jnp.matmul(x, w, out_sharding=P("data", "model"))

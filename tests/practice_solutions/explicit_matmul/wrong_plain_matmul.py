"""Expected: fails result
Hint: JAX will not guess its layout
"""

import jax
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P


def explicit_matmul(x, w, *, mesh):
    x = jax.device_put(x, NamedSharding(mesh, P("data", "model")))
    w = jax.device_put(w, NamedSharding(mesh, P("model", None)))
    return x @ w

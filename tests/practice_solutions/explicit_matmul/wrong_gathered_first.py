"""Expected: fails layout
Hint: every device holds whole rows of the result
"""

import jax
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P


def explicit_matmul(x, w, *, mesh):
    x = jax.device_put(x, NamedSharding(mesh, P("data", "model")))
    w = jax.device_put(w, NamedSharding(mesh, P("model", None)))
    # Gather x's columns so the contraction is no longer split.
    x_rows = jax.sharding.reshard(x, NamedSharding(mesh, P("data", None)))
    return x_rows @ w

"""Expected: fails on_the_mesh
Hint: no matrix product in your traced program is

x placed by rows only and w by columns only, so the contraction is never split: the product
comes out laid out as asked with no out_sharding at all, and the problem's split contraction
is never met.
"""

import jax
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P


def explicit_matmul(x, w, *, mesh):
    x = jax.device_put(x, NamedSharding(mesh, P("data", None)))
    w = jax.device_put(w, NamedSharding(mesh, P(None, "model")))
    return x @ w

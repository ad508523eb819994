"""Expected: fails own_blocks
Hint: every device computes the whole product

Both operands whole on every device, the product then cut to the layout asked for: no
collective, but every device multiplies everything.
"""

import jax
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P


def no_traffic_matmul(a, b, *, mesh):
    whole = NamedSharding(mesh, P())
    product = jax.device_put(a, whole) @ jax.device_put(b, whole)
    return jax.reshard(product, NamedSharding(mesh, P("x", "y")))

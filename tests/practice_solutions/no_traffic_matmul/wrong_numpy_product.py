"""Expected: fails jit
Hint: np.asarray (or another NumPy call) met a traced array

The product in NumPy: under jax.jit, NumPy meets traced values.
"""

import jax
import numpy as np
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P


def no_traffic_matmul(a, b, *, mesh):
    return jax.device_put(np.asarray(a) @ np.asarray(b), NamedSharding(mesh, P("x", "y")))

"""Expected: fails on_the_mesh
Hint: computed outside JAX (in NumPy, say)

The product computed in NumPy and only then placed in the layout asked for: the numbers and the
layout come back right, but no device multiplied anything.
"""

import jax
import numpy as np
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P


def explicit_matmul(x, w, *, mesh):
    return jax.device_put(np.asarray(x) @ np.asarray(w), NamedSharding(mesh, P("data", "model")))

"""Expected: fails jit

The numbers in NumPy, each result placed on the mesh at the end: the layouts come back right,
but nothing was computed on the mesh, and under jax.jit NumPy meets traced values.
"""

import jax
import numpy as np
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P


def explicit_layers(x, w_in, w_out, *, mesh):
    hidden = np.maximum(np.asarray(x) @ np.asarray(w_in), 0)
    out = hidden @ np.asarray(w_out)
    split = NamedSharding(mesh, P("data", "model"))
    return {
        "hidden": jax.device_put(hidden, split),
        "out": jax.device_put(out, split),
        "residual": jax.device_put(np.asarray(x) + out, NamedSharding(mesh, P("data", None))),
    }

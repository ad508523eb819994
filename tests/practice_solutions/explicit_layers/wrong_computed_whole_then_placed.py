"""Expected: fails on_the_mesh

Every number computed whole, off the plan, and each result placed at the end: the layouts come
back right, but no device ever computed only its own block.
"""

import jax
import jax.numpy as jnp
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P


def explicit_layers(x, w_in, w_out, *, mesh):
    hidden = jax.nn.relu(jnp.asarray(x) @ w_in)
    out = hidden @ w_out
    split = NamedSharding(mesh, P("data", "model"))
    return {
        "hidden": jax.device_put(hidden, split),
        "out": jax.device_put(out, split),
        "residual": jax.device_put(x + out, NamedSharding(mesh, P("data", None))),
    }

"""Expected: pass"""

import jax
import jax.numpy as jnp
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P


def explicit_matmul(x, w, *, mesh):
    def on_mesh(*spec):
        return NamedSharding(mesh, P(*spec))

    x = jax.device_put(x, on_mesh("data", "model"))
    w = jax.device_put(w, on_mesh("model", None))
    return jnp.einsum("bd,dh->bh", x, w, out_sharding=on_mesh("data", "model"))

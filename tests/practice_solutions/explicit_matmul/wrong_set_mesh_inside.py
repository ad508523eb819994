"""Expected: fails traceable
Hint: jax.set_mesh cannot be entered while tracing

The layout asked for under jax.set_mesh with bare specs: the numbers and layout are right, but
the checker cannot read a program that enters set_mesh while JAX traces it.
"""

import jax
import jax.numpy as jnp
from jax.sharding import PartitionSpec as P


def explicit_matmul(x, w, *, mesh):
    with jax.set_mesh(mesh):
        x = jax.device_put(x, P("data", "model"))
        w = jax.device_put(w, P("model", None))
        return jnp.einsum("bd,dh->bh", x, w, out_sharding=P("data", "model"))

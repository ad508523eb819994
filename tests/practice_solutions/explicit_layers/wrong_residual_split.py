"""Expected: fails layouts
Hint: takes the finer layout
"""

import jax
import jax.numpy as jnp
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P


def explicit_layers(x, w_in, w_out, *, mesh):
    x = jax.device_put(x, NamedSharding(mesh, P("data", None)))
    w_in = jax.device_put(w_in, NamedSharding(mesh, P(None, "model")))
    w_out = jax.device_put(w_out, NamedSharding(mesh, P("model", None)))
    hidden = jax.nn.relu(x @ w_in)
    out = jnp.matmul(hidden, w_out, out_sharding=NamedSharding(mesh, P("data", "model")))
    return {"hidden": hidden, "out": out, "residual": x + out}

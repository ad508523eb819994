"""Expected: fails layouts
Hint: out holds whole rows on every device
"""

import jax
import jax.numpy as jnp
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P


def explicit_layers(x, w_in, w_out, *, mesh):
    rows = NamedSharding(mesh, P("data", None))
    x = jax.device_put(x, rows)
    w_in = jax.device_put(w_in, NamedSharding(mesh, P(None, "model")))
    w_out = jax.device_put(w_out, NamedSharding(mesh, P("model", None)))
    hidden = jax.nn.relu(x @ w_in)
    # Whole rows suit the residual, so the product is asked for them.
    out = jnp.matmul(hidden, w_out, out_sharding=rows)
    return {"hidden": hidden, "out": out, "residual": x + out}

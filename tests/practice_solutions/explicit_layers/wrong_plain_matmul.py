"""Expected: fails result
Hint: will not guess its layout
"""

import jax
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P


def explicit_layers(x, w_in, w_out, *, mesh):
    x = jax.device_put(x, NamedSharding(mesh, P("data", None)))
    w_in = jax.device_put(w_in, NamedSharding(mesh, P(None, "model")))
    w_out = jax.device_put(w_out, NamedSharding(mesh, P("model", None)))
    hidden = jax.nn.relu(x @ w_in)
    out = hidden @ w_out
    return {"hidden": hidden, "out": out, "residual": x + out}

"""Expected: pass

out made with whole rows on every device and split afterwards: the statement asks for the
layouts, not for how the product reaches them, so this passes too.
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
    whole_rows = jnp.matmul(hidden, w_out, out_sharding=rows)
    out = jax.reshard(whole_rows, NamedSharding(mesh, P("data", "model")))
    return {"hidden": hidden, "out": out, "residual": x + whole_rows}

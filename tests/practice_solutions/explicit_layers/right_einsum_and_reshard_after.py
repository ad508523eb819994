"""Expected: pass

einsum takes out_sharding too, and the residual may be resharded after the sum as well as
before it.
"""

import jax
import jax.numpy as jnp
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P


def explicit_layers(x, w_in, w_out, *, mesh):
    def layout(*spec):
        return NamedSharding(mesh, P(*spec))

    x = jax.device_put(x, layout("data", None))
    w_in = jax.device_put(w_in, layout(None, "model"))
    w_out = jax.device_put(w_out, layout("model", None))
    hidden = jnp.maximum(jnp.einsum("bd,df->bf", x, w_in), 0)
    out = jnp.einsum("bf,fd->bd", hidden, w_out, out_sharding=layout("data", "model"))
    residual = jax.reshard(x + out, layout("data", None))
    return {"hidden": hidden, "out": out, "residual": residual}

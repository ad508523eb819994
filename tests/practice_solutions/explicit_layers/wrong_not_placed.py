"""Expected: fails layouts
Hint: nothing carries a layout
"""

import jax
import jax.numpy as jnp


def explicit_layers(x, w_in, w_out, *, mesh):
    hidden = jax.nn.relu(jnp.asarray(x) @ w_in)
    out = hidden @ w_out
    return {"hidden": hidden, "out": out, "residual": x + out}

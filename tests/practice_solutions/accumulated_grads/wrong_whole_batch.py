"""Expected: fails microbatches
Hint: more rows than its

One all-reduce, but no microbatches: the gradient of the whole batch at once, so every
activation of the batch exists at the same time.
"""

import jax
import jax.numpy as jnp
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P


def accumulated_grads(params, x, y, *, mesh, microbatches):
    def loss(params, x, y):
        return jnp.mean((jnp.tanh(x @ params["w1"]) @ params["w2"] - y) ** 2)

    def place(value, spec):
        return jax.device_put(value, NamedSharding(mesh, spec))

    params = {name: place(w, P(reduced={"data"})) for name, w in params.items()}
    grads = jax.grad(loss)(params, place(x, P("data")), place(y, P("data")))
    return {name: place(g, P()) for name, g in grads.items()}

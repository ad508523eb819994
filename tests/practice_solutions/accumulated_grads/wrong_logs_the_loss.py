"""Expected: fails traceable
Hint: traced

A log line with float() on a value computed from the arguments: fine when called eagerly,
not when the program is traced.
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
    print(f"loss before: {float(loss(params, x, y)):.4f}")
    xs = place(x.reshape(-1, microbatches, x.shape[1]).swapaxes(0, 1), P(None, "data"))
    ys = place(y.reshape(-1, microbatches, y.shape[1]).swapaxes(0, 1), P(None, "data"))

    def add(total, xy):
        return jax.tree.map(jnp.add, total, jax.grad(loss)(params, *xy)), None

    zeros = {name: place(jnp.zeros(w.shape), P(unreduced={"data"})) for name, w in params.items()}
    total, _ = jax.lax.scan(add, zeros, (xs, ys))
    return {name: place(g, P()) / microbatches for name, g in total.items()}

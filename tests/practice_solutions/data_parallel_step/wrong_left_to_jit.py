"""Expected: fails layout

Writes the step as plain jax.numpy and leaves the rest to jax.jit, never using the mesh. The
numbers are right, but the inputs and the answer sit on one device, not replicated over mesh
(and nothing splits the batch, so split_batch fails too).
"""

import jax
import jax.numpy as jnp


def data_parallel_step(params, x, y, *, mesh, lr):
    def loss(params):
        return jnp.mean((x @ params["w"] + params["b"] - y) ** 2)

    grads = jax.grad(loss)(params)
    return jax.tree.map(lambda p, g: p - lr * g, params, grads)

"""Expected: fails traceable
Hint: jax.set_mesh cannot be entered while tracing

Enters jax.set_mesh(mesh) inside the function so it can write bare specs. That runs when
called eagerly, but jax.set_mesh cannot be entered while the function is traced.
"""

import jax
from jax.sharding import PartitionSpec as P


def matmul_2d(x, w, *, mesh):
    def body(x_block, w_rows):
        return jax.lax.psum(x_block @ w_rows, "model")

    with jax.set_mesh(mesh):
        x = jax.device_put(x, P("data", "model"))
        w = jax.device_put(w, P("model", None))
        f = jax.shard_map(
            body, in_specs=(P("data", "model"), P("model", None)), out_specs=P("data", None)
        )
        return f(x, w)

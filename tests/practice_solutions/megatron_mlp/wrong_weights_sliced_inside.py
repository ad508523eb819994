"""Expected: fails split_weights

Gives every device both whole weights (in_specs=P()) and has each cut out its own columns of
w1 and rows of w2 with axis_index. The numbers are right, but every device holds all of both.
"""

import jax
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P


def megatron_mlp(x, w1, w2, *, mesh):
    share = w1.shape[1] // mesh.shape["model"]

    def body(x, w1, w2):
        start = jax.lax.axis_index("model") * share
        a = jax.lax.dynamic_slice_in_dim(w1, start, share, axis=1)
        b = jax.lax.dynamic_slice_in_dim(w2, start, share, axis=0)
        return jax.lax.psum(jax.nn.relu(x @ a) @ b, "model")

    x, w1, w2 = jax.device_put((x, w1, w2), NamedSharding(mesh, P()))
    f = jax.shard_map(body, mesh=mesh, in_specs=(P(), P(), P()), out_specs=P())
    return f(x, w1, w2)

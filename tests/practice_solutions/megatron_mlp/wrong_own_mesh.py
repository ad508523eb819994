"""Expected: fails given_mesh

Builds its own mesh over the first devices instead of using the mesh argument. When mesh
spans only some of the devices, the MLP runs, and its answer lives, on the wrong ones (so
layout fails there too).
"""

import jax
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P


def megatron_mlp(x, w1, w2, *, mesh):
    n = mesh.shape["model"]
    mine = jax.make_mesh((n,), ("model",), devices=jax.devices()[:n])

    def body(x, a, b):
        return jax.lax.psum(jax.nn.relu(x @ a) @ b, "model")

    def put(v, s):
        return jax.device_put(v, NamedSharding(mine, s))

    f = jax.shard_map(
        body, mesh=mine, in_specs=(P(), P(None, "model"), P("model", None)), out_specs=P()
    )
    return f(put(x, P()), put(w1, P(None, "model")), put(w2, P("model", None)))

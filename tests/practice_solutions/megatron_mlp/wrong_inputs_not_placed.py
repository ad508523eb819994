"""Expected: fails explicit_mesh

Hands the NumPy inputs straight to the shard_map. On a mesh with Auto axes shard_map splits
them itself; on one with Explicit axes it wants them already laid out as in_specs says.
"""

import jax
from jax.sharding import PartitionSpec as P


def megatron_mlp(x, w1, w2, *, mesh):
    def body(x, a, b):
        return jax.lax.psum(jax.nn.relu(x @ a) @ b, "model")

    f = jax.shard_map(
        body, mesh=mesh, in_specs=(P(), P(None, "model"), P("model", None)), out_specs=P()
    )
    return f(x, w1, w2)

"""Expected: fails one_psum

Returns each device's partial output stacked on a new leading axis and adds them up outside
the shard_map. The numbers are right, but no psum adds the partial outputs across devices.
"""

import jax
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P


def megatron_mlp(x, w1, w2, *, mesh):
    def body(x, a, b):
        return (jax.nn.relu(x @ a) @ b)[None]

    def put(v, s):
        return jax.device_put(v, NamedSharding(mesh, s))

    f = jax.shard_map(
        body, mesh=mesh, in_specs=(P(), P(None, "model"), P("model", None)), out_specs=P("model")
    )
    partials = f(put(x, P()), put(w1, P(None, "model")), put(w2, P("model", None)))
    return partials.sum(axis=0)

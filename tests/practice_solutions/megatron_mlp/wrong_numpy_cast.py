"""Expected: fails traceable

Makes sure the inputs are float32 with np.asarray before placing them. That works on the
NumPy arrays of an eager call, but np.asarray cannot turn a traced array into NumPy, so
jax.make_jaxpr cannot read the program.
"""

import jax
import numpy as np
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P


def megatron_mlp(x, w1, w2, *, mesh):
    x, w1, w2 = (np.asarray(v, np.float32) for v in (x, w1, w2))

    def body(x, a, b):
        return jax.lax.psum(jax.nn.relu(x @ a) @ b, "model")

    def put(v, s):
        return jax.device_put(v, NamedSharding(mesh, s))

    f = jax.shard_map(
        body, mesh=mesh, in_specs=(P(), P(None, "model"), P("model", None)), out_specs=P()
    )
    return f(put(x, P()), put(w1, P(None, "model")), put(w2, P("model", None)))

"""Expected: fails layout

Converts the answer with np.asarray before returning it, to hand back a plain array. The
numbers are right, but a NumPy array is not laid out on the mesh (and np.asarray cannot meet a
traced value, so traceable fails too).
"""

import jax
import numpy as np
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P


def megatron_mlp(x, w1, w2, *, mesh):
    def body(x, a, b):
        return jax.lax.psum(jax.nn.relu(x @ a) @ b, "model")

    def put(v, s):
        return jax.device_put(v, NamedSharding(mesh, s))

    f = jax.shard_map(
        body, mesh=mesh, in_specs=(P(), P(None, "model"), P("model", None)), out_specs=P()
    )
    return np.asarray(f(put(x, P()), put(w1, P(None, "model")), put(w2, P("model", None))))

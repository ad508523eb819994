"""Expected: fails result
Hint: only the first of each stage's layers was applied
"""

import jax
import jax.numpy as jnp
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P


def pipeline_forward(x, weights, *, mesh, microbatches):
    S = mesh.shape["stage"]
    mb = x.reshape(microbatches, -1, x.shape[1])

    def body(w, mb):
        w = w[0]  # this stage's layer
        s = jax.lax.axis_index("stage")
        carry = jnp.zeros_like(mb[0])
        out = jnp.zeros_like(mb)
        for t in range(microbatches + S - 1):
            h = jnp.tanh(jnp.where(s == 0, mb[min(t, microbatches - 1)], carry) @ w)
            if t >= S - 1:
                out = out.at[t - S + 1].set(h)
            carry = jax.lax.ppermute(h, "stage", [(i, (i + 1) % S) for i in range(S)])
        return jax.lax.psum(jnp.where(s == S - 1, out, 0), "stage")

    ws = jax.device_put(weights, NamedSharding(mesh, P("stage")))
    mb = jax.device_put(mb, NamedSharding(mesh, P()))
    return jax.shard_map(body, mesh=mesh, in_specs=(P("stage"), P()), out_specs=P())(
        ws, mb
    ).reshape(x.shape)

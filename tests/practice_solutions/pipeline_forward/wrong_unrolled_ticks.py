"""Expected: fails loop

The ticks are a Python loop, so the traced program holds a copy of the tick for each of the
M + S - 1 ticks: right numbers, a program that grows with the number of microbatches.
"""

import jax
import jax.numpy as jnp
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P


def pipeline_forward(x, weights, *, mesh, microbatches):
    S = mesh.shape["stage"]
    forward = [(i, (i + 1) % S) for i in range(S)]
    backward = [(i, (i - 1) % S) for i in range(S)]

    def shift(q):
        return jnp.concatenate([q[1:], jax.lax.ppermute(q[:1], "stage", backward)])

    def body(ws, q):
        s = jax.lax.axis_index("stage")

        def step(t, carry):
            h, q, out = carry
            h = jnp.where(s == 0, q[0], h)
            for w in ws:
                h = jnp.tanh(h @ w)
            q, out = shift(q), shift(out)
            out = out.at[-1].set(jnp.where(s == S - 1, h, out[-1]))
            return jax.lax.ppermute(h, "stage", forward), q, out

        carry = (jnp.zeros_like(q[0]), q, jnp.zeros_like(q))
        for t in range(microbatches + S - 1):
            carry = step(t, carry)
        return carry[2]

    ws = jax.device_put(weights, NamedSharding(mesh, P("stage")))
    q = jax.device_put(x.reshape(microbatches, -1, x.shape[1]), NamedSharding(mesh, P("stage")))
    out = jax.shard_map(body, mesh=mesh, in_specs=(P("stage"), P("stage")), out_specs=P("stage"))
    return out(ws, q).reshape(x.shape)

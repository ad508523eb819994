"""Expected: fails batch_split
Hint: the shard_map's inputs per device are

Every stage receives the whole batch (in_specs P()), and a psum over 'stage' hands the last
stage's outputs to every device, which keeps its own microbatches': the numbers and the layout
are right, but each device held the whole batch and the closing sum moved all of it.
"""

import jax
import jax.numpy as jnp
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P


def pipeline_forward(x, weights, *, mesh, microbatches):
    S = mesh.shape["stage"]
    forward = [(i, (i + 1) % S) for i in range(S)]

    def body(ws, chunks):
        s = jax.lax.axis_index("stage")

        def step(t, carry):
            h, out = carry
            h = jnp.where(s == 0, chunks[jnp.minimum(t, microbatches - 1)], h)
            for w in ws:
                h = jnp.tanh(h @ w)
            done = jnp.maximum(t - (S - 1), 0)
            out = jnp.where(t >= S - 1, out.at[done].set(h), out)
            return jax.lax.ppermute(h, "stage", forward), out

        start = jax.lax.pcast(
            (jnp.zeros(chunks.shape[1:]), jnp.zeros(chunks.shape)), "stage", to="varying"
        )
        _, out = jax.lax.fori_loop(0, microbatches + S - 1, step, start)
        full = jax.lax.psum(jnp.where(s == S - 1, out, 0.0), "stage")
        own = microbatches // S
        return jax.lax.dynamic_slice_in_dim(full, s * own, own)

    ws = jax.device_put(weights, NamedSharding(mesh, P("stage")))
    chunks = jax.device_put(x.reshape(microbatches, -1, x.shape[1]), NamedSharding(mesh, P()))
    out = jax.shard_map(body, mesh=mesh, in_specs=(P("stage"), P()), out_specs=P("stage"))
    return out(ws, chunks).reshape(x.shape)

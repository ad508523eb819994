"""Expected: fails traceable

Runs the ring under its own jax.jit and ends with a Python assert that every row equals
x.sum(axis=0): it holds when called eagerly, but asking a traced comparison for True or False
stops jax.make_jaxpr.
"""

import jax
import jax.numpy as jnp
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P


def ring_all_reduce(x, *, mesh):
    n = mesh.shape["data"]
    right = [(i, (i + 1) % n) for i in range(n)]

    def body(row):
        chunks = row.reshape(n, -1)
        me = jax.lax.axis_index("data")
        for s in range(n - 1):
            out = jnp.take(chunks, (me - s) % n, axis=0)
            chunks = chunks.at[(me - s - 1) % n].add(jax.lax.ppermute(out, "data", right))
        for s in range(n - 1):
            out = jnp.take(chunks, (me + 1 - s) % n, axis=0)
            chunks = chunks.at[(me - s) % n].set(jax.lax.ppermute(out, "data", right))
        return chunks.reshape(1, -1)

    xs = jax.device_put(x, NamedSharding(mesh, P("data")))
    out = jax.jit(jax.shard_map(body, mesh=mesh, in_specs=P("data"), out_specs=P("data")))(xs)
    assert jnp.allclose(out, jnp.sum(x, axis=0), atol=1e-4), "the ring lost a contribution"
    return out

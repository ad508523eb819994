"""Expected: pass

The same single all-reduce written per device: the weights declared varying with pcast, so
each device's gradient stays its own through the loop, and one pmean after it.
"""

import jax
import jax.numpy as jnp
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P


def accumulated_grads(params, x, y, *, mesh, microbatches):
    def loss(params, x, y):
        return jnp.mean((jnp.tanh(x @ params["w1"]) @ params["w2"] - y) ** 2)

    def per_device(params, x, y):
        own = jax.lax.pcast(params, "data", to="varying")
        xs = x.reshape(microbatches, -1, x.shape[1])
        ys = y.reshape(microbatches, -1, y.shape[1])

        def add(total, xy):
            return jax.tree.map(jnp.add, total, jax.grad(loss)(own, *xy)), None

        total, _ = jax.lax.scan(add, jax.tree.map(jnp.zeros_like, own), (xs, ys))
        return jax.lax.pmean(jax.tree.map(lambda g: g / microbatches, total), "data")

    def place(value, spec):
        return jax.device_put(value, NamedSharding(mesh, spec))

    step = jax.shard_map(per_device, mesh=mesh, in_specs=(P(), P("data"), P("data")), out_specs=P())
    return step(place(params, P()), place(x, P("data")), place(y, P("data")))

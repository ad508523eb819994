"""Expected: fails layout

Each stage returns its outputs in its own block and the function slices out the last stage's
block, without gathering it first: the answer stays split over 'stage' instead of the same on
every device (and on Explicit axes the slice is refused outright).
"""

import jax
import jax.numpy as jnp
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P


def pipeline_forward(x, weights, *, mesh, microbatches):
    stages = mesh.shape["stage"]
    size = x.shape[0] // microbatches
    line = [(s, s + 1) for s in range(stages - 1)]

    def stage_fn(layers, x):
        me = jax.lax.axis_index("stage")
        incoming = jnp.zeros((size, x.shape[1]), x.dtype)
        finished = []
        for tick in range(microbatches + stages - 1):
            start = min(tick, microbatches - 1) * size
            h = jnp.where(me == 0, x[start : start + size], incoming)
            for i in range(layers.shape[0]):
                h = jnp.tanh(h @ layers[i])
            if tick >= stages - 1:
                finished.append(h)
            incoming = jax.lax.ppermute(h, "stage", line)
        return jnp.concatenate(finished)

    layers = jax.device_put(weights, NamedSharding(mesh, P("stage")))
    x = jax.device_put(x, NamedSharding(mesh, P()))
    blocks = jax.shard_map(stage_fn, mesh=mesh, in_specs=(P("stage"), P()), out_specs=P("stage"))(
        layers, x
    )
    return blocks[-x.shape[0] :]

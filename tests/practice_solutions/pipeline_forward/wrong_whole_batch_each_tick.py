"""Expected: fails microbatches

The batch is never cut into microbatches: stage 0 takes the whole batch at the first tick and
it walks through the stages in S ticks. The numbers are right, but every matrix product takes
all B rows, so only one stage is ever busy at a time.
"""

import jax
import jax.numpy as jnp
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P


def pipeline_forward(x, weights, *, mesh, microbatches):
    stages = mesh.shape["stage"]
    to_next_stage = [(s, (s + 1) % stages) for s in range(stages)]

    def per_stage(own_layers, x):
        stage = jax.lax.axis_index("stage")
        h = x
        for tick in range(stages):
            for w in own_layers:
                h = jnp.tanh(h @ w)
            if tick < stages - 1:
                h = jax.lax.ppermute(h, "stage", to_next_stage)
        return jax.lax.psum(jnp.where(stage == stages - 1, h, 0.0), "stage")

    weights = jax.device_put(weights, NamedSharding(mesh, P("stage")))
    x = jax.device_put(x, NamedSharding(mesh, P()))
    run = jax.shard_map(per_stage, mesh=mesh, in_specs=(P("stage"), P()), out_specs=P())
    return run(weights, x)

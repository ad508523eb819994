"""Expected: fails stages

Every device receives all of the weights (in_specs P()) and picks out its own stage's layers
by jax.lax.axis_index: the numbers are right, but each device holds every layer.
"""

import jax
import jax.numpy as jnp
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P


def pipeline_forward(x, weights, *, mesh, microbatches):
    stages = mesh.shape["stage"]
    per_stage = weights.shape[0] // stages
    chunks = x.reshape(microbatches, -1, x.shape[-1])
    to_next_stage = [(s, (s + 1) % stages) for s in range(stages)]

    def per_stage_fn(all_layers, chunks):
        stage = jax.lax.axis_index("stage")
        own_layers = jax.lax.dynamic_slice_in_dim(all_layers, stage * per_stage, per_stage)
        held = jnp.zeros_like(chunks[0])
        outputs = jnp.zeros_like(chunks)
        for tick in range(microbatches + stages - 1):
            h = jnp.where(stage == 0, chunks[min(tick, microbatches - 1)], held)
            for i in range(per_stage):
                h = jnp.tanh(h @ own_layers[i])
            if tick >= stages - 1:
                outputs = outputs.at[tick - (stages - 1)].set(h)
            held = jax.lax.ppermute(h, "stage", to_next_stage)
        return jax.lax.psum(jnp.where(stage == stages - 1, outputs, 0.0), "stage")

    weights = jax.device_put(weights, NamedSharding(mesh, P()))
    chunks = jax.device_put(chunks, NamedSharding(mesh, P()))
    run = jax.shard_map(per_stage_fn, mesh=mesh, in_specs=(P(), P()), out_specs=P())
    return run(weights, chunks).reshape(x.shape)

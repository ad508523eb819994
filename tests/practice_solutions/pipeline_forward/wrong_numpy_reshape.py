"""Expected: fails traceable
Hint: use jax.numpy inside the function

The batch is cut into microbatches in NumPy (np.asarray of the input), which works when called
eagerly but not on the traced arrays jax.make_jaxpr passes.
"""

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P


def pipeline_forward(x, weights, *, mesh, microbatches):
    stages = mesh.shape["stage"]
    chunks = np.asarray(x).reshape(microbatches, -1, x.shape[-1])
    to_next_stage = [(s, (s + 1) % stages) for s in range(stages)]

    def apply_own_layers(own_layers, h):
        for w in own_layers:
            h = jnp.tanh(h @ w)
        return h

    def per_stage(own_layers, chunks):
        stage = jax.lax.axis_index("stage")
        held = jnp.zeros_like(chunks[0])
        outputs = jnp.zeros_like(chunks)
        for tick in range(microbatches + stages - 1):
            fresh = chunks[min(tick, microbatches - 1)]
            result = apply_own_layers(own_layers, jnp.where(stage == 0, fresh, held))
            if tick >= stages - 1:
                outputs = outputs.at[tick - (stages - 1)].set(result)
            held = jax.lax.ppermute(result, "stage", to_next_stage)
        # Only the last stage's outputs are finished; a masked sum gives them to every device.
        return jax.lax.psum(jnp.where(stage == stages - 1, outputs, 0.0), "stage")

    weights = jax.device_put(weights, NamedSharding(mesh, P("stage")))
    chunks = jax.device_put(chunks, NamedSharding(mesh, P()))
    run = jax.shard_map(per_stage, mesh=mesh, in_specs=(P("stage"), P()), out_specs=P())
    return run(weights, chunks).reshape(x.shape)

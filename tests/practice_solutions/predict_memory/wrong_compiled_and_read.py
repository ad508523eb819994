"""Expected: fails worked_out
Hint: your function called Traced.lower, Lowered.compile

The bytes read off a compiled step's arguments and a compiled gradient's outputs: right for
every strategy, and no prediction at all.
"""

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P


def predict_memory(strategy, devices, width, hidden):
    axis = "model" if strategy == "tp" else "data"
    mesh = jax.make_mesh((devices,), (axis,), devices=jax.devices()[:devices])
    whole = dict.fromkeys(("w1", "b1", "w2", "b2"), P())
    split = {"w1": P("data", None), "b1": P("data"), "w2": P("data", None), "b2": P("data")}
    tensor = {"w1": P(None, "model"), "b1": P("model"), "w2": P("model", None), "b2": P()}
    params_spec, moments_spec = {
        "dp": (whole, whole),
        "zero1": (whole, split),
        "zero3": (split, split),
        "tp": (tensor, tensor),
    }[strategy]
    shapes = {"w1": (width, hidden), "b1": (hidden,), "w2": (hidden, width), "b2": (width,)}

    def placed(spec):
        return {
            k: jax.ShapeDtypeStruct(shapes[k], jnp.float32, sharding=NamedSharding(mesh, spec[k]))
            for k in shapes
        }

    def per_device(values):
        return sum(
            int(np.prod(v.sharding.shard_shape(v.shape))) * 4 for v in jax.tree.leaves(values)
        )

    def loss(params):
        return sum(jnp.sum(jax.reshard(v, P()) ** 2) for v in params.values())

    with jax.set_mesh(mesh):
        compiled = jax.jit(jax.grad(loss)).lower(placed(params_spec)).compile()
    gradients = sum(
        int(np.prod(s.shard_shape(shapes[k]))) * 4
        for k, s in zip(sorted(shapes), jax.tree.leaves(compiled.output_shardings), strict=True)
    )
    return {
        "parameters": per_device(placed(params_spec)),
        "optimizer_state": 2 * per_device(placed(moments_spec)),
        "gradients": gradients,
    }

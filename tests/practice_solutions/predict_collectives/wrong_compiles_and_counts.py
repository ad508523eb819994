"""Expected: fails worked_out
Hint: called Traced.lower, Lowered.compile

The counts read off the compiled program: right on every mesh, and no prediction at all.
"""

import re

import jax
import jax.numpy as jnp
from jax.sharding import AxisType, NamedSharding
from jax.sharding import PartitionSpec as P

NAMES = ("all-reduce", "all-gather", "reduce-scatter", "all-to-all", "collective-permute")


def predict_collectives(data, model):
    mesh = jax.make_mesh(
        (data, model),
        ("data", "model"),
        axis_types=(AxisType.Auto,) * 2,
        devices=jax.devices()[: data * model],
    )

    def loss(x, w1, w2):
        return jnp.mean((jnp.tanh(x @ w1) @ w2) ** 2)

    shapes = [((16, 8), P("data", None)), ((8, 16), P(None, "model")), ((16, 4), P("model", None))]
    args = [
        jax.ShapeDtypeStruct(shape, jnp.float32, sharding=NamedSharding(mesh, spec))
        for shape, spec in shapes
    ]
    text = jax.jit(loss).lower(*args).compile().as_text()
    found = re.findall(r"\b(" + "|".join(NAMES) + r")(?:-start)?\(", text)
    return {name: found.count(name) for name in NAMES}

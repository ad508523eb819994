"""Problem: predict each device's bytes of parameters, optimizer state and gradients for an MLP's
training step under data parallelism, ZeRO 1, ZeRO 3 and tensor parallelism."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P

STRATEGIES = ("dp", "zero1", "zero3", "tp")
"""The strategies a case names."""

PARTS = ("parameters", "optimizer_state", "gradients")
"""The answer's keys."""


def layouts(strategy: str) -> tuple[dict[str, P], dict[str, P]]:
    """How the parameters and Adam's moments are laid out under ``strategy``: data parallelism
    replicates both; ZeRO 1 splits the moments' first dimension over ``'data'``; ZeRO 3 splits
    the parameters' too; tensor parallelism splits ``w1``'s columns, ``b1`` and ``w2``'s rows
    over ``'model'`` and keeps ``b2``, added after the sum, whole."""
    whole = {"w1": P(), "b1": P(), "w2": P(), "b2": P()}
    split = {"w1": P("data", None), "b1": P("data"), "w2": P("data", None), "b2": P("data")}
    megatron = {"w1": P(None, "model"), "b1": P("model"), "w2": P("model", None), "b2": P()}
    return {
        "dp": (whole, whole),
        "zero1": (whole, split),
        "zero3": (split, split),
        "tp": (megatron, megatron),
    }[strategy]


def compiled_memory(strategy: str, devices: int, width: int, hidden: int) -> dict[str, int]:
    """Each device's bytes of parameters and of Adam's two moments, read from the arguments of
    the compiled training step, and of the gradient, read from the outputs of the compiled
    ``jax.grad`` of the loss, on a mesh of the first ``devices`` devices with an Explicit axis
    (``'model'`` for ``tp``, else ``'data'``)."""
    axis = "model" if strategy == "tp" else "data"
    mesh = jax.make_mesh((devices,), (axis,), devices=jax.devices()[:devices])
    parameter_specs, moment_specs = layouts(strategy)
    shapes = {"w1": (width, hidden), "b1": (hidden,), "w2": (hidden, width), "b2": (width,)}
    batch_spec = P() if strategy == "tp" else P("data")

    def abstract(specs):
        return {
            k: jax.ShapeDtypeStruct(shapes[k], jnp.float32, sharding=NamedSharding(mesh, specs[k]))
            for k in shapes
        }

    x = jax.ShapeDtypeStruct(
        (8 * devices, width), jnp.float32, sharding=NamedSharding(mesh, batch_spec)
    )

    def loss(params, x):
        if strategy == "zero3":
            params = {k: jax.reshard(v, P()) for k, v in params.items()}
        h = jnp.tanh(x @ params["w1"] + params["b1"])
        out = jnp.matmul(h, params["w2"], out_sharding=batch_spec) + params["b2"]
        return jnp.mean(out**2)

    def step(params, mu, nu, x):
        grads = jax.grad(loss)(params, x)
        mu = {k: 0.9 * mu[k] + 0.1 * grads[k] for k in grads}
        nu = {k: 0.999 * nu[k] + 0.001 * grads[k] ** 2 for k in grads}
        new = {
            k: jax.reshard(params[k] - 1e-3 * mu[k] / (jnp.sqrt(nu[k]) + 1e-8), parameter_specs[k])
            for k in params
        }
        return new, mu, nu

    params, moments = abstract(parameter_specs), abstract(moment_specs)
    with jax.set_mesh(mesh):
        training = jax.jit(step).lower(params, moments, moments, x).compile()
        gradient = jax.jit(jax.grad(loss)).lower(params, x).compile()

    def per_device(values, shardings) -> int:
        return sum(
            int(np.prod(sharding.shard_shape(value.shape))) * value.dtype.itemsize
            for value, sharding in zip(
                jax.tree.leaves(values), jax.tree.leaves(shardings), strict=True
            )
        )

    arguments = training.input_shardings[0]
    return {
        "parameters": per_device(params, arguments[0]),
        "optimizer_state": per_device(moments, arguments[1]) + per_device(moments, arguments[2]),
        "gradients": per_device(params, gradient.output_shardings),
    }


# solution
def predict_memory(strategy, devices, width, hidden):
    """The bytes one device holds of an MLP's parameters, Adam's moments and gradients in a
    training step under ``strategy`` on ``devices`` devices.

    The MLP is ``tanh(x @ w1 + b1) @ w2 + b2`` in float32: ``w1`` (width, hidden), ``b1``
    (hidden,), ``w2`` (hidden, width), ``b2`` (width,). Adam keeps two moments per parameter,
    float32, laid out as the strategy says. ``"dp"`` (data parallelism) replicates parameters and
    moments; ``"zero1"`` splits the moments' first dimension over the ``devices`` devices and
    replicates the parameters; ``"zero3"`` splits both; ``"tp"`` (tensor parallelism) splits
    ``w1``'s columns, ``b1`` and ``w2``'s rows, keeps ``b2`` whole, and lays the moments out as
    the parameters. A gradient is laid out as its parameter: its type follows the parameter's.

    Return a dict with ``"parameters"``, ``"optimizer_state"`` (both moments) and
    ``"gradients"``, each in bytes on one device. Every dimension split divides evenly.

    Args:
        strategy: ``"dp"``, ``"zero1"``, ``"zero3"`` or ``"tp"``.
        devices: the number of devices, n.
        width: the model's width.
        hidden: the hidden layer's width.
    """
    whole = {"w1": width * hidden, "b1": hidden, "w2": hidden * width, "b2": width}
    split_in_tp = {"w1", "b1", "w2"}

    def per_device(split):
        return sum(4 * size // (devices if split(name) else 1) for name, size in whole.items())

    if strategy == "dp":
        parameters = moments = per_device(lambda name: False)
    elif strategy == "zero1":
        parameters, moments = per_device(lambda name: False), per_device(lambda name: True)
    elif strategy == "zero3":
        parameters = moments = per_device(lambda name: True)
    else:
        parameters = moments = per_device(lambda name: name in split_in_tp)
    return {"parameters": parameters, "optimizer_state": 2 * moments, "gradients": parameters}


# end solution

from spmd_guide.practice.problem import Case, Problem, ResultHint
from spmd_guide.practice.requirements import Returns, WorkedOut


def _cases(devices: int) -> list[Case]:
    # A second size for tensor parallelism, where b2's share of the bytes changes with it.
    sizes = {strategy: [(64, 256)] for strategy in STRATEGIES}
    sizes["tp"].append((32, 96))
    return [
        Case((strategy, devices, width, hidden))
        for strategy in STRATEGIES
        for width, hidden in sizes[strategy]
    ]


def compare_bytes(expected, got) -> list[str]:
    """How the predicted bytes differ from the compiled program's."""
    if not isinstance(got, dict) or set(got) != set(PARTS):
        return [f"expected a dict with the keys {', '.join(map(repr, PARTS))}"]
    lines = []
    for part in PARTS:
        want, have = int(np.asarray(expected[part])), int(np.asarray(got[part]))
        if want != have:
            lines.append(
                f"{part}: the compiled program holds {want} bytes per device, you predicted "
                f"{have} ({have / want:.3g} times as many)"
            )
    return lines


def _predicted(o, part: str) -> int:
    return int(np.asarray(o.value[part]))


def _full(o) -> int:
    _, _, width, hidden = o.args
    return 4 * (2 * width * hidden + hidden + width)


def _zero1_gradients_split(o) -> bool:
    strategy, devices = o.args[:2]
    return strategy == "zero1" and devices > 1 and _predicted(o, "gradients") < _full(o)


def _tp_bias_split(o) -> bool:
    strategy, devices = o.args[:2]
    return strategy == "tp" and devices > 1 and _predicted(o, "parameters") == _full(o) // devices


def _one_moment(o) -> bool:
    expected = int(np.asarray(o.expected["optimizer_state"]))
    return _predicted(o, "optimizer_state") * 2 == expected


PROBLEM = Problem(
    reference=predict_memory,
    title="Predict each device's memory",
    difficulty="medium",
    teaches="memory per device: what DP, ZeRO 1, ZeRO 3 and TP split, worked out before compiling",
    lesson=("worked_out",),
    make_cases=_cases,
    requirements=(
        Returns(
            "result",
            "It returns the bytes one device holds: `parameters` and `optimizer_state` equal to "
            "the compiled training step's arguments per device, and `gradients` to the "
            "outputs of the compiled `jax.grad` of the loss, for each strategy on n devices. "
            "Activations and other temporaries are not asked.",
            compare=compare_bytes,
        ),
        WorkedOut(
            "worked_out",
            "It works the bytes out from the shapes and the strategy, without lowering or "
            "compiling anything: the checker records whether your function calls JAX's "
            "ahead-of-time API (`.lower()`, `.compile()`, `.as_text()`).",
        ),
    ),
    answer=compiled_memory,
    hints=(
        ResultHint(
            _zero1_gradients_split,
            "under ZeRO 1 the parameters are whole on every device, so their gradients are "
            "too: a gradient is laid out as its parameter. ZeRO 2 is the stage that splits them",
        ),
        ResultHint(
            _tp_bias_split,
            "tensor parallelism splits w1's columns, b1 and w2's rows, but b2 is added after "
            "the sum over 'model', so every device keeps it whole",
        ),
        ResultHint(
            _one_moment,
            "Adam keeps two moments per parameter (the mean and the mean of squares), each as "
            "large as the parameter",
        ),
    ),
)

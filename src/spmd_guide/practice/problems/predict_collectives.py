"""Problem: predict the collectives the compiler puts in a jitted function, for each mesh shape."""

from __future__ import annotations

import re

import jax
import jax.numpy as jnp
from jax.sharding import AxisType, NamedSharding
from jax.sharding import PartitionSpec as P

KINDS = ("all-reduce", "all-gather", "reduce-scatter", "all-to-all", "collective-permute")
"""The collectives counted, by their names in the compiled program."""


def mlp_loss(x, w1, w2):
    """A two-layer MLP's mean squared output. ``x`` (16, 8) is split by rows over ``'data'``,
    ``w1`` (8, 16) by columns over ``'model'``, ``w2`` (16, 4) by rows over ``'model'``."""
    return jnp.mean((jnp.tanh(x @ w1) @ w2) ** 2)


LAYOUT = {"x": P("data", None), "w1": P(None, "model"), "w2": P("model", None)}
"""How :func:`mlp_loss`'s arguments are laid out on the (data, model) mesh."""


def compiled_collectives(data: int, model: int) -> dict[str, int]:
    """How many of each collective the compiled ``jax.jit(mlp_loss)`` holds on a (data, model)
    mesh of Auto axes over the first ``data * model`` devices."""
    mesh = jax.make_mesh(
        (data, model),
        ("data", "model"),
        axis_types=(AxisType.Auto,) * 2,
        devices=jax.devices()[: data * model],
    )
    shapes = {"x": (16, 8), "w1": (8, 16), "w2": (16, 4)}
    args = [
        jax.ShapeDtypeStruct(shapes[k], jnp.float32, sharding=NamedSharding(mesh, LAYOUT[k]))
        for k in ("x", "w1", "w2")
    ]
    text = jax.jit(mlp_loss).lower(*args).compile().as_text() or ""
    # Asynchronous collectives appear as a -start and -done pair: count the start.
    found = re.findall(r"\b(" + "|".join(KINDS) + r")(?:-start)?\(", text)
    return {kind: found.count(kind) for kind in KINDS}


# solution
def predict_collectives(data, model):
    """How many of each collective ``jax.jit(mlp_loss)`` compiles to on a (data, model) mesh.

    ``mlp_loss(x, w1, w2)`` is ``mean((tanh(x @ w1) @ w2) ** 2)``, with ``x`` split by rows
    over ``'data'``, ``w1`` by columns over ``'model'`` and ``w2`` by rows over ``'model'``.
    Return a dict from collective names as the compiled program spells them (``all-reduce``,
    ``all-gather``, ``reduce-scatter``, ``all-to-all``, ``collective-permute``) to counts;
    names left out count as 0. The answer is graded against the program this machine's
    compiler produces for every mesh shape (data, model) of n devices, from (1, n) to (n, 1).

    Args:
        data: the size of the mesh axis ``'data'``.
        model: the size of the mesh axis ``'model'``.
    """
    # x @ w1 needs nothing (each device multiplies its rows by its columns), nor does tanh.
    # @ w2 adds over the hidden dimension, split over 'model', so each device holds a partial
    # sum, and the square that follows needs the whole sum: one all-reduce over 'model' when it
    # has more than one device. The mean then adds over the rows, split over 'data': one more
    # all-reduce when 'data' has more than one device.
    return {"all-reduce": int(model > 1) + int(data > 1)}


# end solution

import numpy as np

from spmd_guide.practice.problem import Case, Problem, ResultHint
from spmd_guide.practice.requirements import Returns, WorkedOut


def _cases(devices: int) -> list[Case]:
    return [Case((data, devices // data)) for data in range(1, devices + 1) if devices % data == 0]


def _counts(answer) -> dict[str, int]:
    return {str(k): int(np.asarray(v)) for k, v in answer.items()}


def compare_counts(expected, got) -> list[str]:
    """How the predicted counts differ from the compiled ones."""
    if not isinstance(got, dict):
        return ["expected a dict from collective names to counts"]
    unknown = sorted(set(got) - set(KINDS))
    if unknown:
        return [f"unknown collective name(s) {', '.join(map(repr, unknown))}"]
    expected, got = _counts(expected), _counts(got)
    return [
        f"{kind}: the compiled program has {expected[kind]}, you predicted {got.get(kind, 0)}"
        for kind in KINDS
        if got.get(kind, 0) != expected[kind]
    ]


def _predicted(o, kind: str) -> int:
    return int(np.asarray(o.value.get(kind, 0))) if isinstance(o.value, dict) else -1


def _merged(o) -> bool:
    data, model = o.args
    return (
        data > 1
        and model > 1
        and _predicted(o, "all-reduce") == 1
        and not any(_predicted(o, kind) for kind in KINDS if kind != "all-reduce")
    )


def _axis_of_one(o) -> bool:
    data, model = o.args
    return (data == 1 or model == 1) and _predicted(o, "all-reduce") > int(
        np.asarray(o.expected["all-reduce"])
    )


def _gathered(o) -> bool:
    return _predicted(o, "all-gather") > 0


def _psum_names(o) -> bool:
    return isinstance(o.value, dict) and any(k not in KINDS for k in o.value)


PROBLEM = Problem(
    reference=predict_collectives,
    title="Predict the collectives",
    difficulty="medium",
    teaches="reading a sharded program: which reductions cross which mesh axis",
    lesson=("worked_out",),
    make_cases=_cases,
    requirements=(
        Returns(
            "result",
            "It returns a dict from collective names, spelled as in the compiled program, to "
            "how many of each the program this machine's compiler makes holds, for every mesh "
            "shape from (1, n) to (n, 1).",
            compare=compare_counts,
        ),
        WorkedOut(
            "worked_out",
            "It works the counts out from the shapes and layouts, as the page asks, without "
            "lowering or compiling anything: the checker records whether your function calls "
            "JAX's ahead-of-time API (`.lower()`, `.compile()`, `.as_text()`).",
        ),
    ),
    answer=compiled_collectives,
    hints=(
        ResultHint(
            _psum_names,
            "name the collectives as the compiled program does: all-reduce (what psum becomes), "
            "all-gather, reduce-scatter, all-to-all, collective-permute (ppermute)",
        ),
        ResultHint(
            _merged,
            "two reductions, not one: the second matmul's sum over 'model' must be whole "
            "before the square, and the mean over 'data' comes after it, each an all-reduce "
            "over its own axis",
        ),
        ResultHint(
            _axis_of_one,
            "an axis with one device needs no collective: nothing is split over it",
        ),
        ResultHint(
            _gathered,
            "nothing is gathered: each device multiplies its own rows of x by its own columns "
            "of w1, and w2's rows match those columns, so only partial sums need combining",
        ),
    ),
)

"""Problem: a Megatron-style tensor-parallel MLP: column-split, then row-split, one ``psum``."""

from __future__ import annotations

# solution
import jax
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P


def megatron_mlp(x, w1, w2, *, mesh):
    """``relu(x @ w1) @ w2`` with both weights split over the mesh axis ``'model'``.

    ``w1`` is split by columns, so each device computes its own slice of the hidden layer,
    and the ReLU, applied element by element, needs nothing from the others. ``w2`` is split
    by rows to match, so each device's product is a partial sum of the output; one
    ``jax.lax.psum`` over ``'model'`` adds them, and the output is the same on every device.
    ``x`` is replicated.

    Args:
        x: inputs of shape (B, d).
        w1: the first weight, shape (d, h), h divisible by the size of ``'model'``.
        w2: the second weight, shape (h, d).
        mesh: a mesh with an axis ``'model'``.

    """

    def block(x, w1_columns, w2_rows):
        hidden = jax.nn.relu(x @ w1_columns)
        return jax.lax.psum(hidden @ w2_rows, "model")

    def place(value, spec):
        return jax.device_put(value, NamedSharding(mesh, spec))

    mlp = jax.shard_map(
        block,
        mesh=mesh,
        in_specs=(P(), P(None, "model"), P("model", None)),
        out_specs=P(),
    )
    return mlp(place(x, P()), place(w1, P(None, "model")), place(w2, P("model", None)))


# end solution

import numpy as np

from spmd_guide.practice.cases import kind, normal, one_axis_meshes
from spmd_guide.practice.problem import Case, ErrorHint, Problem, ResultHint
from spmd_guide.practice.requirements import (
    EXPLICIT_MESHES,
    GIVEN_MESH,
    TRACEABLE,
    Layout,
    Program,
    Returns,
    enters_as,
    every,
    forbids,
    uses,
)


def _cases(devices: int) -> list[Case]:
    cases = []
    for seed, mesh in enumerate(one_axis_meshes(devices, "model")):
        hidden = 2 * mesh.shape["model"]
        args = (
            normal(120 + seed, 3, 4),
            normal(130 + seed, 4, hidden),
            normal(140 + seed, hidden, 4),
        )
        cases.append(Case(args, {"mesh": mesh}, exercises=kind(mesh)))
    return cases


def _weight_blocks(o) -> dict[str, tuple[int, ...]]:
    _, w1, w2 = o.args
    n = o.case_mesh["axes"]["model"]
    return {"w1": (w1.shape[0], w1.shape[1] // n), "w2": (w2.shape[0] // n, w2.shape[1])}


def _partials(o) -> np.ndarray:
    """Each device's partial output, (n, B, d)."""
    x, w1, w2 = (np.asarray(a, np.float64) for a in o.args)
    n = o.kwargs["mesh"]["axes"]["model"]
    columns = np.split(w1, n, axis=1)
    rows = np.split(w2, n, axis=0)
    return np.stack([np.maximum(x @ c, 0) @ r for c, r in zip(columns, rows, strict=True)])


def _first_partial(o) -> bool:
    partials = _partials(o)
    return len(partials) > 1 and np.allclose(o.value, partials[0], rtol=1e-4, atol=1e-5)


def _stacked_partials(o) -> bool:
    partials = _partials(o)
    return (
        len(partials) > 1
        and np.shape(o.value) == (len(partials) * partials.shape[1], partials.shape[2])
        and np.allclose(o.value, partials.reshape(-1, partials.shape[2]), rtol=1e-4, atol=1e-5)
    )


def _relu_after_sum(o) -> bool:
    x, w1, w2 = (np.asarray(a, np.float64) for a in o.args)
    return len(_partials(o)) > 1 and np.allclose(
        o.value, np.maximum((x @ w1) @ w2, 0), rtol=1e-4, atol=1e-5
    )


PROBLEM = Problem(
    reference=megatron_mlp,
    title="A tensor-parallel MLP (Megatron)",
    difficulty="medium",
    teaches="tensor parallelism: column then row splits, so one psum finishes the block",
    lesson=("split_weights", "one_psum"),
    make_cases=_cases,
    requirements=(
        Returns("result", "It returns `relu(x @ w1) @ w2`, shape (B, d)."),
        Program(
            "split_weights",
            "Each device holds only its share of the weights: a `jax.shard_map` over `'model'` "
            "receives `w1` in (d, h / n) column blocks and `w2` in (h / n, d) row blocks, and "
            "nothing gathers them whole (no `all_gather`).",
            test=every(uses("shard_map"), forbids("all_gather"), enters_as(_weight_blocks)),
        ),
        Program(
            "one_psum",
            "One `jax.lax.psum` over `'model'` adds the devices' partial outputs.",
            test=uses("psum"),
        ),
        Layout(
            "layout",
            "The output is the same on every device: laid out as `P()`.",
            spec=P(),
        ),
        EXPLICIT_MESHES,
        GIVEN_MESH,
        TRACEABLE,
    ),
    hints=(
        ResultHint(
            _stacked_partials,
            "these are the devices' partial outputs, stacked by out_specs=P('model'): add them "
            "with jax.lax.psum(out, 'model') and return with out_specs=P()",
        ),
        ResultHint(
            _first_partial,
            "this is the first device's partial output only: the psum over 'model' is missing "
            "(check_vma=False let out_specs=P() take device 0's copy)",
        ),
        ResultHint(
            _relu_after_sum,
            "the ReLU belongs between the two matmuls, on each device's hidden slice: "
            "relu(x @ w1_columns) @ w2_rows, then psum",
        ),
        ErrorHint(
            "ValueError",
            r"out_specs which require replication",
            "each device holds a partial sum of the output, so out_specs=P() refuses it: add "
            "the partial sums with jax.lax.psum(out, 'model') first",
        ),
    ),
)

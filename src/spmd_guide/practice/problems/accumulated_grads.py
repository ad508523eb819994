"""Problem: gradient accumulation over microbatches on Explicit axes, the devices' gradients
kept unreduced through the loop and summed by one all-reduce after it."""

from __future__ import annotations

# solution
import jax
import jax.numpy as jnp
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P


def accumulated_grads(params, x, y, *, mesh, microbatches):
    """The mean gradient of the loss of ``tanh(x @ w1) @ w2`` (mean squared error) over the
    whole batch, taken one microbatch at a time, data-parallel over ``'data'``, with one
    all-reduce per step.

    The batch's rows are split over the Explicit mesh axis ``'data'``; the weights are whole on
    every device. A loop (``jax.lax.scan``) takes one microbatch at a time, so only one
    microbatch's activations exist at once, and adds up its gradients. Each device's gradient
    is only its own part of the sum over ``'data'``: laying the weights out as
    ``P(reduced={'data'})`` makes their gradients come back *unreduced*, typed ``{U:data}``, so
    the loop adds each device's parts without communicating, and one
    ``jax.reshard(total, NamedSharding(mesh, P()))`` after it is the single all-reduce.
    Dividing by ``microbatches`` turns the sum of the microbatches' mean gradients into the
    whole batch's.

    Args:
        params: a dict of NumPy arrays, ``"w1"`` of shape (d, h) and ``"w2"`` of shape (h, k).
        x: inputs of shape (B, d), a NumPy array; B divides by ``microbatches`` times the size
            of ``'data'``.
        y: targets of shape (B, k), a NumPy array.
        mesh: a mesh with the Explicit axis ``'data'``, over all the devices or some of them.
        microbatches: how many microbatches to split the batch into, 2 or more.
    """

    def loss(params, x, y):
        return jnp.mean((jnp.tanh(x @ params["w1"]) @ params["w2"] - y) ** 2)

    def place(value, spec):
        return jax.device_put(value, NamedSharding(mesh, spec))

    params = {name: place(w, P(reduced={"data"})) for name, w in params.items()}
    # (microbatches, rows, features): microbatch m holds rows m, m + n, m + 2n, ..., so that
    # each device's rows of every microbatch are rows it already holds.
    xs = place(x.reshape(-1, microbatches, x.shape[1]).swapaxes(0, 1), P(None, "data"))
    ys = place(y.reshape(-1, microbatches, y.shape[1]).swapaxes(0, 1), P(None, "data"))

    def add_microbatch(total, xy):
        return jax.tree.map(jnp.add, total, jax.grad(loss)(params, *xy)), None

    zeros = {name: place(jnp.zeros(w.shape), P(unreduced={"data"})) for name, w in params.items()}
    total, _ = jax.lax.scan(add_microbatch, zeros, (xs, ys))
    # Resharding each device's part to P() sums them: the one all-reduce.
    return {
        name: jax.reshard(g, NamedSharding(mesh, P())) / microbatches for name, g in total.items()
    }


# end solution

import math

import numpy as np

from spmd_guide.analysis import collective_elements_per_step, matmul_result_shapes
from spmd_guide.practice.cases import kind, normal, one_axis_meshes
from spmd_guide.practice.problem import Case, ErrorHint, Problem, ResultHint
from spmd_guide.practice.requirements import (
    TRACEABLE,
    Layout,
    Program,
    Returns,
    compare_dicts,
)

ROWS = 5
"""Rows of each microbatch per device of the machine (on a mesh over half the devices, twice
as many per device of it). With :data:`FEATURES`, a matrix product over one microbatch's own
rows (at most 5 x 6 values) is at least as large as any over the weights alone (4 x 6), and
one over more rows than that is larger than both."""

FEATURES = {"d": 4, "h": 6, "k": 3}


def _cases(devices: int) -> list[Case]:
    d, h, k = FEATURES.values()
    cases = []
    explicit = [mesh for mesh in one_axis_meshes(devices, "data") if kind(mesh)]
    for seed, mesh in enumerate(explicit):
        # Never as many microbatches as devices in the mesh, so that an answer too large by
        # one factor is not also too large by the other.
        for microbatches in (3, 5) if seed == 0 else (3,):
            # Sized by every device, not the mesh's: a solution that builds its own mesh over
            # all of them gets the numbers right and only its layout wrong.
            batch = ROWS * devices * microbatches
            params = {"w1": normal(400 + seed, d, h), "w2": normal(410 + seed, h, k)}
            x, y = normal(420 + seed, batch, d), normal(430 + seed, batch, k)
            cases.append(Case((params, x, y), {"mesh": mesh, "microbatches": microbatches}))
    return cases


def _devices(o) -> int:
    return o.kwargs["mesh"]["axes"]["data"]


def _gradient_elements(o) -> int:
    return sum(math.prod(w.shape) for w in o.args[0].values())


def _one_microbatch_at_a_time(program, o) -> str | None:
    """No matrix product on a device is larger than one over its rows of one microbatch."""
    d, h, k = FEATURES.values()
    rows = len(o.args[1]) // o.kwargs["microbatches"]
    own_rows = rows // _devices(o)
    largest = max(d * h, h * k, own_rows * max(d, h, k))
    shapes = matmul_result_shapes(program["compiled"])
    too_large = [shape for shape in shapes if math.prod(shape) > largest]
    if not too_large:
        return None
    return (
        f"a matrix product on one device has the shape {too_large[0]}: more rows than its "
        f"{own_rows} of one microbatch at once ({rows} rows, split over {_devices(o)} "
        f"device{'s' if _devices(o) > 1 else ''})"
    )


def _summed_once(program, o) -> str | None:
    """The compiled step all-reduces no more than the gradients, and moves nothing else."""
    moved = collective_elements_per_step(program["compiled"])
    others = {op: n for op, n in moved.items() if n and op != "all-reduce"}
    if others:
        named = ", ".join(f"{op} of {n} values" for op, n in others.items())
        return f"your compiled step also runs {named}: only the gradients need to move"
    summed, gradients = moved["all-reduce"], _gradient_elements(o)
    if summed > gradients:
        return (
            f"your compiled step all-reduces {summed} values per device, {summed / gradients:g} "
            f"times the {gradients} of the gradients: the gradients are summed over 'data' more "
            "than once (inside the loop, once per microbatch)"
        )
    return None


def _reduced_per_microbatch(o) -> bool:
    if o.program is None or "compiled" not in o.program:
        return False
    summed = collective_elements_per_step(o.program["compiled"])["all-reduce"]
    return summed >= o.kwargs["microbatches"] * _gradient_elements(o)


def _scaled(o, factor: float) -> bool:
    return all(np.allclose(o.value[k], factor * o.expected[k], rtol=1e-4) for k in o.expected)


def _not_divided(o) -> bool:
    return _scaled(o, o.kwargs["microbatches"])


def _summed_over_devices(o) -> bool:
    return _devices(o) > 1 and _scaled(o, _devices(o))


PROBLEM = Problem(
    reference=accumulated_grads,
    title="Gradient accumulation with one all-reduce",
    difficulty="medium",
    teaches="reduced weights and unreduced gradients on Explicit axes: one all-reduce per step",
    lesson=("one_all_reduce",),
    make_cases=_cases,
    requirements=(
        Returns(
            "result",
            "It returns a dict like `params` holding the mean gradient of the loss over the "
            "whole batch.",
            compare=compare_dicts,
        ),
        Layout(
            "layout",
            "The gradients come back whole on every device of `mesh`: `P()`.",
            spec={"w1": P(), "w2": P()},
        ),
        TRACEABLE,
        Program(
            "microbatches",
            "It takes one microbatch at a time, each device working on its own rows of it: in "
            "the program XLA compiles for the case, no matrix product on a device is larger "
            "than one over its own rows of one microbatch, B / microbatches / the size of "
            "`'data'`.",
            test=_one_microbatch_at_a_time,
            compiled=True,
        ),
        Program(
            "one_all_reduce",
            "The devices' gradients are summed over `'data'` once, after the loop: per step, "
            "the compiled program all-reduces no more values than the gradients hold, and "
            "moves nothing else between devices.",
            test=_summed_once,
            compiled=True,
        ),
    ),
    hints=(
        ResultHint(
            _not_divided,
            "each gradient is `microbatches` times too large: the loop adds the microbatches' "
            "mean gradients, so divide the total by their number",
        ),
        ResultHint(
            _summed_over_devices,
            "each gradient is n times too large, n = mesh.shape['data']: summing the devices' "
            "gradients of their own rows' mean loss adds n means; take their mean "
            "(jax.lax.pmean), or the loss's mean over the whole microbatch",
        ),
        ResultHint(
            _reduced_per_microbatch,
            "the gradients are summed over 'data' inside the loop, once per microbatch: weights "
            "laid out P() (replicated) get gradients already summed where they are taken. Lay "
            "them out as P(reduced={'data'}), start the total as zeros placed as "
            "P(unreduced={'data'}), and reshard it to P() once, after the loop",
            requirement="one_all_reduce",
        ),
        ErrorHint(
            "ValueError",
            "not under a mesh context",
            "a bare P(...) means nothing without a mesh, and the checker's jax.jit has none "
            "around it: pass NamedSharding(mesh, P(...))",
        ),
        ErrorHint(
            "ShardingTypeError",
            "unreduced",
            "a value typed {U:data} is each device's part of a sum, and combines only with "
            "another unreduced over the same axes: start the loop's total as zeros placed "
            "with NamedSharding(mesh, P(unreduced={'data'})), reshard the total to P() after "
            "the loop, and divide after that",
        ),
    ),
)

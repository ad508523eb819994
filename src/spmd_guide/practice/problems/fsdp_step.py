"""Problem: one FSDP training step: parameters stored sharded, gathered for use, gradients
reduce-scattered back to their shards."""

from __future__ import annotations

# solution
import jax
import jax.numpy as jnp
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P


def fsdp_step(params, x, y, *, mesh, lr):
    """One SGD step of a two-layer model, fully sharded data-parallel (FSDP) over ``'data'``.

    The model is ``tanh(x @ w1) @ w2`` with the mean squared error. The batch is split over
    the mesh axis ``'data'``, and so is each weight, by its first dimension: each device
    stores only its own rows of ``w1`` and of ``w2``. Inside ``jax.shard_map``, each device
    gathers the whole weights with ``jax.lax.all_gather(..., tiled=True)``, computes the
    gradient of the loss on its own rows of the batch, and keeps only the gradient of its own
    rows of the weights, summed over the devices: ``jax.lax.psum_scatter(..., tiled=True)``
    (a reduce-scatter). Dividing by the number of devices turns that sum into the mean, and
    each device updates its own rows. The new parameters come back laid out as they went in,
    ``P('data', None)``, and equal the step one device would take on the whole batch.

    Differentiating through the ``all_gather`` gives the reduce-scatter by itself: the
    transpose of gathering is summing back to the shards.

    Args:
        params: a dict with ``"w1"`` of shape (d, h) and ``"w2"`` of shape (h, k); d and h
            divide over ``'data'``.
        x: inputs of shape (B, d), B divisible by the size of ``'data'``.
        y: targets of shape (B, k).
        mesh: a mesh with an axis ``'data'``.
        lr: the learning rate.

    """
    devices = mesh.shape["data"]

    def loss(weights, x, y):
        return jnp.mean((jnp.tanh(x @ weights["w1"]) @ weights["w2"] - y) ** 2)

    def step(own_rows, x, y):
        def loss_of_own_rows(own_rows):
            whole = jax.tree.map(
                lambda rows: jax.lax.all_gather(rows, "data", axis=0, tiled=True), own_rows
            )
            return loss(whole, x, y)

        # The gradient through all_gather is a psum_scatter: summed over devices, own rows only.
        summed = jax.grad(loss_of_own_rows)(own_rows)
        return jax.tree.map(lambda p, g: p - lr * g / devices, own_rows, summed)

    def place(value, spec):
        return jax.device_put(value, NamedSharding(mesh, spec))

    rows = P("data", None)
    params = jax.tree.map(lambda p: place(p, rows), params)
    sharded_step = jax.shard_map(step, mesh=mesh, in_specs=(rows, rows, rows), out_specs=rows)
    return sharded_step(params, place(x, rows), place(y, rows))


# end solution

import numpy as np

from spmd_guide.practice.cases import kind, normal, one_axis_meshes
from spmd_guide.practice.problem import Case, ErrorHint, Problem, ResultHint
from spmd_guide.practice.requirements import (
    EXPLICIT_MESHES,
    GIVEN_MESH,
    Layout,
    Program,
    Returns,
    UnderJit,
    compare_dicts,
    enters_as,
    every,
    uses,
)


def _cases(devices: int) -> list[Case]:
    cases = []
    for seed, mesh in enumerate(one_axis_meshes(devices, "data")):
        n = mesh.shape["data"]
        params = {"w1": normal(200 + seed, 2 * n, 3 * n), "w2": normal(210 + seed, 3 * n, 2)}
        x, y = normal(220 + seed, 4 * n, 2 * n), normal(230 + seed, 4 * n, 2)
        lr = (0.1, 0.04, 0.3)[seed % 3]
        cases.append(Case((params, x, y), {"mesh": mesh, "lr": lr}, exercises=kind(mesh)))
    return cases


def _blocks(o) -> dict[str, tuple[int, ...]]:
    params, x, y = o.args
    n = _devices(o)
    named = {"w1": params["w1"], "w2": params["w2"], "x": x, "y": y}
    return {k: (v.shape[0] // n, *v.shape[1:]) for k, v in named.items()}


def _devices(o) -> int:
    return o.kwargs["mesh"]["axes"]["data"]


def _update_scaled(o, factor: float) -> bool:
    """Whether the answer is the right step scaled by ``factor``."""
    params = o.args[0]
    return all(
        np.allclose(
            o.value[k], params[k] + factor * (o.expected[k] - params[k]), rtol=1e-4, atol=1e-5
        )
        for k in ("w1", "w2")
    )


def _summed(o) -> bool:
    return _devices(o) > 1 and _update_scaled(o, _devices(o))


def _gradients(params, x, y):
    """The loss's gradients on rows ``x, y``, in NumPy."""
    w1, w2 = (np.asarray(params[k], np.float64) for k in ("w1", "w2"))
    hidden = np.tanh(x @ w1)
    error = hidden @ w2 - y
    d_out = 2.0 * error / error.size
    d_hidden = (d_out @ w2.T) * (1 - hidden**2)
    return {"w1": x.T @ d_hidden, "w2": hidden.T @ d_out}


def _own_rows_only(o) -> bool:
    """Each device's rows of the weights updated from its own rows of the batch alone."""
    params, x, y = o.args
    n = _devices(o)
    if n == 1:
        return False
    lr = o.kwargs["lr"]
    batch = len(x) // n
    for k in ("w1", "w2"):
        rows = len(params[k]) // n
        for i in range(n):
            grads = _gradients(
                params, x[i * batch : (i + 1) * batch], y[i * batch : (i + 1) * batch]
            )
            block = slice(i * rows, (i + 1) * rows)
            if not np.allclose(
                o.value[k][block], params[k][block] - lr * grads[k][block], rtol=1e-4, atol=1e-5
            ):
                return False
    return True


PROBLEM = Problem(
    reference=fsdp_step,
    title="A fully sharded data-parallel (FSDP) step",
    difficulty="hard",
    teaches="FSDP: weights stored sharded, all-gathered for use, gradients reduce-scattered",
    lesson=("stored_split", "gather_and_scatter"),
    make_cases=_cases,
    requirements=(
        Returns(
            "result",
            "It returns the updated parameters, a dict like `params`, equal to one SGD step "
            "with learning rate `lr` on the whole batch.",
            compare=compare_dicts,
        ),
        UnderJit(
            "jit",
            "It works under `jax.jit`, as a training step is called (the checker also reads "
            "its program with `jax.make_jaxpr`).",
        ),
        Program(
            "stored_split",
            "Each device stores only its rows of each weight and of the batch: a "
            "`jax.shard_map` over `'data'` receives `w1`, `w2`, `x` and `y` in blocks of 1 / n "
            "of their rows.",
            test=every(uses("shard_map"), enters_as(_blocks)),
        ),
        Program(
            "gather_and_scatter",
            "Weights are gathered whole for use with `jax.lax.all_gather`, and gradients "
            "summed back onto their shards by a reduce-scatter (`jax.lax.psum_scatter`, or "
            "the transpose of the `all_gather`).",
            test=uses("all_gather", "reduce_scatter"),
        ),
        Layout(
            "layout",
            "The new parameters come back laid out as they went in: `P('data', None)`.",
            spec={"w1": P("data", None), "w2": P("data", None)},
        ),
        EXPLICIT_MESHES,
        GIVEN_MESH,
    ),
    hints=(
        ResultHint(
            _summed,
            "the step is n times too large, n = mesh.shape['data']: the reduce-scatter sums "
            "the devices' gradients; divide by n for their mean",
        ),
        ResultHint(
            _own_rows_only,
            "each device updated its rows with the gradient from its own rows of the batch "
            "alone: the gradients were never combined across devices. Sum them onto their "
            "shards with jax.lax.psum_scatter(grads, 'data', scatter_dimension=0, tiled=True), "
            "or differentiate through the all_gather, which does that for you",
        ),
        ErrorHint(
            "TypeError",
            r"dot_general requires contracting dimensions to have the same shape",
            "a gathered weight has the wrong shape: all_gather without tiled=True stacks the "
            "shards on a new axis; use jax.lax.all_gather(w, 'data', axis=0, tiled=True)",
        ),
    ),
)

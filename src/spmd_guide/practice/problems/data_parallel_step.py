"""Problem: one data-parallel SGD step of a linear model, with ``shard_map`` and ``pmean``."""

from __future__ import annotations

# solution
import jax
import jax.numpy as jnp
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P


def data_parallel_step(params, x, y, *, mesh, lr):
    """One SGD step of the linear model ``x @ w + b`` on the mean squared error, data-parallel.

    The batch ``x, y`` is split over the mesh axis ``'data'``; the parameters are replicated.
    Each device computes the gradient of the loss on its own rows, ``jax.lax.pmean`` averages
    the gradients over ``'data'``, and every device applies the same update, so the new
    parameters come back replicated (``out_specs=P()``). The result equals the step one device
    would take on the whole batch.

    Inside ``shard_map``, the gradient of a replicated (invariant) parameter arrives already
    summed over the devices. ``jax.lax.pcast(params, 'data', to='varying')`` first makes each
    device's parameters its own, so its gradient stays its own until the ``pmean``.

    Args:
        params: a dict with ``"w"`` of shape (d, k) and ``"b"`` of shape (k,).
        x: inputs of shape (B, d), B divisible by the size of the ``'data'`` axis.
        y: targets of shape (B, k).
        mesh: a mesh with an axis ``'data'``.
        lr: the learning rate.

    """

    def loss(params, x, y):
        return jnp.mean((x @ params["w"] + params["b"] - y) ** 2)

    def step(params, x, y):
        own = jax.lax.pcast(params, "data", to="varying")
        grads = jax.lax.pmean(jax.grad(loss)(own, x, y), "data")
        return jax.tree.map(lambda p, g: p - lr * g, params, grads)

    def place(value, spec):
        return jax.device_put(value, NamedSharding(mesh, spec))

    params = jax.tree.map(lambda p: place(p, P()), params)
    sharded_step = jax.shard_map(
        step, mesh=mesh, in_specs=(P(), P("data"), P("data")), out_specs=P()
    )
    return sharded_step(params, place(x, P("data")), place(y, P("data")))


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
        rows = 4 * mesh.shape["data"]
        params = {"w": normal(60 + seed, 3, 2), "b": normal(70 + seed, 2)}
        x, y = normal(80 + seed, rows, 3), normal(90 + seed, rows, 2)
        lr = (0.1, 0.03, 0.25)[seed % 3]
        cases.append(Case((params, x, y), {"mesh": mesh, "lr": lr}, exercises=kind(mesh)))
    return cases


def _gradients(params, x, y):
    """The mean-squared-error gradients of the linear model on rows ``x, y``, in NumPy."""
    w, b = np.asarray(params["w"], np.float64), np.asarray(params["b"], np.float64)
    error = x @ w + b - y
    scale = 2.0 / error.size
    return {"w": scale * x.T @ error, "b": scale * error.sum(axis=0)}


def _step_with(o, gradients) -> bool:
    """Whether the answer is the step taken with ``gradients`` instead of the right ones."""
    lr = o.kwargs["lr"]
    params = o.args[0]
    return all(
        np.allclose(o.value[k], params[k] - lr * gradients[k], rtol=1e-4, atol=1e-5)
        for k in ("w", "b")
    )


def _devices(o) -> int:
    return o.kwargs["mesh"]["axes"]["data"]


def _summed(o) -> bool:
    params, x, y = (np.asarray(a, np.float64) if not isinstance(a, dict) else a for a in o.args)
    whole = _gradients(params, x, y)
    n = _devices(o)
    return n > 1 and _step_with(o, {k: n * g for k, g in whole.items()})


def _first_block_only(o) -> bool:
    params, x, y = o.args
    n = _devices(o)
    rows = len(x) // n
    return n > 1 and _step_with(o, _gradients(params, x[:rows], y[:rows]))


PROBLEM = Problem(
    reference=data_parallel_step,
    title="A data-parallel training step",
    difficulty="medium",
    teaches="data parallelism by hand: split the batch, pmean the gradients, replicated update",
    lesson=("split_batch",),
    make_cases=_cases,
    requirements=(
        Returns(
            "result",
            "It returns the updated parameters, a dict like `params`, equal to one SGD step with "
            "learning rate `lr` on the whole batch.",
            compare=compare_dicts,
        ),
        UnderJit(
            "jit",
            "It works under `jax.jit`, as a training step is called (the checker also reads "
            "its program with `jax.make_jaxpr`).",
        ),
        Program(
            "split_batch",
            "Each device computes gradients on its own rows only: a `jax.shard_map` over "
            "`'data'` receives `x` in blocks of B / n rows, and the gradients are averaged "
            "with a collective (`jax.lax.pmean` or `psum`).",
            test=every(
                uses("shard_map", "psum"),
                enters_as(lambda o: {"x": (len(o.args[1]) // _devices(o), o.args[1].shape[1])}),
            ),
        ),
        Layout(
            "layout",
            "The new parameters are replicated: laid out as `P()` on every device of `mesh`.",
            spec={"w": P(), "b": P()},
        ),
        EXPLICIT_MESHES,
        GIVEN_MESH,
    ),
    hints=(
        ResultHint(
            _summed,
            "the step is once per device too large: the devices' gradients were added, not "
            "averaged. Inside shard_map the gradient of a replicated parameter arrives already "
            "summed over the devices, so a pmean after it changes nothing. Make the parameters "
            "each device's own first, jax.lax.pcast(params, 'data', to='varying'), then "
            "jax.lax.pmean the gradients",
        ),
        ResultHint(
            _first_block_only,
            "this is the step from the first device's rows alone: the gradients were never "
            "combined (check_vma=False let out_specs=P() take device 0's copy). Keep the "
            "check on, and average the gradients with jax.lax.pmean",
        ),
        ErrorHint(
            "ValueError",
            r"out_specs which require replication",
            "each device's update differs, so out_specs=P() refuses the parameters: average "
            "the gradients with jax.lax.pmean(grads, 'data') before the update",
        ),
    ),
)

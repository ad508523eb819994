"""Problem: a tensor-parallel MLP block on Explicit axes, each layer's value made with the
layout its type must show, using ``out_sharding`` and ``reshard``."""

from __future__ import annotations

# solution
import jax
import jax.numpy as jnp
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P


def explicit_layers(x, w_in, w_out, *, mesh):
    """The block ``hidden = relu(x @ w_in)``, ``out = hidden @ w_out``, ``residual = x + out``
    on a mesh with Explicit axes ``('data', 'model')``, each value laid out as the plan says.

    The plan is Megatron's for an MLP: ``x`` split by rows over ``'data'``, ``w_in`` by columns
    over ``'model'`` and ``w_out`` by rows. ``hidden`` is then ``P('data', 'model')``, which
    follows from its inputs; ``out`` is ``P('data', 'model')`` too, each device keeping only its
    own block of a sum of partial products whose layout JAX will not guess, so
    ``out_sharding=`` names it; and ``residual`` is ``P('data', None)``, whole rows for whatever
    comes next, where ``x + out`` would take ``out``'s finer layout, so ``jax.reshard`` says
    otherwise. ``jax.typeof`` shows each layout, e.g. ``float32[8@data,32@model]``.

    Args:
        x: shape (B, d), a NumPy array, to be laid out ``P('data', None)``; B divides over
            ``'data'`` and d over ``'model'``.
        w_in: shape (d, f), a NumPy array, to be laid out ``P(None, 'model')``; f divides over
            ``'model'``.
        w_out: shape (f, d), a NumPy array, to be laid out ``P('model', None)``.
        mesh: a mesh with Explicit axes ``'data'`` and ``'model'``.
    """

    def place(value, spec):
        return jax.device_put(value, NamedSharding(mesh, spec))

    x = place(x, P("data", None))
    w_in = place(w_in, P(None, "model"))
    w_out = place(w_out, P("model", None))
    hidden = jax.nn.relu(x @ w_in)
    out = jnp.matmul(hidden, w_out, out_sharding=NamedSharding(mesh, P("data", "model")))
    residual = x + jax.reshard(out, NamedSharding(mesh, P("data", None)))
    return {"hidden": hidden, "out": out, "residual": residual}


# end solution

from spmd_guide.practice.cases import normal, two_axis_meshes
from spmd_guide.practice.problem import Case, ErrorHint, Problem, ResultHint
from spmd_guide.practice.requirements import (
    Layout,
    Program,
    Returns,
    UnderJit,
    compare_dicts,
    product_typed,
)


def _cases(devices: int) -> list[Case]:
    cases = []
    for seed, mesh in enumerate(two_axis_meshes(devices, ("data", "model"))):
        rows, columns = mesh.shape["data"], mesh.shape["model"]
        x = normal(500 + seed, 2 * rows, 2 * columns)
        w_in = normal(510 + seed, 2 * columns, 3 * columns)
        w_out = normal(520 + seed, 3 * columns, 2 * columns)
        cases.append(Case((x, w_in, w_out), {"mesh": mesh}))
    return cases


def _hidden_split(o) -> str:
    x, w_in, _ = o.args
    return f"float32[{len(x)}@data,{w_in.shape[1]}@model]"


def _shown(o, part: str) -> str:
    return (o.sharding or {}).get(part, "")


def _residual_split(o) -> bool:
    return "P('data', 'model')" in _shown(o, "residual")


def _out_gathered(o) -> bool:
    shown = _shown(o, "out")
    return "@" in shown and "P('data', 'model')" not in shown


def _not_placed(o) -> bool:
    return all("@" not in _shown(o, part) for part in ("hidden", "out", "residual"))


PROBLEM = Problem(
    reference=explicit_layers,
    title="Every layer's layout on Explicit axes",
    difficulty="medium",
    teaches="explicit sharding through a block: layouts that follow, out_sharding, and reshard",
    lesson=("on_the_mesh",),
    make_cases=_cases,
    requirements=(
        Returns(
            "result",
            'It returns a dict with `"hidden"`, `"out"` and `"residual"`, equal to '
            "`relu(x @ w_in)`, `hidden @ w_out` and `x + out`.",
            compare=compare_dicts,
        ),
        Layout(
            "layouts",
            "`hidden` and `out` are laid out as `P('data', 'model')` and `residual` as "
            "`P('data', None)` on `mesh`: each device holds the blocks those layouts give it.",
            spec={
                "hidden": P("data", "model"),
                "out": P("data", "model"),
                "residual": P("data", None),
            },
        ),
        Program(
            "on_the_mesh",
            "The block computes on the mesh: the inputs are laid out as the plan says before "
            "they are used, so that in the traced program `x @ w_in` is typed "
            "`float32[B@data,f@model]`.",
            test=product_typed(_hidden_split, "x @ w_in"),
        ),
        UnderJit(
            "jit",
            "It works under `jax.jit`, as a block of a jitted model does: the layouts are "
            "part of the types JAX traces.",
        ),
    ),
    hints=(
        ResultHint(
            _not_placed,
            "the numbers are right but nothing carries a layout: place x, w_in and w_out on "
            "the mesh first, e.g. jax.device_put(x, NamedSharding(mesh, P('data', None)))",
            requirement="layouts",
        ),
        ResultHint(
            _residual_split,
            "residual is split like out: adding P('data', None) to P('data', 'model') takes "
            "the finer layout. Reshard out (or the sum) to NamedSharding(mesh, P('data', None))",
            requirement="layouts",
        ),
        ResultHint(
            _out_gathered,
            "out holds whole rows on every device: ask the product for the split layout, "
            "jnp.matmul(hidden, w_out, out_sharding=NamedSharding(mesh, P('data', 'model')))",
            requirement="layouts",
        ),
        ErrorHint(
            "ShardingTypeError",
            "ambiguous",
            "hidden's columns and w_out's rows are both split over 'model', so hidden @ w_out "
            "is a sum of partial products and JAX will not guess its layout: use "
            "jnp.matmul(hidden, w_out, out_sharding=...)",
        ),
        ErrorHint(
            "ValueError",
            "not under a mesh context",
            "a bare P(...) means nothing without a mesh: pass NamedSharding(mesh, P(...))",
        ),
    ),
)

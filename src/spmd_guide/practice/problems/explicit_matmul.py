"""Problem: a matmul on Explicit axes whose contraction is split, laid out with ``out_sharding``."""

from __future__ import annotations

# solution
import jax
import jax.numpy as jnp
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P


def explicit_matmul(x, w, *, mesh):
    """``x @ w`` on a mesh with Explicit axes ``('data', 'model')``, laid out as
    ``P('data', 'model')``.

    ``x`` is laid out as ``P('data', 'model')`` and ``w`` as ``P('model', None)``, so the
    dimension the product adds over is split over ``'model'``: each device can multiply only
    its own slices, and the sum of those partial products has no single obvious layout. With
    Explicit axes JAX refuses to guess (a ``ShardingTypeError``); ``out_sharding=`` says where
    the result goes. Asking for ``P('data', 'model')`` keeps every device's share of the result
    as small as its share of ``x``, and ``jax.typeof`` of the answer must show it, e.g.
    ``float32[8@data,12@model]``.

    Args:
        x: shape (B, d), a NumPy array, to be laid out ``P('data', 'model')``; B divides over
            ``'data'`` and d over ``'model'``.
        w: shape (d, h), a NumPy array, to be laid out ``P('model', None)``; h divides over
            ``'model'``.
        mesh: a mesh with Explicit axes ``'data'`` and ``'model'``.
    """
    x = jax.device_put(x, NamedSharding(mesh, P("data", "model")))
    w = jax.device_put(w, NamedSharding(mesh, P("model", None)))
    return jnp.matmul(x, w, out_sharding=NamedSharding(mesh, P("data", "model")))


# end solution

from spmd_guide.practice.cases import normal, two_axis_meshes
from spmd_guide.practice.problem import Case, ErrorHint, Problem, ResultHint
from spmd_guide.practice.requirements import Layout, Program, Returns, Traceable, product_typed


def _cases(devices: int) -> list[Case]:
    cases = []
    for seed, mesh in enumerate(two_axis_meshes(devices, ("data", "model"))):
        rows, columns = mesh.shape["data"], mesh.shape["model"]
        x = normal(150 + seed, 2 * rows, 3 * columns)
        w = normal(160 + seed, 3 * columns, 2 * columns)
        cases.append(Case((x, w), {"mesh": mesh}))
    return cases


def _split_product(o) -> str:
    x, w = o.args
    return f"float32[{len(x)}@data,{w.shape[1]}@model]"


def _split_operands(o) -> tuple[str, str]:
    x, w = o.args
    return f"float32[{len(x)}@data,{w.shape[0]}@model]", f"float32[{w.shape[0]}@model,{w.shape[1]}]"


def _product_typed_otherwise(o) -> bool:
    """A product outside any shard_map, none typed as asked: the layout came afterwards."""
    wanted = _split_product(o)
    made = [
        types[0]
        for primitive, _, _, inside, types, *_ in (o.program or {}).get("values", [])
        if primitive == "dot_general" and not inside and types
    ]
    return bool(made) and wanted not in made


def _shown(o) -> str:
    return (o.sharding or {}).get("", "")


def _columns_whole(o) -> bool:
    return "@" in _shown(o) and not _shown(o).rstrip("])").endswith("@model")


def _not_placed(o) -> bool:
    return "@" not in _shown(o)


PROBLEM = Problem(
    reference=explicit_matmul,
    title="A matmul on Explicit axes",
    difficulty="easy",
    teaches="explicit sharding: a split contraction needs out_sharding, and jax.typeof shows it",
    lesson=("on_the_mesh",),
    make_cases=_cases,
    requirements=(
        Returns("result", "It returns `x @ w`, shape (B, h)."),
        Layout(
            "layout",
            "The product is laid out as `P('data', 'model')` on `mesh`, each device holding "
            "only its own block, and `jax.typeof` of it shows so.",
            spec=P("data", "model"),
        ),
        Program(
            "on_the_mesh",
            "The product is computed on the mesh from the inputs laid out as given, its layout "
            "asked for: in the traced program, `x @ w` takes `float32[B@data,d@model]` and "
            "`float32[d@model,h]` and is typed `float32[B@data,h@model]`, which that split "
            "contraction gives only through `out_sharding=`.",
            test=product_typed(_split_product, "x @ w", _split_operands),
        ),
        Traceable(
            "traceable",
            "It traces: the checker reads its program with `jax.make_jaxpr`, its inputs fixed "
            "as given, so it must not enter `jax.set_mesh` (which refuses to run while JAX "
            "traces): give `out_sharding=` a `NamedSharding(mesh, P(...))`.",
            inputs_as_given=True,
        ),
    ),
    hints=(
        ResultHint(
            _not_placed,
            "the numbers are right but the answer carries no layout: place x and w on the mesh "
            "first, jax.device_put(x, NamedSharding(mesh, P('data', 'model'))) and w as "
            "P('model', None)",
            requirement="layout",
        ),
        ResultHint(
            _columns_whole,
            "the numbers are right but every device holds whole rows of the result: ask for "
            "the layout in the matmul itself, jnp.matmul(x, w, out_sharding=NamedSharding(mesh, "
            "P('data', 'model'))), so each device keeps only its own block",
            requirement="layout",
        ),
        ResultHint(
            _product_typed_otherwise,
            "the product itself is laid out otherwise and moved into place afterwards: ask for "
            "the layout in the matmul, jnp.matmul(x, w, out_sharding=NamedSharding(mesh, "
            "P('data', 'model'))), with x laid out P('data', 'model') and w P('model', None)",
            requirement="on_the_mesh",
        ),
        ErrorHint(
            "ShardingTypeError",
            "ambiguous",
            "x's columns and w's rows are both split over 'model', so x @ w is a sum of partial "
            "products and JAX will not guess its layout: use jnp.matmul(x, w, out_sharding=...)",
        ),
        ErrorHint(
            "ValueError",
            "not under a mesh context",
            "a bare P(...) means nothing without a mesh: pass NamedSharding(mesh, P(...))",
        ),
    ),
)

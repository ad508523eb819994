"""Problem: choose the operands' layouts so that a matmul lands in the layout asked for with no
collective at all."""

from __future__ import annotations

# solution
import jax
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P


def no_traffic_matmul(a, b, *, mesh):
    """``a @ b`` on a mesh with Explicit axes ``('x', 'y')``, laid out ``P('x', 'y')``, made from
    operands laid out so that no device needs another's data.

    Choose where ``a`` and ``b`` go. If neither splits the dimension the product adds over,
    each device can make its own block of the product from what it holds: ``a`` split by rows
    over ``'x'`` and ``b`` by columns over ``'y'`` give ``P('x', 'y')`` with nothing moved.

    Args:
        a: shape (I, J), a NumPy array; I divides over ``'x'``.
        b: shape (J, K), a NumPy array; K divides over ``'y'``.
        mesh: a mesh with Explicit axes ``'x'`` and ``'y'``.
    """
    a = jax.device_put(a, NamedSharding(mesh, P("x", None)))
    b = jax.device_put(b, NamedSharding(mesh, P(None, "y")))
    return a @ b


# end solution

from spmd_guide.practice.cases import normal, two_axis_meshes
from spmd_guide.practice.problem import Case, Problem, ResultHint
from spmd_guide.practice.requirements import Layout, Program, Returns, UnderJit, product_typed


def _cases(devices: int) -> list[Case]:
    cases = []
    for seed, mesh in enumerate(two_axis_meshes(devices, ("x", "y"))):
        rows, columns = mesh.shape["x"], mesh.shape["y"]
        a = normal(800 + seed, 2 * rows, 8)
        b = normal(810 + seed, 8, 3 * columns)
        cases.append(Case((a, b), {"mesh": mesh}))
    return cases


def _own_block(o) -> str:
    a, b = o.args
    return f"float32[{len(a)}@x,{b.shape[1]}@y]"


def _operands(o) -> tuple[str, str]:
    a, b = o.args
    return f"float32[{len(a)}@x,{a.shape[1]}]", f"float32[{b.shape[0]},{b.shape[1]}@y]"


def _made_whole(o) -> bool:
    return any(
        primitive == "dot_general" and not inside and types and "@" not in types[0]
        for primitive, _, _, inside, types, *_ in (o.program or {}).get("values", [])
    )


PROBLEM = Problem(
    reference=no_traffic_matmul,
    title="A matmul with no traffic",
    difficulty="easy",
    teaches="layouts that need no collective: split the free dimensions, never the contraction",
    lesson=("own_blocks",),
    make_cases=_cases,
    requirements=(
        Returns("result", "It returns `a @ b`, shape (I, K)."),
        Layout(
            "layout",
            "The product is laid out as `P('x', 'y')` on `mesh`: each device holds its own block.",
            spec=P("x", "y"),
        ),
        Program(
            "own_blocks",
            "Each device makes its own block from what it holds: in the traced program the "
            "product takes `float32[I@x,J]` and `float32[J,K@y]` and is typed "
            "`float32[I@x,K@y]`, a product that needs no collective.",
            test=product_typed(_own_block, "a @ b", _operands),
        ),
        UnderJit(
            "jit",
            "It works under `jax.jit` (so no `jax.set_mesh` inside it: name layouts with "
            "`NamedSharding(mesh, P(...))`).",
        ),
    ),
    hints=(
        ResultHint(
            _made_whole,
            "every device computes the whole product and keeps its block: place a split by "
            "rows over 'x' and b by columns over 'y', so each device makes only its own block",
            requirement="own_blocks",
        ),
    ),
)

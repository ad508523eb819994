"""Problem: a matmul on a 2D mesh, batch over one axis and the contraction over the other."""

from __future__ import annotations

# solution
import jax
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P


def matmul_2d(x, w, *, mesh):
    """``x @ w`` with the batch split over ``'data'`` and the contraction over ``'model'``.

    Each device holds a (B / rows, d / columns) block of ``x`` and the matching (d / columns,
    h) rows of ``w``; its product is a partial sum of its batch block's output. A
    ``jax.lax.psum`` over ``'model'`` (not ``'data'``) adds the partial sums along each row of
    the mesh. Nothing may assume the mesh's shape: the same code runs on 1x8, 2x4, 4x2 and 8x1.

    Args:
        x: an array of shape (B, d), B divisible by the ``'data'`` axis and d by ``'model'``.
        w: an array of shape (d, h).
        mesh: a mesh with axes ``'data'`` and ``'model'``.

    Returns:
        ``x @ w``, shape (B, h), split over ``'data'`` by rows.
    """

    def block(x_block, w_rows):
        return jax.lax.psum(x_block @ w_rows, "model")

    product = jax.shard_map(
        block,
        mesh=mesh,
        in_specs=(P("data", "model"), P("model", None)),
        out_specs=P("data", None),
    )
    x = jax.device_put(x, NamedSharding(mesh, P("data", "model")))
    w = jax.device_put(w, NamedSharding(mesh, P("model", None)))
    return product(x, w)


# end solution


from spmd_guide.practice.cases import normal, two_axis_meshes
from spmd_guide.practice.problem import Case, ErrorHint, Problem, ResultHint


def _cases(devices: int) -> list[Case]:
    cases = []
    for seed, mesh in enumerate(two_axis_meshes(devices, ("data", "model"))):
        rows, columns = mesh.shape["data"], mesh.shape["model"]
        x = normal(150 + seed, 2 * rows, 3 * columns)
        cases.append(Case((x, normal(160 + seed, 3 * columns, 5)), {"mesh": mesh}))
    return cases


def _non_square(o) -> bool:
    axes = o.kwargs["mesh"]["axes"]
    return axes["data"] != axes["model"]


PROBLEM = Problem(
    reference=matmul_2d,
    title="A matmul on a 2D mesh",
    difficulty="medium",
    teaches="2D meshes: which axis each collective runs over, and no hard-coded axis sizes",
    make_cases=_cases,
    uses=frozenset({"shard_map", "psum"}),
    hints=(
        ErrorHint(
            "ValueError",
            r"out_specs which require replication",
            "out_specs=P('data', None) says the output is the same across 'model', but each "
            "device holds a partial sum over its columns of x: psum over 'model', the axis "
            "the contraction is split over",
        ),
        ErrorHint(
            "TypeError",
            r"dot_general requires contracting dimensions to have the same shape",
            "the blocks of x and w do not line up: split x's columns and w's rows over the "
            "same axis, 'model' (in_specs P('data', 'model') and P('model', None))",
        ),
        ResultHint(
            _non_square,
            "wrong on this non-square mesh: a size written as a number (2, 4) or the two axes "
            "swapped fails when the axes differ in size. Read sizes from mesh.shape and check "
            "which axis each spec and psum names",
        ),
    ),
)

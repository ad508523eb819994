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


from jax.sharding import AxisType

from spmd_guide.practice.cases import kind, normal, two_axis_meshes
from spmd_guide.practice.problem import Case, ErrorHint, Problem
from spmd_guide.practice.requirements import (
    EXPLICIT_MESHES,
    GIVEN_MESH,
    TRACEABLE,
    Layout,
    Program,
    Returns,
    enters_as,
    every,
    uses,
)


def _cases(devices: int) -> list[Case]:
    cases = []
    for seed, mesh in enumerate(two_axis_meshes(devices, ("data", "model"))):
        rows, columns = mesh.shape["data"], mesh.shape["model"]
        x = normal(150 + seed, 2 * rows, 3 * columns)
        w = normal(160 + seed, 3 * columns, 5)
        cases.append(Case((x, w), {"mesh": mesh}, exercises=kind(mesh)))
    # One mesh with Auto axes, so that a failure on Explicit ones is told apart.
    auto = jax.make_mesh(
        (1, devices),
        ("data", "model"),
        axis_types=(AxisType.Auto,) * 2,
        devices=jax.devices()[:devices],
    )
    x, w = normal(170, 2, 3 * devices), normal(171, 3 * devices, 5)
    cases.insert(0, Case((x, w), {"mesh": auto}))
    return cases


def _blocks(o) -> dict[str, tuple[int, ...]]:
    x, _ = o.args
    rows, columns = o.case_mesh["axes"]["data"], o.case_mesh["axes"]["model"]
    return {"x": (x.shape[0] // rows, x.shape[1] // columns)}


PROBLEM = Problem(
    reference=matmul_2d,
    title="A matmul on a 2D mesh",
    difficulty="medium",
    teaches="2D meshes: which axis each collective runs over, and no hard-coded axis sizes",
    lesson=("blocks",),
    make_cases=_cases,
    requirements=(
        Returns("result", "It returns `x @ w`, shape (B, h)."),
        Program(
            "blocks",
            "Each device multiplies only its own block of `x`: a `jax.shard_map` receives `x` "
            "in (B / rows, d / columns) blocks, its batch split over `'data'` and its columns "
            "over `'model'`.",
            test=every(uses("shard_map"), enters_as(_blocks)),
        ),
        Layout(
            "layout",
            "The product is split over `'data'` by rows and the same across `'model'`: laid "
            "out as `P('data', None)`.",
            spec=P("data", None),
        ),
        EXPLICIT_MESHES,
        GIVEN_MESH,
        TRACEABLE,
    ),
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
    ),
)

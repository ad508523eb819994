"""Problem: predict the collectives, their mesh axes and the bytes each device sends for a matmul
of laid-out operands, as the sharding explorer counts them, graded against the compiled
program."""

from __future__ import annotations

from spmd_guide import explorer

SHAPES = {"a": (16, 32), "b": (32, 64)}
"""The operands' shapes: A is (I, J) and B is (J, K), float32."""


def compiled_traffic(a_spec, b_spec, out_spec, x, y) -> dict[str, float]:
    """The compiled program's collectives for ``A @ B`` on an Explicit (x, y) mesh, each as
    ``"<kind> over <axes>"`` with the bytes each device sends by the explorer's formula, from
    the sizes the program prints."""
    question = {
        "mesh": {"axes": [["x", x], ["y", y]], "types": "Explicit"},
        "arrays": [
            {"shape": list(SHAPES["a"]), "spec": list(a_spec)},
            {"shape": list(SHAPES["b"]), "spec": list(b_spec)},
        ],
        "op": {"kind": "matmul", **({"out_spec": list(out_spec)} if out_spec else {})},
    }
    found = explorer.compiled(question)
    sizes = {"x": x, "y": y}
    traffic: dict[str, float] = {}
    for kind, axes, elements in found["collectives"]:
        devices = 1
        for axis in axes:
            devices *= sizes[axis]
        key = f"{kind} over {','.join(axes)}"
        traffic[key] = traffic.get(key, 0.0) + explorer.bytes_sent(kind, devices, elements)
    return traffic


# solution
def matmul_traffic(a_spec, b_spec, out_spec, x, y):
    """The collectives ``jax.jit`` inserts for ``A @ B`` and the bytes each device sends, on a
    mesh with Explicit axes ``('x', 'y')`` of sizes ``x`` and ``y``.

    A is (16, 32) and B is (32, 64), float32, laid out by ``a_spec`` and ``b_spec`` (tuples with
    an axis name or None per dimension); ``out_spec``, when not None, is the product's
    ``out_sharding``. Return a dict from ``"<collective> over <axes>"`` (``"all-gather over
    y"``; axes joined by commas) to the bytes one device sends in it, on a ring of the n
    devices of those axes: an all-gather sends (n - 1)/n of its result, an all-reduce twice
    that. An axis of size 1 moves nothing. Return {} when nothing moves.

    Args:
        a_spec: A's spec, e.g. ``("x", None)``.
        b_spec: B's spec.
        out_spec: the product's ``out_sharding`` spec, or None.
        x: the size of axis ``'x'``.
        y: the size of axis ``'y'``.
    """
    sizes = {"x": x, "y": y, None: 1}
    (a_rows, a_inner), (b_inner, b_columns) = a_spec, b_spec

    def sent(kind, axis, elements):
        n = sizes[axis]
        share = (n - 1) / n * elements * 4
        return {f"{kind} over {axis}": 2 * share if kind == "all-reduce" else share}

    if sizes[a_inner] > 1 and a_inner == b_inner:
        # Each device holds a partial sum of its rows and columns, added over a_inner.
        rows, columns = 16 // sizes[a_rows], 64 // sizes[b_columns]
        return sent("all-reduce", a_inner, rows * columns)
    if sizes[a_inner] > 1:
        # A's slices of the contraction are gathered: its rows' block, whole along J.
        return sent("all-gather", a_inner, 16 // sizes[a_rows] * 32)
    if sizes[b_inner] > 1:
        return sent("all-gather", b_inner, 32 * 64 // sizes[b_columns])
    return {}


# end solution

import numpy as np

from spmd_guide.practice.problem import Case, Problem, ResultHint
from spmd_guide.practice.requirements import Returns, WorkedOut

LAYOUTS = (
    (("x", None), (None, "y"), None),
    (("x", "y"), (None, None), None),
    (("x", "y"), ("y", None), ("x", None)),
    (("x", "y"), ("y", None), ("x", "y")),
)
"""The (A, B, out_sharding) specs asked about: the matmul cases the explorer names, less the
refused fourth, with the sum of the third kept whole or split. B's contraction split alone is
left out: where gathering B and reducing the product move the same bytes, the compiler takes
one or the other by the mesh's shape (the explorer's page shows it)."""


def _cases(devices: int) -> list[Case]:
    shapes = [(x, devices // x) for x in range(1, devices + 1) if devices % x == 0]
    return [Case((*layout, x, y)) for x, y in shapes for layout in LAYOUTS]


def compare_traffic(expected, got) -> list[str]:
    """How the predicted traffic differs from the compiled program's."""
    if not isinstance(got, dict):
        return ['expected a dict from "<collective> over <axes>" to bytes']
    want = {k: float(np.asarray(v)) for k, v in expected.items()}
    have = {str(k): float(np.asarray(v)) for k, v in got.items()}
    lines = [
        f"{k}: the compiled program has it, you predicted nothing" for k in want if k not in have
    ]
    lines += [f"{k}: the compiled program has no such collective" for k in have if k not in want]
    lines += [
        f"{k}: each device sends {want[k]:g} bytes, you predicted {have[k]:g}"
        for k in want
        if k in have and not np.isclose(want[k], have[k], rtol=1e-6)
    ]
    return lines


def _gather_for_sum(o) -> bool:
    a_spec, b_spec = o.args[0], o.args[1]
    both = a_spec[1] is not None and a_spec[1] == b_spec[0]
    return both and isinstance(o.value, dict) and any("all-gather" in k for k in o.value)


def _once_not_twice(o) -> bool:
    if not isinstance(o.value, dict) or not isinstance(o.expected, dict):
        return False
    return any(
        "all-reduce" in k and np.isclose(float(np.asarray(o.value.get(k, 0))) * 2, float(v))
        for k, v in o.expected.items()
    )


PROBLEM = Problem(
    reference=matmul_traffic,
    title="Predict a matmul's traffic",
    difficulty="medium",
    teaches="the matmul cases: which collective a layout needs, over which axes, how many bytes",
    lesson=("worked_out",),
    make_cases=_cases,
    requirements=(
        Returns(
            "result",
            'It returns a dict from `"<collective> over <axes>"` to the bytes each device sends, '
            "equal to the compiled program's collectives on every (x, y) mesh of n devices, "
            "their bytes counted by the formula the statement gives.",
            compare=compare_traffic,
        ),
        WorkedOut(
            "worked_out",
            "It works the traffic out from the specs and sizes, without lowering or compiling "
            "anything: the checker records whether your function calls JAX's ahead-of-time API "
            "(`.lower()`, `.compile()`, `.as_text()`).",
        ),
    ),
    answer=compiled_traffic,
    hints=(
        ResultHint(
            _gather_for_sum,
            "when both operands split the contraction over the same axis, each device already "
            "holds matching slices: it multiplies them into a partial sum, and an all-reduce "
            "adds those; nothing is gathered",
        ),
        ResultHint(
            _once_not_twice,
            "an all-reduce on a ring sends its data twice, once to add (a reduce-scatter) and "
            "once to share the sums (an all-gather): 2 (n - 1)/n of the result",
        ),
    ),
)

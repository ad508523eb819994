"""The reference's process: the cases and their expected answers, for one device count.

The checker starts one per device count. It makes each problem's cases, runs the reference on
them, and sends the parent the inputs, the expected answers and the expected layouts; then it
exits. No learner's code runs here: solutions run in another process
(:mod:`spmd_guide.practice.solution_runner`), which receives only the inputs.

Usage (the checker runs it): python -m spmd_guide.practice.reference_worker --channel FD NAME ...
"""

from __future__ import annotations

import json
import os
import sys
import warnings
from typing import TYPE_CHECKING, Any

from spmd_guide.practice.protocol import encode
from spmd_guide.practice.solution_runner import blocks_by_device, bound

if TYPE_CHECKING:
    from spmd_guide.practice.problem import Case, Problem


def main(argv: list[str]) -> None:
    if len(argv) < 3 or argv[0] != "--channel":
        sys.exit("usage: python -m spmd_guide.practice.reference_worker --channel FD NAME ...")
    warnings.simplefilter("ignore")
    import jax

    from spmd_guide.practice.catalog import get_problem

    with os.fdopen(int(argv[1]), "w", encoding="utf-8") as channel:
        for name in dict.fromkeys(argv[2:]):
            problem = get_problem(name)
            cases = [expected_case(problem, c) for c in problem.make_cases(jax.device_count())]
            channel.write(json.dumps({"problem": name, "cases": cases}) + "\n")
            channel.flush()


def expected_case(problem: Problem, case: Case) -> dict[str, Any]:
    """A case as the parent receives it: inputs, what the answer must be, and how laid out."""
    record: dict[str, Any] = {
        "inputs": describe_call(case.args, case.kwargs),
        "args": encode(tuple(case.args)),
        "kwargs": encode(dict(case.kwargs)),
        "raises": case.raises,
        "exercises": case.exercises,
        "expected": encode(None),
        "expected_layout": None,
    }
    if case.raises is None:
        answer = _answer(problem, case)
        record["expected"] = encode(plain(answer))
        mesh = mesh_of(case)
        if problem.layout is not None and mesh is not None:
            record["expected_layout"] = _layout_for(problem.layout.spec, mesh, answer)
    return record


def _answer(problem: Problem, case: Case) -> Any:
    """The expected answer: the reference's, under ``jax.jit`` when the problem is traced (as
    the solution's process runs a traceable solution), else called as it is."""
    import jax

    if problem.answer is not None:
        return problem.answer(*case.args, **case.kwargs)
    if not problem.traced:
        return problem.reference(*_fresh(case.args), **_fresh(case.kwargs))
    call, arrays = bound(problem.reference, case.args, dict(case.kwargs))
    return jax.jit(call)(*arrays)


def _layout_for(spec: Any, mesh: Any, answer: Any) -> dict[str, Any]:
    from jax.sharding import NamedSharding

    if isinstance(answer, dict):
        return {
            str(k): blocks_by_device(NamedSharding(mesh, spec[k]), v.shape)
            for k, v in answer.items()
        }
    return {"": blocks_by_device(NamedSharding(mesh, spec), answer.shape)}


def plain(answer: Any) -> Any:
    """``answer`` as NumPy data (a dict of numbers stays a dict)."""
    import jax
    import numpy as np

    if isinstance(answer, dict):
        return {str(k): plain(v) for k, v in answer.items()}
    return np.asarray(jax.device_get(answer))


def mesh_of(case: Case) -> Any:
    from jax.sharding import Mesh

    for value in (*case.args, *case.kwargs.values()):
        if isinstance(value, Mesh):
            return value
    return None


def describe_call(args: Any, kwargs: Any) -> str:
    """A case's arguments as the report shows them."""
    parts = [_describe(a) for a in args] + [f"{k}={_describe(v)}" for k, v in kwargs.items()]
    return ", ".join(parts)


def _describe(value: Any) -> str:
    import numpy as np
    from jax.sharding import Mesh

    if isinstance(value, Mesh):
        axes = ", ".join(f"{k!r}: {v}" for k, v in value.shape.items())
        kind = "Explicit" if all("Explicit" in str(t) for t in value.axis_types) else "Auto"
        ids = [int(d.id) for d in value.devices.flat]
        return f"Mesh({axes}; {kind}; devices {ids})"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k!r}: {_shape(v)}" for k, v in value.items()) + "}"
    if isinstance(value, np.ndarray):
        body = np.array2string(value.reshape(-1)[:6], precision=3, separator=", ")
        more = ", ..." if value.size > 6 else ""
        return f"{value.dtype}{list(value.shape)} {body[:-1]}{more}]"
    return repr(value)


def _shape(value: Any) -> str:
    import numpy as np

    array = np.asarray(value)
    return f"{array.dtype}{list(array.shape)}"


def _fresh(value: Any) -> Any:
    import numpy as np

    if isinstance(value, dict):
        return {k: _fresh(v) for k, v in value.items()}
    if isinstance(value, tuple):
        return tuple(_fresh(v) for v in value)
    return value.copy() if isinstance(value, np.ndarray) else value


if __name__ == "__main__":
    main(sys.argv[1:])

"""The checker's worker: one process per device count, started by the checker.

It starts JAX, builds every case and runs the reference on it, and sends those expected
answers to the parent *before* it loads any learner's file. Only then does it import each
solution and run the cases, sending what the function returned or raised. The parent judges;
this process never does, so nothing a solution patches in here can turn a wrong answer into a
pass. Messages go over a private pipe (``--channel``), never stdout, which the parent sends to a
file along with stderr.

Usage (the checker runs it): python -m spmd_guide.practice.worker --channel FD NAME=PATH ...
"""

from __future__ import annotations

import importlib.util
import json
import os
import sys
import threading
import traceback
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from spmd_guide.practice.protocol import encode

if TYPE_CHECKING:
    from spmd_guide.practice.problem import Case, Problem

MESSAGE_LIMIT = 400
"""Characters of an exception's message sent to the parent."""

WATCHED_ENVIRONMENT = ("JAX_", "XLA_", "TF_CPP_")
"""Environment variables a solution should leave alone: the checker sets up JAX itself."""


class _NotAnArray(Exception):
    """A solution returned None or a string: carried out of ``jax.jit`` as its description."""


class _Channel:
    def __init__(self, fd: int) -> None:
        self._file = os.fdopen(fd, "w", encoding="utf-8")

    def send(self, **message: Any) -> None:
        self._file.write(json.dumps(message) + "\n")
        self._file.flush()


def main(argv: list[str]) -> None:
    if len(argv) < 3 or argv[0] != "--channel":
        sys.exit("usage: python -m spmd_guide.practice.worker --channel FD NAME=PATH ...")
    channel = _Channel(int(argv[1]))
    jobs = [job.split("=", 1) for job in argv[2:]]
    warnings.simplefilter("ignore")

    import jax

    from spmd_guide.practice.catalog import get_problem

    channel.send(started=jax.device_count())
    # The expected answers, once per problem however many solutions to it are checked: the
    # cases are the same for the same device count, and each call gets fresh copies of them.
    answers: dict[str, tuple[Problem, list[Case], list[dict[str, Any]]]] = {}
    prepared = []
    for number, (name, file) in enumerate(jobs):
        if name not in answers:
            problem = get_problem(name)
            cases = problem.make_cases(jax.device_count())
            answers[name] = (problem, cases, [_expected(problem, case) for case in cases])
        problem, cases, expected = answers[name]
        channel.send(expected=number, cases=expected)
        prepared.append((problem, Path(file), cases))
    channel.send(trusted_end=True)

    # From here on, learners' code runs in this process.
    for number, (problem, path, cases) in enumerate(prepared):
        channel.send(loading=number)
        environment = _watched_environment()
        threads = set(threading.enumerate())
        function = _load(channel, number, path, problem.name)
        if function is None:
            continue
        channel.send(loaded=number)
        for index, case in enumerate(cases):
            channel.send(running=[number, index])
            channel.send(case=[number, index], **_run(function, case, path, problem))
        changed = sorted(
            k
            for k in set(environment) | set(_watched_environment())
            if environment.get(k) != os.environ.get(k)
        )
        started = [t for t in threading.enumerate() if t not in threads and t.is_alive()]
        channel.send(finished=number, changed_environment=changed, threads=len(started))
    channel.send(done=True)
    # Threads a solution left running must not keep this process alive.
    os._exit(0)


def _expected(problem: Problem, case: Case) -> dict[str, Any]:
    import jax

    record: dict[str, Any] = {
        "inputs": _describe_call(case.args, case.kwargs),
        "args": encode(tuple(case.args)),
        "kwargs": encode(dict(case.kwargs)),
        "raises": case.raises,
        "expect_type": case.expect_type,
    }
    if case.raises is None:
        answer = _caller(problem.answer or problem.reference, case, problem)(*_fresh(case.args))
        record["expected"] = encode(_plain(answer))
        record["expected_type"] = str(jax.typeof(answer)) if case.expect_type else None
    else:
        record["expected"] = encode(None)
    return record


def _load(channel: _Channel, number: int, path: Path, name: str) -> Callable[..., Any] | None:
    spec = importlib.util.spec_from_file_location(f"solution_{number}", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    try:
        spec.loader.exec_module(module)
    except SyntaxError as error:
        channel.send(
            load_failed=number,
            kind="syntax",
            message=f"{error.msg} at line {error.lineno}: {(error.text or '').strip()}",
        )
        return None
    except SystemExit as error:
        channel.send(load_failed=number, kind="exit", message=f"sys.exit({error.code!r})")
        return None
    except BaseException as error:
        channel.send(
            load_failed=number,
            kind="raised",
            error_type=type(error).__name__,
            message=_message(error) + _line_in(path, error),
        )
        return None
    function: Callable[..., Any] | None = getattr(module, name, None)
    if not callable(function):
        defined = sorted(
            n
            for n, v in vars(module).items()
            if callable(v)
            and not n.startswith("_")
            and getattr(v, "__module__", "") == module.__name__
        )
        channel.send(load_failed=number, kind="missing", defined=defined)
        return None
    return function


def _run(function: Callable[..., Any], case: Case, path: Path, problem: Problem) -> dict[str, Any]:
    import jax

    outcome: dict[str, Any] = {}
    try:
        answer = _caller(function, case, problem)(*_fresh(case.args))
    except _NotAnArray as returned:
        outcome["returned"] = str(returned)
        return outcome
    except BaseException as error:  # SystemExit and KeyboardInterrupt are verdicts too
        frames = traceback.extract_tb(error.__traceback__)
        outcome.update(
            error_type=type(error).__name__,
            error_message=_message(error),
            raised_in_solution=bool(frames) and not _inside_libraries(frames[-1].filename),
        )
        return outcome
    try:
        plain = _plain(answer)
        outcome["value"] = encode(plain)
    except Exception:
        outcome["returned"] = f"a {type(answer).__name__}"
        return outcome
    if isinstance(answer, jax.Array):
        outcome["type"] = str(jax.typeof(answer))
    if case.raises is None and _traced(problem, case):
        outcome.update(_how_computed(function, case))
    return outcome


def _traced(problem: Problem, case: Case) -> bool:
    """Whether the checker reads how ``case`` is computed: problems on meshes must trace,
    unless the problem lets the function enter ``jax.set_mesh``, which tracing forbids."""
    if not problem.traced:
        return False
    return bool(problem.uses or problem.forbids) or _mesh_of(case) is not None


def _caller(function: Callable[..., Any], case: Case, problem: Problem) -> Callable[..., Any]:
    """``function`` with the case's keyword arguments bound; under ``jax.jit`` for problems that
    must trace anyway, since an eager ``shard_map`` runs its body one operation at a time."""
    import jax

    kwargs = _fresh(case.kwargs)

    def call(*args: Any) -> Any:
        answer = function(*args, **kwargs)
        if answer is None or isinstance(answer, str | bytes):
            raise _NotAnArray(repr(answer)[:80])
        return answer

    return jax.jit(call) if _traced(problem, case) else call


def _how_computed(function: Callable[..., Any], case: Case) -> dict[str, Any]:
    """The primitives in ``function``'s jaxpr, and the meshes its shard_maps ran on."""
    import jax

    try:
        traced = jax.make_jaxpr(lambda *a: function(*a, **_fresh(case.kwargs)))(*_fresh(case.args))
    except BaseException as error:
        return {"trace_error": f"{type(error).__name__}: {_message(error)[:200]}"}
    primitives: set[str] = set()
    meshes: list[dict[str, Any]] = []
    _walk(traced.jaxpr, primitives, meshes)
    return {"primitives": sorted(primitives), "meshes": meshes}


def _walk(jaxpr: Any, primitives: set[str], meshes: list[dict[str, Any]]) -> None:
    for equation in jaxpr.eqns:
        name = equation.primitive.name
        primitives.add(name)
        # psum of a value the same on every device is traced as psum_invariant (and so on).
        primitives.add(name.removesuffix("_invariant"))
        mesh = equation.params.get("mesh") if equation.primitive.name == "shard_map" else None
        if mesh is not None:
            devices = getattr(mesh, "devices", None)
            meshes.append(
                {
                    "axes": {str(k): int(v) for k, v in dict(mesh.shape).items()},
                    "devices": [int(d.id) for d in devices.flat] if devices is not None else None,
                }
            )
        for value in equation.params.values():
            for inner in value if isinstance(value, tuple | list) else (value,):
                if hasattr(inner, "eqns"):
                    _walk(inner, primitives, meshes)
                elif hasattr(inner, "jaxpr") and hasattr(inner.jaxpr, "eqns"):
                    _walk(inner.jaxpr, primitives, meshes)


def _plain(answer: Any) -> Any:
    """``answer`` as NumPy data (a dict of numbers stays a dict)."""
    import jax
    import numpy as np

    if isinstance(answer, dict):
        return {str(k): _plain(v) for k, v in answer.items()}
    array = np.asarray(jax.device_get(answer))
    if array.dtype == object or not (np.issubdtype(array.dtype, np.number) or array.dtype == bool):
        raise TypeError(f"not an array of numbers: {array.dtype}")
    return array


def _fresh(value: Any) -> Any:
    """A copy of the case's arrays, so a solution that writes into its input cannot spoil the
    next call."""
    import numpy as np

    if isinstance(value, dict):
        return {k: _fresh(v) for k, v in value.items()}
    if isinstance(value, tuple):
        return tuple(_fresh(v) for v in value)
    return value.copy() if isinstance(value, np.ndarray) else value


def _mesh_of(case: Case) -> Any:
    from jax.sharding import Mesh

    for value in (*case.args, *case.kwargs.values()):
        if isinstance(value, Mesh):
            return value
    return None


def _describe_call(args: Any, kwargs: Any) -> str:
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


def _inside_libraries(filename: str) -> bool:
    """Whether ``filename`` belongs to JAX, jaxlib, NumPy or Flax rather than to a solution."""
    import flax
    import jax
    import jaxlib
    import numpy

    roots = [Path(m.__file__ or "").parent for m in (jax, jaxlib, numpy, flax)]
    return any(Path(filename).is_relative_to(root) for root in roots)


def _shape(value: Any) -> str:
    import numpy as np

    array = np.asarray(value)
    return f"{array.dtype}{list(array.shape)}"


def _message(error: BaseException) -> str:
    lines = [line for line in str(error).strip().splitlines() if line.strip()]
    text = " ".join(lines[:4])
    return text[:MESSAGE_LIMIT] + (" ..." if len(text) > MESSAGE_LIMIT or len(lines) > 4 else "")


def _line_in(path: Path, error: BaseException) -> str:
    frames = [f for f in traceback.extract_tb(error.__traceback__) if Path(f.filename) == path]
    return f" (line {frames[-1].lineno}: {frames[-1].line})" if frames else ""


def _watched_environment() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if k.startswith(WATCHED_ENVIRONMENT)}


if __name__ == "__main__":
    main(sys.argv[1:])

"""The solution's process: runs a learner's function on the inputs the checker sends.

The checker starts this file as a script (``python -I solution_runner.py``), one process per
device count. It imports JAX and NumPy but nothing of ``spmd_guide``: the reference
solutions, the expected answers and the judging code are not in this process, and importing
``spmd_guide`` from a solution raises an error that says so. The parent sends one request at a
time, each with a fresh random id (load a file, run a case, finish); this process answers each
with one message carrying that id. The parent judges the values it receives, so code that
patches this process can at most send other values, and a message the parent did not ask for
fails the check.

Usage (the checker runs it): python -I solution_runner.py --requests FD --channel FD
"""

from __future__ import annotations

import importlib.abc
import importlib.util
import json
import os
import sys
import threading
import traceback
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

MESSAGE_LIMIT = 400
"""Characters of an exception's message sent to the parent."""

VALUES_LIMIT = 5000
"""Equations of a program summarised at most; a longer program is cut, not refused."""

WATCHED_ENVIRONMENT = ("JAX_", "XLA_", "TF_CPP_")
"""Environment variables a solution should leave alone: the checker sets up JAX itself."""

PROTOCOL = Path(__file__).with_name("protocol.py")


class NotAvailableWhileChecking(importlib.abc.MetaPathFinder):
    """Refuses every import of :mod:`spmd_guide` while a solution is checked."""

    def find_spec(self, name: str, path: Any = None, target: Any = None) -> None:
        if name == "spmd_guide" or name.startswith("spmd_guide."):
            raise ImportError(
                f"{name} is not available while checking: your file runs where the checker's "
                "modules and reference solutions cannot be imported. Write the function "
                "yourself (the problem's page folds a solution away if you want one)",
                name=name,
            )
        return None


class _NotAnArray(Exception):
    """A solution returned None or a string: carried out of ``jax.jit`` as its description."""


def main(argv: list[str]) -> None:
    if len(argv) != 4 or argv[0] != "--requests" or argv[2] != "--channel":
        sys.exit("usage: python -I solution_runner.py --requests FD --channel FD")
    requests = os.fdopen(int(argv[1]), "r", encoding="utf-8")
    channel = os.fdopen(int(argv[3]), "w", encoding="utf-8")
    sys.meta_path.insert(0, NotAvailableWhileChecking())
    protocol = _load_protocol()
    warnings.simplefilter("ignore")

    import jax

    def send(message: dict[str, Any]) -> None:
        channel.write(json.dumps(message) + "\n")
        channel.flush()

    send({"ready": jax.device_count()})
    function: Callable[..., Any] | None = None
    environment: dict[str, str] = {}
    threads: set[threading.Thread] = set()
    for line in requests:
        request = json.loads(line)
        reply: dict[str, Any] = {"id": request["id"]}
        if "load" in request:
            environment = _watched_environment()
            threads = set(threading.enumerate())
            function, failure = _load(Path(request["load"]), request["name"], request["number"])
            reply.update(failure or {"loaded": True})
        elif "run" in request and function is not None:
            reply.update(_run(function, request, protocol))
        elif "finish" in request:
            changed = sorted(
                k
                for k in set(environment) | set(_watched_environment())
                if environment.get(k) != os.environ.get(k)
            )
            started = [t for t in threading.enumerate() if t not in threads and t.is_alive()]
            reply.update(changed_environment=changed, threads=len(started))
            function = None
        send(reply)
    # Threads a solution left running must not keep this process alive.
    os._exit(0)


def _load_protocol() -> Any:
    spec = importlib.util.spec_from_file_location("practice_protocol", PROTOCOL)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _load(
    path: Path, name: str, number: int
) -> tuple[Callable[..., Any] | None, dict[str, Any] | None]:
    spec = importlib.util.spec_from_file_location(f"solution_{number}", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    try:
        spec.loader.exec_module(module)
    except SyntaxError as error:
        message = f"{error.msg} at line {error.lineno}: {(error.text or '').strip()}"
        return None, {"load_failed": "syntax", "message": message}
    except SystemExit as error:
        return None, {"load_failed": "exit", "message": f"sys.exit({error.code!r})"}
    except BaseException as error:
        return None, {
            "load_failed": "raised",
            "error_type": type(error).__name__,
            "message": _message(error) + _line_in(path, error),
        }
    function = getattr(module, name, None)
    if not callable(function):
        defined = sorted(
            n
            for n, v in vars(module).items()
            if callable(v)
            and not n.startswith("_")
            and getattr(v, "__module__", "") == module.__name__
        )
        return None, {"load_failed": "missing", "defined": defined}
    return function, None


def _run(function: Callable[..., Any], request: dict[str, Any], protocol: Any) -> dict[str, Any]:
    """Call ``function`` on the request's inputs; what it returned or raised, how the answer
    is laid out, and (when asked) a summary of its traced program."""
    import jax

    args = _with_meshes(protocol.decode(request["args"]))
    kwargs = _with_meshes(protocol.decode(request["kwargs"]))
    watch = _AheadOfTimeCalls()
    outcome: dict[str, Any] = {"ahead_of_time": watch.calls}
    # A function the checker can trace runs under jax.jit, as it would in a training step and
    # far faster than an eager shard_map; one that cannot trace runs eagerly, so its numbers
    # are still judged, and the failed trace is reported as the requirement it breaks.
    jit = request["jit"]
    if request["trace"]:
        try:
            call, arrays = bound(function, args, kwargs)
            if request.get("as_given"):
                call, arrays = _as_given(call, arrays), []
            with watch:
                outcome["program"] = _summary(jax.make_jaxpr(call)(*arrays).jaxpr)
            jit = jit or not request.get("as_given")
        except _NotAnArray:
            pass  # reported by the call below, as what the function returned
        except BaseException as error:
            outcome["trace_error"] = f"{type(error).__name__}: {_message(error)[:200]}"
    call, arrays = bound(function, args, kwargs)
    try:
        with watch:
            answer = jax.jit(call)(*arrays) if jit else call(*arrays)
    except _NotAnArray as returned:
        return {**outcome, "returned": str(returned)}
    except BaseException as error:  # SystemExit and KeyboardInterrupt are verdicts too
        frames = traceback.extract_tb(error.__traceback__)
        if outcome.get("trace_error", "").startswith(f"{type(error).__name__}:"):
            del outcome["trace_error"]  # the same error, not one of tracing
        return {
            **outcome,
            "error_type": type(error).__name__,
            "error_classes": [c.__name__ for c in type(error).__mro__],
            "error_message": _message(error),
            "raised_in_solution": bool(frames) and not _inside_libraries(frames[-1].filename),
        }
    if request.get("compile") and "program" in outcome:
        # Collectives and per-device shapes are the compiler's choices: read them from the
        # program it compiled for this case.
        outcome["program"]["compiled"] = jax.jit(call).lower(*arrays).compile().as_text()
    try:
        value, dtype = _plain(answer)
        outcome["value"] = protocol.encode(value)
        outcome["dtype"] = dtype
    except Exception:
        name = type(answer).__name__
        return {**outcome, "returned": f"{'an' if name[0].lower() in 'aeiou' else 'a'} {name}"}
    outcome["layout"], outcome["sharding"] = _layout(answer)
    return outcome


class _AheadOfTimeCalls:
    """While entered, records each call of JAX's ahead-of-time API (``jax.jit(f).lower``,
    ``.trace(...).lower()``, ``Lowered.compile``, ``as_text``) in ``calls``: what
    a solution that reads its answer from a compiled program calls, and JAX's own dispatch does
    not. The checker's own lowering for a case runs outside it."""

    WATCHED = (
        ("Traced", "lower"),
        ("Lowered", "compile"),
        ("Lowered", "as_text"),
        ("Compiled", "as_text"),
    )

    def __init__(self) -> None:
        self.calls: list[str] = []
        self._saved: list[tuple[Any, str, Any]] = []

    def __enter__(self) -> None:
        import jax.stages

        for owner, method in self.WATCHED:
            cls = getattr(jax.stages, owner)
            original = cls.__dict__[method]
            self._saved.append((cls, method, original))
            setattr(cls, method, self._recording(f"{owner}.{method}", original))

    def __exit__(self, *exc: object) -> None:
        for cls, method, original in reversed(self._saved):
            setattr(cls, method, original)
        self._saved.clear()

    def _recording(self, name: str, original: Callable[..., Any]) -> Callable[..., Any]:
        calls = self.calls

        def recorded(*args: Any, **kwargs: Any) -> Any:
            if name not in calls:
                calls.append(name)
            return original(*args, **kwargs)

        return recorded


def bound(
    function: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]
) -> tuple[Callable[..., Any], list[Any]]:
    """``function`` as a function of the inputs' arrays alone, and fresh copies of them: under
    ``jax.jit`` or ``jax.make_jaxpr`` the arrays are traced, while meshes and Python numbers
    stay as they are."""
    import jax
    import numpy as np

    leaves, tree = jax.tree.flatten((args, kwargs))
    arrays = [leaf.copy() for leaf in leaves if isinstance(leaf, np.ndarray)]

    def call(*traced_arrays: Any) -> Any:
        supply = iter(traced_arrays)
        filled = [next(supply) if isinstance(leaf, np.ndarray) else leaf for leaf in leaves]
        call_args, call_kwargs = jax.tree.unflatten(tree, filled)
        answer = function(*call_args, **call_kwargs)
        if answer is None or isinstance(answer, str | bytes):
            raise _NotAnArray(repr(answer)[:80])
        return answer

    return call, arrays


def _as_given(call: Callable[..., Any], arrays: list[Any]) -> Callable[[], Any]:
    """``call`` with its inputs fixed as given, to be traced with no arguments."""
    return lambda: call(*arrays)


def _with_meshes(value: Any) -> Any:
    """Decoded inputs with each mesh description made a Mesh again."""
    if isinstance(value, dict) and set(value) == {"axes", "devices", "types"}:
        import jax
        import numpy as np
        from jax.sharding import AxisType, Mesh

        by_id = {d.id: d for d in jax.devices()}
        devices = np.array([by_id[i] for i in value["devices"]]).reshape(
            tuple(value["axes"].values())
        )
        types = tuple(getattr(AxisType, t) for t in value["types"])
        return Mesh(devices, tuple(value["axes"]), axis_types=types)
    if isinstance(value, dict):
        return {k: _with_meshes(v) for k, v in value.items()}
    if isinstance(value, tuple):
        return tuple(_with_meshes(v) for v in value)
    return value


def _plain(answer: Any) -> tuple[Any, str | None]:
    """``answer`` as NumPy numbers, and its dtype's name when that had to change (bfloat16 and
    other types NumPy cannot save come back as float32)."""
    import jax
    import numpy as np

    if isinstance(answer, dict):
        parts = {str(k): _plain(v)[0] for k, v in answer.items()}
        return parts, None
    array = np.asarray(jax.device_get(answer))
    if array.dtype == object:
        raise TypeError("not an array of numbers")
    if np.issubdtype(array.dtype, np.number) or array.dtype == bool:
        return array, array.dtype.name
    try:
        return array.astype(np.float32), array.dtype.name
    except (TypeError, ValueError):
        raise TypeError(f"not an array of numbers: {array.dtype}") from None


def _layout(answer: Any) -> tuple[dict[str, Any], dict[str, str]]:
    """Each part's blocks by device id, and how it describes its own layout."""
    import jax

    parts = answer if isinstance(answer, dict) else {"": answer}
    layout: dict[str, Any] = {}
    shown: dict[str, str] = {}
    for key, part in parts.items():
        if not isinstance(part, jax.Array):
            name = type(part).__name__
            shown[str(key)] = f"{'an' if name[0].lower() in 'aeiou' else 'a'} {name}"
            continue
        layout[str(key)] = blocks_by_device(part.sharding, part.shape)
        spec = getattr(part.sharding, "spec", None)
        described = f"{spec}" if spec is not None else type(part.sharding).__name__
        ids = sorted(int(getattr(d, "id", -1)) for d in part.sharding.device_set)
        shown[str(key)] = f"{described} ({jax.typeof(part)}) over devices {ids}"
    return layout, shown


def blocks_by_device(sharding: Any, shape: tuple[int, ...]) -> dict[str, list[list[int]]]:
    blocks = {}
    for device, index in sharding.devices_indices_map(tuple(shape)).items():
        blocks[str(device.id)] = [
            list(part.indices(size)[:2]) for part, size in zip(index, shape, strict=True)
        ]
    return blocks


def product_dimensions(equation: Any) -> list[list[int]] | None:
    """A ``dot_general``'s left operand's contracting and batch dimensions, or ``None`` for any
    other equation."""
    if equation.primitive.name != "dot_general":
        return None
    (contracting, _), (batch, _) = equation.params["dimension_numbers"]
    return [[int(d) for d in contracting], [int(d) for d in batch]]


def _summary(jaxpr: Any) -> dict[str, Any]:
    """The primitives a program uses, the meshes and per-device input and output shapes of its
    shard_maps, and each equation's primitive, input and output shapes, whether it runs
    inside a shard_map, its outputs' types (``float32[8@data,16]`` on Explicit axes), a
    matrix product's dimensions (:func:`product_dimensions`), and its inputs' types."""
    primitives: set[str] = set()
    shard_maps: list[dict[str, Any]] = []
    values: list[list[Any]] = []

    def shape(var: Any) -> list[int] | None:
        aval = getattr(var, "aval", None)
        dims = getattr(aval, "shape", None)
        return [int(d) for d in dims] if dims is not None else None

    def typed(var: Any) -> str:
        return str(getattr(var, "aval", ""))

    def walk(inner: Any, inside: bool) -> None:
        for equation in inner.eqns:
            name = equation.primitive.name
            # psum of a value the same on every device is traced as psum_invariant (and so on).
            primitives.update({name, name.removesuffix("_invariant")})
            if len(values) < VALUES_LIMIT:
                values.append(
                    [
                        name.removesuffix("_invariant"),
                        [shape(v) for v in equation.invars],
                        [shape(v) for v in equation.outvars],
                        inside,
                        [typed(v) for v in equation.outvars],
                        product_dimensions(equation),
                        [typed(v) for v in equation.invars],
                    ]
                )
            body_inside = inside
            if name == "shard_map":
                mesh = equation.params.get("mesh")
                body = equation.params.get("jaxpr")
                devices = getattr(mesh, "devices", None)
                shard_maps.append(
                    {
                        "axes": {str(k): int(v) for k, v in dict(mesh.shape).items()},
                        "devices": [int(d.id) for d in devices.flat]
                        if devices is not None
                        else None,
                        "inputs": [shape(v) for v in getattr(body, "invars", [])],
                        "outputs": [shape(v) for v in getattr(body, "outvars", [])],
                    }
                )
                body_inside = True
            for value in equation.params.values():
                for nested in value if isinstance(value, tuple | list) else (value,):
                    if hasattr(nested, "eqns"):
                        walk(nested, body_inside)
                    elif hasattr(nested, "jaxpr") and hasattr(nested.jaxpr, "eqns"):
                        walk(nested.jaxpr, body_inside)

    walk(jaxpr, False)
    return {"primitives": sorted(primitives), "shard_maps": shard_maps, "values": values}


def _inside_libraries(filename: str) -> bool:
    """Whether ``filename`` belongs to JAX, jaxlib, NumPy or Flax rather than to a solution."""
    roots = []
    for name in ("jax", "jaxlib", "numpy", "flax"):
        file = getattr(sys.modules.get(name), "__file__", None)
        if file:
            roots.append(Path(file).parent)
    return any(Path(filename).is_relative_to(root) for root in roots)


def _message(error: BaseException) -> str:
    # JAX names where tracing began; here that is this file, which means nothing to a learner.
    lines = [
        line
        for line in str(error).strip().splitlines()
        if line.strip() and Path(__file__).name not in line
    ]
    text = " ".join(lines[:4])
    return text[:MESSAGE_LIMIT] + (" ..." if len(text) > MESSAGE_LIMIT or len(lines) > 4 else "")


def _line_in(path: Path, error: BaseException) -> str:
    frames = [f for f in traceback.extract_tb(error.__traceback__) if Path(f.filename) == path]
    return f" (line {frames[-1].lineno}: {frames[-1].line})" if frames else ""


def _watched_environment() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if k.startswith(WATCHED_ENVIRONMENT)}


if __name__ == "__main__":
    main(sys.argv[1:])

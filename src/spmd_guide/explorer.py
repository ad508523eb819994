"""The sharding explorer's formulas, run here, and the programs they describe, compiled to check
them.

The explorer on the site is one JavaScript file, ``docs/_static/explorer/model.js``: a reader's
browser runs it, and :func:`explain` runs the same file here (in V8, through ``mini-racer``), so
the layouts, collectives and bytes the build checks are those the page shows. :func:`compiled`
builds the operation a question describes for abstract inputs on this process's devices,
compiles it, and reads what the compiler chose; :func:`disagreements` compares the two.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
from jax.sharding import AxisType, NamedSharding
from jax.sharding import PartitionSpec as P

from spmd_guide import scripts
from spmd_guide.analysis import collectives_by_axis
from spmd_guide.tpu import compile_like, like

MODEL_JS = Path(__file__).resolve().parents[2] / "docs" / "_static" / "explorer" / "model.js"
"""The explorer's formulas, shared with the page's script."""


class ExplorerError(ValueError):
    """The explorer refused a question; the message says what to change."""


def _context() -> Any:
    return scripts.context(MODEL_JS, "spmd_guide.explorer")


def explain(question: dict[str, Any]) -> dict[str, Any]:
    """What the explorer shows for ``question`` (a mesh, arrays and an operation).

    Raises:
        ExplorerError: for a question the explorer refuses, with its message.
    """
    from py_mini_racer import JSEvalException

    try:
        text = _context().call("spmdExplorer.explainJson", json.dumps(question))
    except JSEvalException as error:
        message = str(error).split("Error: ", 1)[-1].splitlines()[0]
        raise ExplorerError(message) from None
    answer: dict[str, Any] = json.loads(str(text))
    return answer


def presets() -> list[dict[str, Any]]:
    """The explorer's presets, each a name, what it shows and a question."""
    found: list[dict[str, Any]] = json.loads(str(_context().call("spmdExplorer.presetsJson")))
    return found


def _spec(entries: list[Any]) -> P:
    return P(*[tuple(e) if isinstance(e, list) else e for e in entries])


def _mesh(question: dict[str, Any]) -> jax.sharding.Mesh:
    names = tuple(name for name, _ in question["mesh"]["axes"])
    shape = tuple(size for _, size in question["mesh"]["axes"])
    kind = AxisType.Explicit if question["mesh"]["types"] == "Explicit" else AxisType.Auto
    count = 1
    for size in shape:
        count *= size
    return jax.make_mesh(
        shape, names, axis_types=(kind,) * len(names), devices=jax.devices()[:count]
    )


def _function(question: dict[str, Any]) -> Any:
    """The operation ``question`` names, with bare specs, to be traced under ``jax.set_mesh``
    of whichever mesh it is compiled for."""
    op = question["op"]
    kind = op["kind"]
    if kind == "add":
        return lambda a, b: a + b
    if kind == "matmul":
        if op.get("out_spec"):
            out = _spec(op["out_spec"])
            return lambda a, b: jnp.matmul(a, b, out_sharding=out)
        return lambda a, b: a @ b
    if kind == "sum":
        return lambda a: jnp.sum(a, axis=op["axis"])
    target = _spec(op["spec"])
    if question["mesh"]["types"] == "Explicit":
        return lambda a: jax.reshard(a, target)
    return lambda a: jax.lax.with_sharding_constraint(a, target)


def _arguments(question: dict[str, Any], mesh: jax.sharding.Mesh) -> list[jax.ShapeDtypeStruct]:
    return [
        jax.ShapeDtypeStruct(
            tuple(array["shape"]), jnp.float32, sharding=NamedSharding(mesh, _spec(array["spec"]))
        )
        for array in question["arrays"]
    ]


def compiled(question: dict[str, Any], topology: str | None = None) -> dict[str, Any]:
    """The program ``question`` describes, compiled on this process's devices, or with
    ``topology`` (``"v5e:2x4"``) by the TPU compiler for that slice: the result's spec
    (trailing ``None`` dropped), its collectives as (kind, axes, elements of the values), or
    the error JAX raised."""
    mesh = _mesh(question)
    args = _arguments(question, mesh)
    function = jax.jit(_function(question))
    try:
        if topology is None:
            with jax.set_mesh(mesh):
                program = function.lower(*args).compile()
        else:
            program = compile_like(function, *args, topology=topology, mesh=mesh)
            mesh = like(mesh, topology)
    except Exception as error:  # the refusal is the answer for such a question
        return {"error": type(error).__name__, "message": str(error).splitlines()[0]}
    # A collective of several values (an all-to-all's pieces) carries the sum of their sizes.
    found = [
        (c.op, tuple(c.axes), sum(_elements(shape) for shape in c.shapes))
        for c in collectives_by_axis(program, mesh)
    ]
    spec = list(program.output_shardings.spec)
    return {"spec": _trimmed(spec), "collectives": sorted(found)}


def _elements(shape: str) -> int:
    dims = re.search(r"\[([\d,]*)\]", shape)
    count = 1
    for dim in (dims.group(1) if dims else "").split(","):
        if dim:
            count *= int(dim)
    return count


def _trimmed(spec: list[Any]) -> list[Any]:
    entries = [list(e) if isinstance(e, tuple) else e for e in spec]
    while entries and entries[-1] is None:
        entries.pop()
    return entries


def disagreements(question: dict[str, Any]) -> list[str]:
    """Where the explorer's answer to ``question`` and the compiled program differ: empty when
    they agree on the refusal, or on the result's layout and each collective's kind, axes and
    size."""
    shown = explain(question)
    made = compiled(question)
    if shown["refused"] or "error" in made:
        if not shown["refused"]:
            return [f"JAX refused with {made['error']}: {made['message']}; the explorer did not"]
        if "error" not in made:
            return ["the explorer refused; JAX compiled it"]
        words = shown["refused"]["message"].split(":")[0]
        if made["error"] != shown["refused"]["error"] or words not in made["message"]:
            return [
                f"JAX refused with {made['error']}: {made['message']}; the explorer said {words}"
            ]
        return []
    lines = []
    if _trimmed(shown["result"]["spec"]) != made["spec"]:
        lines.append(f"result: the explorer says {shown['result']['spec']}, JAX {made['spec']}")
    said = sorted((c["kind"], tuple(c["axes"]), _product(c["shape"])) for c in shown["collectives"])
    if Counter(said) != Counter(made["collectives"]):
        lines.append(
            f"collectives: the explorer says {said}, the compiled program {made['collectives']}"
        )
    return lines


def _product(shape: list[int]) -> int:
    count = 1
    for dim in shape:
        count *= int(dim)
    return count


def bytes_sent(kind: str, devices: int, elements: int, itemsize: int = 4) -> float:
    """Bytes one device sends in a collective over ``devices`` devices, by the explorer's own
    formula (``bytesSent`` in model.js), from the elements of the value a compiled program
    prints for it: the result, whose input is ``devices`` times larger for a reduce-scatter
    and the same size otherwise."""
    result = elements * itemsize
    given = result * devices if kind == "reduce-scatter" else result
    sent: float = _context().call("spmdExplorer.bytesSent", kind, devices, result, given)
    return float(sent)

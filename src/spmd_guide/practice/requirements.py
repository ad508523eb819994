"""What a problem's statement requires: each requirement is a sentence on the page and a check.

A problem declares its requirements once (``Problem.requirements``). The page and the
starter file show them, from the same objects, and the checker runs exactly those checks; a
failed check names its requirement, so the report and the statement use the same words.

Every check here runs in the checker's parent process, on values the solution's process sent
(numbers, layouts as device-to-block maps, and a summary of the traced program). None of them
imports or calls a learner's code.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    from spmd_guide.practice.problem import Outcome

Shape = tuple[int, ...]


@dataclass(frozen=True)
class Requirement:
    """One thing the statement asks for. ``key`` names it in reports and tests; ``text`` is the
    sentence the page and the starter show (Markdown)."""

    key: str
    text: str

    def check(self, outcome: Outcome) -> list[str]:
        """Why ``outcome`` does not meet this requirement: empty when it does."""
        return []


@dataclass(frozen=True)
class Returns(Requirement):
    """The numbers: the answer equals the reference's, compared by ``compare``.

    ``locate`` turns the index of the first differing element into the learner's terms (which
    microbatch, which chunk); without it, the expected layout names the devices holding it.
    """

    compare: Callable[[Any, Any], list[str]] | None = None
    locate: Callable[[tuple[int, ...], Outcome], str] | None = None

    def check(self, outcome: Outcome) -> list[str]:
        if outcome.error_type:
            return [f"raised {outcome.error_type}: {outcome.error_message or '(no message)'}"]
        if outcome.value is None:
            return [
                f"your function returned {outcome.returned}; expected {_kind(outcome.expected)}"
            ]
        if self.compare is not None:
            return self.compare(outcome.expected, outcome.value)
        where = self.locate or _devices_holding
        lines = compare_arrays(
            outcome.expected, outcome.value, locate=lambda index: where(index, outcome)
        )
        if lines and outcome.dtype and outcome.dtype != np.asarray(outcome.expected).dtype.name:
            lines.append(
                f"your result is {outcome.dtype}, the expected one "
                f"{np.asarray(outcome.expected).dtype.name}: compute in the inputs' dtype"
            )
        return lines


@dataclass(frozen=True)
class Refuses(Requirement):
    """Input the statement says to refuse: the function itself raises ``error``. Only the cases
    that name this requirement (``Case.exercises``) check it."""

    error: str = "ValueError"

    def check(self, outcome: Outcome) -> list[str]:
        raised = self.error in outcome.error_classes
        if raised and outcome.raised_in_solution:
            return []
        if raised:
            return [
                f"a {self.error} came from inside JAX, not from your function: check the input "
                "yourself and raise one that says what is wrong and how to fix it"
            ]
        got = f"raised {outcome.error_type}" if outcome.error_type else "returned a value"
        return [f"expected your function to raise {self.error}, but it {got}"]


@dataclass(frozen=True)
class CaseKind(Requirement):
    """Inputs of a kind the statement promises to handle, e.g. meshes with Explicit axes. The
    cases that name it (``Case.exercises``) exist for it: an error on one of them whose type
    and message match ``signs`` (a regular expression on "Type: message") is reported as its."""

    signs: str = ""

    def claims(self, outcome: Outcome) -> bool:
        """Whether the error ``outcome`` raised is one this kind of input causes."""
        error = f"{outcome.error_type}: {outcome.error_message}"
        return bool(outcome.error_type and self.signs and re.search(self.signs, error))


@dataclass(frozen=True)
class UnderJit(Requirement):
    """The checker calls the function as ``jax.jit(f)``, as a training step is called."""

    def check(self, outcome: Outcome) -> list[str]:
        if outcome.error_type in TRACING_ERRORS or "outside of `jax.jit`" in (
            outcome.error_message or ""
        ):
            return [f"under jax.jit it raised {outcome.error_type}: {outcome.error_message}"]
        return []


TRACING_ERRORS = frozenset(
    {
        "ConcretizationTypeError",
        "TracerArrayConversionError",
        "TracerBoolConversionError",
        "TracerIntegerConversionError",
    }
)
"""Errors a function raises when a traced value meets Python or NumPy."""


@dataclass(frozen=True)
class Traceable(Requirement):
    """The checker reads the function's jaxpr (``jax.make_jaxpr``) for its program checks.

    With ``inputs_as_given``, the inputs enter the trace as they are given (NumPy arrays as
    constants), not as traced arguments: for a problem whose function places its inputs on the
    mesh itself, so that a product computed in NumPy shows as no product at all rather than as
    a NumPy call on a traced value."""

    inputs_as_given: bool = False

    def check(self, outcome: Outcome) -> list[str]:
        if outcome.trace_error:
            return [f"jax.make_jaxpr could not trace your function: {outcome.trace_error}"]
        return []


@dataclass(frozen=True)
class Layout(Requirement):
    """How the answer is laid out: ``spec`` (a PartitionSpec, or a dict of them for a dict
    answer) on the case's mesh, compared device by device with where the answer's blocks are."""

    spec: Any = None

    def check(self, outcome: Outcome) -> list[str]:
        expected = outcome.expected_layout
        if outcome.case_mesh is None or expected is None:
            return []
        got = outcome.layout or {}
        lines = []
        for part, blocks in expected.items():
            label = f"{part}: " if part else ""
            mine = got.get(part)
            shown = (outcome.sharding or {}).get(part, "not a jax.Array")
            if mine is None:
                lines.append(
                    f"{label}your answer is {shown}, not an array laid out on the mesh; "
                    f"expected {_spec_text(self.spec, part)}"
                )
            elif _normal(mine) != _normal(blocks):
                lines.append(
                    f"{label}laid out as {shown}; expected {_spec_text(self.spec, part)} on the "
                    f"mesh given ({_first_block_difference(blocks, mine)})"
                )
        return lines


@dataclass(frozen=True)
class Program(Requirement):
    """A property of the traced program, read from the summary the solution's process sent:
    ``test(program, outcome)`` says what is wrong, or None. With ``compiled``, the summary
    also holds the text of the program XLA compiled for the case (``program["compiled"]``)."""

    test: Callable[[Mapping[str, Any], Outcome], str | None] | None = None
    compiled: bool = False

    def check(self, outcome: Outcome) -> list[str]:
        if outcome.program is None or self.test is None:
            return []
        problem = self.test(outcome.program, outcome)
        return [problem] if problem else []


@dataclass(frozen=True)
class Satisfies(Requirement):
    """A property of the answer itself where more than one answer is right, such as a schedule
    or a plan: ``test(outcome)`` says what is wrong with ``outcome.value``, or None. It runs
    only on an answer that met the first requirement, so it may assume the answer's form."""

    test: Callable[[Outcome], str | None] | None = None

    def check(self, outcome: Outcome) -> list[str]:
        if self.test is None or outcome.value is None:
            return []
        problem = self.test(outcome)
        return [problem] if problem else []


@dataclass(frozen=True)
class WorkedOut(Requirement):
    """A prediction made by reasoning: the function calls none of JAX's ahead-of-time API
    (``jax.jit(f).lower``, ``.trace(...).lower()``, ``Lowered.compile``, ``as_text``), as
    the solution's process records while it runs. A file that patches that record can forge
    it, as it can forge values; the check is for the learner who reads the answer off a
    compiled program without noticing that the problem asks for the reasoning."""

    def check(self, outcome: Outcome) -> list[str]:
        if not outcome.ahead_of_time:
            return []
        return [
            f"your function called {', '.join(outcome.ahead_of_time)}: it read its answer from "
            "a program JAX lowered or compiled, where the problem asks you to work it out from "
            "the shapes and layouts before compiling anything"
        ]


# Program tests: each reads the summary made by the solution's process (see
# solution_runner._summary): "primitives", "shard_maps" (mesh, input shapes), "values"
# (every equation's primitive, input and output shapes, whether it is inside a shard_map, and
# its outputs' types), and "compiled" for a Program that asks for it.


def every(
    *tests: Callable[[Mapping[str, Any], Outcome], str | None],
) -> Callable[[Mapping[str, Any], Outcome], str | None]:
    """Every problem ``tests`` find, joined, so that a report names each thing the program did
    instead (no ``ppermute``, and an ``all_gather``)."""

    def test(program: Mapping[str, Any], outcome: Outcome) -> str | None:
        found = [problem for t in tests if (problem := t(program, outcome))]
        return "; ".join(found) or None

    return test


def uses(*primitives: str) -> Callable[[Mapping[str, Any], Outcome], str | None]:
    """The program uses each of ``primitives``; on one device, only ``shard_map`` is needed."""

    def test(program: Mapping[str, Any], outcome: Outcome) -> str | None:
        needed = set(primitives)
        if _mesh_size(outcome) == 1:
            needed &= {"shard_map"}
        missing = sorted(needed - set(program["primitives"]))
        return f"your program has no {', '.join(missing)}" if missing else None

    return test


def forbids(*primitives: str) -> Callable[[Mapping[str, Any], Outcome], str | None]:
    """The program uses none of ``primitives``."""

    def test(program: Mapping[str, Any], outcome: Outcome) -> str | None:
        used = sorted(set(primitives) & set(program["primitives"]))
        return f"your program uses {', '.join(used)}" if used else None

    return test


def on_given_mesh(program: Mapping[str, Any], outcome: Outcome) -> str | None:
    """Every shard_map runs on the mesh the case gave."""
    given = outcome.case_mesh
    if given is None:
        return None
    for used in program["shard_maps"]:
        same_devices = used.get("devices") is None or list(used["devices"]) == given["devices"]
        if list(used["axes"].items()) != list(given["axes"].items()) or not same_devices:
            return (
                f"a shard_map ran on another mesh ({_axes(used['axes'])} over devices "
                f"{used.get('devices')}) than the one given ({_axes(given['axes'])} over devices "
                f"{given['devices']}): use the mesh argument"
            )
    return None


def product_typed(
    wanted: Callable[[Outcome], str],
    what: str,
    operands: Callable[[Outcome], Sequence[str]] | None = None,
) -> Callable[[Mapping[str, Any], Outcome], str | None]:
    """Some matrix product outside any shard_map is typed ``wanted(outcome)`` (e.g.
    ``float32[8@data,12@model]``), and, with ``operands``, takes operands typed as those say:
    ``what`` was computed by JAX on the mesh from inputs laid out as asked, with its layout in
    its type, not computed elsewhere and placed afterwards."""

    def test(program: Mapping[str, Any], outcome: Outcome) -> str | None:
        typed = wanted(outcome)
        inputs = list(operands(outcome)) if operands else None
        made = [
            (types[0], entry[6] if len(entry) > 6 else [])
            for entry in program["values"]
            for primitive, _, _, inside, types, *_ in [entry]
            if primitive == "dot_general" and not inside and types
        ]
        if any(out == typed and (inputs is None or list(ins) == inputs) for out, ins in made):
            return None
        if not made:
            blocks = any(
                primitive == "dot_general" and inside
                for primitive, _, _, inside, *_ in program["values"]
            )
            if blocks:
                return (
                    f"your matrix products run inside a shard_map, on blocks: this problem asks "
                    f"for {what} on the global arrays, its layout in its type"
                )
            return (
                f"your traced program has no matrix product: {what} was computed outside JAX "
                "(in NumPy, say) and only its result placed on the mesh, so nothing was "
                "multiplied on the devices; compute it with jnp on arrays placed on the mesh"
            )
        shown = ", ".join(f"{' @ '.join(ins)} -> {out}" if ins else out for out, ins in made)
        asked = f"{' @ '.join(inputs)} -> {typed}" if inputs else typed
        return f"no matrix product in your traced program is {asked}; yours: {shown}"

    return test


def combined_inside(
    collectives: Sequence[str], output: Callable[[Outcome], Shape]
) -> Callable[[Mapping[str, Any], Outcome], str | None]:
    """Every shard_map hands back per device a value of shape ``output(outcome)``, and, on a
    mesh of more than one device, its body combines the devices' values with one of
    ``collectives``: the result is whole inside the shard_map, not finished outside it."""

    def test(program: Mapping[str, Any], outcome: Outcome) -> str | None:
        if not program["shard_maps"]:
            return "your program has no shard_map"
        wanted = tuple(output(outcome))
        for used in program["shard_maps"]:
            returned = [tuple(shape) for shape in used.get("outputs", [])]
            if returned != [wanted]:
                shown = ", ".join(str(s) for s in returned) or "nothing"
                return (
                    f"your shard_map hands back {shown} per device, where the combined "
                    f"result is {wanted}: the devices' values were joined outside the "
                    "shard_map, so out_specs had to keep one value per device"
                )
        inside = {primitive for primitive, _, _, within, *_ in program["values"] if within}
        if _mesh_size(outcome) > 1 and not inside & set(collectives):
            return "no collective combines the devices' values inside your shard_map"
        return None

    return test


def enters_as(
    blocks: Callable[[Outcome], Mapping[str, Shape]],
) -> Callable[[Mapping[str, Any], Outcome], str | None]:
    """A shard_map receives each named input as a block of the given per-device shape."""

    def test(program: Mapping[str, Any], outcome: Outcome) -> str | None:
        if _mesh_size(outcome) == 1:
            return None
        received = [tuple(shape) for used in program["shard_maps"] for shape in used["inputs"]]
        if not program["shard_maps"]:
            return "your program has no shard_map, so no device receives a block of its own"
        for name, shape in blocks(outcome).items():
            if tuple(shape) not in received:
                shown = ", ".join(str(s) for s in received) or "none"
                return (
                    f"each device should receive {name} as a {tuple(shape)} block, but the "
                    f"shard_map's inputs per device are {shown}"
                )
        return None

    return test


def rows_per_product(left: Sequence[int], dimensions: Sequence[Sequence[int]] | None) -> int:
    """The rows one matrix product multiplies: the size of the left operand's last dimension that
    is neither contracted nor a batch dimension. Dimensions before it are a batch of products,
    as ``jax.vmap`` over a product leaves them (with its weights unbatched, ``vmap`` adds no batch
    dimension to ``dot_general``: a ``(chunks, rows, k)`` operand is still one product per chunk).
    ``dimensions`` is the product's ``[contracting, batch]`` dimensions of ``left``; without
    them, the first dimension."""
    if dimensions is None:
        return int(left[0])
    contracting, batch = dimensions
    free = [d for d in range(len(left)) if d not in contracting and d not in batch]
    return int(left[free[-1]]) if free else 1


def matmuls_on_rows(
    rows: Callable[[Outcome], int | None], what: str, *, inside: bool = True
) -> Callable[[Mapping[str, Any], Outcome], str | None]:
    """Every matrix product (inside a shard_map, or anywhere) multiplies ``rows`` rows, read as
    :func:`rows_per_product` reads them, so a vmapped, mapped or scanned form counts the rows of
    one product, not of the whole batch."""

    def test(program: Mapping[str, Any], outcome: Outcome) -> str | None:
        wanted = rows(outcome)
        if wanted is None:
            return None
        products = [
            (inputs[0], rows_per_product(inputs[0], extra[1] if len(extra) > 1 else None))
            for primitive, inputs, _, within, *extra in program["values"]
            if primitive == "dot_general" and (within or not inside) and inputs and inputs[0]
        ]
        if not products:
            return f"your program has no matrix product on {what}"
        wrong = [(tuple(shape), taken) for shape, taken in products if taken != wanted]
        if wrong:
            (shape, taken), *_ = wrong
            return (
                f"a matrix product multiplies {taken} rows at once (left operand {shape}); "
                f"each should take {what}, {wanted} rows"
            )
        return None

    return test


def compare_arrays(
    expected: Any,
    got: Any,
    *,
    rtol: float = 1e-4,
    atol: float = 1e-5,
    locate: Callable[[tuple[int, ...]], str] | None = None,
) -> list[str]:
    """How the array ``got`` differs from ``expected``: empty when shapes and values agree.
    ``locate`` names where an index lives (a device's block, a microbatch)."""
    expected = np.asarray(expected)
    got = np.asarray(got)
    if got.shape != expected.shape:
        return [f"shape: expected {expected.shape}, got {got.shape}"]
    if not np.issubdtype(got.dtype, np.number) and got.dtype != bool:
        return [f"expected numbers, got an array of {got.dtype}"]
    if np.isnan(got).any() and not np.isnan(expected).any():
        first = tuple(int(i) for i in np.argwhere(np.isnan(got))[0])
        where = _where(first, locate)
        return [
            f"{int(np.isnan(got).sum())} of {got.size} values are NaN; the first at {first}{where}"
        ]
    close = np.isclose(got, expected, rtol=rtol, atol=atol)
    if close.all():
        return []
    if expected.size == 1:
        return [f"off by {(got - expected).item():+.6g}"]
    wrong = np.argwhere(~close)
    lines = [f"{len(wrong)} of {expected.size} values differ; the first:"]
    for position in wrong[:3]:
        index = tuple(int(i) for i in position)
        lines.append(
            f"  at {index}{_where(index, locate)}: expected {expected[index]:.6g}, "
            f"got {got[index]:.6g}"
        )
    return lines


def compare_dicts(expected: Mapping[str, Any], got: Any) -> list[str]:
    """How the dict of arrays ``got`` differs from ``expected``, key by key."""
    keys = ", ".join(f'"{k}"' for k in expected)
    if not isinstance(got, dict) or set(got) != set(expected):
        return [f"expected a dict with the keys {keys}"]
    return [f"{k}: {line}" for k in expected for line in compare_arrays(expected[k], got[k])]


def _where(index: tuple[int, ...], locate: Callable[[tuple[int, ...]], str] | None) -> str:
    if locate is None:
        return ""
    try:
        place = locate(index)
    except Exception:  # naming a place must never hide the difference itself
        return ""
    return f" ({place})" if place else ""


def _devices_holding(index: tuple[int, ...], outcome: Outcome) -> str:
    """Which devices hold element ``index`` of the expected answer, when that is not all."""
    layout = (outcome.expected_layout or {}).get("")
    if not layout:
        return ""
    holders = [
        int(device)
        for device, bounds in layout.items()
        if all(start <= i < stop for i, (start, stop) in zip(index, bounds, strict=False))
    ]
    if not holders or len(holders) == len(layout):
        return ""
    word = "device" if len(holders) == 1 else "devices"
    return f"in the block of {word} {', '.join(map(str, sorted(holders)))}"


def _normal(blocks: Mapping[str, Sequence[Sequence[int]]]) -> dict[str, list[tuple[int, int]]]:
    return {str(d): [tuple(b) for b in bounds] for d, bounds in blocks.items()}  # type: ignore[misc]


def _first_block_difference(expected: Mapping[str, Any], got: Mapping[str, Any]) -> str:
    want, have = _normal(expected), _normal(got)
    for device in sorted(set(want) | set(have), key=int):
        if want.get(device) == have.get(device):
            continue
        if device not in want:
            return f"device {device} is not in the mesh given, yet holds {_bounds(have[device])}"
        return (
            f"device {device} should hold {_bounds(want[device])}, "
            f"and holds {_bounds(have.get(device))}"
        )
    return "the blocks differ"


def _bounds(bounds: Sequence[tuple[int, int]] | None) -> str:
    if bounds is None:
        return "nothing"
    if not bounds:
        return "the value"
    return "[" + ", ".join(f"{start}:{stop}" for start, stop in bounds) + "]"


def _spec_text(spec: Any, part: str) -> str:
    chosen = spec[part] if isinstance(spec, Mapping) else spec
    return str(chosen)


def _mesh_size(outcome: Outcome) -> int:
    mesh = outcome.case_mesh
    return math.prod(mesh["axes"].values()) if mesh else 1


def _kind(expected: Any) -> str:
    if isinstance(expected, dict):
        return "a dict"
    array = np.asarray(expected)
    return f"an array of shape {array.shape}" if array.ndim else "a scalar array"


def _axes(axes: Mapping[str, int]) -> str:
    return ", ".join(f"{name!r}: {size}" for name, size in axes.items())


TRACEABLE = Traceable(
    "traceable",
    "It traces: the checker reads its program with `jax.make_jaxpr` and then runs it under "
    "`jax.jit`, so no `float()`, `int()`, NumPy call or Python `if` on an array argument or "
    "a value computed from one (Python numbers among the arguments are fine), and no "
    "`jax.set_mesh` inside it.",
)
"""For every problem whose other requirements read the program."""

EXPLICIT_MESHES = CaseKind(
    "explicit_mesh",
    "It works on meshes whose axes are Explicit (the default of `jax.make_mesh`) as well as "
    "Auto. The inputs arrive as NumPy arrays.",
    signs=r"^ShardingTypeError|does not match the specs of the input|can only refer to Auto",
)
"""For problems whose cases include meshes with Explicit axes."""

GIVEN_MESH = Program(
    "given_mesh",
    "Its `shard_map` runs on the mesh it is given, which may span only some of the devices.",
    test=on_given_mesh,
)
"""For problems that pass the function a mesh."""

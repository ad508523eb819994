"""What a practice problem is: its cases, the checks its answers must pass, and its hints.

Every problem module in ``spmd_guide/practice/problems/`` builds one :class:`Problem` from its
reference solution. The checker's worker calls ``Problem.make_cases`` and the reference in a
fresh process before it loads a learner's file; the parent then judges each answer with
:meth:`Problem.judge` and picks a hint with :meth:`Problem.hint_for`.
"""

from __future__ import annotations

import inspect
import math
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

COLLECTIVES = frozenset(
    {"psum", "pmax", "pmin", "all_gather", "reduce_scatter", "ppermute", "all_to_all"}
)
"""The names of the collective primitives, as they appear in a jaxpr."""


@dataclass(frozen=True)
class Case:
    """One call of a problem's function: its arguments, and what a right answer must do.

    ``raises`` names an exception class the function must raise itself (for input the
    statement says to refuse); ``expect_type`` asks for the answer's ``jax.typeof`` too.
    """

    args: tuple[Any, ...]
    kwargs: Mapping[str, Any] = field(default_factory=dict)
    raises: str | None = None
    expect_type: bool = False


@dataclass(frozen=True)
class Outcome:
    """A case as the parent process receives it: its inputs, the expected answer, and what the
    learner's function did. Meshes among ``args`` and ``kwargs`` arrive as dicts of axis sizes.

    Exactly one of ``value``, ``error_type`` or ``returned`` describes the answer: ``value`` is
    an array of numbers (or a dict of numbers), ``error_type`` an exception the function raised,
    ``returned`` a description of anything else it returned.
    """

    inputs: str
    expected: Any
    args: tuple[Any, ...] = ()
    kwargs: Mapping[str, Any] = field(default_factory=dict)
    raises: str | None = None
    expect_type: bool = False
    expected_type: str | None = None
    value: Any = None
    returned: str | None = None
    type: str | None = None
    error_type: str | None = None
    error_message: str = ""
    raised_in_solution: bool = False
    primitives: frozenset[str] | None = None
    trace_error: str | None = None
    meshes: tuple[Mapping[str, Any], ...] = ()
    case_mesh: Mapping[str, Any] | None = None


@dataclass(frozen=True)
class ErrorHint:
    """A hint for an exception whose class name is ``exception`` and whose message matches."""

    exception: str
    message: str
    text: str

    def matches(self, outcome: Outcome) -> bool:
        return outcome.error_type == self.exception and bool(
            re.search(self.message, outcome.error_message)
        )


@dataclass(frozen=True)
class ResultHint:
    """A hint for a wrong answer that ``test(outcome)`` recognises (it reads ``outcome.args``,
    ``outcome.expected`` and ``outcome.value``)."""

    test: Callable[[Outcome], bool]
    text: str

    def matches(self, outcome: Outcome) -> bool:
        if outcome.value is None or outcome.error_type:
            return False
        try:
            return bool(self.test(outcome))
        except Exception:  # a hint's test must never turn a wrong answer into a crash
            return False


Hint = ErrorHint | ResultHint

COMMON_HINTS: tuple[Hint, ...] = (
    ErrorHint(
        "NotImplementedError",
        "",
        "the function still raises NotImplementedError: replace the starter's body",
    ),
    ErrorHint(
        "RuntimeError",
        "jax_num_cpu_devices",
        "delete the line that sets the device count: the checker gives each run its own "
        "device count before your file is loaded",
    ),
    ErrorHint(
        "NameError",
        "unbound axis name",
        "a collective ran outside the shard_map that binds its axis: call it only inside the "
        "function you pass to jax.shard_map",
    ),
    ErrorHint(
        "AssertionError",
        "^$",
        "a bare AssertionError from inside JAX: most often a collective names an axis the mesh "
        "does not have. Use the mesh's own axis names (mesh.axis_names)",
    ),
    ErrorHint(
        "ValueError",
        "does not match the specs of the input",
        "on a mesh with Explicit axes, shard_map wants each input already laid out as its "
        "in_specs: place it first with jax.device_put(x, NamedSharding(mesh, spec))",
    ),
    ErrorHint(
        "ValueError",
        "out_specs which require replication",
        "out_specs=P() (or an axis left out) claims every device holds the same value, but "
        "the value differs between devices: combine it with a collective first, or name the "
        "axis in out_specs to keep one block per device",
    ),
    ErrorHint(
        "TypeError",
        "manual axis types do not match",
        "a loop's starting value (jnp.zeros, jnp.full, a Python number) is the same on every "
        "device, but the loop's body makes it differ between devices, and a loop's carry must "
        "keep one type: start it with jax.lax.pcast(start, axis_name, to='varying')",
    ),
    ErrorHint(
        "ValueError",
        "can only be used outside of `jax.jit`",
        "the checker calls your function under jax.jit, as a training step would be, and "
        "jax.set_mesh cannot be entered while tracing: pass NamedSharding(mesh, P(...)) "
        "instead of a bare P(...)",
    ),
    ErrorHint(
        "ValueError",
        "not evenly divisible",
        "an input does not divide over the mesh axis: check the length first and raise a "
        "ValueError that says how to pad",
    ),
    ErrorHint(
        "ShardingTypeError",
        "ambiguous",
        "with Explicit axes, say where the result goes: pass out_sharding= to the operation",
    ),
    ErrorHint(
        "ConcretizationTypeError",
        "",
        "a traced value was used as a Python number (int(), if, range) inside a traced function: "
        "keep shapes and counts as Python values, or use jax.lax.cond / jnp.where",
    ),
    ErrorHint(
        "TracerArrayConversionError",
        "",
        "np.asarray (or another NumPy call) met a traced array: use jax.numpy inside the function",
    ),
)
"""Hints for mistakes any problem can meet, tried after the problem's own."""


@dataclass(frozen=True)
class Problem:
    """A practice problem and everything the checker needs to judge answers to it.

    Attributes:
        reference: the reference solution; its name is the function a learner defines, its
            signature the one the starter shows, its docstring the statement.
        title, difficulty, teaches: how the problem is listed.
        page: the problem's page under docs/problems/, without the suffix.
        make_cases: the cases, for the number of devices JAX started with.
        hints: hints for this problem's common mistakes, most specific first.
        uses: primitives a right answer must use (in its jaxpr), e.g. {"shard_map"}.
        forbids: primitives it must not use.
        starter_imports: import lines the starter file begins with.
        compare: how an answer differs from the expected one (lines; empty when right).
        traced: whether answers on meshes are computed under ``jax.jit`` and their jaxpr read
            for ``uses``, ``forbids`` and the mesh. False for problems whose statement allows
            ``with jax.set_mesh(mesh):``, which cannot be entered while tracing; such a problem
            checks its layouts with ``Case.expect_type`` instead.
        answer: computes the expected answer from a case's arguments, when that is not what
            the reference returns: e.g. counts read from a compiled program, which a reference
            predicting them must match.
    """

    reference: Callable[..., Any]
    title: str
    difficulty: str
    teaches: str
    make_cases: Callable[[int], list[Case]]
    hints: tuple[Hint, ...] = ()
    uses: frozenset[str] = frozenset()
    forbids: frozenset[str] = frozenset()
    starter_imports: tuple[str, ...] = (
        "import jax",
        "import jax.numpy as jnp",
        "import numpy as np",
        "from jax.sharding import Mesh, NamedSharding, PartitionSpec as P",
    )
    compare: Callable[[Any, Any], list[str]] | None = None
    traced: bool = True
    answer: Callable[..., Any] | None = None

    @property
    def name(self) -> str:
        return self.reference.__name__

    @property
    def page(self) -> str:
        return self.name.replace("_", "-")

    @property
    def signature(self) -> str:
        """The function's signature as a learner writes it, read from the reference."""
        plain = inspect.signature(self.reference).replace(return_annotation=inspect.Signature.empty)
        params = [p.replace(annotation=inspect.Parameter.empty) for p in plain.parameters.values()]
        return f"{self.name}{plain.replace(parameters=params)}"

    @property
    def statement(self) -> str:
        return inspect.cleandoc(self.reference.__doc__ or "")

    def judge(self, outcome: Outcome) -> list[str]:
        """Why ``outcome`` is not a right answer to its case: empty when it is."""
        if outcome.raises:
            if outcome.error_type == outcome.raises and outcome.raised_in_solution:
                return []
            if outcome.error_type == outcome.raises:
                return [
                    f"a {outcome.raises} came from inside JAX, not from your function: check "
                    "the input yourself and raise one that says what is wrong and how to fix it"
                ]
            got = f"raised {outcome.error_type}" if outcome.error_type else "returned a value"
            return [f"expected your function to raise {outcome.raises}, but it {got}"]
        if outcome.error_type:
            return [f"raised {outcome.error_type}: {outcome.error_message or '(no message)'}"]
        if outcome.value is None:
            return [
                f"your function returned {outcome.returned}; expected {_kind(outcome.expected)}"
            ]
        lines = (self.compare or compare_arrays)(outcome.expected, outcome.value)
        if not lines and outcome.expect_type and outcome.type != outcome.expected_type:
            lines = [f"type: expected {outcome.expected_type}, got {outcome.type}"]
        return lines or self._requirements(outcome)

    def _requirements(self, outcome: Outcome) -> list[str]:
        if not self.traced or (not (self.uses or self.forbids) and outcome.case_mesh is None):
            return []
        if outcome.primitives is None:
            return [
                "the checker could not trace your function with jax.make_jaxpr to see how it "
                f"computes ({outcome.trace_error}); keep NumPy conversions and Python "
                "decisions on array values out of it"
            ]
        required = self.uses
        if outcome.case_mesh is not None and math.prod(outcome.case_mesh["axes"].values()) == 1:
            # One device needs no communication: a ring of n - 1 steps has none.
            required = required & {"shard_map"}
        used = sorted(self.forbids & outcome.primitives)
        if used:
            return [
                f"right numbers, but computed with {', '.join(used)}, which this problem "
                "asks you to build yourself"
            ]
        missing = sorted(required - outcome.primitives)
        if missing:
            return [
                f"right numbers, but computed without {', '.join(missing)}, which this "
                "problem is about"
            ]
        given = outcome.case_mesh
        if given is not None and any(not _same_mesh(given, used) for used in outcome.meshes):
            return [
                f"right numbers, but a shard_map ran on another mesh than the one given "
                f"({_axes(given['axes'])} over devices {given['devices']}): use the mesh argument"
            ]
        return []

    def hint_for(self, outcome: Outcome) -> str | None:
        """The first of this problem's hints, then the common ones, that fits ``outcome``."""
        for hint in (*self.hints, *COMMON_HINTS):
            if hint.matches(outcome):
                return hint.text
        return None


def compare_arrays(expected: Any, got: Any, *, rtol: float = 1e-4, atol: float = 1e-5) -> list[str]:
    """How the array ``got`` differs from ``expected``: empty when shapes and values agree."""
    expected = np.asarray(expected)
    got = np.asarray(got)
    if got.shape != expected.shape:
        return [f"shape: expected {expected.shape}, got {got.shape}"]
    if not np.issubdtype(got.dtype, np.number) and got.dtype != bool:
        return [f"expected numbers, got an array of {got.dtype}"]
    if np.isnan(got).any() and not np.isnan(expected).any():
        return [f"{int(np.isnan(got).sum())} of {got.size} values are NaN"]
    close = np.isclose(got, expected, rtol=rtol, atol=atol)
    if close.all():
        return []
    if expected.size == 1:
        return [f"off by {(got - expected).item():+.6g}"]
    wrong = np.argwhere(~close)
    lines = [f"{len(wrong)} of {expected.size} values differ; the first:"]
    for position in wrong[:3]:
        index = tuple(int(i) for i in position)
        lines.append(f"  at {index}: expected {expected[index]:.6g}, got {got[index]:.6g}")
    return lines


def compare_dicts(expected: Mapping[str, Any], got: Any) -> list[str]:
    """How the dict of arrays ``got`` differs from ``expected``, key by key."""
    keys = ", ".join(f'"{k}"' for k in expected)
    if not isinstance(got, dict) or set(got) != set(expected):
        return [f"expected a dict with the keys {keys}"]
    return [f"{k}: {line}" for k in expected for line in compare_arrays(expected[k], got[k])]


def _kind(expected: Any) -> str:
    if isinstance(expected, dict):
        return "a dict"
    array = np.asarray(expected)
    return f"an array of shape {array.shape}" if array.ndim else "a scalar array"


def _same_mesh(given: Mapping[str, Any], used: Mapping[str, Any]) -> bool:
    if dict(used["axes"]) != dict(given["axes"]):
        return False
    return used.get("devices") is None or list(used["devices"]) == list(given["devices"])


def _axes(axes: Mapping[str, int]) -> str:
    return ", ".join(f"{name!r}: {size}" for name, size in axes.items())

"""What a practice problem is: its cases, its requirements, and its hints.

Every problem module in ``spmd_guide/practice/problems/`` builds one :class:`Problem` from its
reference solution. The reference's process (:mod:`spmd_guide.practice.reference_worker`) makes
the cases and the expected answers; the solution's process
(:mod:`spmd_guide.practice.solution_runner`) runs a learner's function on them; the parent
judges each answer against the problem's requirements with :meth:`Problem.judge` and picks a
hint with :meth:`Problem.hint_for`.
"""

from __future__ import annotations

import inspect
import re
import textwrap
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from spmd_guide.practice.requirements import (
    CaseKind,
    Layout,
    Program,
    Refuses,
    Requirement,
    Returns,
    Traceable,
    UnderJit,
)

COLLECTIVES = frozenset(
    {"psum", "pmax", "pmin", "all_gather", "reduce_scatter", "ppermute", "all_to_all"}
)
"""The names of the collective primitives, as they appear in a jaxpr."""


@dataclass(frozen=True)
class Case:
    """One call of a problem's function.

    ``raises`` names an exception class the function must raise itself (for input the
    statement says to refuse); ``exercises`` names the requirement the case exists for (a
    :class:`~spmd_guide.practice.requirements.Refuses` or
    :class:`~spmd_guide.practice.requirements.CaseKind`), whose name its failures carry.
    """

    args: tuple[Any, ...]
    kwargs: Mapping[str, Any] = field(default_factory=dict)
    raises: str | None = None
    exercises: str | None = None


@dataclass(frozen=True)
class Outcome:
    """A case as the parent process receives it: its inputs and expected answer (from the
    reference's process), and what the learner's function did (from the solution's process).
    Meshes among ``args`` and ``kwargs`` arrive as dicts of axis sizes, device ids and types.

    Exactly one of ``value``, ``error_type`` or ``returned`` describes the answer: ``value`` is
    an array of numbers (or a dict of them), ``error_type`` an exception the function raised,
    ``returned`` a description of anything else it returned. ``layout`` maps each part of the
    answer ("" for a lone array) to its blocks by device id; ``program`` summarises its jaxpr;
    ``ahead_of_time`` names the methods of JAX's ahead-of-time API the function called
    (``Traced.lower``, ``Lowered.compile``, ...).
    """

    inputs: str
    expected: Any
    args: tuple[Any, ...] = ()
    kwargs: Mapping[str, Any] = field(default_factory=dict)
    raises: str | None = None
    exercises: str | None = None
    expected_layout: Mapping[str, Any] | None = None
    value: Any = None
    dtype: str | None = None
    returned: str | None = None
    layout: Mapping[str, Any] | None = None
    sharding: Mapping[str, str] | None = None
    error_type: str | None = None
    error_classes: tuple[str, ...] = ()
    error_message: str = ""
    raised_in_solution: bool = False
    program: Mapping[str, Any] | None = None
    trace_error: str | None = None
    case_mesh: Mapping[str, Any] | None = None
    ahead_of_time: tuple[str, ...] = ()


@dataclass(frozen=True)
class Failure:
    """A requirement a case did not meet, and how."""

    key: str
    text: str
    lines: tuple[str, ...]


@dataclass(frozen=True)
class ErrorHint:
    """A hint for an exception whose class name is ``exception`` and whose message matches."""

    exception: str
    message: str
    text: str

    def matches(self, outcome: Outcome) -> bool:
        """Whether the function raised this, or tracing it did."""
        raised = []
        if outcome.error_type:
            kinds = outcome.error_classes or (outcome.error_type,)
            raised.append((kinds, outcome.error_message))
        if outcome.trace_error:
            kind, _, message = outcome.trace_error.partition(": ")
            raised.append(((kind,), message))
        return any(
            self.exception in kinds and bool(re.search(self.message, message))
            for kinds, message in raised
        )


@dataclass(frozen=True)
class ResultHint:
    """A hint for an answer that failed ``requirement`` (by default, its numbers) in the way
    ``test(outcome)`` recognises (it reads ``outcome.args``, ``outcome.expected``,
    ``outcome.value`` and ``outcome.sharding``)."""

    test: Callable[[Outcome], bool]
    text: str
    requirement: str = "result"

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
        "write your solution here",
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
        "the checker traces your function (the requirements say how), and jax.set_mesh "
        "cannot be entered while tracing: pass NamedSharding(mesh, P(...)) instead of a bare "
        "P(...)",
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
        "TracerBoolConversionError",
        "",
        "a Python `if` (or `and`, `or`, `assert`) met a traced value: the checker traces your "
        "function, and a traced value has no True or False yet. Use jnp.where or "
        "jax.lax.cond, or check shapes (Python values) instead",
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
            signature the one the starter shows, its docstring the explanation and inputs.
        title, difficulty, teaches: how the problem is listed.
        make_cases: the cases, for the number of devices JAX started with.
        requirements: what the statement asks, in the order it lists them; the first is the
            :class:`~spmd_guide.practice.requirements.Returns` that compares the numbers. The
            page, the starter and the checker all read this one list.
        hints: hints for this problem's common mistakes, most specific first.
        starter_imports: import lines the starter file begins with.
        answer: computes the expected answer from a case's arguments, when that is not what
            the reference returns: e.g. counts read from a compiled program, which a reference
            predicting them must match.
        lesson: the keys of the requirements that check the skill ``teaches`` names, by how
            the answer was made (its traced program, or what the function called), so that a
            right answer reached another way fails; the page marks them.
    """

    reference: Callable[..., Any]
    title: str
    difficulty: str
    teaches: str
    make_cases: Callable[[int], list[Case]]
    requirements: tuple[Requirement, ...]
    hints: tuple[Hint, ...] = ()
    starter_imports: tuple[str, ...] = (
        "import jax",
        "import jax.numpy as jnp",
        "import numpy as np",
        "from jax.sharding import Mesh, NamedSharding, PartitionSpec as P",
    )
    answer: Callable[..., Any] | None = None
    lesson: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        keys = [r.key for r in self.requirements]
        if len(set(keys)) != len(keys):
            raise ValueError(f"{self.name}: two requirements share a key: {keys}")
        unknown = sorted(set(self.lesson) - set(keys))
        if unknown:
            raise ValueError(f"{self.name}: the lesson names no requirement {unknown}: {keys}")
        if not self.requirements or not isinstance(self.requirements[0], Returns):
            raise ValueError(f"{self.name}: the first requirement must be a Returns")
        tracing = [r for r in self.requirements if isinstance(r, Traceable | UnderJit)]
        if self.traced and len(tracing) != 1:
            raise ValueError(
                f"{self.name}: program checks need one requirement that says the function is "
                "traced: Traceable, or UnderJit"
            )

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
        """The reference's docstring, which says what the function does and what it is given."""
        return inspect.cleandoc(self.reference.__doc__ or "")

    @property
    def jit(self) -> bool:
        """Whether the checker calls the function under ``jax.jit`` (the statement says so)."""
        return any(isinstance(r, UnderJit) for r in self.requirements)

    @property
    def traced(self) -> bool:
        """Whether the checker reads the function's jaxpr for program requirements."""
        return any(isinstance(r, Program) for r in self.requirements)

    @property
    def traced_as_given(self) -> bool:
        """Whether the trace takes the inputs as given, not as traced arguments."""
        return any(isinstance(r, Traceable) and r.inputs_as_given for r in self.requirements)

    @property
    def compiled(self) -> bool:
        """Whether a program requirement reads the program XLA compiled, not only the jaxpr."""
        return any(isinstance(r, Program) and r.compiled for r in self.requirements)

    @property
    def layout(self) -> Layout | None:
        """The requirement on how the answer is laid out, if the statement makes one."""
        return next((r for r in self.requirements if isinstance(r, Layout)), None)

    def requirement(self, key: str) -> Requirement:
        """The requirement called ``key``."""
        for requirement in self.requirements:
            if requirement.key == key:
                return requirement
        raise KeyError(f"{self.name} has no requirement {key!r}")

    def judge(self, outcome: Outcome) -> list[Failure]:
        """The requirements ``outcome`` does not meet: empty when it is a right answer."""
        if outcome.raises:
            owner = self.requirement(outcome.exercises or "")
            return _failed(owner, owner.check(outcome))
        result = self.requirements[0]
        lines = result.check(outcome)
        if lines:
            # An error under tracing belongs to the rule that says the function is traced;
            # any other wrong answer on a case made for a kind of input, to that kind.
            for requirement in self.requirements:
                if isinstance(requirement, UnderJit | Traceable) and requirement.check(outcome):
                    # A failed trace is reported with what the call that followed it did.
                    why = requirement.check(outcome) if isinstance(requirement, Traceable) else []
                    return _failed(requirement, [*why, *lines])
            kind = self.requirement(outcome.exercises) if outcome.exercises else None
            if isinstance(kind, CaseKind) and kind.claims(outcome):
                # Input of that kind made the function raise: the kind is what it missed.
                return _failed(kind, lines)
            return _failed(result, lines)
        failures: list[Failure] = []
        for requirement in self.requirements[1:]:
            if not isinstance(requirement, Refuses | CaseKind):
                failures += _failed(requirement, requirement.check(outcome))
        return failures

    def hint_for(self, outcome: Outcome, failures: Sequence[Failure] = ()) -> str | None:
        """The first of this problem's hints, then the common ones, that fits ``outcome``: a
        hint on a result only when the requirement it is about is what failed."""
        failed = {f.key for f in failures}
        for hint in (*self.hints, *COMMON_HINTS):
            if isinstance(hint, ResultHint) and hint.requirement not in failed:
                continue
            if hint.matches(outcome):
                return hint.text
        return None


def statement_markdown(problem: Problem) -> str:
    """The problem as its page states it: the signature, what the function is given, and the
    requirements the checker checks, by name."""
    summary = problem.statement.split("\n\n", 1)[0].replace("\n", " ")
    lines = [f"Write `{problem.signature}`: {summary}", ""]
    given = docstring_section(problem.statement, "Args")
    if given:
        lines += ["It is given:", ""]
        lines += [f"- `{name}`: {text}" for name, text in given]
        lines.append("")
    lines += [
        "It must meet each of these requirements; the checker checks them by name, on 1, 2, 4 "
        "and 8 devices. Those marked *the lesson* check how the answer was made, the skill "
        "the problem teaches, so a right answer reached another way fails them:",
        "",
    ]
    lines += [
        f"- **{r.key}**{LESSON_MARK if r.key in problem.lesson else ''}: {r.text}"
        for r in problem.requirements
    ]
    return "\n".join(lines)


LESSON_MARK = " (*the lesson*)"
"""How the statement marks a requirement that checks the skill the problem teaches."""


def statement_text(problem: Problem) -> str:
    """The requirements as the starter file lists them, in plain text."""
    lines = ["Requirements, each checked by name:"]
    for requirement in problem.requirements:
        text = requirement.text.replace("`", "")
        mark = LESSON_MARK.replace("*", "") if requirement.key in problem.lesson else ""
        lines.append(
            textwrap.fill(f"- {requirement.key}{mark}: {text}", 92, subsequent_indent="  ")
        )
    return "\n".join(lines)


def docstring_section(docstring: str, title: str) -> list[tuple[str, str]]:
    """The entries of a Google-style docstring section, e.g. ``Args``: (name, text) pairs,
    continuation lines joined."""
    entries: list[tuple[str, str]] = []
    inside = False
    for line in docstring.splitlines():
        if line.strip() == f"{title}:":
            inside = True
            continue
        if not inside:
            continue
        if line and not line.startswith(" "):
            break
        match = re.match(r"^    (\S[^:]*):\s*(.*)$", line)
        if match:
            entries.append((match.group(1), match.group(2)))
        elif line.strip() and entries:
            name, text = entries[-1]
            entries[-1] = (name, f"{text} {line.strip()}")
    return entries


def _failed(requirement: Requirement, lines: Sequence[str]) -> list[Failure]:
    return [Failure(requirement.key, requirement.text, tuple(lines))] if lines else []

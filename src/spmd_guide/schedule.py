"""Reading a compiled program's schedule: what runs in which order, inside which loop, what an
asynchronous collective overlaps, and in which memory space a value lives.

A compiled program (``jax.jit(f).lower(...).compile().as_text()``) is *scheduled*: each
computation lists its instructions in the order they run. A ``while`` instruction names its
loop's body and condition, and a fusion the computation it runs. An asynchronous collective is
a start, which returns at once, and a done, which waits for the result; what is scheduled
between them runs while the collective moves data. XLA's HLO writes a pair as
``all-gather-start``/``all-gather-done`` (or ``async-start``/``async-done`` around the
collective); the TPU compiler writes fusions named ``async-collective-start`` and
``async-collective-done``, with continuation fusions between them that hold a copy of the
collective (same channel id) beside the computation it overlaps. A value's layout may name a
memory space, ``S(n)``; none means the device's main memory (``0``).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from spmd_guide.analysis import COLLECTIVES, _computations, _runs_per_call

MATMULS = frozenset({"dot", "convolution"})
"""Opcodes of matrix products: the TPU compiler writes a ``dot`` as a ``convolution``."""

BOOKKEEPING = frozenset(
    {"parameter", "constant", "get-tuple-element", "tuple", "bitcast", "copy-start", "copy-done"}
)
"""Opcodes that move no data through a compute unit: ignored when asking what an async
collective overlaps."""

_RUNS_SCHEDULED = frozenset({"while", "call", "conditional"})
"""Opcodes whose called computations are scheduled computations of their own."""

_INSTRUCTION = re.compile(r"^\s*(ROOT\s+)?%([\w.\-]+)\s*=\s*(.*)$")
_CALLS = re.compile(
    r"\b(?:calls|body|condition|to_apply)=%([\w.\-]+)"
    r"|\b(?:called_computations|branch_computations)=\{([^}]*)\}"
)
_CHANNEL = re.compile(r"\bchannel_id=(\d+)")
_OP_NAME = re.compile(r'op_name="([^"]*)"')
_MEMORY_SPACE = re.compile(r"S\((\d+)\)")
_ARRAY = re.compile(r"\b([a-z]+\d*)\[([\d,]*)\](\{[^}]*\})?")


@dataclass(frozen=True)
class Instruction:
    """One instruction of a computation, as the compiled program prints it."""

    name: str
    opcode: str
    result: str
    """The result's type: ``f32[4,8]{1,0}``, or a tuple of such types."""
    operands: tuple[str, ...]
    calls: tuple[str, ...]
    """The computations it runs: a fusion's, a loop's body and condition, a reduction's."""
    channel: int | None
    op_name: str
    """The JAX operation it came from (``metadata={op_name=...}``), or ``""``."""
    root: bool
    body: str | None = None
    """A ``while`` loop's body computation."""

    @property
    def arrays(self) -> list[str]:
        """The arrays of its result, each as ``dtype[dims]``."""
        return [f"{dtype}[{dims}]" for dtype, dims, _ in _ARRAY.findall(self.result)]

    @property
    def memory_spaces(self) -> list[int]:
        """The memory space of each array of its result (``0``, main memory, unless the layout
        names another)."""
        spaces = []
        for _, _, layout in _ARRAY.findall(self.result):
            found = _MEMORY_SPACE.search(layout or "")
            spaces.append(int(found.group(1)) if found else 0)
        return spaces


@dataclass(frozen=True)
class ScheduledCollective:
    """A collective as a scheduled computation runs it."""

    kind: str
    arrays: tuple[str, ...]
    """What it produces, as ``dtype[dims]``."""
    instruction: Instruction
    """The instruction of the scheduled computation that runs it (a fusion, for one inside)."""
    asynchronous: bool
    """Whether that instruction starts it, to be waited for later by a done."""


@dataclass(frozen=True)
class AsyncPair:
    """An asynchronous collective: its start, its done, and what runs between them."""

    computation: str
    kind: str
    """The collective: ``all-gather``, ``all-reduce``, ``reduce-scatter``, ..."""
    arrays: tuple[str, ...]
    """What the collective produces, as ``dtype[dims]``."""
    start: Instruction
    done: Instruction
    between: tuple[Instruction, ...]
    """The instructions scheduled strictly between start and done, bookkeeping left out."""


@dataclass
class Program:
    """A compiled program's computations, each an ordered list of instructions."""

    entry: str
    computations: dict[str, list[Instruction]]
    runs: dict[str, int | None] = field(repr=False)
    """How many times each computation runs in one call (``None``: a loop of unknown length)."""

    @classmethod
    def read(cls, compiled: Any) -> Program:
        """Parse ``compiled`` (a compiled program, or its ``as_text()``).

        Raises:
            ValueError: if the text has no ENTRY computation.
        """
        text = compiled if isinstance(compiled, str) else compiled.as_text()
        entry, bodies = _computations(text)
        computations = {
            name: [i for i in (_instruction(line) for line in lines) if i is not None]
            for name, lines in bodies.items()
        }
        return cls(entry, computations, _runs_per_call(text))

    # -- where things are --------------------------------------------------------------------

    def instruction(self, name: str) -> Instruction:
        """The instruction called ``name`` (without its ``%``).

        Raises:
            KeyError: if no computation holds it.
        """
        for instructions in self.computations.values():
            for instruction in instructions:
                if instruction.name == name:
                    return instruction
        raise KeyError(f"no instruction named {name!r} in this program")

    def computation_of(self, name: str) -> str:
        """The computation that holds the instruction called ``name``."""
        for computation, instructions in self.computations.items():
            if any(i.name == name for i in instructions):
                return computation
        raise KeyError(f"no instruction named {name!r} in this program")

    def loops(self) -> dict[str, int | None]:
        """Each loop's body computation and its trip count (``None`` where not stated)."""
        found = {}
        for computation, instructions in self.computations.items():
            for instruction in instructions:
                if instruction.opcode == "while":
                    body = instruction.body
                    assert body is not None
                    runs_here = self.runs.get(computation)
                    runs_body = self.runs.get(body)
                    trips = (
                        runs_body // runs_here
                        if runs_here and runs_body is not None and runs_here > 0
                        else None
                    )
                    found[body] = trips
        return found

    def scheduled(self) -> list[str]:
        """The computations whose instructions are scheduled one after another: the entry and
        the loops' bodies (and what they call that is not a fusion, a reduction or a loop's
        condition). A fusion's computation runs inside the one instruction that calls it."""
        names: list[str] = []

        def visit(name: str) -> None:
            if name in names or name not in self.computations:
                return
            names.append(name)
            for instruction in self.computations[name]:
                if instruction.body is not None:
                    visit(instruction.body)
                elif instruction.opcode in _RUNS_SCHEDULED:
                    for callee in instruction.calls:
                        visit(callee)

        visit(self.entry)
        return names

    def loop_of(self, computation: str) -> str | None:
        """The innermost loop body among the scheduled computations that runs ``computation``
        (itself, if it is a body); ``None`` for what runs outside every loop."""
        bodies = set(self.loops())
        owner = self._scheduled_owner(computation)
        return owner if owner in bodies else None

    def inside(self, instruction: Instruction, through_loops: bool = True) -> set[str]:
        """The opcodes of everything ``instruction`` runs: its own and those of the computations
        it calls, through every level; with ``through_loops`` false, not into a loop, a call or
        a conditional (computations scheduled on their own), only into fusions and reductions."""
        opcodes = {instruction.opcode}
        if not through_loops and instruction.opcode in _RUNS_SCHEDULED:
            return opcodes
        stack = list(instruction.calls)
        seen: set[str] = set()
        while stack:
            name = stack.pop()
            if name in seen:
                continue
            seen.add(name)
            for inner in self.computations.get(name, ()):
                opcodes.add(inner.opcode)
                if through_loops or inner.opcode not in _RUNS_SCHEDULED:
                    stack.extend(inner.calls)
        return opcodes

    def collectives(self, computation: str) -> list[ScheduledCollective]:
        """The collectives run by the scheduled ``computation``, in order. A collective inside
        a fusion is listed under the fusion; one kept under the same channel by an async start,
        its continuations and its done is listed once, at the start. A TPU reduce-scatter (a
        fusion of an all-reduce named ``all-reduce-scatter``) is listed as a
        ``reduce-scatter``."""
        found: list[ScheduledCollective] = []
        # Copies inside fusions share their collective's channel; outside fusions one channel
        # id may serve several collectives (two psums of one shard_map), so only copies are merged.
        channels: set[int] = set()
        for instruction in self.computations[computation]:
            if _is_done(instruction):
                continue
            for kind, channel, arrays in self._collectives_in(instruction):
                nested = not _collective_kind(instruction.opcode)
                if nested and channel is not None and channel in channels:
                    continue
                if nested and channel is not None:
                    channels.add(channel)
                found.append(
                    ScheduledCollective(kind, tuple(arrays), instruction, _is_start(instruction))
                )
        return found

    def depends_on(self, name: str) -> set[str]:
        """The instructions of the same computation whose results ``name`` takes, directly or
        through others."""
        by_name = {i.name: i for i in self.computations[self.computation_of(name)]}
        found: set[str] = set()
        stack = list(by_name[name].operands)
        while stack:
            operand = stack.pop()
            if operand in found or operand not in by_name:
                continue
            found.add(operand)
            stack.extend(by_name[operand].operands)
        return found

    def users(self, name: str) -> list[Instruction]:
        """The instructions of the same computation that take ``name``'s result."""
        instructions = self.computations[self.computation_of(name)]
        return [i for i in instructions if name in i.operands]

    def async_pairs(self, computation: str | None = None) -> list[AsyncPair]:
        """Every asynchronous collective of the scheduled computations (or of ``computation``
        alone), with the instructions scheduled between its start and its done."""
        names = [computation] if computation is not None else self.scheduled()
        pairs = []
        for name in names:
            instructions = self.computations[name]
            position = {i.name: n for n, i in enumerate(instructions)}
            by_name = {i.name: i for i in instructions}
            for n, done in enumerate(instructions):
                if not _is_done(done):
                    continue
                start = self._start_of(done, by_name)
                collectives = self._collectives_in(start)
                kind, _, arrays = (
                    collectives[0]
                    if collectives
                    else (start.opcode.removesuffix("-start"), None, done.arrays)
                )
                between = tuple(
                    i
                    for i in instructions[position[start.name] + 1 : n]
                    if i.opcode not in BOOKKEEPING and not _is_done(i) and not _is_start(i)
                )
                pairs.append(AsyncPair(name, kind, tuple(arrays), start, done, between))
        return pairs

    # -- helpers -----------------------------------------------------------------------------

    def _scheduled_owner(self, computation: str) -> str | None:
        """The scheduled computation that runs ``computation`` (itself if scheduled)."""
        scheduled = self.scheduled()
        if computation in scheduled:
            return computation
        callers = {
            callee: name
            for name, instructions in self.computations.items()
            for instruction in instructions
            for callee in instruction.calls
        }
        seen = set()
        while computation in callers and computation not in seen:
            seen.add(computation)
            computation = callers[computation]
            if computation in scheduled:
                return computation
        return None

    def _collectives_in(self, instruction: Instruction) -> list[tuple[str, int | None, list[str]]]:
        """``(kind, channel, arrays produced)`` of each collective ``instruction`` runs, itself
        or in what it calls."""
        found = []
        own = _collective_kind(instruction.opcode)
        if own:
            arrays = instruction.arrays
            # A start's result is (operands..., result): keep the result.
            found.append(
                (own, instruction.channel, arrays[-1:] if _is_start(instruction) else arrays)
            )
        # A loop's body or a called computation is scheduled on its own: not this one's.
        if instruction.opcode in _RUNS_SCHEDULED:
            return found
        stack = [(callee, callee) for callee in instruction.calls]
        seen: set[str] = set()
        while stack:
            name, top = stack.pop()
            if name in seen:
                continue
            seen.add(name)
            for inner in self.computations.get(name, ()):
                kind = _collective_kind(inner.opcode)
                if kind == "all-reduce" and top.startswith("all-reduce-scatter"):
                    kind = "reduce-scatter"
                if kind == "reduce-scatter" and inner.opcode.startswith("all-reduce"):
                    # The fusion keeps this device's slice of the sum: its own result.
                    found.append((kind, inner.channel, self._result_of(top)))
                elif kind:
                    found.append((kind, inner.channel, inner.arrays))
                if inner.opcode not in _RUNS_SCHEDULED:
                    stack.extend((callee, top) for callee in inner.calls)
        return found

    def _result_of(self, computation: str) -> list[str]:
        """The arrays a computation's ROOT instruction produces."""
        roots = [i for i in self.computations.get(computation, ()) if i.root]
        return roots[0].arrays if roots else []

    def _start_of(self, done: Instruction, by_name: dict[str, Instruction]) -> Instruction:
        """The start a ``done`` waits for, found through its operands (tuple accesses and, on
        TPU, continuation fusions)."""
        stack = list(done.operands)
        seen: set[str] = set()
        while stack:
            name = stack.pop()
            if name in seen or name not in by_name:
                continue
            seen.add(name)
            operand = by_name[name]
            if _is_start(operand):
                return operand
            stack.extend(operand.operands)
        raise ValueError(f"{done.name} waits for no start in its computation")


def _instruction(line: str) -> Instruction | None:
    match = _INSTRUCTION.match(line)
    if not match:
        return None
    root, name, rest = match.groups()
    result, opcode, arguments = _split_result(rest)
    if opcode is None:
        return None
    operands = tuple(re.findall(r"%([\w.\-]+)", _outer_parentheses(arguments)))
    calls = tuple(
        callee.strip().lstrip("%")
        for found in _CALLS.finditer(arguments)
        for callee in (found.group(1) or found.group(2)).split(",")
        if callee.strip()
    )
    channel = _CHANNEL.search(arguments)
    body = re.search(r"\bbody=%([\w.\-]+)", arguments)
    op_name = _OP_NAME.search(arguments)
    return Instruction(
        name=name,
        opcode=opcode,
        result=result,
        operands=operands,
        calls=calls,
        channel=int(channel.group(1)) if channel else None,
        op_name=op_name.group(1) if op_name else "",
        root=bool(root),
        body=body.group(1) if body else None,
    )


def _split_result(rest: str) -> tuple[str, str | None, str]:
    """``type opcode(operands), attributes`` split into the type, the opcode and the rest."""
    depth = 0
    for n, char in enumerate(rest):
        if char in "([{":
            depth += 1
        elif char in ")]}":
            depth -= 1
        elif char == " " and depth == 0:
            found = re.match(r"\s*([\w\-]+)\(", rest[n:])
            if found:
                return rest[:n], found.group(1), rest[n + found.end() - 1 :]
    return rest, None, ""


def _outer_parentheses(arguments: str) -> str:
    """The text inside the parentheses that open ``arguments``."""
    depth = 0
    for n, char in enumerate(arguments):
        if char == "(":
            depth += 1
        elif char == ")":
            depth -= 1
            if depth == 0:
                return arguments[1:n]
    return arguments


def _collective_kind(opcode: str) -> str | None:
    base = opcode.removesuffix("-start").removesuffix("-done")
    return base if base in COLLECTIVES and not opcode.endswith("-done") else None


def _is_start(instruction: Instruction) -> bool:
    return instruction.opcode.endswith("-start") or instruction.name.startswith(
        "async-collective-start"
    )


def _is_done(instruction: Instruction) -> bool:
    return instruction.opcode.endswith("-done") or instruction.name.startswith(
        "async-collective-done"
    )


def matmuls(
    program: Program, instructions: Iterable[Instruction], through_loops: bool = True
) -> list[Instruction]:
    """Those of ``instructions`` that compute a matrix product, themselves or in what they call
    (with ``through_loops`` false, not in a loop they run: :meth:`Program.inside`)."""
    return [i for i in instructions if program.inside(i, through_loops) & MATMULS]

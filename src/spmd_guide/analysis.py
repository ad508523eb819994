"""Measuring a sharded program: bytes each device holds, and collectives XLA inserted."""

from __future__ import annotations

import glob
import gzip
import json
import math
import re
import tempfile
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import jax
import numpy as np

COLLECTIVES = ("all-reduce", "all-gather", "reduce-scatter", "collective-permute", "all-to-all")
"""The collective operations :func:`count_collectives` looks for in compiled HLO."""

# An HLO instruction reads `%name = type op(operands)`; an async collective appears as a
# `-start`/`-done` pair, of which the `-start` is counted.
_OP = re.compile(r"=\s*[^=]*?\s(" + "|".join(COLLECTIVES) + r")(?:-start)?\(")
_CHANNEL = re.compile(r"\bchannel_id=(\d+)")
# TPU's compiler writes a reduce-scatter as a fusion whose computation, named all-reduce-scatter,
# all-reduces and keeps this device's slice; it runs as one reduce-scatter.
_REDUCE_SCATTER_COMPUTATION = "all-reduce-scatter"
_FUSION_CALLS = re.compile(r"\sfusion\(.*?\bcalls=%([\w.\-]+)")


def _collective_lines(text: str) -> list[tuple[str, str, str]]:
    """Each collective of a compiled program once, as ``(op, instruction line, computation)``.

    TPU's compiler may split one collective into an asynchronous start, continuations and a
    done, fusions that each hold a copy of the collective under its channel id: such copies
    inside fusions are listed once. (Outside fusions a channel id is not unique: two ``psum`` s
    of one ``shard_map`` may share one.) An all-reduce inside TPU's all-reduce-scatter fusion is
    listed as a ``reduce-scatter``.
    """
    fused = _fusion_callers(text)
    found: list[tuple[str, str, str]] = []
    seen: set[tuple[str, str]] = set()
    computation = ""
    for line in text.splitlines():
        header = _COMPUTATION.match(line)
        if header:
            computation = header.group(1)
            continue
        match = _OP.search(line)
        if not match:
            continue
        op = match.group(1)
        if op == "all-reduce" and computation.startswith(_REDUCE_SCATTER_COMPUTATION):
            op = "reduce-scatter"
        channel = _CHANNEL.search(line)
        if channel and computation in fused:
            key = (op, channel.group(1))
            if key in seen:
                continue
            seen.add(key)
        found.append((op, line, computation))
    return found


def bytes_per_device(tree: Any) -> dict[int, int]:
    """The bytes of ``tree``'s arrays held by each device, by device id.

    Counts every addressable shard of every ``jax.Array`` leaf (a replicated array counts in
    full on every device). Works on anything JAX can flatten: a dict, an ``nnx.State``, a model.

    Raises:
        TypeError: if a leaf is not a ``jax.Array`` (a NumPy array lives on no device).
    """
    totals: Counter[int] = Counter()
    for leaf in jax.tree.leaves(tree):
        if not isinstance(leaf, jax.Array):
            raise TypeError(
                f"bytes_per_device counts jax.Array leaves, got {type(leaf).__name__}; "
                "put it on devices first with jax.device_put"
            )
        for shard in leaf.addressable_shards:
            totals[shard.device.id] += shard.data.nbytes
    return dict(sorted(totals.items()))


def total_bytes(tree: Any) -> int:
    """The bytes of ``tree``'s arrays counted once each, as if on one device."""
    return sum(leaf.nbytes for leaf in jax.tree.leaves(tree))


def count_collectives(compiled: Any) -> dict[str, int]:
    """How many of each collective a compiled program contains.

    Reads the CPU's and the TPU's compiled programs alike: a collective that TPU's compiler
    splits into an asynchronous start, continuations and a done counts once, and its
    all-reduce-scatter fusion counts as a reduce-scatter.

    Args:
        compiled: the result of ``jax.jit(f).lower(...).compile()``, or its ``as_text()``.

    Returns:
        A count for every name in :data:`COLLECTIVES`, zeros included.
    """
    text = compiled if isinstance(compiled, str) else compiled.as_text()
    found = Counter(op for op, _, _ in _collective_lines(text))
    return {name: found.get(name, 0) for name in COLLECTIVES}


# A computation's header: `%name (params) -> type {`, or `ENTRY %name ...{`.
_COMPUTATION = re.compile(r"^(?:ENTRY\s+)?%([\w.\-]+)\s.*\{\s*$")
_CALLED = re.compile(
    r"\b(?:body|condition|to_apply|calls|branch_computations)=\{?(%[\w.\-]+(?:, %[\w.\-]+)*)"
)
_TRIP_COUNT = re.compile(r'"known_trip_count":\{"n":"(\d+)"\}')


def collectives_per_step(compiled: Any) -> dict[str, int]:
    """How many of each collective a compiled program *executes* in one call.

    :func:`count_collectives` counts the operations written in the program; a collective inside
    a loop (``jax.lax.scan``, ``fori_loop``) is written once but runs on every iteration. This
    multiplies each collective by the trip counts of the loops around it. It reads the CPU's and
    the TPU's programs alike (see :func:`count_collectives`).

    Raises:
        ValueError: if a loop holding a collective has no trip count known at compile time.
    """
    text = compiled if isinstance(compiled, str) else compiled.as_text()
    runs = _runs_per_call(text)
    counts: Counter[str] = Counter()
    for op, line, computation in _collective_lines(text):
        times = runs.get(computation, 0)
        if times is None:
            raise ValueError(
                f"a {op} ({line.split('=')[0].strip()}) is in a loop whose trip count is not "
                "known at compile time; count it with count_collectives and multiply by the "
                "iterations yourself"
            )
        counts[op] += times
    return {name: counts.get(name, 0) for name in COLLECTIVES}


def _computations(text: str) -> tuple[str, dict[str, list[str]]]:
    """The ENTRY computation's name, and every computation's instruction lines by name."""
    bodies: dict[str, list[str]] = {}
    entry = None
    current = None
    for line in text.splitlines():
        header = _COMPUTATION.match(line)
        if header:
            current = header.group(1)
            bodies[current] = []
            if line.startswith("ENTRY"):
                entry = current
        elif current is not None:
            if line.strip() == "}":
                current = None
            else:
                bodies[current].append(line)
    if entry is None:
        raise ValueError("no ENTRY computation found: pass a compiled program or its as_text()")
    return entry, bodies


# A TPU program leaves a loop's trip count in its condition: the counter compared with a constant.
_S32_CONSTANT = re.compile(r"s32\[\]\S*\s+constant\((\d+)\)")


def _trip_count(line: str, bodies: dict[str, list[str]]) -> int | None:
    """The trip count of the ``while`` instruction ``line``, if the program states it."""
    known = _TRIP_COUNT.search(line)
    if known:
        return int(known.group(1))
    condition = re.search(r"\bcondition=%([\w.\-]+)", line)
    bounds = (
        {int(n) for text in bodies.get(condition.group(1), ()) for n in _S32_CONSTANT.findall(text)}
        if condition
        else set()
    )
    return bounds.pop() if len(bounds) == 1 else None


def _runs_per_call(text: str) -> dict[str, int | None]:
    """How many times each computation runs in one call of the program (``None``: in a loop
    whose trip count is not known). A loop's body runs once per trip, its condition once more."""
    entry, bodies = _computations(text)
    runs: dict[str, int | None] = {}

    def visit(name: str, times: int | None, seen: frozenset[str]) -> None:
        if name in seen:
            return
        before = runs.get(name, 0)
        runs[name] = None if before is None or times is None else before + times
        for line in bodies.get(name, ()):
            loop = " while(" in line
            trips = _trip_count(line, bodies) if loop else 1
            for called in _CALLED.finditer(line):
                repeats: int | None = 1
                if loop:
                    repeats = None if trips is None else trips
                    if trips is not None and called.group(0).startswith("condition="):
                        repeats = trips + 1
                for callee in called.group(1).split(","):
                    inner = None if times is None or repeats is None else times * repeats
                    visit(callee.strip().lstrip("%"), inner, seen | {name})

    visit(entry, 1, frozenset())
    return runs


@dataclass(frozen=True)
class TimedOperation:
    """One instruction of a compiled program as a thread ran it, timed by the JAX profiler."""

    name: str
    """The instruction's name in the compiled program, e.g. ``ppermute.3`` or ``fusion.2``."""
    start_us: float
    """Microseconds from the first traced instruction of the call, on any thread."""
    end_us: float


# An instruction line: `%name = type op(...)`, or `ROOT %name = ...`.
_INSTRUCTION = re.compile(r"^\s*(?:ROOT\s+)?%([\w.\-]+)\s*=", re.M)


def trace_threads(function: Any, *args: Any) -> dict[str, list[TimedOperation]]:
    """Run a jitted ``function(*args)`` once under the JAX profiler; the instructions of its
    compiled program that each thread ran, in the order they started.

    The function is called once first, so compilation stays out of the trace. XLA's CPU runtime
    records every instruction it runs under its name in the compiled program; other events
    (waits, rendezvous) are left out.

    Raises:
        TypeError: if ``function`` is not jitted (it has no ``lower``).
        ValueError: if the trace records none of the program's instructions.
    """
    if not hasattr(function, "lower"):
        raise TypeError(
            f"trace_threads needs a jitted function, got {type(function).__name__}; "
            "wrap it in jax.jit"
        )
    program = set(_INSTRUCTION.findall(function.lower(*args).compile().as_text()))
    jax.block_until_ready(function(*args))
    with tempfile.TemporaryDirectory() as folder:
        with jax.profiler.trace(folder):
            jax.block_until_ready(function(*args))
        (path,) = glob.glob(f"{folder}/**/*.xplane.pb", recursive=True)
        profile = jax.profiler.ProfileData.from_file(path)
        ran = [
            (line.name, event.name, event.start_ns, event.end_ns)
            for plane in profile.planes
            for line in plane.lines
            for event in line.events
            if event.name in program
        ]
    if not ran:
        raise ValueError(
            "the profile records none of the compiled program's instructions; "
            "this backend's runtime may not record them by name"
        )
    first = min(start for _, _, start, _ in ran)
    threads: dict[str, list[TimedOperation]] = {}
    for thread, name, start, end in sorted(ran, key=lambda op: op[2]):
        threads.setdefault(thread, []).append(
            TimedOperation(name, (start - first) / 1e3, (end - first) / 1e3)
        )
    return threads


def trace_timeline(trace_dir: str) -> dict[int, list[TimedOperation]]:
    """The last program call recorded in a ``jax.profiler.trace`` directory, device by device:
    each instruction of the compiled program that device ran, in the order they started, timed
    from the call's first instruction on any device.

    Reads the trace viewer's JSON (``*.trace.json.gz``), in which XLA's CPU runtime gives each
    instruction it ran its device (``device_ordinal``) and its call (``run_id``). A call spans
    every device; the last to start is taken, so a trace of several steps gives the final one.

    Raises:
        ValueError: if the directory holds no such trace, or the trace names no instruction with
            its device (a runtime other than XLA's CPU runtime may not).
    """
    found = sorted(glob.glob(f"{trace_dir}/**/*.trace.json.gz", recursive=True))
    if not found:
        raise ValueError(
            f"no *.trace.json.gz under {trace_dir}: write one with jax.profiler.trace(dir)"
        )
    with gzip.open(found[-1]) as file:
        events = json.load(file)["traceEvents"]
    ran = [
        event
        for event in events
        if event.get("ph") == "X"
        and {"hlo_op", "device_ordinal", "run_id"} <= set(event.get("args", {}))
    ]
    if not ran:
        raise ValueError(
            f"the trace in {found[-1]} names no instruction with its device and call; "
            "this backend's runtime may not record them so"
        )
    first_of_run: dict[str, float] = {}
    for event in ran:
        run = event["args"]["run_id"]
        first_of_run[run] = min(first_of_run.get(run, math.inf), event["ts"])
    last = max(first_of_run, key=lambda run: first_of_run[run])
    start = first_of_run[last]
    devices: dict[int, list[TimedOperation]] = {}
    for event in sorted(ran, key=lambda event: event["ts"]):
        if event["args"]["run_id"] == last:
            devices.setdefault(int(event["args"]["device_ordinal"]), []).append(
                TimedOperation(
                    event["args"]["hlo_op"],
                    event["ts"] - start,
                    event["ts"] + event["dur"] - start,
                )
            )
    return dict(sorted(devices.items()))


_COLLECTIVE_INSTRUCTION = re.compile(
    r"^\s*(?:ROOT\s+)?%(?P<name>[\w.\-]+)\s*=[^\n]*?\s(?P<op>"
    + "|".join(COLLECTIVES)
    + r")(?:-start|-done)?\(",
    re.M,
)


def collective_instructions(program: str) -> dict[str, str]:
    """Each instruction of a compiled program's text that is a collective, by name, to which of
    :data:`COLLECTIVES` it is: ``{"psum.3": "all-reduce", ...}``. Names alone do not say (a
    ``psum`` compiles to an all-reduce named ``psum.3``); the instruction's operation does."""
    return {m["name"]: m["op"] for m in _COLLECTIVE_INSTRUCTION.finditer(program)}


@dataclass(frozen=True)
class Collective:
    """One collective of a compiled program, and the mesh axes it communicates over."""

    op: str
    """One of :data:`COLLECTIVES`, e.g. ``all-reduce``."""
    axes: tuple[str, ...]
    """The mesh axes along which the devices of one group (or one send) differ, in mesh order."""
    shapes: tuple[str, ...]
    """The per-device shapes it produces, e.g. ``("f32[4,32,64]",)``; several when XLA combined
    collectives into one."""
    runs: int | None = 1
    """How many times one call of the program runs it (more than once in a loop's body), or
    ``None`` in a loop whose trip count the program does not state."""


_COLLECTIVE_LINE = re.compile(
    r"=\s*(?P<type>\(.*?\)|\S+)\s(?P<op>" + "|".join(COLLECTIVES) + r")(?:-start)?\("
)
_MESH_GROUPS = re.compile(r"replica_groups=mesh\[(?P<axes>[^\]]*)\]\s*\{(?P<over>[^}]*)\}")
_IOTA_GROUPS = re.compile(
    r"replica_groups=\[(?P<groups>\d+),(?P<size>\d+)\]<=\[(?P<dims>[\d,]+)\](?:T\((?P<perm>[\d,]+)\))?"
)
_LISTED_GROUPS = re.compile(
    r"(?:replica_groups|source_target_pairs)=\{(?P<groups>(?:\{[\d,]*\},?)*)\}"
)


def collectives_by_axis(compiled: Any, mesh: jax.sharding.Mesh) -> list[Collective]:
    """Each collective of a compiled program, with the axes of ``mesh`` it runs over.

    Reads the replica groups XLA prints (by mesh axis, as an iota pattern, or listed) and the
    source-target pairs of a collective permute, and names the mesh axes along which the
    devices of a group differ: ``("model",)`` for a collective within each row of a
    ``("data", "model")`` mesh.

    Args:
        compiled: the result of ``jax.jit(f).lower(...).compile()``, or its ``as_text()``.
        mesh: the mesh the program was partitioned over.

    Raises:
        ValueError: if a collective's groups name devices that are not in ``mesh``.
    """
    text = compiled if isinstance(compiled, str) else compiled.as_text()
    position = _mesh_positions(mesh)
    return [
        Collective(op, _axes(line, mesh, position), shapes, times)
        for op, line, shapes, times, _ in _collectives_produced(text)
    ]


@dataclass(frozen=True)
class LayerTraffic:
    """One value a collective of a compiled program carries, and the layer it comes from."""

    layer: str
    """The name scope (``jax.named_scope``) of the operation that made the value, or ``""``."""
    direction: str
    """``"forward"``, or ``"backward"`` when the value comes from the transpose of the layer's
    operations (its gradients)."""
    op: str
    """The collective, one of :data:`COLLECTIVES`."""
    axes: tuple[str, ...]
    """The mesh axes it runs over."""
    shape: str
    """The per-device shape of this value in the collective's result, e.g. ``f32[128,256]``."""
    runs: int | None
    """How many times one call of the program runs the collective (see :class:`Collective`)."""

    @property
    def elements(self) -> int:
        """The number of elements of this value on one device, per run."""
        return _elements(self.shape)


def traffic_by_layer(
    compiled: Any, mesh: jax.sharding.Mesh, layers: Sequence[str]
) -> list[LayerTraffic]:
    """Each value every collective of a compiled program carries, with the layer it comes from.

    JAX names each operation by the transforms and name scopes around it, and XLA keeps that
    name on most instructions (``op_name`` metadata): ``jit(step)/jvp(down)/dot_general`` for
    the forward pass of a layer traced under ``jax.named_scope("down")``,
    ``transpose(jvp(down))/dot_general`` for its backward pass. A collective that XLA combined
    from several carries one value per operand, and its own ``op_name`` lists them all after
    their common prefix (``jit(step)/(a:b:...)``), or, on some compilers, only the first; so
    each value is traced through the instruction that made it, past copies, bitcasts, tuple
    accesses and the like, which carry no name of their own. Where the compiler named the
    parts of a combined collective's result (``get-tuple-element`` s of it, or of its
    ``-done``, with their own ``op_name``), those names come first. A value whose maker has no
    name (a program's argument, or a fused computation's parameter) takes the collective's own
    name, or for a collective inside a fusion (TPU's reduce-scatter) the fusion's. A value whose
    origin names no layer of ``layers``, or cannot be found, gets the layer ``""``. A value is
    listed under the pass that made it, whichever pass the collective runs in.

    Args:
        compiled: the result of ``jax.jit(f).lower(...).compile()``, or its ``as_text()``.
        mesh: the mesh the program was partitioned over.
        layers: the name scopes to look for.

    Raises:
        ValueError: for a collective in a loop whose trip count the program does not state.
    """
    text = compiled if isinstance(compiled, str) else compiled.as_text()
    position = _mesh_positions(mesh)
    instructions = {
        name.group(1): line for line in text.splitlines() if (name := _DEFINED.match(line))
    }

    def origin(name: str, depth: int = 0) -> str:
        line = instructions.get(name, "")
        named = _OP_NAME.search(line)
        if named:
            return named.group(1)
        passed = _PASS_THROUGH.search(line)
        if passed and depth < 8:
            sources = _call_operands(line, passed.group(1))
            return origin(sources[0], depth + 1) if sources else ""
        return ""

    parts: dict[tuple[str, int], str] = {}
    done_of: dict[str, str] = {}  # an async collective's -start, to its -done
    for defined_name, definition in instructions.items():
        part = _NAMED_PART.search(definition)
        if part:
            parts[(part.group("of"), int(part.group("index")))] = part.group("name")
        done = _ASYNC_DONE.search(definition)
        if done:
            done_of[done.group(1)] = defined_name
    callers = _fusion_callers(text)

    found = []
    for op, line, shapes, times, computation in _collectives_produced(text):
        if times is None:
            raise ValueError(f"a {op} is in a loop whose trip count is not known at compile time")
        axes = _axes(line, mesh, position)
        operands = _call_operands(line, op)
        started = re.search(r"\s" + re.escape(op) + r"-start\(", line)
        if started and len(shapes) == 2 * len(operands):
            shapes = shapes[len(operands) :]  # an async start's result holds inputs, then outputs
        # The collective's own name, when it is one operation's (a combined one lists several).
        caller = callers.get(computation, "")
        own = _OP_NAME.search(line) or _OP_NAME.search(caller)
        single = own.group(1) if own and ":" not in own.group(1) else ""
        # A reduce-scatter written as a fusion: the fusion's result is the collective's.
        fused_scatter = op == "reduce-scatter" and " reduce-scatter" not in line
        defined = _DEFINED.match(caller if fused_scatter else line)
        results = [defined.group(1)] if defined else []
        results += [done_of[r] for r in results if r in done_of]
        if len(operands) == len(shapes):
            sources = [
                next((parts[r, i] for r in results if (r, i) in parts), "") or origin(o) or single
                for i, o in enumerate(operands)
            ]
        else:
            sources = [single] * len(shapes)
        for shape, source in zip(shapes, sources, strict=True):
            layer, direction = _layer_of(source, layers)
            found.append(LayerTraffic(layer, direction, op, axes, shape, times))
    return found


OUTSIDE_LAYERS = "(no layer)"
"""The layer :func:`values_by_layer` gives values whose origin names none of the layers."""


def values_by_layer(found: Sequence[LayerTraffic]) -> dict[tuple[str, str], dict[str, int]]:
    """How many values each (layer, direction) puts through each collective in one call, per
    device: ``{("down", "forward"): {"all-reduce over model": 8192}, ...}``, a collective over
    several axes written ``over data+model``.

    Args:
        found: the result of :func:`traffic_by_layer`.

    Raises:
        ValueError: if a collective's number of runs is not known.
    """
    rows: dict[tuple[str, str], dict[str, int]] = {}
    for item in found:
        if item.runs is None:
            raise ValueError(f"a {item.op} of {item.shape} runs an unknown number of times")
        where = f"{item.op} over {'+'.join(item.axes)}"
        row = rows.setdefault((item.layer or OUTSIDE_LAYERS, item.direction), {})
        row[where] = row.get(where, 0) + item.elements * item.runs
    return rows


def ledger_table(traffic: dict[str, Sequence[LayerTraffic]], layers: Sequence[str]) -> str:
    """A Markdown table with one row per layer and direction, and for each compiler (the keys
    of ``traffic``, each mapped to its :func:`traffic_by_layer`) the values per device its
    collectives carry, by collective and mesh axes. Every layer has a forward and a backward
    row; values from outside every layer get rows only where there are some."""
    tables = {compiler: values_by_layer(found) for compiler, found in traffic.items()}
    unlisted = {layer for rows in tables.values() for layer, _ in rows} - {*layers, OUTSIDE_LAYERS}
    if unlisted:
        raise ValueError(
            f"traffic from layers {sorted(unlisted)} that are not in layers={tuple(layers)}; "
            "pass ledger_table the layers given to traffic_by_layer"
        )
    lines = [
        "| layer | pass | " + " | ".join(f"{c}: values per device" for c in tables) + " |",
        "| --- | --- |" + " --- |" * len(tables),
    ]
    for layer in (*layers, OUTSIDE_LAYERS):
        for direction in ("forward", "backward"):
            cells = [rows.get((layer, direction), {}) for rows in tables.values()]
            if layer == OUTSIDE_LAYERS and not any(cells):
                continue
            described = [
                "; ".join(f"{where}: {n:,}" for where, n in cell.items()) or "nothing"
                for cell in cells
            ]
            name = layer if layer == OUTSIDE_LAYERS else f"`{layer}`"
            lines.append(f"| {name} | {direction} | " + " | ".join(described) + " |")
    return "\n".join(lines)


_OP_NAME = re.compile(r'op_name="([^"]*)"')
# `get-tuple-element(%x)`, or with the operand's type printed before it.
_NAMED_PART = re.compile(
    r"get-tuple-element\([^%]*%(?P<of>[\w.\-]+)\), index=(?P<index>\d+)"
    r".*?op_name=\"(?P<name>[^\"]*)\""
)
_ASYNC_DONE = re.compile(r"\s[\w-]+-done\([^%]*%([\w.\-]+)\)")
_DEFINED = re.compile(r"\s*(?:ROOT\s+)?%([\w.\-]+)\s*=")
_PASS_THROUGH = re.compile(
    r"\s(bitcast|copy|convert|reshape|get-tuple-element|transpose|copy-start|copy-done)\("
)


def _call_operands(line: str, op: str) -> list[str]:
    """The names of the operands of instruction ``line``, whose operation is ``op``."""
    start = re.search(r"\s" + re.escape(op) + r"(?:-start)?\(", line)
    if not start:
        return []
    depth, end = 1, start.end()
    while end < len(line) and depth:
        depth += {"(": 1, ")": -1}.get(line[end], 0)
        end += 1
    return re.findall(r"%([\w.\-]+)", line[start.end() : end - 1])


def _layer_of(op_name: str, layers: Sequence[str]) -> tuple[str, str]:
    """The innermost of ``layers`` among the scopes of ``op_name``, and whether the operation
    belongs to a backward pass."""
    scopes = op_name.split("/")[:-1]  # the last part is the primitive itself
    names = [n for scope in scopes for n in re.findall(r"[^()]+", scope)]
    layer = next((n for n in reversed(names) if n in layers), "")
    backward = any(re.search(r"(^|\()transpose\(", scope) for scope in scopes)
    return layer, "backward" if backward else "forward"


def collective_elements_per_step(compiled: Any) -> dict[str, int]:
    """How many elements each kind of collective produces on one device in one call of a
    compiled program: the sizes of what each returns, times the runs of the loops around it.

    An all-reduce of a whole gradient produces the gradient's elements; one inside a loop of
    four trips produces them four times. Reads the CPU's and the TPU's programs alike.

    Raises:
        ValueError: if a loop holding a collective has no trip count known at compile time.
    """
    text = compiled if isinstance(compiled, str) else compiled.as_text()
    totals: Counter[str] = Counter()
    for op, line, shapes, times, _ in _collectives_produced(text):
        if times is None:
            raise ValueError(
                f"a {op} ({line.split('=')[0].strip()}) is in a loop whose trip count is not "
                "known at compile time"
            )
        totals[op] += times * sum(_elements(shape) for shape in shapes)
    return {name: totals.get(name, 0) for name in COLLECTIVES}


def matmul_result_shapes(compiled: Any) -> list[tuple[int, ...]]:
    """The per-device shape of every matrix product (``dot``) a compiled program computes,
    fused or not, in the order the program lists them."""
    text = compiled if isinstance(compiled, str) else compiled.as_text()
    return [tuple(int(d) for d in dims.split(",") if d) for dims in _DOT_RESULT.findall(text)]


_DOT_RESULT = re.compile(r"=\s*\w+\[([\d,]*)\]\S*\s+dot\(")


def _elements(shape: str) -> int:
    dims = re.search(r"\[([\d,]*)\]", shape)
    return math.prod(int(d) for d in dims.group(1).split(",") if d) if dims else 1


def _collectives_produced(
    text: str,
) -> list[tuple[str, str, tuple[str, ...], int | None, str]]:
    """Each collective as ``(op, instruction line, per-device shapes it produces, runs per
    call, the computation it is in)``."""
    runs = _runs_per_call(text) if "ENTRY" in text else {}
    callers = _fusion_callers(text)
    found = []
    for op, line, computation in _collective_lines(text):
        match = _COLLECTIVE_LINE.search(line)
        assert match is not None
        produced = match.group("type")
        if op != match.group("op") and computation in callers:
            # A reduce-scatter written as a fusion: what it produces is the fusion's result.
            produced = callers[computation].split("=", 1)[1].split(" fusion(", 1)[0]
        shapes = tuple(re.findall(r"\w+\[[\d,]*\]", produced))
        found.append((op, line, shapes, runs.get(computation, 1) if runs else 1, computation))
    return found


def _fusion_callers(text: str) -> dict[str, str]:
    """Each fused computation's name, to the line of the first fusion that calls it."""
    callers: dict[str, str] = {}
    for line in text.splitlines():
        called = _FUSION_CALLS.search(line)
        if called:
            callers.setdefault(called.group(1), line)
    return callers


def _mesh_positions(mesh: jax.sharding.Mesh) -> dict[int, tuple[int, ...]]:
    """Each device of a program partitioned over ``mesh``, as the program numbers it, to its
    coordinates on the mesh.

    A ``jit`` program has one replica, so the global device ids in its replica groups and the
    pairs of a collective permute are partition ids: places in its device assignment, which for
    a mesh is ``mesh.devices`` flattened, not ``device.id`` s. The two agree on a mesh whose
    devices are in id order, as on this CPU build, and can differ on a TPU slice, where
    ``jax.make_mesh`` may follow the chips' ring order.
    """
    shape = np.asarray(mesh.devices).shape
    return {flat: tuple(int(i) for i in np.unravel_index(flat, shape)) for flat in range(mesh.size)}


def _axes(
    line: str, mesh: jax.sharding.Mesh, position: dict[int, tuple[int, ...]]
) -> tuple[str, ...]:
    by_name = _MESH_GROUPS.search(line)
    if by_name:
        # XLA may print the axes by the mesh's names or by position, as axis_0, axis_1, ...,
        # and it may leave out axes of size 1.
        printed = [axis.split("=")[0].strip("'") for axis in by_name.group("axes").split(",")]
        over = {
            name.strip().strip("'") for name in by_name.group("over").split(",") if name.strip()
        }
        if set(printed) <= set(mesh.axis_names):
            return tuple(name for name in mesh.axis_names if name in over)
        named = list(mesh.axis_names)
        if len(printed) != len(named):
            named = [name for name in named if mesh.shape[name] > 1]
        return tuple(named[i] for i, name in enumerate(printed) if name in over)
    iota = _IOTA_GROUPS.search(line)
    if iota:
        dims = [int(d) for d in iota.group("dims").split(",")]
        ids = np.arange(int(np.prod(dims))).reshape(dims)
        if iota.group("perm"):
            ids = ids.transpose([int(p) for p in iota.group("perm").split(",")])
        groups = ids.reshape(int(iota.group("groups")), int(iota.group("size"))).tolist()
    else:
        listed = _LISTED_GROUPS.search(line)
        if not listed:
            return ()
        groups = [
            [int(d) for d in group.split(",") if d]
            for group in re.findall(r"\{([\d,]*)\}", listed.group("groups"))
        ]
    differing: set[int] = set()
    for group in groups:
        try:
            coordinates = [position[device] for device in group]
        except KeyError as missing:
            raise ValueError(
                f"a collective groups the device at place {missing}, which is not in the mesh "
                f"{dict(mesh.shape)}: pass the mesh the program was compiled for"
            ) from None
        for coordinate in coordinates[1:]:
            differing |= {
                i for i, (a, b) in enumerate(zip(coordinate, coordinates[0], strict=True)) if a != b
            }
    return tuple(mesh.axis_names[i] for i in sorted(differing))

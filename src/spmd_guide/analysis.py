"""Measuring a sharded program: bytes each device holds, and collectives XLA inserted."""

from __future__ import annotations

import re
from collections import Counter
from typing import Any

import jax
import numpy as np

COLLECTIVES = ("all-reduce", "all-gather", "reduce-scatter", "collective-permute", "all-to-all")
"""The collective operations :func:`count_collectives` looks for in compiled HLO."""

# An HLO instruction reads `%name = type op(operands)`; an async collective appears as a
# `-start`/`-done` pair, of which the `-start` is counted.
_OP = re.compile(r"=\s*[^=]*?\s(" + "|".join(COLLECTIVES) + r")(?:-start)?\(")


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


def blocks_by_device(array: jax.Array) -> dict[int, np.ndarray]:
    """What each device holds of ``array``, by device id, as NumPy arrays."""
    return {
        shard.device.id: np.asarray(shard.data)
        for shard in sorted(array.addressable_shards, key=lambda shard: shard.device.id)
    }


def total_bytes(tree: Any) -> int:
    """The bytes of ``tree``'s arrays counted once each, as if on one device."""
    return sum(leaf.nbytes for leaf in jax.tree.leaves(tree))


def count_collectives(compiled: Any) -> dict[str, int]:
    """How many of each collective a compiled program contains.

    Args:
        compiled: the result of ``jax.jit(f).lower(...).compile()``, or its ``as_text()``.

    Returns:
        A count for every name in :data:`COLLECTIVES`, zeros included.
    """
    text = compiled if isinstance(compiled, str) else compiled.as_text()
    found = Counter(match.group(1) for match in _OP.finditer(text))
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
    multiplies each collective by the trip counts of the loops around it.

    Raises:
        ValueError: if a loop holding a collective has no trip count known at compile time.
    """
    text = compiled if isinstance(compiled, str) else compiled.as_text()
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

    counts: Counter[str] = Counter()

    def visit(name: str, times: int) -> None:
        for line in bodies.get(name, ()):
            op = _OP.search(line)
            if op:
                counts[op.group(1)] += times
            loop = " while(" in line
            found = _TRIP_COUNT.search(line) if loop else None
            for called in _CALLED.finditer(line):
                callees = [c.strip().lstrip("%") for c in called.group(1).split(",")]
                repeats = 1
                if loop:
                    if found is None:
                        if any(_holds_collective(c, bodies) for c in callees):
                            raise ValueError(
                                f"loop {line.split('=')[0].strip()} holds a collective but its "
                                "trip count is not known at compile time; count it with "
                                "count_collectives and multiply by the iterations yourself"
                            )
                        continue
                    # The condition runs once more than the body: the test that ends the loop.
                    trips = int(found.group(1))
                    repeats = trips if called.group(0).startswith("body=") else trips + 1
                for callee in callees:
                    visit(callee, times * repeats)

    visit(entry, 1)
    return {name: counts.get(name, 0) for name in COLLECTIVES}


def _holds_collective(
    name: str, bodies: dict[str, list[str]], seen: frozenset[str] = frozenset()
) -> bool:
    """Whether computation ``name``, or anything it calls, contains a collective."""
    if name in seen:
        return False
    for line in bodies.get(name, ()):
        if _OP.search(line):
            return True
        for called in _CALLED.finditer(line):
            for callee in called.group(1).split(","):
                if _holds_collective(callee.strip().lstrip("%"), bodies, seen | {name}):
                    return True
    return False

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

"""Problem: attention over a sequence split across devices, keys and values passed around a
ring, with an online softmax."""

from __future__ import annotations

# solution
import jax
import jax.numpy as jnp
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P


def ring_attention(q, k, v, *, mesh):
    """``softmax(q @ k.T / sqrt(d)) @ v`` with the sequence split over the mesh axis ``'seq'``.

    Each device holds its own block of queries, keys and values, and never the whole sequence.
    It keeps its queries and passes its keys and values around a ring with
    ``jax.lax.ppermute``: after n - 1 passes (n the size of ``'seq'``) every query block has
    met every key block. The softmax is computed online: a running maximum of the scores, a
    running sum of their exponentials and a running weighted sum of values, each rescaled by
    ``exp(old_max - new_max)`` whenever the maximum grows, so no device ever holds a whole row
    of scores. The output is divided by the running sum at the end and stays split like
    ``q``.

    Args:
        q, k, v: shape (S, d), S divisible by the size of ``'seq'``.
        mesh: a mesh with an axis ``'seq'``.

    """
    devices = mesh.shape["seq"]
    to_next = [(i, (i + 1) % devices) for i in range(devices)]
    scale = q.shape[-1] ** -0.5

    def per_device(q, k, v):
        running_max = jnp.full(q.shape[:1], -jnp.inf)
        running_sum = jnp.zeros(q.shape[:1])
        weighted = jnp.zeros_like(q)
        for step in range(devices):
            scores = (q @ k.T) * scale
            new_max = jnp.maximum(running_max, scores.max(axis=1))
            rescale = jnp.exp(running_max - new_max)
            p = jnp.exp(scores - new_max[:, None])
            running_sum = running_sum * rescale + p.sum(axis=1)
            weighted = weighted * rescale[:, None] + p @ v
            running_max = new_max
            if step < devices - 1:
                k, v = jax.lax.ppermute((k, v), "seq", to_next)
        return weighted / running_sum[:, None]

    split = NamedSharding(mesh, P("seq"))
    q, k, v = (jax.device_put(a, split) for a in (q, k, v))
    return jax.shard_map(per_device, mesh=mesh, in_specs=P("seq"), out_specs=P("seq"))(q, k, v)


# end solution

import math

import numpy as np

from spmd_guide.practice.cases import kind, normal, one_axis_meshes
from spmd_guide.practice.problem import Case, Problem, ResultHint
from spmd_guide.practice.requirements import (
    EXPLICIT_MESHES,
    GIVEN_MESH,
    TRACEABLE,
    Layout,
    Program,
    Returns,
    every,
    forbids,
    uses,
)

WIDTH = 5
"""d, chosen unlike any sequence length the cases use, so shapes cannot be mistaken."""


def _cases(devices: int) -> list[Case]:
    cases = []
    for seed, mesh in enumerate(one_axis_meshes(devices, "seq")):
        length = (2 + seed % 2) * mesh.shape["seq"]
        # Scores spread widely, so a block with a larger maximum arrives late for some rows.
        q, k, v = (
            normal(260 + 10 * seed + i, length, WIDTH) * (2.0 if i < 2 else 1.0) for i in range(3)
        )
        cases.append(Case((q, k, v), {"mesh": mesh}, exercises=kind(mesh)))
    # Scores in the hundreds: exp overflows float32 unless the maximum is subtracted first.
    mesh = one_axis_meshes(devices, "seq")[0]
    q, k, v = (normal(290 + i, 2 * devices, WIDTH) * (15.0 if i < 2 else 1.0) for i in range(3))
    cases.append(Case((q, k, v), {"mesh": mesh}))
    return cases


def _attention(q, k, v, scale) -> np.ndarray:
    scores = q @ k.T * scale
    p = np.exp(scores - scores.max(axis=1, keepdims=True))
    return (p / p.sum(axis=1, keepdims=True)) @ v


def _arrays(o):
    return tuple(np.asarray(a, np.float64) for a in o.args)


def _devices(o) -> int:
    return o.kwargs["mesh"]["axes"]["seq"]


def _no_whole_rows(program, o) -> str | None:
    """Finds a value of scores (its dimensions drawn from S / n, S and n, never d) holding as
    many as a block of whole rows, (S / n, S), in any arrangement."""
    n = _devices(o)
    length = len(o.args[0])
    if n == 1:
        return None
    score_dims = {1, n, length // n, length}
    for primitive, _, outputs, inside, *_ in program["values"]:
        for shape in outputs:
            if (
                inside
                and shape
                and set(shape) <= score_dims
                and math.prod(shape) >= length // n * length
            ):
                return (
                    f"a {primitive} inside your shard_map makes {tuple(shape)}: whole rows of "
                    f"scores, as many as ({length // n}, {length})"
                )
    return None


def _local_only(o) -> bool:
    q, k, v = _arrays(o)
    n = _devices(o)
    if n == 1:
        return False
    blocks = zip(*(np.split(a, n) for a in (q, k, v)), strict=True)
    local = np.concatenate([_attention(qb, kb, vb, q.shape[1] ** -0.5) for qb, kb, vb in blocks])
    return np.allclose(o.value, local, rtol=1e-4, atol=1e-5)


def _unscaled(o) -> bool:
    q, k, v = _arrays(o)
    return np.allclose(o.value, _attention(q, k, v, 1.0), rtol=1e-4, atol=1e-5)


def _never_rescaled(o) -> bool:
    """The online softmax without the exp(old_max - new_max) factor, blocks met in either
    direction around the ring."""
    q, k, v = _arrays(o)
    n = _devices(o)
    qs, ks, vs = (np.split(a, n) for a in (q, k, v))
    for direction in (-1, 1):
        out = []
        for i, qb in enumerate(qs):
            running_max = np.full(len(qb), -np.inf)
            total, weighted = np.zeros(len(qb)), np.zeros_like(qb)
            for step in range(n):
                j = (i + direction * step) % n
                scores = qb @ ks[j].T * q.shape[1] ** -0.5
                running_max = np.maximum(running_max, scores.max(axis=1))
                p = np.exp(scores - running_max[:, None])
                total, weighted = total + p.sum(axis=1), weighted + p @ vs[j]
            out.append(weighted / total[:, None])
        if np.allclose(o.value, np.concatenate(out), rtol=1e-4, atol=1e-5):
            return True
    return False


PROBLEM = Problem(
    reference=ring_attention,
    title="Ring attention",
    difficulty="hard",
    teaches="context parallelism: keys and values around a ring, an online softmax",
    lesson=("ring", "online_softmax"),
    make_cases=_cases,
    requirements=(
        Returns(
            "result",
            "It returns `softmax(q @ k.T / sqrt(d)) @ v`, shape (S, d), finite even when the "
            "scores run into the hundreds.",
        ),
        Program(
            "ring",
            "Keys and values travel around a ring with `jax.lax.ppermute` inside a "
            "`jax.shard_map` over `'seq'`; nothing gathers them (no `all_gather`).",
            test=every(uses("shard_map", "ppermute"), forbids("all_gather")),
        ),
        Program(
            "online_softmax",
            "No device holds whole rows of scores: nothing inside the `shard_map` made of "
            "scores (every dimension S / n, S or n) is as large as (S / n, S).",
            test=_no_whole_rows,
        ),
        Layout(
            "layout",
            "The output stays split like `q`: laid out as `P('seq')`.",
            spec=P("seq"),
        ),
        EXPLICIT_MESHES,
        GIVEN_MESH,
        TRACEABLE,
    ),
    hints=(
        ResultHint(
            _local_only,
            "each block of queries attended only to its own block of keys: pass the keys and "
            "values around the ring with jax.lax.ppermute, n - 1 times, so every query block "
            "meets every key block",
        ),
        ResultHint(
            lambda o: not np.isfinite(o.value).all() and np.isfinite(o.expected).all(),
            "some outputs are NaN or infinite: exp of a score in the hundreds overflows "
            "float32. Subtract the running maximum of the scores before exp, and rescale the "
            "sums by exp(old_max - new_max) when it grows",
        ),
        ResultHint(
            _unscaled,
            "the scores were not scaled: divide q @ k.T by sqrt(d), d = q.shape[-1]",
        ),
        ResultHint(
            _never_rescaled,
            "when the running maximum grows, the sums built with the old maximum are too "
            "large: multiply the running sum and the weighted values by "
            "exp(old_max - new_max) before adding the new block's",
        ),
    ),
)

"""Problem: a mixture-of-experts layer's dispatch and combine, with ``all_to_all`` and a
capacity per expert."""

from __future__ import annotations

# solution
import jax
import jax.numpy as jnp
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P


def moe_dispatch(tokens, experts, weights, *, mesh, capacity):
    """Send each token to its expert's device, apply the expert, and bring the result back.

    The mesh axis ``'expert'`` has n devices and there are n experts: expert e is
    ``tanh(token @ weights[e])`` and lives on device e. ``tokens`` and ``experts`` (each
    token's expert) are split over ``'expert'`` by rows. Each device sends each expert at most
    ``capacity`` of its own tokens, the first ones in order; the rest are dropped and come out
    as zeros. Dispatch: each device fills a buffer of shape (n, capacity, d), row e holding the
    tokens it sends to expert e, and ``jax.lax.all_to_all`` delivers row e to device e. Each
    device applies its expert to everything it received, and a second ``all_to_all`` returns
    each result to the device its token came from, in the slot it left from (combine).

    Args:
        tokens: shape (T, d), T divisible by the size of ``'expert'``.
        experts: integers in [0, n), shape (T,).
        weights: shape (n, d, d), one weight per expert.
        mesh: a mesh with an axis ``'expert'``.
        capacity: how many tokens each device may send each expert.

    """
    n = mesh.shape["expert"]

    def per_device(tokens, experts, own_weight):
        chosen = jax.nn.one_hot(experts, n, dtype=jnp.int32)
        # A token's position among this device's tokens for the same expert: 0, 1, 2, ...
        slot = (jnp.cumsum(chosen, axis=0) * chosen).sum(axis=1) - 1
        kept = slot < capacity
        outgoing = jnp.zeros((n, capacity, tokens.shape[1]), tokens.dtype)
        outgoing = outgoing.at[experts, slot].set(tokens, mode="drop")
        received = jax.lax.all_to_all(outgoing, "expert", 0, 0, tiled=True)
        processed = jnp.tanh(received @ own_weight[0])
        returned = jax.lax.all_to_all(processed, "expert", 0, 0, tiled=True)
        combined = returned[experts, jnp.minimum(slot, capacity - 1)]
        return jnp.where(kept[:, None], combined, 0.0)

    def place(value):
        return jax.device_put(value, NamedSharding(mesh, P("expert")))

    layer = jax.shard_map(per_device, mesh=mesh, in_specs=P("expert"), out_specs=P("expert"))
    return layer(place(tokens), place(experts), place(weights))


# end solution

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
    enters_as,
    every,
    forbids,
    uses,
)


def _cases(devices: int) -> list[Case]:
    cases = []
    for seed, mesh in enumerate(one_axis_meshes(devices, "expert")):
        n = mesh.shape["expert"]
        per_device = 6
        tokens = normal(300 + seed, n * per_device, 4)
        experts = np.random.default_rng(310 + seed).integers(0, n, n * per_device).astype(np.int32)
        weights = normal(320 + seed, n, 4, 4)
        capacity = 2 + seed % 2
        kwargs = {"mesh": mesh, "capacity": capacity}
        cases.append(Case((tokens, experts, weights), kwargs, exercises=kind(mesh)))
    return cases


def _size(o) -> int:
    return o.case_mesh["axes"]["expert"]


def _moe(o, capacity: int, mask: bool = True) -> np.ndarray:
    """The layer in NumPy, with ``capacity``; without ``mask``, a dropped token gets whatever
    its expert's last slot holds."""
    tokens, experts, weights = (np.asarray(a) for a in o.args)
    n = o.kwargs["mesh"]["axes"]["expert"]
    out = np.zeros(tokens.shape, np.float64)
    for block in np.split(np.arange(len(tokens)), n):
        counts: dict[int, int] = {}
        last: dict[int, np.ndarray] = {}
        for t in block:
            e = int(experts[t])
            slot = counts.get(e, 0)
            counts[e] = slot + 1
            result = np.tanh(tokens[t].astype(np.float64) @ weights[e])
            if slot < capacity:
                out[t] = result
                if slot == capacity - 1:
                    last[e] = result
            elif not mask and e in last:
                out[t] = last[e]
    return out


def _dropped_not_zero(o) -> bool:
    return not np.allclose(o.value, o.expected, rtol=1e-4, atol=1e-5) and np.allclose(
        o.value, _moe(o, o.kwargs["capacity"], mask=False), rtol=1e-4, atol=1e-5
    )


def _one_slot_short(o) -> bool:
    return np.allclose(o.value, _moe(o, o.kwargs["capacity"] - 1), rtol=1e-4, atol=1e-5)


def _no_capacity(o) -> bool:
    return np.allclose(o.value, _moe(o, len(o.args[0])), rtol=1e-4, atol=1e-5)


PROBLEM = Problem(
    reference=moe_dispatch,
    title="Mixture-of-experts dispatch and combine",
    difficulty="hard",
    teaches="expert parallelism: all_to_all there and back, a capacity, dropped tokens",
    lesson=("all_to_all",),
    make_cases=_cases,
    requirements=(
        Returns(
            "result",
            "It returns shape (T, d): each kept token's expert output, zeros for the dropped ones.",
            locate=lambda index, o: f"token {index[0]}, sent to expert {o.args[1][index[0]]}",
        ),
        Program(
            "all_to_all",
            "Tokens travel to their experts and back with `jax.lax.all_to_all` inside a "
            "`jax.shard_map` over `'expert'`, each device receiving its (T / n, d) block of "
            "`tokens`; nothing gathers them (no `all_gather`).",
            test=every(
                uses("shard_map", "all_to_all"),
                forbids("all_gather"),
                enters_as(lambda o: {"tokens": (len(o.args[0]) // _size(o), o.args[0].shape[1])}),
            ),
        ),
        Layout(
            "layout",
            "The result is split like `tokens`: laid out as `P('expert')`.",
            spec=P("expert"),
        ),
        EXPLICIT_MESHES,
        GIVEN_MESH,
        TRACEABLE,
    ),
    hints=(
        ResultHint(
            _one_slot_short,
            "each device sent each expert it filled one token too few: the first token sent to an "
            "expert takes slot 0, so a token is dropped only when its slot is >= capacity "
            "(a cumulative count starts at 1: subtract 1)",
        ),
        ResultHint(
            _dropped_not_zero,
            "the kept tokens are right, but the dropped ones are not zeros: they read the "
            "last slot's result. Mask them with jnp.where(slot < capacity, result, 0)",
        ),
        ResultHint(
            _no_capacity,
            "no token was dropped: each device may send each expert only `capacity` tokens, "
            "the first ones in order; the rest come out as zeros",
        ),
    ),
)

"""The planner's formulas, run here, and the training step they describe, compiled to check them.

The planner on the site is one JavaScript file, ``docs/_static/planner/model.js``: a reader's
browser runs it, and :func:`plan` runs the same file here (in V8, through ``mini-racer``), so the
numbers the build checks are the numbers the page shows. :func:`lower_step` lowers the training
step the formulas describe (a decoder-only transformer, Adam, the configuration's layout) for
abstract inputs, and :func:`measure` compiles it, for this process's CPU devices or for a TPU
slice, and reads what the compiler planned.
"""

from __future__ import annotations

import functools
import hashlib
import json
import math
import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
from jax.ad_checkpoint import checkpoint_name
from jax.sharding import AxisType, NamedSharding
from jax.sharding import PartitionSpec as P

from spmd_guide import scripts

MODEL_JS = Path(__file__).resolve().parents[2] / "docs" / "_static" / "planner" / "model.js"
"""The planner's formulas, shared with the page's script."""

MESH_AXES = ("pipe", "data", "tensor")
"""The axes of a configuration's mesh, in this order; ``data`` also carries ZeRO's splits."""

DTYPES = {"float32": jnp.float32, "bfloat16": jnp.bfloat16}


class PlannerError(ValueError):
    """The planner refused a configuration; the message says what to change."""


def _call(function: str, *args: str) -> Any:
    """Call a function of ``spmdPlanner`` that takes and gives JSON text; parse its answer."""
    return json.loads(str(_context().call(f"spmdPlanner.{function}", *args)))


def _context() -> Any:
    return scripts.context(MODEL_JS, "spmd_guide.planner")


def plan(config: Mapping[str, Any]) -> dict[str, Any]:
    """The planner's answer for ``config``, from the page's own script.

    Raises:
        PlannerError: with the script's message, if the script refuses the configuration.
    """
    answer: dict[str, Any] = _call("planJson", json.dumps(dict(config)))
    if "error" in answer:
        raise PlannerError(answer["error"])
    return answer


def suggest(config: Mapping[str, Any]) -> dict[str, Any] | None:
    """For a step that does not fit: the one setting the page's verdict says to change (the
    change that saves the most memory per device, from the page's own script); None when the
    step fits or no single change saves any."""
    suggestion: dict[str, Any] | None = _call("suggestJson", json.dumps(dict(config)))
    return suggestion


def fragment(config: Mapping[str, Any]) -> str:
    """The part of the planner page's address after ``#`` that opens ``config`` in its form."""
    return str(_context().call("spmdPlanner.fragmentJson", json.dumps(dict(config))))


def defaults() -> dict[str, Any]:
    """The configuration the page's form starts from."""
    configuration: dict[str, Any] = _call("defaultsJson")
    return configuration


def chips() -> dict[str, Any]:
    """The chips the planner knows, with the figures its estimates use."""
    figures: dict[str, Any] = _call("chipsJson")
    return figures


def expected_constants() -> dict[str, float]:
    """The two constants of the expected GPU step time in the planner's script: ``efficiency``
    and ``kernelSeconds``."""
    constants: dict[str, float] = _call("expectedJson")
    return constants


def model_flops(config: Mapping[str, Any]) -> float:
    """The model's FLOPs in one step of ``config``, recomputation not counted: 6 per token for
    each parameter of the layers and the output projection, and attention's 12·L·s²·h per
    sequence."""
    c = {**defaults(), **config}
    layers = c["layers"] * (4 * c["width"] ** 2 + 2 * c["width"] * c["mlp"])
    tokens = c["batch"] * c["seq"]
    return float(
        6 * (layers + c["vocab"] * c["width"]) * tokens
        + 12 * c["layers"] * c["seq"] ** 2 * c["width"] * c["batch"]
    )


# The step the formulas describe. Each layer's weights are stacked over the layers and the
# layers run under jax.lax.scan, as large models run. The names given to checkpoint_name are the
# activations the formulas count; a remat policy says which of them the backward pass keeps.

REMAT_POLICIES = ("saved", "selective", "full")
"""The remat settings of the planner's form."""

SAVED = {
    "saved": ("norm1", "q", "k", "v", "probs", "attn", "mid", "norm2", "up", "act"),
    "selective": ("norm1", "q", "k", "v", "attn", "mid", "norm2", "up", "act"),
    "full": (),
}
"""What each remat policy keeps of a layer for the backward pass, besides the layer's input."""


def _layer_shapes(c: Mapping[str, Any]) -> dict[str, tuple[int, ...]]:
    h, f, n = c["width"], c["mlp"], c["heads"]
    return {
        "q": (h, n, h // n),
        "k": (h, n, h // n),
        "v": (h, n, h // n),
        "o": (n, h // n, h),
        "up": (h, f),
        "down": (f, h),
    }


def _layer_specs(fsdp: str | None) -> dict[str, P]:
    return {
        "q": P(fsdp, "tensor", None),
        "k": P(fsdp, "tensor", None),
        "v": P(fsdp, "tensor", None),
        "o": P("tensor", None, fsdp),
        "up": P(fsdp, "tensor"),
        "down": P("tensor", fsdp),
    }


def _specs(c: Mapping[str, Any], fsdp: str | None) -> dict[str, Any]:
    layer = _layer_specs(fsdp)
    return {
        "embed": P("tensor", fsdp),
        "layers": {name: P("pipe", None, *spec) for name, spec in layer.items()},
        "unembed": P(fsdp, "tensor"),
    }


def _shapes(c: Mapping[str, Any]) -> dict[str, Any]:
    stages, per_stage = c["pipe"], c["layers"] // c["pipe"]
    return {
        "embed": (c["vocab"], c["width"]),
        "layers": {name: (stages, per_stage, *shape) for name, shape in _layer_shapes(c).items()},
        "unembed": (c["width"], c["vocab"]),
    }


def _rms(x: jax.Array) -> jax.Array:
    return x * jax.lax.rsqrt(jnp.mean(jnp.square(x), -1, keepdims=True) + 1e-6)


def _layer(x: jax.Array, w: dict[str, jax.Array], act: Any, between: P) -> jax.Array:
    w = jax.tree.map(lambda a: a.astype(act), w)
    y = checkpoint_name(_rms(x), "norm1")
    q = checkpoint_name(jnp.einsum("bsh,hnd->bsnd", y, w["q"]), "q")
    k = checkpoint_name(jnp.einsum("bsh,hnd->bsnd", y, w["k"]), "k")
    v = checkpoint_name(jnp.einsum("bsh,hnd->bsnd", y, w["v"]), "v")
    scores = jnp.einsum("bqnd,bknd->bnqk", q, k) / math.sqrt(q.shape[-1])
    causal = jnp.tril(jnp.ones((x.shape[1], x.shape[1]), bool))
    probs = checkpoint_name(jax.nn.softmax(jnp.where(causal, scores, -1e9)), "probs")
    o = checkpoint_name(jnp.einsum("bnqk,bknd->bqnd", probs, v), "attn")
    x = x + jnp.einsum("bsnd,ndh->bsh", o, w["o"])
    x = checkpoint_name(jax.lax.with_sharding_constraint(x, between), "mid")
    y = checkpoint_name(_rms(x), "norm2")
    u = checkpoint_name(y @ w["up"], "up")
    a = checkpoint_name(jax.nn.gelu(u), "act")
    out: jax.Array = jax.lax.with_sharding_constraint(x + a @ w["down"], between)
    return out


def _remat_layer(c: Mapping[str, Any]) -> tuple[Any, P]:
    """The configuration's layer under its remat policy, and the layout between layers."""
    between = P("data", "tensor" if c["sequence_parallel"] else None, None)
    layer = jax.checkpoint(
        functools.partial(_layer, act=DTYPES[c["act_dtype"]], between=between),
        policy=jax.checkpoint_policies.save_only_these_names(*SAVED[c["remat"]]),
    )
    return layer, between


def _loss(params: Any, tokens: jax.Array, c: Mapping[str, Any]) -> jax.Array:
    act = DTYPES[c["act_dtype"]]
    layer, between = _remat_layer(c)
    x = params["embed"].astype(act)[tokens[:, :-1]]
    x = jax.lax.with_sharding_constraint(x, between)
    if c["pipe"] == 1:
        layers = jax.tree.map(lambda w: w.reshape(-1, *w.shape[2:]), params["layers"])
        x, _ = jax.lax.scan(lambda h, w: (layer(h, w), None), x, layers)
    else:
        x = _gpipe(x, params["layers"], layer, c["microbatches"], between)
    return _cross_entropy(x, params["unembed"], tokens[:, 1:], act)


def _cross_entropy(x: jax.Array, unembed: jax.Array, labels: jax.Array, act: Any) -> jax.Array:
    """The mean cross-entropy of the next tokens ``labels``, from the last layer's output."""
    logits = (_rms(x) @ unembed.astype(act)).astype(jnp.float32)
    log_probs = jax.nn.log_softmax(logits)
    loss: jax.Array = -jnp.mean(jnp.take_along_axis(log_probs, labels[..., None], -1))
    return loss


def _gpipe(x: jax.Array, layers: Any, layer: Any, count: int, between: P) -> jax.Array:
    """Run the layers as a GPipe pipeline over the mesh axis ``pipe``: ``count`` microbatches
    enter stage 0 one per tick, and each tick every stage runs its layers on what the stage
    before it passed on (a roll along the stage axis, which the compiler makes a
    collective-permute). ``jax.grad`` differentiates it as it is: every tick's stage inputs are
    kept for the backward pass, the bubble's ticks included."""
    stages = jax.tree.leaves(layers)[0].shape[0]
    rows = x.shape[0]
    micro = x.reshape(rows // count, count, *x.shape[1:]).swapaxes(0, 1)
    on_stages = P("pipe", *between)

    def stage(weights: Any, h: jax.Array) -> jax.Array:
        h, _ = jax.lax.scan(lambda h, w: (layer(h, w), None), h, weights)
        return h

    run_stages = jax.vmap(stage, spmd_axis_name="pipe")

    def tick(state: jax.Array, t: jax.Array) -> tuple[jax.Array, jax.Array]:
        entering = jnp.where(t < count, micro[jnp.minimum(t, count - 1)], 0)
        state = jnp.roll(state, 1, axis=0).at[0].set(entering)
        state = run_stages(layers, jax.lax.with_sharding_constraint(state, on_stages))
        return state, state[-1]

    empty = jax.lax.with_sharding_constraint(
        jnp.zeros((stages, *micro.shape[1:]), x.dtype), on_stages
    )
    _, leaving = jax.lax.scan(tick, empty, jnp.arange(count + stages - 1))
    out = leaving[stages - 1 :]
    return out.swapaxes(0, 1).reshape(x.shape)


def _one_f_one_b_table(stages: int, count: int) -> tuple[Any, Any, dict[str, int]]:
    """1F1B's steps as a table, and the most that any stage holds at once.

    Stage ``s`` runs ``stages - s - 1`` forwards, then alternates a forward and a backward; each
    step goes on the first tick its input is ready. Returns the kind of step of every stage on
    every tick (0 idle, 1 forward, 2 backward) and its microbatch, as ``(ticks, stages)`` arrays,
    and the slots each stage needs: ``residuals`` (microbatches forwarded and not yet backward),
    ``activations`` and ``gradients`` (arrived from a neighbour and not yet used).
    """
    import numpy as np

    orders = []
    for s in range(stages):
        warmup = min(stages - s - 1, count)
        order = [(1, k) for k in range(warmup)]
        for k in range(count):
            order += [(1, warmup + k)] if warmup + k < count else []
            order.append((2, k))
        orders.append(order)

    def needs(s: int, kind: int, k: int) -> tuple[int, int, int] | None:
        if kind == 1:
            return (s - 1, 1, k) if s > 0 else None
        return (s + 1, 2, k) if s < stages - 1 else (s, 1, k)

    finished: dict[tuple[int, int, int], int] = {}
    table: list[list[tuple[int, int]]] = [[] for _ in range(stages)]
    ran = [0] * stages
    while any(ran[s] < len(orders[s]) for s in range(stages)):
        tick = len(table[0])
        for s in range(stages):
            step = orders[s][ran[s]] if ran[s] < len(orders[s]) else None
            needed = needs(s, *step) if step else None
            if step and (needed is None or finished.get(needed, tick) < tick):
                table[s].append(step)
                ran[s] += 1
            else:
                table[s].append((0, 0))
        for s in range(stages):
            if table[s][tick][0]:
                finished[(s, *table[s][tick])] = tick
    kinds = np.array([[kind for kind, _ in row] for row in table], np.int32).T
    microbatch = np.array([[k for _, k in row] for row in table], np.int32).T

    # Replay the table: what each stage holds after each tick, slot k % slots per microbatch.
    held: dict[str, list[set[int]]] = {
        name: [set() for _ in range(stages)] for name in ("residuals", "activations", "gradients")
    }
    most = dict.fromkeys(held, 1)
    for tick in range(len(kinds)):
        for s in range(stages):
            kind, k = kinds[tick, s], int(microbatch[tick, s])
            if kind == 1:
                held["activations"][s].discard(k)
                held["residuals"][s].add(k)
            elif kind == 2:
                held["residuals"][s].discard(k)
                held["gradients"][s].discard(k)
        for s in range(stages):
            kind, k = kinds[tick, s], int(microbatch[tick, s])
            if kind == 1 and s < stages - 1:
                held["activations"][s + 1].add(k)
            if kind == 2 and s > 0:
                held["gradients"][s - 1].add(k)
        for name, by_stage in held.items():
            most[name] = max(most[name], *map(len, by_stage))
    for name, by_stage in held.items():
        # Held microbatches are consecutive, so k % slots never puts two in one slot.
        assert all(max(h) - min(h) < most[name] for h in by_stage if h), (name, by_stage)
    return kinds, microbatch, most


def _one_f_one_b(params: Any, tokens: jax.Array, c: Mapping[str, Any]) -> tuple[jax.Array, Any]:
    """The loss and its gradient by a 1F1B pipeline over the mesh axis ``pipe``.

    Differentiating a scan over ticks runs the whole backward scan after the whole forward scan,
    which is not 1F1B's order, so the order is written out: a
    table of steps (:func:`_one_f_one_b_table`) run tick by tick in a ``shard_map`` manual over
    ``pipe`` (``data`` and ``tensor`` stay with the compiler). A forward keeps what ``jax.vjp``
    needs for its backward (what the remat policy saves of each layer) in a slot of its stage,
    which the backward reads and a later microbatch reuses; activations go forward and
    gradients back by ``ppermute``. Stage 0 embeds and the last stage computes the loss, a
    microbatch at a time.
    """
    stages, count = c["pipe"], c["microbatches"]
    kinds, microbatch, slots = _one_f_one_b_table(stages, count)
    layer, between = _remat_layer(c)
    act = DTYPES[c["act_dtype"]]
    rows, length = tokens.shape[0] // count, tokens.shape[1] - 1
    batches = tokens.reshape(rows, count, -1).swapaxes(0, 1)  # microbatch k: rows k, k + count, ...
    h_shape = jax.ShapeDtypeStruct((rows, length, c["width"]), act)
    last = stages - 1

    def head(unembed: jax.Array, h: jax.Array, batch: jax.Array) -> jax.Array:
        share: jax.Array = _cross_entropy(h, unembed, batch[:, 1:], act) / count
        return share

    def run(layers: Any, table: jax.Array, unembed: jax.Array, batches: jax.Array) -> Any:
        layers = jax.tree.map(lambda w: w[0], layers)
        index = jax.lax.axis_index("pipe")
        varying = functools.partial(jax.lax.pcast, axis_name="pipe", to="varying")
        # Every stage holds the whole embedding and unembedding; as varying values, their
        # gradients stay on the stage that computes them (a pipe-invariant input's gradient
        # would be summed over the pipe on the spot, inside one stage's branch).
        table, unembed = varying(table), varying(unembed)
        per_stage = jax.tree.leaves(layers)[0].shape[0]
        structure: dict[str, Any] = {}

        def residuals_of(w: Any, h: jax.Array) -> tuple[jax.Array, list[jax.Array]]:
            """One layer's output, and what jax.vjp keeps for its backward, less its weights."""
            out, pull_back = jax.vjp(lambda w, h: layer(h, w), w, h)
            leaves, structure["tree"] = jax.tree.flatten(pull_back)
            ins = jax.tree.leaves(w)
            # The layer's weights are among what jax.vjp keeps: they are at hand at the backward.
            structure["weights"] = [
                next((i for i, x in enumerate(ins) if x is leaf), None) for leaf in leaves
            ]
            # Else every slot would hold a copy of the weights, and the memory check would drift.
            if sorted(i for i in structure["weights"] if i is not None) != list(range(len(ins))):
                raise RuntimeError("jax.vjp no longer keeps this layer's weights as they came in")
            return out, [
                leaf for leaf, i in zip(leaves, structure["weights"], strict=True) if i is None
            ]

        def pull_back_of(w: Any, kept: list[jax.Array]) -> Any:
            stored, weights = iter(kept), jax.tree.leaves(w)
            leaves = [next(stored) if i is None else weights[i] for i in structure["weights"]]
            return jax.tree.unflatten(structure["tree"], leaves)

        def zeros(like: Any, *lead: int) -> jax.Array:
            zero: jax.Array = varying(jnp.zeros((*lead, *like.shape), like.dtype))
            return zero

        one_layer = jax.tree.map(lambda w: w[0], layers)
        _, kept = jax.eval_shape(lambda w: residuals_of(w, zeros(h_shape)), one_layer)
        start = {
            # A slot per microbatch in flight, and in it what each layer of the stage keeps.
            "residuals": [zeros(leaf, slots["residuals"], per_stage) for leaf in kept],
            "activations": zeros(h_shape, slots["activations"]),
            "gradients": zeros(h_shape, slots["gradients"]),
            "output": zeros(h_shape),  # the last stage's, from its forward to its backward
            "d_layers": jax.tree.map(jnp.zeros_like, layers),
            "d_table": zeros(table),
            "d_unembed": zeros(unembed),
            "loss": zeros(jax.ShapeDtypeStruct((), jnp.float32)),
        }

        # A stage runs one layer at a time, the step (idle, forward or backward) chosen per
        # layer: the slots are read and written outside the branches, a layer at a time, so
        # the compiler never copies them whole into a branch.
        def idle(x: jax.Array, w: Any, kept_here: list[jax.Array]) -> Any:
            return x, kept_here, jax.tree.map(jnp.zeros_like, w)

        def forward(x: jax.Array, w: Any, kept_here: list[jax.Array]) -> Any:
            out, kept_now = residuals_of(w, x)
            return out, kept_now, jax.tree.map(jnp.zeros_like, w)

        def backward(x: jax.Array, w: Any, kept_here: list[jax.Array]) -> Any:
            d_w, d_x = pull_back_of(w, kept_here)(x)
            return d_x, kept_here, d_w

        def with_head(carry: Any, k: jax.Array) -> Any:
            return jax.value_and_grad(head, (0, 1))(unembed, carry["output"], batches[k])

        def without_head(carry: Any, k: jax.Array) -> Any:
            no_loss = zeros(jax.ShapeDtypeStruct((), jnp.float32))
            return no_loss, (zeros(unembed), carry["gradients"][k % slots["gradients"]])

        kinds_now, microbatch_now = jnp.asarray(kinds), jnp.asarray(microbatch)
        before, after = jnp.maximum(index - 1, 0), jnp.minimum(index + 1, last)

        def tick(carry: Any, t: jax.Array) -> tuple[Any, None]:
            kind, k = kinds_now[t, index], microbatch_now[t, index]
            forward_now, backward_now = kind == 1, kind == 2
            slot = k % slots["residuals"]
            embedded = table[batches[k, :, :-1]].astype(act)
            embedded = jax.lax.with_sharding_constraint(embedded, between)
            h = jnp.where(index == 0, embedded, carry["activations"][k % slots["activations"]])
            loss, (d_unembed, d_out) = jax.lax.cond(
                backward_now & (index == last), with_head, without_head, carry, k
            )
            # What runs through the layers: an activation forward, or a gradient backward.
            x = jnp.where(backward_now, d_out, h)

            def through(state: Any, i: jax.Array) -> tuple[Any, None]:
                x, residuals, d_layers = state
                at = jnp.where(backward_now, per_stage - 1 - i, i)
                w = jax.tree.map(lambda a: a[at], layers)
                kept_here = [buf[slot, at] for buf in residuals]
                x, kept_now, d_w = jax.lax.switch(kind, (idle, forward, backward), x, w, kept_here)
                residuals = [
                    buf.at[slot, at].set(jnp.where(forward_now, new, old))
                    for buf, new, old in zip(residuals, kept_now, kept_here, strict=True)
                ]
                d_layers = jax.tree.map(lambda a, g: a.at[at].add(g), d_layers, d_w)
                return (x, residuals, d_layers), None

            (x, residuals, d_layers), _ = jax.lax.scan(
                through, (x, carry["residuals"], carry["d_layers"]), jnp.arange(per_stage)
            )
            # The embedding's gradient, on stage 0: each token's row gets that token's.
            d_embedded = jnp.where(backward_now & (index == 0), x, 0).astype(table.dtype)
            carry = dict(
                carry,
                residuals=residuals,
                d_layers=d_layers,
                output=jnp.where(forward_now, x, carry["output"]),
                d_table=carry["d_table"].at[batches[k, :, :-1]].add(d_embedded),
                d_unembed=carry["d_unembed"] + d_unembed,
                loss=carry["loss"] + loss,
            )
            # What a neighbour ran this tick says what arrives, and for which microbatch.
            ahead = jax.lax.ppermute(x, "pipe", [(s, s + 1) for s in range(last)])
            back = jax.lax.ppermute(x, "pipe", [(s + 1, s) for s in range(last)])
            for name, arrives, sender, value in (
                ("activations", (index > 0) & (kinds_now[t, before] == 1), before, ahead),
                ("gradients", (index < last) & (kinds_now[t, after] == 2), after, back),
            ):
                into = microbatch_now[t, sender] % slots[name]
                kept_there = carry[name][into]
                carry[name] = carry[name].at[into].set(jnp.where(arrives, value, kept_there))
            return carry, None

        end, _ = jax.lax.scan(tick, start, jnp.arange(len(kinds)))
        d_layers = jax.tree.map(lambda g: g[None], end["d_layers"])
        summed = jax.lax.psum((end["loss"], end["d_table"], end["d_unembed"]), "pipe")
        return d_layers, *summed

    run_stages = jax.shard_map(
        run,
        in_specs=(P("pipe"), P(), P(), P()),
        out_specs=(P("pipe"), P(), P(), P()),
        axis_names={"pipe"},
    )
    d_layers, loss, d_table, d_unembed = run_stages(
        params["layers"], params["embed"], params["unembed"], batches
    )
    return loss, {"embed": d_table, "layers": d_layers, "unembed": d_unembed}


def _adam(
    params: Any, grads: Any, state: dict[str, Any], opt_dtype: Any
) -> tuple[Any, dict[str, Any]]:
    """Adam's update, with its moments stored in ``opt_dtype`` and computed in float32."""
    b1, b2, lr, eps = 0.9, 0.999, 1e-4, 1e-8
    count = state["count"] + 1

    def moments(g: jax.Array, mu: jax.Array, nu: jax.Array) -> tuple[jax.Array, jax.Array]:
        g = g.astype(jnp.float32)
        return b1 * mu.astype(jnp.float32) + (1 - b1) * g, b2 * nu.astype(jnp.float32) + (
            1 - b2
        ) * g * g

    new = jax.tree.map(moments, grads, state["mu"], state["nu"])
    mu = jax.tree.map(lambda pair: pair[0], new, is_leaf=lambda leaf: isinstance(leaf, tuple))
    nu = jax.tree.map(lambda pair: pair[1], new, is_leaf=lambda leaf: isinstance(leaf, tuple))
    step = count.astype(jnp.float32)

    def update(p: jax.Array, m: jax.Array, v: jax.Array) -> jax.Array:
        m_hat, v_hat = m / (1 - b1**step), v / (1 - b2**step)
        new: jax.Array = (p.astype(jnp.float32) - lr * m_hat / (jnp.sqrt(v_hat) + eps)).astype(
            p.dtype
        )
        return new

    params = jax.tree.map(update, params, mu, nu)
    cast = functools.partial(jax.tree.map, lambda a: a.astype(opt_dtype))
    return params, {"mu": cast(mu), "nu": cast(nu), "count": count}


def _step(params: Any, opt_state: Any, tokens: jax.Array, c: Mapping[str, Any]) -> Any:
    grad_dtype = DTYPES[c["grad_dtype"]]
    loss_and_grads = jax.value_and_grad(functools.partial(_loss, c=c))
    as_grads = jax.tree.map(lambda p: p.astype(grad_dtype), params)
    count = c["microbatches"] if c["pipe"] == 1 else 1
    if c["pipe"] > 1 and c["schedule"] == "1f1b":
        loss, grads = _one_f_one_b(as_grads, tokens, c)
    elif count == 1:
        loss, grads = loss_and_grads(as_grads, tokens)
    else:
        # Microbatch k is rows k, k + count, ...: each device's rows stay on it.
        rows = tokens.shape[0]
        micro = tokens.reshape(rows // count, count, -1).swapaxes(0, 1)

        # ZeRO 2: the running sum is kept split over data like Adam's moments, a constraint
        # on the loop's carry, so that each microbatch's gradients are reduce-scattered into it.
        def kept(total: Any) -> Any:
            if c["zero"] != 2:
                return total
            loss, grads = total
            split = jax.tree.map(jax.lax.with_sharding_constraint, grads, _specs(c, "data"))
            return loss, split

        def accumulate(total: Any, batch: jax.Array) -> tuple[Any, None]:
            loss, grads = loss_and_grads(as_grads, batch)
            return kept(jax.tree.map(jnp.add, total, (loss, grads))), None

        zero = kept(jax.tree.map(jnp.zeros_like, (jnp.zeros((), jnp.float32), as_grads)))
        (loss, grads), _ = jax.lax.scan(accumulate, zero, micro)
        loss = loss / count
    params, opt_state = _adam(params, grads, opt_state, DTYPES[c["opt_dtype"]])
    return params, opt_state, loss


def mesh_for(c: Mapping[str, Any], devices: Sequence[jax.Device]) -> jax.sharding.Mesh:
    """The configuration's mesh over ``devices``, with Auto axes: the compiler places what the
    layouts leave open (this check measures its plan, not a hand-written one)."""
    return jax.make_mesh(
        (c["pipe"], c["data"], c["tensor"]),
        MESH_AXES,
        axis_types=(AxisType.Auto,) * 3,
        devices=devices,
    )


def lower_step(c: Mapping[str, Any], mesh: jax.sharding.Mesh) -> Any:
    """Lower one training step of configuration ``c`` on ``mesh`` for abstract inputs.

    Nothing the size of the model is allocated. The parameters and optimizer state are donated,
    so the step writes its results over them, as a training loop does.
    """
    zero = c["zero"]
    param_fsdp = "data" if zero == 3 else None
    state_fsdp = "data" if zero >= 1 else None
    param_specs, state_specs, shapes = _specs(c, param_fsdp), _specs(c, state_fsdp), _shapes(c)

    def abstract(shape: tuple[int, ...], spec: P, dtype: Any) -> jax.ShapeDtypeStruct:
        return jax.ShapeDtypeStruct(shape, dtype, sharding=NamedSharding(mesh, spec))

    def tree(specs: Any, dtype: Any) -> Any:
        return jax.tree.map(
            lambda shape, spec: abstract(shape, spec, dtype),
            shapes,
            specs,
            is_leaf=lambda leaf: isinstance(leaf, tuple),
        )

    params = tree(param_specs, DTYPES[c["param_dtype"]])
    moments = tree(state_specs, DTYPES[c["opt_dtype"]])
    count = abstract((), P(), jnp.int32)
    opt_state = {"mu": moments, "nu": moments, "count": count}
    tokens = abstract((c["batch"], c["seq"] + 1), P("data"), jnp.int32)
    shardings = jax.tree.map(lambda leaf: leaf.sharding, (params, opt_state))
    step = jax.jit(
        functools.partial(_step, c=c),
        donate_argnums=(0, 1),
        out_shardings=(*shardings, NamedSharding(mesh, P())),
    )
    with jax.set_mesh(mesh):
        return step.lower(params, opt_state, tokens)


@dataclass(frozen=True)
class CompiledPlan:
    """What a compiler planned for one step, per device, or why it refused."""

    target: str
    """``"cpu"`` or a TPU topology such as ``"v5e:2x4"``."""
    argument_bytes: int = 0
    output_bytes: int = 0
    alias_bytes: int = 0
    temporary_bytes: int = 0
    collectives: tuple[tuple[str, str], ...] = ()
    """Each kind of collective the program runs, with the mesh axes it runs over."""
    refused: str = ""
    """The compiler's message when it found that the step does not fit, else empty."""

    @property
    def needed_temporary_bytes(self) -> float:
        """The temporaries the compiler planned, or those its refusal said the step needs.

        Raises:
            ValueError: if a refusal's message does not state the temporaries it needed.
        """
        if not self.refused:
            return self.temporary_bytes
        found = re.search(r"HLO temporaries \(([\d.]+)([KMGT])\)", self.refused)
        if found is None:
            raise ValueError(
                "the compiler's refusal does not state the temporaries it needed in the form "
                f"'HLO temporaries (16.49G)': {self.refused!r}"
            )
        # XLA writes sizes in binary units: its "G" is a gibibyte.
        unit: int = 2 ** (10 * ("KMGT".index(found[2]) + 1))
        return float(found[1]) * unit


def _read(compiled: Any, mesh: jax.sharding.Mesh, target: str) -> CompiledPlan:
    from spmd_guide.analysis import collectives_by_axis

    found = sorted(
        {(c.op, "+".join(c.axes)) for c in collectives_by_axis(compiled, mesh) if c.axes}
    )
    analysis = compiled.memory_analysis()
    return CompiledPlan(
        target=target,
        argument_bytes=analysis.argument_size_in_bytes,
        output_bytes=analysis.output_size_in_bytes,
        alias_bytes=analysis.alias_size_in_bytes,
        temporary_bytes=analysis.temp_size_in_bytes,
        collectives=tuple(found),
    )


def _fingerprint(lowered: Any, target: str) -> str:
    """What a compiler's plan depends on: the program, the target, the versions, the flags."""
    import importlib.metadata

    versions = [jax.__version__]
    if target != "cpu":
        versions.append(importlib.metadata.version("libtpu"))
    return hashlib.sha256(
        "\0".join(
            [
                lowered.as_text(),
                target,
                *versions,
                os.environ.get("XLA_FLAGS", ""),
                os.environ.get("LIBTPU_INIT_ARGS", ""),
            ]
        ).encode()
    ).hexdigest()


def measure(c: Mapping[str, Any], target: str = "cpu") -> CompiledPlan:
    """Compile configuration ``c`` (as :func:`plan` completes it) and read the compiler's plan.

    ``target`` is ``"cpu"`` (this process's CPU devices, which must number the configuration's
    devices) or a TPU topology, compiled for a slice that is not attached
    (:mod:`spmd_guide.tpu`). CPU programs are compiled without LLVM's slow optimisations, which
    change the machine code and not the plan of buffers.

    When the environment variable ``SPMD_GUIDE_TPU_PLANS`` names a folder, a TPU result is kept
    there under a fingerprint of the lowered program, the topology, and the JAX and libtpu
    versions, and read back for the same program instead of compiling it again;
    ``SPMD_GUIDE_CPU_PLANS`` does the same for CPU results (the docs build empties that folder
    and compiles afresh each build, :func:`compile_cpu_checks`).

    Raises:
        ValueError: if the target's devices do not number the configuration's.
        jax.errors.JaxRuntimeError: if compiling fails for any reason but memory.
    """
    devices_needed = c["pipe"] * c["data"] * c["tensor"]
    if target == "cpu":
        devices = tuple(jax.devices()[:devices_needed])
    else:
        from spmd_guide import tpu

        devices = tpu.compile_only_devices(target)
    if len(devices) != devices_needed:
        raise ValueError(
            f"the configuration's mesh (pipe {c['pipe']} x data {c['data']} x tensor "
            f"{c['tensor']}) needs {devices_needed} devices, and {target!r} has {len(devices)}"
        )
    mesh = mesh_for(c, devices)
    lowered = lower_step(c, mesh)
    folder = os.environ.get("SPMD_GUIDE_CPU_PLANS" if target == "cpu" else "SPMD_GUIDE_TPU_PLANS")
    kept = None
    if folder:
        kept = Path(folder) / f"{_fingerprint(lowered, target)}.json"
        if kept.is_file():
            fields = json.loads(kept.read_text())
            fields["collectives"] = tuple(tuple(pair) for pair in fields.get("collectives", ()))
            try:
                return CompiledPlan(**fields)
            except TypeError:
                pass  # kept by an older CompiledPlan: compile again and keep the new one
    if target == "cpu":
        options = {"xla_backend_optimization_level": 0, "xla_llvm_disable_expensive_passes": True}
        result = _read(lowered.compile(compiler_options=options), mesh, target)
        if kept is not None:
            kept.parent.mkdir(parents=True, exist_ok=True)
            kept.write_text(json.dumps(asdict(result)))
        return result
    try:
        result = _read(lowered.compile(), mesh, target)
    except jax.errors.JaxRuntimeError as error:
        if "RESOURCE_EXHAUSTED" not in str(error):
            raise
        result = CompiledPlan(target=target, refused=str(error).split("\n")[0])
    if kept is not None:
        kept.parent.mkdir(parents=True, exist_ok=True)
        kept.write_text(json.dumps(asdict(result)))
    return result


# The configurations the planner page compiles for TPU slices. They live here, not on the page,
# so that the build can compile them before any page runs (:func:`keep_tpu_plans`): the drawn
# configurations below, and the question the page opens with.

QUESTION: dict[str, Any] = dict(
    layers=32, width=4096, heads=32, mlp=16384, vocab=32000, seq=4096, batch=256,
    data=16, zero=3, tensor=4, remat="full", chip="v5e",
)  # fmt: skip
"""The question the page opens with, GPT-3 6.7B's layers on 64 v5e chips (the form's default)."""

QUESTION_CHANGES: dict[str, dict[str, Any]] = {
    "as asked": {},
    "+ sequence parallel": dict(sequence_parallel=True),
    "+ sequence parallel, 4 microbatches": dict(sequence_parallel=True, microbatches=4),
}
"""The question as asked, and the two changes the page answers it with."""

QUESTION_SLICE = "v5e:8x8"
"""The TPU slice the question is compiled for."""


# Configurations drawn to cover the form, so that the bands the page states hold where readers
# use the planner, not only where the formulas were tuned.

DRAW_SEED = 20261127
"""The seed of :func:`drawn_configurations`, so that every build draws the same."""

CPU_DRAWS = 30
"""How many drawn configurations the build compiles with the CPU compiler."""

DRAWN_SLICE = "v5e:2x4"
"""The TPU slice the drawn configurations are compiled for, 8 chips as the CPU has 8 devices."""

_SHAPES = ((1024, 8), (1024, 16), (2048, 16), (2048, 32), (3072, 24), (4096, 32))
_MESHES = ((1, 8, 1), (1, 4, 2), (1, 2, 4), (1, 1, 8), (2, 4, 1), (2, 2, 2), (2, 1, 4), (4, 2, 1))


def expected_seconds(answer: Mapping[str, Any], efficiency: float, kernel_seconds: float) -> float:
    """The expected step time of a GPU ``answer`` of :func:`plan` under the two constants given,
    by the formula of ``stepSeconds.expected``."""
    parts = answer["expected"]
    work = parts["rooflineSeconds"] / efficiency + parts["kernels"] * kernel_seconds
    return float(max(answer["stepSeconds"]["overlapped"], work + parts["communicationSeconds"]))


def fit_expected(measured: Sequence[tuple[Mapping[str, Any], float]]) -> dict[str, float]:
    """The two constants of the expected step time that fit measured GPU steps best, each step a
    configuration (its ``chip`` a GPU) and its measured seconds: the efficiency (0.30 to 1.00, in
    hundredths) and the overhead per kernel (0 to 100 microseconds, in whole ones) that make the
    largest error, as a ratio either way, the smallest. Returns them with that error."""
    if not measured:
        raise PlannerError("fit_expected needs at least one measured step")
    answers = [(plan(config), seconds) for config, seconds in measured]
    not_gpu = [a["chip"]["key"] for a, _ in answers if a["expected"] is None]
    if not_gpu:
        raise PlannerError(
            f"fit_expected fits GPU steps only; these chips have no expected time: {not_gpu}"
        )
    best: tuple[float, float, float] | None = None
    for hundredths in range(30, 101):
        for microseconds in range(0, 101):
            e, k = hundredths / 100, microseconds / 1e6
            worst = max(
                abs(math.log(expected_seconds(a, e, k) / seconds)) for a, seconds in answers
            )
            if best is None or worst < best[0] - 1e-12:
                best = (worst, e, k)
    assert best is not None
    return {"efficiency": best[1], "kernelSeconds": best[2], "worst_ratio": math.exp(best[0])}


def drawn_configurations(
    count: int = CPU_DRAWS, seed: int = DRAW_SEED, devices: int = 8
) -> list[dict[str, Any]]:
    """``count`` configurations on ``devices`` devices, drawn at random (seeded) from every
    choice the form offers: the model's shape, the dtypes, the batch and microbatches, the
    remat policy, the mesh's three axes, ZeRO, sequence parallelism and the pipeline schedule.
    Each is completed by :func:`plan` (a draw it refuses is drawn again); v5e is the chip."""
    import random

    rng = random.Random(seed)
    meshes = [mesh for mesh in _MESHES if math.prod(mesh) == devices]
    found: list[dict[str, Any]] = []
    while len(found) < count:
        pipe, data, tensor = rng.choice(meshes)
        width, heads = rng.choice(_SHAPES)
        microbatches = rng.choice((pipe, 2 * pipe)) if pipe > 1 else rng.choice((1, 1, 2, 4))
        draw = dict(
            layers=pipe * rng.choice((2, 4, 8, 12)),
            width=width,
            heads=heads,
            mlp=4 * width,
            vocab=rng.choice((32000, 50304)),
            seq=rng.choice((1024, 2048, 4096)),
            batch=data * microbatches * rng.choice((1, 2, 4)),
            microbatches=microbatches,
            remat=rng.choice(REMAT_POLICIES),
            pipe=pipe,
            data=data,
            tensor=tensor,
            zero=rng.choice((0, 1, 3)) if data > 1 else 0,
            sequence_parallel=tensor > 1 and rng.random() < 0.5,
            schedule=rng.choice(("gpipe", "1f1b")),
            param_dtype=rng.choice(("float32", "float32", "bfloat16")),
            grad_dtype=rng.choice(("float32", "bfloat16")),
            opt_dtype=rng.choice(("float32", "bfloat16")),
            act_dtype=rng.choice(("bfloat16", "bfloat16", "float32")),
            chip="v5e",
        )
        if pipe > 1 and draw["schedule"] == "1f1b" and draw["grad_dtype"] == "bfloat16":
            continue  # this build's XLA:CPU aborts compiling it (ONE_F_ONE_B_BF16_ABORTS)
        try:
            found.append(plan(draw)["config"])
        except PlannerError:
            continue
    return found


ONE_F_ONE_B_BF16_ABORTS = (
    "XLA:CPU in jaxlib 0.12.0.1 aborts the process compiling the 1F1B step with bfloat16 "
    "gradients (AllReducePromotion: 'Invalid binary instruction opcode copy'), so such draws "
    "are drawn again; tests/test_planner.py checks that it still does"
)


def _features(c: Mapping[str, Any]) -> set[str]:
    """What of the form a configuration exercises, for :func:`spanning`."""
    features = {
        f"zero {c['zero']}",
        f"remat {c['remat']}",
        f"params {c['param_dtype']}",
        f"gradients {c['grad_dtype']}",
        f"moments {c['opt_dtype']}",
        f"activations {c['act_dtype']}",
    }
    features |= {axis for axis in MESH_AXES if c[axis] > 1}
    if c["pipe"] > 1:
        features.add(f"schedule {c['schedule']}")
    if c["microbatches"] > 1:
        features.add("microbatches")
    if c["sequence_parallel"]:
        features.add("sequence parallel")
    return features


def spanning(configs: Sequence[Mapping[str, Any]], start: Sequence[int] = ()) -> list[int]:
    """The positions of a few of ``configs`` that between them exercise every choice any of them
    does, picked greedily: from the positions ``start``, each pick adds the most choices not yet
    exercised (the earliest on a tie)."""
    chosen = list(start)
    covered: set[str] = set().union(*(_features(configs[n]) for n in chosen))
    everything: set[str] = set().union(*(_features(c) for c in configs))
    while covered != everything:
        left = [n for n in range(len(configs)) if n not in chosen]
        best = max(left, key=lambda n: (len(_features(configs[n]) - covered), -n))
        chosen.append(best)
        covered |= _features(configs[best])
    return sorted(chosen)


def zero_two_twins(configs: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """ZeRO 2 versions of those of ``configs`` that run ZeRO 1 with an accumulation loop (one
    pipeline stage, several microbatches), as :func:`plan` completes them: the same step with the
    loop's running sum split over data, to compare with its ZeRO 1 original."""
    return [
        plan(dict(c, zero=2))["config"]
        for c in configs
        if c["zero"] == 1 and c["pipe"] == 1 and c["microbatches"] > 1
    ]


def tpu_positions(drawn: Sequence[Mapping[str, Any]]) -> list[int]:
    """The positions of the drawn configurations the build compiles for :data:`DRAWN_SLICE`:
    the smallest model that has a ZeRO 2 twin (:func:`zero_two_twins`), so that one twin is
    compiled beside its original, and from it as few more as :func:`spanning` picks to exercise
    every choice the draws do. A TPU compile takes 24 to 49 s on two cores, set more by the
    step's structure than by the model's size, so the build compiles few of them."""
    with_twin = [n for n, c in enumerate(drawn) if zero_two_twins([c])]
    smallest = min(with_twin, key=lambda n: plan(drawn[n])["parameters"])
    return spanning(drawn, start=[smallest])


def drawn_tpu_checks() -> list[dict[str, Any]]:
    """The drawn configurations the build compiles for :data:`DRAWN_SLICE`
    (:func:`tpu_positions`), with the ZeRO 2 twin of the one that has one."""
    drawn = drawn_configurations()
    picked = [drawn[n] for n in tpu_positions(drawn)]
    return picked + zero_two_twins(picked)


def tpu_checks() -> list[tuple[dict[str, Any], str]]:
    """Every configuration (as :func:`plan` completes it) the planner page compiles for a TPU
    slice, with the slice."""
    drawn = [(config, DRAWN_SLICE) for config in drawn_tpu_checks()]
    question = [(dict(QUESTION, **change), QUESTION_SLICE) for change in QUESTION_CHANGES.values()]
    return drawn + [(plan(config)["config"], target) for config, target in question]


def keep_tpu_plans(folder: str | os.PathLike[str]) -> tuple[int, int]:
    """Compile each of :func:`tpu_checks` for its slice, keeping the results in ``folder`` as
    :func:`measure` keeps them, so that the page reads them instead of compiling.

    A TPU compile of one of these steps takes 24 to 49 s on two cores; a refusal, about one.

    Returns:
        How many programs were compiled now, and how many were already kept.
    """
    os.environ["SPMD_GUIDE_TPU_PLANS"] = os.fspath(folder)
    kept_before = set(Path(folder).glob("*.json")) if Path(folder).is_dir() else set()
    checks = tpu_checks()
    for config, target in checks:
        measure(config, target)
    compiled = len(set(Path(folder).glob("*.json")) - kept_before)
    return compiled, len(checks) - compiled


def compile_cpu_checks(folder: str | os.PathLike[str]) -> int:
    """Compile every drawn configuration, and its ZeRO 2 twin where it has one
    (:func:`zero_two_twins`), with this process's CPU compiler, afresh: ``folder``
    is emptied first, then holds each result as :func:`measure` keeps it, for the page to read.

    Returns:
        How many programs were compiled.

    Raises:
        ValueError: if this process has fewer than 8 CPU devices.
    """
    import shutil

    shutil.rmtree(folder, ignore_errors=True)
    os.environ["SPMD_GUIDE_CPU_PLANS"] = os.fspath(folder)
    drawn = drawn_configurations()
    checked = drawn + zero_two_twins(drawn)
    for config in checked:
        measure(config, "cpu")
    return len(checked)


if __name__ == "__main__":
    # The docs build runs both before any page executes, side by side:
    #     python -m spmd_guide.planner tpu TPU_FOLDER
    #     python -m spmd_guide.planner cpu CPU_FOLDER
    import sys
    import time

    jax.config.update("jax_num_cpu_devices", 8)
    started = time.perf_counter()
    target, folder = sys.argv[1:]
    if target == "tpu":
        compiled_now, already = keep_tpu_plans(folder)
        done = f"TPU: {compiled_now} compiled, {already} already kept"
    else:
        done = f"CPU: {compile_cpu_checks(folder)} compiled"
    print(f"{done} in {time.perf_counter() - started:.0f} s")

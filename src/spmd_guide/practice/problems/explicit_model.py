"""Problem: a small language model's forward pass and loss on Explicit axes, each refusal (an
embedding lookup, a cross-entropy, a gather) fixed where it happens, with the layouts asked for."""

from __future__ import annotations

# solution
import jax
import jax.numpy as jnp
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P


def explicit_model(ids, labels, lengths, table, w_out, *, mesh):
    """Embed ``ids``, project to logits, and take each token's cross-entropy and each sequence's
    loss at its last token, on a mesh with Explicit axes ``('data', 'model')``, its vocabulary
    split over ``'model'``.

    ``hidden = table[ids]``; ``logits = hidden @ w_out``; ``losses`` is the softmax
    cross-entropy of each token's logits against its integer label; ``last[b]`` is
    ``losses[b, lengths[b] - 1]``. Written as on one device, three of these steps are refused
    on these layouts, each with a ``ShardingTypeError``: the lookup in a table split over its
    vocabulary, optax's integer-label cross-entropy (a gather of each label's logit from logits
    split over the vocabulary), and the pick of each sequence's last loss with indices split
    over ``'data'``. Fix each where it happens, keeping the table and the logits split: name the
    gather's result layout with ``.at[...].get(out_sharding=)``, and write the loss with a
    one-hot encoding laid out as the logits. ``jax.typeof`` shows each layout, e.g.
    ``float32[8@data,3,32@model]``.

    Args:
        ids: shape (B, T), int32 token ids below V, to be laid out ``P('data')``; B divides over
            ``'data'``.
        labels: shape (B, T), int32 labels below V, laid out as ``ids``.
        lengths: shape (B,), int32 from 1 to T, laid out ``P('data')``.
        table: shape (V, d), the embedding table, to be laid out ``P('model', None)``; V
            divides over ``'model'``.
        w_out: shape (d, V), the output projection, to be laid out ``P(None, 'model')``.
        mesh: a mesh with Explicit axes ``'data'`` and ``'model'``.
    """

    def on_mesh(*spec):
        return NamedSharding(mesh, P(*spec))

    ids, labels, lengths = (jax.device_put(v, on_mesh("data")) for v in (ids, labels, lengths))
    table = jax.device_put(table, on_mesh("model", None))
    w_out = jax.device_put(w_out, on_mesh(None, "model"))
    hidden = table.at[ids].get(out_sharding=on_mesh("data"))
    logits = hidden @ w_out
    one_hot = jax.nn.one_hot(labels, logits.shape[-1], out_sharding=on_mesh("data", None, "model"))
    losses = jax.nn.logsumexp(logits, axis=-1) - jnp.sum(logits * one_hot, axis=-1)
    last = losses.at[jnp.arange(len(lengths)), lengths - 1].get(out_sharding=on_mesh("data"))
    return {"hidden": hidden, "logits": logits, "losses": losses, "last": last}


# end solution

import re

import numpy as np

from spmd_guide.practice.cases import two_axis_meshes
from spmd_guide.practice.problem import Case, ErrorHint, Problem, ResultHint
from spmd_guide.practice.requirements import Layout, Program, Returns, UnderJit, compare_dicts


def _cases(devices: int) -> list[Case]:
    cases = []
    for seed, mesh in enumerate(two_axis_meshes(devices, ("data", "model"))):
        rng = np.random.default_rng(700 + seed)
        batch, tokens, vocab, width = 2 * mesh.shape["data"], 3, 4 * mesh.shape["model"], 6
        ids = rng.integers(0, vocab, (batch, tokens)).astype(np.int32)
        labels = rng.integers(0, vocab, (batch, tokens)).astype(np.int32)
        lengths = rng.integers(1, tokens + 1, batch).astype(np.int32)
        table = rng.normal(size=(vocab, width)).astype(np.float32)
        w_out = rng.normal(size=(width, vocab)).astype(np.float32)
        cases.append(Case((ids, labels, lengths, table, w_out), {"mesh": mesh}))
    return cases


_TYPE = re.compile(r"^\w+\[(.*)\]$")

MOVES = frozenset({"reshard", "device_put", "all_gather", "sharding_constraint"})
"""Primitives that move an existing value to another layout."""


def _dimensions(typed: str) -> list[tuple[int, bool]]:
    """A type's dimensions, each as (size, whether a mesh axis splits it):
    ``float32[8@data,3]`` gives ``[(8, True), (3, False)]``."""
    found = _TYPE.match(typed)
    if not found or not found.group(1):
        return []
    dims = []
    for part in found.group(1).split(","):
        size, _, axes = part.partition("@")
        if not size.strip().isdigit():
            return []
        dims.append((int(size), bool(axes)))
    return dims


def _vocabulary_split(program, o) -> str | None:
    """No value has a whole vocabulary as its last dimension: the logits, the projection and the
    one-hot labels stay split over ``'model'``. (The lookup may gather: ``.at[ids].get`` traces
    to a gather from the whole table, which the compiler turns into a lookup in each device's
    rows and one all-reduce.)"""
    _, _, _, table, _ = o.args
    vocab = len(table)
    for primitive, _, _, _, types, *_ in program["values"]:
        for typed in types:
            dims = _dimensions(typed)
            if len(dims) >= 2 and dims[-1] == (vocab, False):
                if primitive in MOVES:
                    return (
                        f"your program holds a whole vocabulary on every device, {typed} (made "
                        f"by {primitive}): the logits (or the projection) were gathered to dodge "
                        "a refusal. Keep them split over 'model' and write the loss with a "
                        "one-hot encoding laid out as the logits"
                    )
                return (
                    f"your program builds a whole vocabulary on every device, {typed} (made by "
                    f"{primitive}): the one-hot labels (or what builds them) are not split. "
                    "Use jax.nn.one_hot(labels, V, out_sharding=NamedSharding(mesh, "
                    "P('data', None, 'model')))"
                )
    return None


def _shown(o, part: str) -> str:
    return (o.sharding or {}).get(part, "")


def _not_placed(o) -> bool:
    return all("@" not in _shown(o, part) for part in ("hidden", "logits", "losses", "last"))


def _logits_whole(o) -> bool:
    return "@" in _shown(o, "logits") and "'model')" not in _shown(o, "logits")


PROBLEM = Problem(
    reference=explicit_model,
    title="A model on Explicit axes, op by op",
    difficulty="medium",
    teaches="explicit sharding op by op: a lookup, a loss and a gather fixed where JAX refuses",
    lesson=("on_the_mesh",),
    make_cases=_cases,
    requirements=(
        Returns(
            "result",
            'It returns a dict with `"hidden"`, `"logits"`, `"losses"` and `"last"`, equal to '
            "`table[ids]`, `hidden @ w_out`, each token's softmax cross-entropy against its "
            "label, and `losses[b, lengths[b] - 1]` for each sequence b.",
            compare=compare_dicts,
        ),
        Layout(
            "layouts",
            "`hidden`, `losses` and `last` are split over `'data'` by their first dimension, "
            "`P('data')`, and `logits` over `'data'` and, by vocabulary, over `'model'`: "
            "`P('data', None, 'model')`.",
            spec={
                "hidden": P("data"),
                "logits": P("data", None, "model"),
                "losses": P("data"),
                "last": P("data"),
            },
        ),
        Program(
            "on_the_mesh",
            "Each refusal is fixed where it happens, the vocabulary kept split: no value in the "
            "traced program holds a whole vocabulary as its last dimension (the logits, the "
            "projection and the one-hot labels stay split over `'model'`), so the loss is "
            "computed where the logits are.",
            test=_vocabulary_split,
        ),
        UnderJit(
            "jit",
            "It works under `jax.jit`, as a model's step is called: the layouts are part of "
            "the types JAX traces (so no `jax.set_mesh` inside it: name layouts with "
            "`NamedSharding(mesh, P(...))`).",
        ),
    ),
    hints=(
        ErrorHint(
            "ShardingTypeError",
            r"operand=ShapedArray\(float32\[\d+@model,\d+\]\)",
            "the lookup table[ids] is refused: the table is split over the vocabulary that the "
            "ids index. Name the result's layout: table.at[ids].get(out_sharding="
            "NamedSharding(mesh, P('data')))",
        ),
        ErrorHint(
            "ShardingTypeError",
            r"operand=ShapedArray\(float32\[\d+@data,\d+,\d+@model\]\)",
            "picking each label's logit (optax's integer-label loss does) is a gather from "
            "logits split over the vocabulary: write the loss as logsumexp(logits) minus "
            "sum(logits * one_hot), with jax.nn.one_hot(labels, V, out_sharding=NamedSharding("
            "mesh, P('data', None, 'model')))",
        ),
        ErrorHint(
            "ShardingTypeError",
            r"operand=ShapedArray\(float32\[\d+@data,\d+\]\)",
            "losses[rows, lengths - 1] is a gather with indices split over 'data': name its "
            "layout, losses.at[rows, lengths - 1].get(out_sharding=NamedSharding(mesh, "
            "P('data')))",
        ),
        ResultHint(
            _not_placed,
            "the numbers are right but nothing carries a layout: place each input on the mesh "
            "first, e.g. jax.device_put(table, NamedSharding(mesh, P('model', None)))",
            requirement="layouts",
        ),
        ResultHint(
            _logits_whole,
            "the logits hold the whole vocabulary on each device: keep them as hidden @ w_out "
            "makes them, split over 'model'",
            requirement="layouts",
        ),
    ),
)

"""Problem: a pipeline's forward pass over microbatches, stages passing activations with
``ppermute``."""

from __future__ import annotations

# solution
import jax
import jax.numpy as jnp
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P


def pipeline_forward(x, weights, *, mesh, microbatches):
    """The layers ``h = tanh(h @ weights[i])``, for i = 0, 1, ..., run as a pipeline.

    The mesh axis ``'stage'`` has S devices, and ``weights`` (L layers, L a multiple of S) is
    split over it by layers: device s holds layers s*L/S up to (s+1)*L/S and applies them in
    order. The batch is cut into ``microbatches`` equal parts. At tick t, stage 0 takes
    microbatch t (while there is one), every stage applies its layers to what it holds, and
    ``jax.lax.ppermute`` passes each result to the next stage. Microbatch m leaves the last
    stage at tick m + S - 1, so the pipeline runs for ``microbatches + S - 1`` ticks. The last
    stage's outputs are handed to every device, and the result equals the L layers applied
    in sequence on one device.

    Args:
        x: inputs of shape (B, d), B divisible by ``microbatches``.
        weights: shape (L, d, d), L divisible by the size of ``'stage'``.
        mesh: a mesh with an axis ``'stage'``.
        microbatches: how many parts to cut the batch into.

    """
    stages = mesh.shape["stage"]
    chunks = x.reshape(microbatches, -1, x.shape[-1])
    to_next_stage = [(s, (s + 1) % stages) for s in range(stages)]

    def apply_own_layers(own_layers, h):
        for w in own_layers:
            h = jnp.tanh(h @ w)
        return h

    def per_stage(own_layers, chunks):
        stage = jax.lax.axis_index("stage")
        held = jnp.zeros_like(chunks[0])
        outputs = jnp.zeros_like(chunks)
        for tick in range(microbatches + stages - 1):
            fresh = chunks[min(tick, microbatches - 1)]
            result = apply_own_layers(own_layers, jnp.where(stage == 0, fresh, held))
            if tick >= stages - 1:
                outputs = outputs.at[tick - (stages - 1)].set(result)
            held = jax.lax.ppermute(result, "stage", to_next_stage)
        # Only the last stage's outputs are finished; a masked sum gives them to every device.
        return jax.lax.psum(jnp.where(stage == stages - 1, outputs, 0.0), "stage")

    weights = jax.device_put(weights, NamedSharding(mesh, P("stage")))
    chunks = jax.device_put(chunks, NamedSharding(mesh, P()))
    run = jax.shard_map(per_stage, mesh=mesh, in_specs=(P("stage"), P()), out_specs=P())
    return run(weights, chunks).reshape(x.shape)


# end solution

import numpy as np

from spmd_guide.practice.cases import kind, normal, one_axis_meshes
from spmd_guide.practice.problem import Case, ErrorHint, Problem, ResultHint
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
    matmuls_on_rows,
    uses,
)


def _cases(devices: int) -> list[Case]:
    cases = []
    for seed, mesh in enumerate(one_axis_meshes(devices, "stage")):
        stages = mesh.shape["stage"]
        layers_per_stage = 1 + seed % 2
        microbatches = (stages + 1, 2, 2 * stages)[seed]
        width = 4
        weights = normal(240 + seed, stages * layers_per_stage, width, width) / 2
        x = normal(250 + seed, 2 * microbatches, width)
        kwargs = {"mesh": mesh, "microbatches": microbatches}
        cases.append(Case((x, weights), kwargs, exercises=kind(mesh)))
    return cases


def _sequential(x, weights) -> np.ndarray:
    h = np.asarray(x, np.float64)
    for w in weights:
        h = np.tanh(h @ np.asarray(w, np.float64))
    return h


def _width(o) -> tuple[int, int]:
    return tuple(o.args[1].shape[1:])


def _microbatch_of(index: tuple[int, ...], o) -> str:
    rows = len(o.args[0]) // o.kwargs["microbatches"]
    return f"microbatch {index[0] // rows}"


def _stages(o) -> int:
    return o.kwargs["mesh"]["axes"]["stage"]


def _microbatches_missing(o) -> bool:
    """Some microbatches come out as zeros while the rest are right."""
    m = o.kwargs["microbatches"]
    got = np.asarray(o.value).reshape(m, -1, np.shape(o.value)[-1])
    expected = np.asarray(o.expected).reshape(got.shape)
    zero = [bool(np.all(chunk == 0)) for chunk in got]
    right = [np.allclose(g, e, rtol=1e-4, atol=1e-5) for g, e in zip(got, expected, strict=True)]
    return any(zero) and all(z or r for z, r in zip(zero, right, strict=True))


def _first_layer_of_each_stage(o) -> bool:
    x, weights = o.args
    per_stage = len(weights) // _stages(o)
    return per_stage > 1 and np.allclose(
        o.value, _sequential(x, weights[::per_stage]), rtol=1e-4, atol=1e-5
    )


PROBLEM = Problem(
    reference=pipeline_forward,
    title="A pipeline forward pass",
    difficulty="hard",
    teaches="pipeline parallelism: microbatches, M + S - 1 ticks, ppermute to the next stage",
    make_cases=_cases,
    requirements=(
        Returns(
            "result",
            "It returns the outputs of the L layers applied in sequence, shape (B, d).",
            locate=lambda index, o: _microbatch_of(index, o),
        ),
        Program(
            "stages",
            "Each device holds only its stage's layers: a `jax.shard_map` over `'stage'` "
            "receives `weights` in (L / S, d, d) blocks, and activations move to the next "
            "stage with `jax.lax.ppermute`, never by gathering (no `all_gather`).",
            test=every(
                uses("shard_map", "ppermute"),
                forbids("all_gather"),
                enters_as(lambda o: {"weights": (len(o.args[1]) // _stages(o), *_width(o))}),
            ),
        ),
        Program(
            "microbatches",
            "Every stage works on one microbatch at a time: each matrix product inside the "
            "`shard_map` takes B / `microbatches` rows.",
            test=matmuls_on_rows(
                lambda o: len(o.args[0]) // o.kwargs["microbatches"], "one microbatch"
            ),
        ),
        Layout(
            "layout",
            "The outputs are the same on every device: laid out as `P()`.",
            spec=P(),
        ),
        EXPLICIT_MESHES,
        GIVEN_MESH,
        TRACEABLE,
    ),
    hints=(
        ResultHint(
            _microbatches_missing,
            "some microbatches come out as zeros: the last one enters stage 0 at tick M - 1 "
            "and leaves the last stage S - 1 ticks later, so run microbatches + S - 1 ticks",
        ),
        ResultHint(
            _first_layer_of_each_stage,
            "only the first of each stage's layers was applied: a stage holds "
            "weights.shape[0] // S consecutive layers; apply all of them, in order",
        ),
        ErrorHint(
            "ValueError",
            r"out_specs which require replication",
            "the outputs' type varies over 'stage' (only the last stage's are finished), so "
            "out_specs=P() refuses them: keep the last stage's with jnp.where and add them "
            "over 'stage' with jax.lax.psum, which makes them the same on every device",
        ),
    ),
)

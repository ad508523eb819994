"""Problem: a pipeline's forward pass over microbatches, stages passing activations with
``ppermute``."""

from __future__ import annotations

# solution
import jax
import jax.numpy as jnp
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P


def pipeline_forward(x, weights, *, mesh, microbatches):
    """The layers ``h = tanh(h @ weights[i])``, for i = 0, 1, ..., run as a pipeline over the
    mesh axis ``'stage'`` of S devices: device s holds layers s*L/S up to (s+1)*L/S, and the
    batch, cut into M = ``microbatches`` equal parts, starts split over the stages in order
    (stage s holds microbatches s*M/S up to (s+1)*M/S).

    At tick t stage 0 works on microbatch t, every stage applies its layers to what it holds,
    and ``jax.lax.ppermute`` passes each result to the next stage; the microbatches reach stage
    0, and the finished ones return to where their inputs started, by moving one place along
    the stages per tick. The pipeline runs M + S - 1 ticks, in a loop.

    Args:
        x: inputs of shape (B, d), B divisible by ``microbatches``.
        weights: shape (L, d, d), L divisible by S, the size of ``'stage'``.
        mesh: a mesh with an axis ``'stage'``.
        microbatches: M, how many parts to cut the batch into, a multiple of S.

    """
    stages = mesh.shape["stage"]
    to_next = [(s, (s + 1) % stages) for s in range(stages)]
    to_previous = [(s, (s - 1) % stages) for s in range(stages)]

    def move_towards_stage_0(queue):
        arriving = jax.lax.ppermute(queue[0], "stage", to_previous)
        return jnp.concatenate([queue[1:], arriving[None]])

    def apply_own_layers(own_layers, h):
        return jax.lax.scan(lambda h, w: (jnp.tanh(h @ w), None), h, own_layers)[0]

    def per_stage(own_layers, queue):
        stage = jax.lax.axis_index("stage")

        def tick(carry, _):
            received, queue, outputs = carry
            result = apply_own_layers(own_layers, jnp.where(stage == 0, queue[0], received))
            queue, outputs = move_towards_stage_0(queue), move_towards_stage_0(outputs)
            # The last stage's result goes to the back of the queue of outputs.
            outputs = outputs.at[-1].set(jnp.where(stage == stages - 1, result, outputs[-1]))
            return (jax.lax.ppermute(result, "stage", to_next), queue, outputs), None

        start = (jnp.zeros_like(queue[0]), queue, jnp.zeros_like(queue))
        ticks = microbatches + stages - 1
        (_, _, outputs), _ = jax.lax.scan(tick, start, None, length=ticks)
        return outputs

    weights = jax.device_put(weights, NamedSharding(mesh, P("stage")))
    queue = x.reshape(microbatches, -1, x.shape[-1])
    queue = jax.device_put(queue, NamedSharding(mesh, P("stage")))
    run = jax.shard_map(
        per_stage, mesh=mesh, in_specs=(P("stage"), P("stage")), out_specs=P("stage")
    )
    return run(weights, queue).reshape(x.shape)


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
        microbatches = (2 * stages, stages, 3 * stages)[seed]
        width = 4
        weights = normal(240 + seed, stages * layers_per_stage, width, width) / 2
        # 3 rows per microbatch, so that a block of the queue never has a block of weights' shape.
        x = normal(250 + seed, 3 * microbatches, width)
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


def _rows_and_width(o) -> tuple[int, int]:
    return len(o.args[0]) // o.kwargs["microbatches"], o.args[0].shape[1]


def _microbatch_of(index: tuple[int, ...], o) -> str:
    rows = len(o.args[0]) // o.kwargs["microbatches"]
    return f"microbatch {index[0] // rows}"


def _stages(o) -> int:
    return o.kwargs["mesh"]["axes"]["stage"]


def _microbatches_missing(o) -> bool:
    """Some microbatches come out as zeros."""
    m = o.kwargs["microbatches"]
    if np.size(o.value) != np.size(o.expected):
        return False
    got = np.asarray(o.value).reshape(m, -1, np.shape(o.value)[-1])
    return any(bool(np.all(chunk == 0)) for chunk in got)


def _ticks_in_a_loop(program, o) -> str | None:
    """The ticks run in a loop: the program holds fewer sends than there are ticks."""
    ticks = o.kwargs["microbatches"] + _stages(o) - 1
    sends = sum(1 for primitive, *_ in program["values"] if primitive == "ppermute")
    if ticks >= 4 and sends >= ticks:
        return (
            f"your program holds {sends} ppermutes for {ticks} ticks: the ticks are unrolled, "
            "so the program grows with the number of microbatches; run them in a "
            "jax.lax.scan or jax.lax.fori_loop"
        )
    return None


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
    teaches="pipeline parallelism: microbatches split over the stages and rotated with "
    "ppermute, M + S - 1 ticks in a loop",
    lesson=("stages", "batch_split", "loop"),
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
            "batch_split",
            "No device holds the whole batch: the `shard_map` receives the batch as the "
            "stage's (M / S, B / M, d) block of microbatches, and the program has no `psum` "
            "(nothing is summed over the stages).",
            test=every(
                enters_as(
                    lambda o: {"x": (o.kwargs["microbatches"] // _stages(o), *_rows_and_width(o))}
                ),
                forbids("psum"),
            ),
        ),
        Program(
            "microbatches",
            "Every stage works on one microbatch at a time: the left operand of each matrix "
            "product inside the `shard_map` has B / M rows as its first dimension.",
            test=matmuls_on_rows(
                lambda o: len(o.args[0]) // o.kwargs["microbatches"], "one microbatch"
            ),
        ),
        Program(
            "loop",
            "The ticks run in a loop (`jax.lax.scan`, `fori_loop` or `while_loop`): the traced "
            "program holds fewer `ppermute`s than there are ticks, so it does not grow with M.",
            test=_ticks_in_a_loop,
        ),
        Layout(
            "layout",
            "The outputs are laid out as the inputs were cut: their rows split over `'stage'` "
            "in order, `P('stage')`, each device holding its own microbatches' outputs.",
            spec=P("stage"),
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
            "TypeError",
            r"carry input and carry output must have equal types",
            "a carry that starts the same on every device (plain jnp.zeros) comes back from "
            "ppermute varying over 'stage': start it as jnp.zeros_like(a block of the queue), or "
            "cast it with jax.lax.pcast(..., 'stage', to='varying')",
        ),
    ),
)

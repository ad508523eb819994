"""Measure what a GPU does with this site's programs, and record it as one JSON file.

Run by hand on a machine with an NVIDIA GPU and JAX's CUDA plugin (the build never runs it):

    pip install -e . "jax[cuda13]"
    python benchmarks/gpu_measure.py --out src/spmd_guide/recorded_gpu_runs/NAME.json

It writes one file in the format spmd_guide.gpu_runs reads, with its provenance (GPU, driver,
JAX, jaxlib and plugin versions, date, command), in two parts, each in a process of its own:

- ``plans_for_8_gpus``: the GPU compiler's plan for 8 GPUs of the pages' key programs, compiled
  on one GPU with 8 mocked single-GPU processes (``mock_num_gpu_processes``), autotuning off:
  the collectives by mesh axis, which are asynchronous and what compute each start-done pair
  brackets, and the temporaries. Nothing runs across GPUs.
- ``steps_on_one_gpu``: real training steps of the planner's configurations that fit one GPU:
  step time (median of the steps after the first), model FLOPs utilisation, the compiler's
  memory against the planner's figures, and the device's memory statistics.

Two parts more when asked, for checking the planner away from the configurations it was built on:

- ``--drawn N``: N one-device configurations drawn from a seeded distribution of the planner's
  space (layers, width and heads, MLP width, sequence, batch, vocabulary, remat), each one the
  planner says fits, timed like the steps above, each in a process of its own
  (``steps_drawn``);
- ``--drawn-meshes N``: N 8-device configurations drawn as the planner's tests draw them,
  compiled for 8 mocked GPUs: each device's arguments and temporaries beside the planner's
  figures (``meshes_drawn``).

Each asynchronous collective's values are recorded once (format 2; a format 1 file listed an
all-reduce's operands and results alike, which spmd_guide.gpu_runs corrects on reading).

``--cpu`` does the same on CPU devices (8 for the plans, one for the steps), with ``--small``
models: the tests run it that way, so the code path is exercised without a GPU. Keep a GPU run
under 10 minutes; ``--steps``, ``--configurations`` and ``--programs`` trim it.
"""

from __future__ import annotations

import argparse
import datetime
import importlib.metadata
import json
import math
import os
import re
import shlex
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

PLANNER_CHIPS = {"H100": "h100", "H200": "h200"}

# The planner's configurations to time on one device: (name, overrides of the planner's
# defaults). Each must fit one device; the small ones are for CPU runs.
STEP_CONFIGURATIONS = {
    "full": [
        ("1.3 B, full remat", dict(layers=24, width=2048, mlp=8192, heads=16, seq=2048, batch=8)),
        ("0.4 B, full remat", dict(layers=12, width=1024, mlp=4096, heads=8, seq=2048, batch=16)),
        (
            "0.4 B, no remat",
            dict(layers=12, width=1024, mlp=4096, heads=8, seq=2048, batch=8, remat="saved"),
        ),
    ],
    "small": [
        (
            "tiny, full remat",
            dict(layers=2, width=64, mlp=256, heads=4, vocab=512, seq=32, batch=4),
        ),
    ],
}
ONE_DEVICE = dict(
    pipe=1,
    data=1,
    tensor=1,
    zero=0,
    microbatches=1,
    remat="full",
    param_dtype="float32",
    grad_dtype="float32",
    opt_dtype="float32",
    act_dtype="bfloat16",
    sequence_parallel=False,
)


class MeasureError(RuntimeError):
    """The measurement could not be made as asked."""


# ---------------------------------------------------------------------------------------------
# Reading a compiled program.

_INSTRUCTION = re.compile(
    r"^\s*(?:ROOT )?%?(?P<name>[\w.\-]+) = (?P<type>\(.*?\)|\S+) (?P<op>[\w\-]+)\("
)
_COMPUTE = ("fusion", "dot", "convolution", "custom-call")


def entry_schedule(text: str) -> list[tuple[str, str, str]]:
    """The entry computation's instructions in the order they run: (name, op, line)."""
    entry = text[text.index("\nENTRY") :]
    entry = entry[: entry.index("\n}")]
    found = []
    for line in entry.splitlines()[1:]:
        match = _INSTRUCTION.match(line)
        if match:
            found.append((match["name"], match["op"], line))
    return found


_COMPUTATION = re.compile(
    r"^(?:ENTRY )?%?(?P<name>[\w.\-]+) [^\n]*\{\n(?P<body>.*?)^\}", re.M | re.S
)
# cuBLAS's matrix products as XLA:GPU calls them: "__cublas$gemm", "__cublas$lt$matmul", ...
_LIBRARY_MATMUL = re.compile(r'custom_call_target="__cublas')
_CALLS = re.compile(r"calls=%?(?P<name>[\w.\-]+)")


def computations(text: str) -> dict[str, str]:
    """Each computation of a program by name: its body's lines."""
    return {m["name"]: m["body"] for m in _COMPUTATION.finditer(text)}


def root_op(body: str) -> str | None:
    """The op of a computation's ROOT instruction."""
    for line in body.splitlines():
        if line.lstrip().startswith("ROOT "):
            match = _INSTRUCTION.match(line)
            return match["op"] if match else None
    return None


def is_matmul(op: str, line: str, bodies: dict[str, str]) -> bool:
    """Whether one instruction is a matrix product, by its own kind: a dot or a convolution, a
    call of cuBLAS's matmuls, or a fusion whose root is a dot (as XLA:GPU's Triton GEMMs are). A
    name with "dot" in it is not enough."""
    if op in ("dot", "convolution"):
        return True
    if op == "custom-call":
        return bool(_LIBRARY_MATMUL.search(line))
    if op == "fusion":
        called = _CALLS.search(line)
        return bool(called) and root_op(bodies.get(called["name"], "")) in ("dot", "convolution")
    return False


def async_pairs(text: str) -> list[dict[str, Any]]:
    """Each asynchronous collective of the entry computation: its op and how many compute
    instructions (fusions, matmuls, library calls) run between its start and its done."""
    schedule = entry_schedule(text)
    bodies = computations(text)
    pairs = []
    for at, (name, op, _) in enumerate(schedule):
        if not op.endswith("-start") or op.removesuffix("-start") in ("copy", "send", "recv"):
            continue
        # The done's operand is the start, typed or not: "(%ag-start)" or "(... ) %ag-start)".
        finished = re.compile(rf"[( ]%?{re.escape(name)}[,)]")
        done = next(
            (
                i
                for i in range(at + 1, len(schedule))
                if schedule[i][1].endswith("-done") and finished.search(schedule[i][2])
            ),
            None,
        )
        between = schedule[at + 1 : done] if done is not None else []
        pairs.append(
            {
                "op": op.removesuffix("-start"),
                "compute_between": sum(1 for _, o, _ in between if o in _COMPUTE),
                "matmuls_between": sum(1 for _, o, line in between if is_matmul(o, line, bodies)),
            }
        )
    return pairs


_WHILE_BODY = re.compile(r" while\(.*?body=%?(?P<body>[\w.\-]+)")


def windowed_loop(text: str) -> bool:
    """Whether a while loop's body both passes blocks on and multiplies them: the loop XLA's
    windowed einsum writes in place of a gather and a matmul."""
    bodies = computations(text)
    for match in _WHILE_BODY.finditer(text):
        body = bodies.get(match["body"], "")
        calls = [bodies.get(name, "") for name in re.findall(r"calls=%?([\w.\-]+)", body)]
        inside = body + "".join(calls)
        if "collective-permute" in inside and (" dot(" in inside or "gemm" in inside):
            return True
    return False


def elements(shape: str) -> int:
    """How many values an HLO shape such as ``f32[16384,1024]`` holds."""
    dims = re.search(r"\[([\d,]*)\]", shape)
    return math.prod(int(d) for d in dims[1].split(",") if d) if dims else 0


def recorded_shapes(op: str, line: str, shapes: tuple[str, ...]) -> tuple[str, ...]:
    """The shapes of the values one collective carries, each once. An asynchronous start's type
    lists its operands' shapes, then its results' (and a permute's scalar contexts): keep the
    results."""
    if f" {op}-start(" not in line or len(shapes) < 2:
        return tuple(shapes)
    data = [s for s in shapes if op != "collective-permute" or not s.endswith("[]")]
    return tuple(data[len(data) // 2 :]) if len(data) % 2 == 0 else tuple(data)


def read_plan(compiled: Any, mesh: Any, program: str) -> dict[str, Any]:
    """What one compiled program does, in the recorded file's form."""
    from spmd_guide import analysis

    text = compiled.as_text()
    grouped: dict[tuple, int] = {}
    position = analysis._mesh_positions(mesh)
    for op, line, shapes, _, _ in analysis._collectives_produced(text):
        # XLA:GPU writes even a synchronous collective as a start and a done, marked is_sync.
        asynchronous = f" {op}-start(" in line and '"is_sync":true' not in line
        shapes = recorded_shapes(op, line, shapes)
        # One collective may carry several values, when XLA combined them: its shapes.
        key = (op, "+".join(analysis._axes(line, mesh, position)), tuple(shapes), asynchronous)
        grouped[key] = grouped.get(key, 0) + 1
    schedule = entry_schedule(text)
    bodies = computations(text)
    ops = [op for _, op, _ in schedule]
    first_matmul = next(
        (i for i, (_, op, line) in enumerate(schedule) if is_matmul(op, line, bodies)),
        len(schedule),
    )
    analysis = compiled.memory_analysis()
    return {
        "program": program,
        "collectives": [
            {
                "op": op,
                "axes": axes,
                "shapes": list(shapes),
                "asynchronous": asynchronous,
                "count": count,
            }
            for (op, axes, shapes, asynchronous), count in sorted(
                grouped.items(), key=lambda item: (item[0][0], sum(map(elements, item[0][2])))
            )
        ],
        "async_pairs": async_pairs(text),
        "matmuls": sum(1 for _, op, line in schedule if is_matmul(op, line, bodies)),
        "permutes_before_first_matmul": sum(
            1
            for op in ops[:first_matmul]
            if op.startswith("collective-permute") and not op.endswith("-done")
        ),
        "reduce_scatters": sum(
            count for (op, *_), count in grouped.items() if op == "reduce-scatter"
        ),
        "windowed_loop": windowed_loop(text),
        "temporary_bytes": analysis.temp_size_in_bytes,
        "argument_bytes": analysis.argument_size_in_bytes,
    }


# ---------------------------------------------------------------------------------------------
# The programs, each as on its page.


def programs(mesh: Any, small: bool) -> dict[str, tuple[str, Any, tuple, dict]]:
    """Each key program: (what it is, the jitted function, abstract arguments, compiler options)."""
    import jax
    import jax.numpy as jnp
    from jax.sharding import NamedSharding
    from jax.sharding import PartitionSpec as P

    def abstract(shape, spec, dtype=jnp.float32):
        return jax.ShapeDtypeStruct(shape, dtype, sharding=NamedSharding(mesh, spec))

    found = {}

    # FSDP (patterns/fsdp): 4 layers tanh(x @ W) in a lax.scan, the stack split by rows over
    # "x", by jit and by shard_map; the instructions in the loops do not depend on the depth.
    width = 64 if small else 256
    stack = abstract((4, width, width), P(None, "x"))
    batch, targets = abstract((64, width), P("x")), abstract((64, width), P("x"))

    def fsdp_loss(layers, x, y):
        x, _ = jax.lax.scan(lambda x, w: (jnp.tanh(x @ w), None), x, layers)
        return jnp.mean((x - y) ** 2)

    found["fsdp_by_jit"] = (
        "jax.grad of the FSDP page's loss, a (4, W, W) stack split P(None, 'x'), Auto axes",
        jax.jit(jax.grad(fsdp_loss)),
        (stack, batch, targets),
        {},
    )

    def fsdp_by_hand(layers, x, y):
        def per_device(layers, x, y):
            def layer(x, w):
                return jnp.tanh(x @ jax.lax.all_gather(w, "x", axis=0, tiled=True)), None

            x, _ = jax.lax.scan(layer, x, layers)
            return jax.lax.pmean(jnp.mean((x - y) ** 2), "x")

        specs = (P(None, "x"), P("x"), P("x"))
        return jax.shard_map(per_device, mesh=mesh, in_specs=specs, out_specs=P())(layers, x, y)

    found["fsdp_by_shard_map"] = (
        "the same loss with each layer's weight all-gathered in shard_map; jax.grad",
        jax.jit(jax.grad(fsdp_by_hand)),
        (stack, batch, targets),
        {},
    )

    # A matmul whose partial sums are constrained to a split result.
    h = abstract((4, 64, 8 * width), P(None, None, "x"))
    w_rows = abstract((8 * width, width), P("x", None))
    found["constraint_to_reduce_scatter"] = (
        "h @ w contracting over the split dimension, with_sharding_constraint(h @ w, "
        "P(None, 'x', None))",
        jax.jit(lambda h, w: jax.lax.with_sharding_constraint(h @ w, P(None, "x", None))),
        (h, w_rows),
        {},
    )

    # Data parallelism (patterns/data-parallel): replicated two-layer MLP, gradients combined.
    def mlp_loss(p, x, y):
        return jnp.mean((jax.nn.relu(x @ p["w1"] + p["b1"]) @ p["w2"] + p["b2"] - y) ** 2)

    for name, (d_in, d_hidden, d_out, rows) in {
        "data_parallel_small": (16, 32, 4, 64),
        "data_parallel_large": (512, 2048, 128, 64) if small else (4096, 16384, 1024, 512),
    }.items():
        params = {
            "w1": abstract((d_in, d_hidden), P()),
            "b1": abstract((d_hidden,), P()),
            "w2": abstract((d_hidden, d_out), P()),
            "b2": abstract((d_out,), P()),
        }
        found[name] = (
            f"jax.grad of the data-parallel page's MLP {d_in}-{d_hidden}-{d_out}, batch split",
            jax.jit(jax.grad(mlp_loss)),
            (params, abstract((rows, d_in), P("x")), abstract((rows, d_out), P("x"))),
            {},
        )

    # Tensor parallelism (patterns/tensor-parallel): 2 Megatron MLP blocks in shard_map.
    specs = {"w1": P(None, "x"), "b1": P("x"), "w2": P("x", None), "b2": P()}
    shapes = {"w1": (16, 32), "b1": (32,), "w2": (32, 16), "b2": (16,)}
    blocks = [{k: abstract(shapes[k], specs[k]) for k in shapes} for _ in range(2)]

    def tp_loss(params, x, y):
        def per_device(params, x, y):
            for p in params:
                partial = jax.nn.relu(x @ p["w1"] + p["b1"]) @ p["w2"]
                x = jax.lax.psum(partial, "x") + p["b2"]
            return jnp.mean((x - y) ** 2)

        return jax.shard_map(
            per_device, mesh=mesh, in_specs=([specs] * 2, P(), P()), out_specs=P()
        )(params, x, y)

    found["tensor_parallel_two_blocks"] = (
        "jax.value_and_grad of 2 Megatron blocks in shard_map",
        jax.jit(jax.value_and_grad(tp_loss)),
        (blocks, abstract((64, 16), P()), abstract((64, 16), P())),
        {},
    )

    # Collective matmul (transformer-patterns/collective-matmul): the hand-written ring.
    rows, inner, cols = (128, 64, 256) if small else (1024, 128, 512)

    def ring(x, w):
        devices = jax.lax.axis_size("x")
        me = jax.lax.axis_index("x")
        out = jnp.zeros((x.shape[0] * devices, w.shape[1]), x.dtype)
        for step in range(devices):
            if step < devices - 1:
                arriving = jax.lax.ppermute(
                    x, "x", [(i, (i + 1) % devices) for i in range(devices)]
                )
            out = jax.lax.dynamic_update_slice_in_dim(
                out, x @ w, ((me - step) % devices) * x.shape[0], axis=0
            )
            if step < devices - 1:
                x = arriving
        return out

    ring_args = (abstract((rows, inner), P("x", None)), abstract((inner, cols), P(None, "x")))
    sharded_ring = jax.jit(
        jax.shard_map(
            ring, mesh=mesh, in_specs=(P("x", None), P(None, "x")), out_specs=P(None, "x")
        )
    )
    found["collective_matmul_ring"] = (
        "the collective-matmul page's ring, jitted",
        sharded_ring,
        ring_args,
        {},
    )
    found["collective_matmul_ring_lhs"] = (
        "the same, with --xla_gpu_enable_latency_hiding_scheduler=true",
        sharded_ring,
        ring_args,
        {"xla_gpu_enable_latency_hiding_scheduler": True},
    )
    gather = abstract((rows * 8, inner), P("x", None))
    found["windowed_einsum_threshold_zero"] = (
        "a jitted matmul of a row-split x by a column-split w, its result split by columns, "
        "with --xla_gpu_threshold_for_windowed_einsum_mib=0",
        jax.jit(lambda x, w: jax.lax.with_sharding_constraint(x @ w, P(None, "x"))),
        (gather, ring_args[1]),
        {"xla_gpu_threshold_for_windowed_einsum_mib": 0},
    )
    return found


def planner_grid(devices: list, small: bool) -> dict[str, tuple[str, Any, Any]]:
    """The planner's step for a few of its 8-device meshes: (what, mesh, lowered)."""
    from spmd_guide import planner

    sizes = (
        dict(layers=2, width=64, mlp=256, heads=8, vocab=512, seq=32, batch=16)
        if small
        else dict(layers=8, width=2048, mlp=8192, heads=16, seq=2048, batch=32)
    )
    found = {}
    meshes = ((1, 4, 2, 1),) if small else ((1, 8, 1, 3), (1, 4, 2, 1), (1, 2, 4, 0))
    for pipe, data, tensor, zero in meshes:
        config = planner.plan(
            {
                **planner.defaults(),
                **ONE_DEVICE,
                **sizes,
                "pipe": pipe,
                "data": data,
                "tensor": tensor,
                "zero": zero,
            }
        )["config"]
        mesh = mesh_of(devices, (pipe, data, tensor), planner.MESH_AXES)
        found[f"planner_{pipe}x{data}x{tensor}_zero{zero}"] = (
            f"the planner's step, pipe {pipe}, data {data}, tensor {tensor}, ZeRO {zero}",
            mesh,
            planner.lower_step(config, mesh),
        )
    return found


def mesh_of(devices: list, shape: tuple, names: tuple) -> Any:
    """A mesh over ``devices`` with Auto axes; jax.make_mesh refuses mocked GPUs (each its own
    slice), so the devices are laid out directly."""
    import numpy as np
    from jax.sharding import AxisType, Mesh

    return Mesh(np.array(devices).reshape(shape), names, axis_types=(AxisType.Auto,) * len(shape))


def measure_plans(small: bool, chosen: list[str] | None = None) -> dict[str, Any]:
    import jax

    devices = jax.devices()
    if len(devices) != 8:
        raise MeasureError(
            f"the plans need 8 devices (mocked GPUs or CPU devices); found {len(devices)}"
        )
    mesh = mesh_of(devices, (8,), ("x",))
    plans: dict[str, Any] = {}
    every = programs(mesh, small)
    grid = (
        planner_grid(devices, small)
        if chosen is None or any(name.startswith("planner") for name in chosen)
        else {}
    )
    unknown = sorted(set(chosen or ()) - set(every) - set(grid) - {"planner"})
    if unknown:
        raise MeasureError(
            f"no program {', '.join(unknown)}; the programs are {', '.join([*every, 'planner'])}"
        )
    for name, (what, function, args, options) in every.items():
        if chosen is not None and name not in chosen:
            continue
        with jax.set_mesh(mesh):
            compiled = function.lower(*args).compile(compiler_options=options or None)
        plans[name] = read_plan(compiled, mesh, what)
    for name, (what, grid_mesh, lowered) in grid.items():
        plans[name] = read_plan(lowered.compile(), grid_mesh, what)
    if "collective_matmul_ring" in plans and "collective_matmul_ring_lhs" in plans:
        ring, lhs = plans["collective_matmul_ring"], plans["collective_matmul_ring_lhs"]
        keys = ("collectives", "async_pairs", "matmuls", "permutes_before_first_matmul")
        ring["same_with_latency_hiding_scheduler"] = all(ring[k] == lhs[k] for k in keys)
    if "data_parallel_large" in plans:
        from spmd_guide import xla_options

        in_effect = xla_options.read(os.environ.get("XLA_FLAGS", "")).values
        plans["data_parallel_large"]["combine_threshold_bytes"] = in_effect[
            "xla_gpu_all_reduce_combine_threshold_bytes"
        ]
    plans["how"] = (
        "compiled for 8 GPUs mocked on one with jax.config.update('mock_num_gpu_processes', 8), "
        "XLA_PYTHON_CLIENT_PREALLOCATE=false, --xla_gpu_autotune_level=0 and "
        "--xla_gpu_enable_command_buffer= (none); nothing ran across GPUs"
        if devices[0].platform == "gpu"
        else "compiled for 8 CPU devices (a test of this script)"
    )
    return plans


# ---------------------------------------------------------------------------------------------
# Real steps on one device.


# The seeded distributions the drawn configurations come from.
DRAW_SEED = 20261128
ONE_DEVICE_DRAWS = {
    "full": dict(
        layers=(4, 8, 12, 16, 24, 32),
        shapes=((1024, 8), (1536, 12), (2048, 16), (2560, 20), (3072, 24), (4096, 32)),
        mlp_ratio=(2, 4),
        seq=(512, 1024, 2048, 4096),
        batch=(1, 2, 4, 8, 16),
        vocab=(32000, 50304),
    ),
    "small": dict(
        layers=(1, 2),
        shapes=((32, 2), (64, 4)),
        mlp_ratio=(2, 4),
        seq=(16, 32),
        batch=(2, 4),
        vocab=(256, 512),
    ),
}


def drawn_one_device(count: int, chip: str, small: bool, seed: int = DRAW_SEED) -> list[tuple]:
    """``count`` configurations of the planner's one-device space (layers, width and heads, MLP
    width, sequence, batch, vocabulary, remat), drawn from a seeded distribution and kept when
    the planner says they fit ``chip``: (what, overrides of the planner's defaults)."""
    import random

    from spmd_guide import planner

    space = ONE_DEVICE_DRAWS["small" if small else "full"]
    rng = random.Random(seed)
    found: list[tuple] = []
    for _ in range(1000 * count):
        if len(found) == count:
            return found
        width, heads = rng.choice(space["shapes"])
        overrides = dict(
            layers=rng.choice(space["layers"]),
            width=width,
            heads=heads,
            mlp=rng.choice(space["mlp_ratio"]) * width,
            seq=rng.choice(space["seq"]),
            batch=rng.choice(space["batch"]),
            vocab=rng.choice(space["vocab"]),
            remat=rng.choice(planner.REMAT_POLICIES),
        )
        try:
            answer = planner.plan({**planner.defaults(), **ONE_DEVICE, **overrides, "chip": chip})
        except planner.PlannerError:
            continue
        if answer["fits"]:
            found.append((f"drawn {len(found)} (seed {seed})", overrides))
    raise MeasureError(f"only {len(found)} of {count} drawn configurations fit {chip}")


def drawn_meshes(count: int, chip: str, seed: int = DRAW_SEED) -> list[dict[str, Any]]:
    """``count`` configurations of 8 devices drawn as the planner's tests draw them, on ``chip``,
    kept when the planner says they fit."""
    from spmd_guide import planner

    found: list[dict[str, Any]] = []
    for attempt in range(50):
        for config in planner.drawn_configurations(8 * count, seed=seed + attempt, devices=8):
            try:
                answer = planner.plan({**config, "chip": chip})
            except planner.PlannerError:
                continue
            if answer["fits"] and len(found) < count:
                found.append(answer["config"])
        if len(found) == count:
            return found
    raise MeasureError(f"only {len(found)} of {count} drawn meshes fit {chip}")


def measure_meshes(count: int, chip: str) -> list[dict[str, Any]]:
    """Each drawn 8-device configuration compiled on this process's 8 devices (mocked GPUs, or CPU
    devices): each device's arguments and temporaries beside the planner's figures."""
    import jax

    from spmd_guide import planner

    devices = jax.devices()
    if len(devices) != 8:
        raise MeasureError(f"the drawn meshes need 8 devices; found {len(devices)}")
    found = []
    for config in drawn_meshes(count, chip):
        shape = (config["pipe"], config["data"], config["tensor"])
        mesh = mesh_of(devices, shape, planner.MESH_AXES)
        analysis = planner.lower_step(config, mesh).compile().memory_analysis()
        answer = planner.plan(config)
        memory = answer["memory"]
        stored = memory["parameters"]["value"] + memory["optimizer"]["value"]
        stored += memory["batch"]["value"]
        found.append(
            {
                "configuration": config,
                "argument_bytes": analysis.argument_size_in_bytes,
                "temporary_bytes": analysis.temp_size_in_bytes,
                "planner_stored_bytes": stored,
                "planner_total_bytes": answer["memoryTotal"],
            }
        )
    return found


def planner_chip(device: Any) -> str:
    """The planner's chip for this device (a CPU test run takes the H100's figures)."""
    if device.platform != "gpu":
        return "h100"
    kind = device.device_kind
    # The planner's H100 and H200 are the SXM parts; a PCIe card has other rates.
    chip = next((key for name, key in PLANNER_CHIPS.items() if name in kind), None)
    if chip is None or "PCIe" in kind:
        raise MeasureError(f"the planner has no chip for {kind!r}; add it to model.js first")
    return chip


def measure_step(small: bool, steps: int, index: int, drawn: str | None = None) -> dict[str, Any]:
    """Train configuration ``index`` (or the ``drawn`` one, as JSON: what, overrides) for
    ``steps`` steps after a first, on one device. Each runs in a process of its own, so the
    device's peak memory is this configuration's."""
    import jax
    import jax.numpy as jnp

    from spmd_guide import planner

    device = jax.devices()[0]
    chip = planner_chip(device)
    what, overrides = (
        json.loads(drawn) if drawn else STEP_CONFIGURATIONS["small" if small else "full"][index]
    )
    config = planner.plan({**planner.defaults(), **ONE_DEVICE, **overrides, "chip": chip})["config"]
    answer = planner.plan(config)
    mesh = planner.mesh_for(config, [device])
    lowered = planner.lower_step(config, mesh)
    started = time.perf_counter()
    compiled = lowered.compile()
    compile_seconds = time.perf_counter() - started
    keys = iter(jax.random.split(jax.random.key(0), 10_000))

    def concrete(info, keys=keys):
        if jnp.issubdtype(info.dtype, jnp.integer):
            return jnp.zeros(info.shape, info.dtype, device=device)
        return jax.device_put(
            (0.02 * jax.random.normal(next(keys), info.shape)).astype(info.dtype), device
        )

    params_info, state_info, tokens_info = lowered.args_info[0]
    params = jax.tree.map(concrete, params_info)
    # Adam starts from zero moments and a zero count, as optax's init makes them.
    state = jax.tree.map(lambda info: jnp.zeros(info.shape, info.dtype, device=device), state_info)
    tokens = jax.device_put(
        jax.random.randint(next(keys), tokens_info.shape, 0, config["vocab"], jnp.int32), device
    )
    times = []
    for _ in range(steps + 1):
        started = time.perf_counter()
        params, state, loss = compiled(params, state, tokens)
        jax.block_until_ready((params, state, loss))
        times.append(time.perf_counter() - started)
    analysis = compiled.memory_analysis()
    stats = device.memory_stats() or {}
    memory = answer["memory"]
    stored = memory["parameters"]["value"] + memory["optimizer"]["value"] + memory["batch"]["value"]
    peak = answer["chip"]["flops"]
    return {
        "what": what,
        "configuration": {
            k: config[k]
            for k in (
                *ONE_DEVICE,
                "layers",
                "width",
                "mlp",
                "heads",
                "vocab",
                "seq",
                "batch",
            )
        },
        "planner_chip": chip,
        "argument_bytes": analysis.argument_size_in_bytes,
        "temporary_bytes": analysis.temp_size_in_bytes,
        "planner_stored_bytes": stored,
        "planner_temporary_bytes": answer["memoryTotal"] - stored,
        "planner_step_seconds": round(answer["stepSeconds"]["overlapped"], 6),
        # The planner's expected step beside its bound, as the planner stood when measured.
        "planner_expected_seconds": round(answer["stepSeconds"]["expected"], 6),
        "step_seconds_median": round(statistics.median(times[1:]), 6),
        "step_seconds_range": [round(min(times[1:]), 6), round(max(times[1:]), 6)],
        "steps_timed": steps,
        "model_flops_per_step": round(
            planner.plan({**config, "remat": "saved"})["time"]["compute"]["value"] * peak
        ),
        "flops_per_step_with_recompute": round(answer["time"]["compute"]["value"] * peak),
        "flops_counted_by": (
            "the planner's formulas for this configuration, without and with remat's recomputation"
        ),
        "peak_flops_per_second": peak,
        "compile_seconds": round(compile_seconds, 2),
        "bytes_limit": stats.get("bytes_limit"),
        "peak_bytes_in_use": stats.get("peak_bytes_in_use"),
        "final_loss": round(float(loss), 4),
    }


def measure_observations(small: bool) -> dict[str, Any]:
    """What the run's device and plugin show apart from any step: the error of a float32 matmul
    at default and at highest precision, the allocator's cap, and the memory-fraction variables
    the plugin reads."""
    import jax
    import jax.numpy as jnp
    import numpy as np

    side = 256 if small else 4096
    rng = np.random.default_rng(0)
    a, b = rng.normal(size=(side, side)), rng.normal(size=(side, side))
    exact = a @ b

    def error(precision: str) -> float:
        with jax.default_matmul_precision(precision):
            product = np.asarray(jnp.dot(jnp.float32(a), jnp.float32(b)), np.float64)
        return float(np.max(np.abs(product - exact)) / np.max(np.abs(exact)))

    current, deprecated = memory_fraction_variables()
    stats = jax.devices()[0].memory_stats() or {}
    return {
        "float32_matmul_side": side,
        "float32_matmul_default_relative_error": float(f"{error('default'):.2g}"),
        "float32_matmul_highest_relative_error": float(f"{error('highest'):.2g}"),
        "bytes_limit": stats.get("bytes_limit"),
        "memory_fraction_variable": current,
        "memory_fraction_variable_deprecated": deprecated,
    }


def memory_fraction_variables() -> tuple[str | None, str | None]:
    """The memory-fraction variable JAX reads for a GPU, and the older one if JAX calls it
    deprecated: from jaxlib's own source (its GPU plugin options and their error message) and from
    the strings in the installed GPU plugin's libraries (None when neither names them)."""
    import importlib.util

    texts = []
    spec = importlib.util.find_spec("jaxlib.xla_client")
    if spec and spec.origin:
        texts.append(Path(spec.origin).read_bytes())
    for package in ("jax_plugins", "jax_cuda13_plugin", "jax_cuda12_plugin"):
        spec = importlib.util.find_spec(package)
        for root in (spec.submodule_search_locations or []) if spec else []:
            texts += [library.read_bytes() for library in Path(root).rglob("*.so")]
    data = b"\n".join(texts)
    current = "XLA_CLIENT_MEM_FRACTION" if b"XLA_CLIENT_MEM_FRACTION" in data else None
    older = b"XLA_PYTHON_CLIENT_MEM_FRACTION"
    said = [
        data[max(0, at - 200) : at + 200] for at in (m.start() for m in re.finditer(older, data))
    ]
    deprecated = older.decode() if any(b"deprecat" in text.lower() for text in said) else None
    return current, deprecated


# ---------------------------------------------------------------------------------------------
# The run: each part in a process of its own, then one file.


def provenance(cpu: bool) -> dict[str, Any]:
    def version(package: str) -> str | None:
        try:
            return importlib.metadata.version(package)
        except importlib.metadata.PackageNotFoundError:
            return None

    plugins = [
        f"{p} {version(p)}" for p in ("jax-cuda13-plugin", "jax-cuda12-plugin") if version(p)
    ]
    if cpu:
        gpu, driver = "none: CPU devices (a test of this script)", "none"
    else:
        query = subprocess.run(
            ["nvidia-smi", "--query-gpu=name,driver_version", "--format=csv,noheader"],
            capture_output=True,
            text=True,
            timeout=60,
        )
        if query.returncode != 0:
            raise MeasureError(
                f"nvidia-smi failed, so this machine's GPU is unknown: {query.stderr}"
            )
        gpu, driver = [part.strip() for part in query.stdout.splitlines()[0].split(",")]
    return {
        "gpu": gpu,
        "gpus": 1,
        "driver": driver,
        "jax": version("jax"),
        "jaxlib": version("jaxlib"),
        "plugin": ", ".join(plugins) or "none",
        "date": datetime.date.today().isoformat(),
        "command": shlex.join([Path(sys.executable).name, *sys.argv]),
        "recorded_by": "benchmarks/gpu_measure.py",
    }


def run_part(
    part: str, args: argparse.Namespace, index: int | None = None, drawn: tuple | None = None
) -> Any:
    env = dict(os.environ)
    if args.cpu:
        devices = "8" if part in ("plans", "meshes") else "1"
        env.update(JAX_PLATFORMS="cpu", JAX_NUM_CPU_DEVICES=devices)
    else:
        env["XLA_PYTHON_CLIENT_PREALLOCATE"] = "false"
        if part in ("plans", "meshes"):
            # No autotuning (it would take minutes for 8 mocked GPUs), and no command buffers,
            # which would move runs of kernels out of the entry computation's schedule.
            flags = " --xla_gpu_autotune_level=0 --xla_gpu_enable_command_buffer="
            env["XLA_FLAGS"] = (env.get("XLA_FLAGS", "") + flags).strip()
    command = [sys.executable, __file__, "--part", part, "--steps", str(args.steps)]
    command += ["--cpu"] * args.cpu + ["--small"] * args.small
    if index is not None:
        command += ["--index", str(index)]
    if drawn is not None:
        command += ["--drawn-configuration", json.dumps(drawn)]
    if part == "meshes":
        command += ["--drawn-meshes", str(args.drawn_meshes), "--chip", args.chip]
    if args.programs:
        command += ["--programs", args.programs]
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=args.timeout)
    if done.returncode != 0:
        raise MeasureError(
            f"the {part} part failed (exit {done.returncode}):\n{done.stderr[-4000:]}"
        )
    return json.loads(done.stdout.splitlines()[-1])


def card_bytes() -> int | None:
    """The GPU's memory, as nvidia-smi reports it."""
    query = subprocess.run(
        ["nvidia-smi", "--query-gpu=memory.total", "--format=csv,noheader,nounits"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    return int(query.stdout.split()[0]) * 2**20 if query.returncode == 0 else None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, help="the JSON file to write")
    parser.add_argument("--cpu", action="store_true", help="CPU devices instead of a GPU (tests)")
    parser.add_argument("--small", action="store_true", help="small models (with --cpu)")
    parser.add_argument("--steps", type=int, default=6, help="steps timed after the first")
    parser.add_argument("--configurations", type=int, help="time only the first N configurations")
    parser.add_argument(
        "--programs",
        help="compile only these programs, by name, comma-separated "
        "(planner for the planner's grid)",
    )
    parser.add_argument(
        "--drawn",
        type=int,
        default=0,
        help="also time N one-device configurations drawn (seeded) from the planner's space, "
        "each the planner says fits, each in a process of its own",
    )
    parser.add_argument(
        "--drawn-meshes",
        type=int,
        default=0,
        help="also compile N drawn 8-device configurations (mocked GPUs) and record each "
        "device's arguments and temporaries beside the planner's",
    )
    parser.add_argument("--timeout", type=int, default=540, help="seconds each part may take")
    parser.add_argument(
        "--part", choices=("plans", "step", "observations", "meshes"), help=argparse.SUPPRESS
    )
    parser.add_argument("--index", type=int, default=0, help=argparse.SUPPRESS)
    parser.add_argument("--drawn-configuration", help=argparse.SUPPRESS)
    parser.add_argument("--chip", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.steps < 1:
        parser.error(f"--steps must be at least 1, got {args.steps}")
    if args.configurations is not None and args.configurations < 1:
        parser.error(f"--configurations must be at least 1, got {args.configurations}")
    for flag, value in (("--drawn", args.drawn), ("--drawn-meshes", args.drawn_meshes)):
        if value < 0:
            parser.error(f"{flag} must be 0 or more, got {value}")

    if args.part:
        import jax

        if args.part in ("plans", "meshes") and not args.cpu:
            jax.config.update("mock_num_gpu_processes", 8)
        if not args.cpu and jax.devices()[0].platform != "gpu":
            raise MeasureError(
                f"no GPU found (JAX sees {jax.devices()[0].platform}); use --cpu to test on CPU"
            )
        chosen = args.programs.split(",") if args.programs else None
        result = {
            "plans": lambda: measure_plans(args.small, chosen),
            "step": lambda: measure_step(
                args.small, args.steps, args.index, args.drawn_configuration
            ),
            "meshes": lambda: measure_meshes(args.drawn_meshes, args.chip),
            "observations": lambda: measure_observations(args.small),
        }[args.part]()
        print(json.dumps(result))
        return 0

    if args.out is None:
        parser.error("--out is required: the JSON file to write")
    configurations = len(STEP_CONFIGURATIONS["small" if args.small else "full"])
    observations = run_part("observations", args)
    run_provenance = provenance(args.cpu)
    # The planner's chip, named from the GPU nvidia-smi reports (this process starts no JAX
    # backend, which would take the GPU's memory from the parts); a CPU test takes the H100's.
    args.chip = next(
        (key for name, key in PLANNER_CHIPS.items() if name in run_provenance["gpu"]), "h100"
    )
    total = None if args.cpu else card_bytes()
    observations["memory_reserved_fraction"] = (
        round(observations["bytes_limit"] / total, 4)
        if total and observations["bytes_limit"]
        else None
    )
    record = {
        "format": 2,
        "provenance": run_provenance,
        "plans_for_8_gpus": run_part("plans", args),
        "steps_on_one_gpu": [
            run_part("step", args, index)
            for index in range(min(configurations, args.configurations or configurations))
        ],
        "observations": observations,
    }
    if args.drawn:
        record["steps_drawn"] = {
            "seed": DRAW_SEED,
            "space": ONE_DEVICE_DRAWS["small" if args.small else "full"],
            "steps": [
                run_part("step", args, drawn=drawn)
                for drawn in drawn_one_device(args.drawn, args.chip, args.small)
            ],
        }
    if args.drawn_meshes:
        record["meshes_drawn"] = {"seed": DRAW_SEED, "meshes": run_part("meshes", args)}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(record, indent=1) + "\n")
    from spmd_guide import gpu_runs

    gpu_runs.load(args.out)  # the file must be one the pages can read
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except MeasureError as error:
        sys.exit(f"gpu_measure: {error}")

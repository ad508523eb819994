"""Measuring sharding strategies side by side: memory per device, collectives and loss.

The model, its sharded creation and the training step are the lesson, so they are written on
the guide's page and passed in; this module only measures them. The training step runs on this
machine's devices; it can also be compiled, not run, for a TPU slice (see :mod:`spmd_guide.tpu`),
so that the TPU compiler's collectives and temporaries stand beside this build's.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import jax
import numpy as np
from flax import nnx
from jax.sharding import Mesh, NamedSharding
from jax.sharding import PartitionSpec as P

from spmd_guide import tpu
from spmd_guide.analysis import COLLECTIVES, bytes_per_device, count_collectives, total_bytes


@dataclass(frozen=True)
class StrategyMeasurement:
    """What one strategy on one mesh cost, measured on this machine's devices.

    ``param_bytes`` and ``optimizer_bytes`` are the largest over the devices, read from the
    shards of the live arrays as elements times bytes per element. The shard shapes are the same
    on every backend; the memory a device sets aside for them need not be (a TPU pads each array
    to whole tiles of its layout).
    ``temporary_bytes`` is the compiled training step's scratch memory per device, as this
    backend's compiler planned it (``memory_analysis().temp_size_in_bytes``): another backend's
    compiler plans differently. ``step_bytes`` is the whole memory the compiled step plans per
    device: its arguments and outputs (less the outputs written over donated arguments) and its
    temporaries; a step that is not donated can find scratch in its outputs' buffers, so compare
    this, not the temporaries alone. ``total_param_bytes`` counts the model's parameters once.
    ``program`` and ``tpu_program`` are the compiled steps' HLO text, for reading further.
    """

    strategy: str
    mesh_shape: tuple[int, ...]
    param_bytes: int
    optimizer_bytes: int
    temporary_bytes: int
    step_bytes: int
    total_param_bytes: int
    collectives: dict[str, int]
    losses: tuple[float, ...]
    tpu_topology: str | None = None
    tpu_temporary_bytes: int | None = None
    tpu_step_bytes: int | None = None
    tpu_collectives: dict[str, int] | None = None
    program: str = field(default="", repr=False)
    tpu_program: str | None = field(default=None, repr=False)

    @property
    def param_share(self) -> float:
        """The fraction of all parameter bytes that one device holds."""
        return self.param_bytes / self.total_param_bytes


def step_bytes(plan: Any) -> int:
    """A compiled step's whole memory per device, from its ``memory_analysis()``: arguments,
    outputs not written over donated arguments, and temporaries."""
    held = plan.argument_size_in_bytes + plan.output_size_in_bytes - plan.alias_size_in_bytes
    return int(held + plan.temp_size_in_bytes)


def measure_strategy(
    strategy: str,
    mesh: Mesh,
    create: Callable[[], tuple[nnx.Module, nnx.Optimizer[Any]]],
    train_step: Any,
    x: np.ndarray,
    y: np.ndarray,
    *,
    steps: int = 10,
    batch_size: int = 256,
    tpu_topology: str | None = None,
) -> StrategyMeasurement:
    """Create a sharded model with ``create()``, measure it, and train it for ``steps`` steps.

    Args:
        strategy: the name to report.
        mesh: the mesh ``create`` shards over; batches are split over its ``"data"`` axis.
        create: returns ``(model, optimizer)``, already laid out on ``mesh``.
        train_step: an ``nnx.jit`` function ``(model, optimizer, x, y) -> loss`` that updates
            the model and optimizer in place.
        x, y: the training data; batches of ``batch_size`` are taken from it in turn.
        tpu_topology: a TPU slice, such as ``"v5e:2x4"``, with as many chips as ``mesh`` has
            devices: the step is also compiled for it (not run), on a mesh of the same axes.

    Raises:
        ValueError: if ``x`` and ``y`` differ in length, the data is shorter than one batch, the
            batch does not divide over the ``"data"`` axis, or the TPU slice has a different
            number of chips from the mesh.
        spmd_guide.tpu.TpuCompilerUnavailable: if ``tpu_topology`` is given and libtpu is not
            installed.
    """
    if len(x) != len(y):
        raise ValueError(f"x has {len(x)} examples but y has {len(y)}; give one label each")
    if batch_size > len(x):
        raise ValueError(f"batch_size {batch_size} is larger than the {len(x)} examples")
    data = mesh.shape.get("data", 1)
    if batch_size % data:
        raise ValueError(
            f"batch {batch_size} is not divisible by the {data} devices on axis 'data'; "
            f"use a multiple of {data}, such as {data * -(-batch_size // data)}"
        )
    model, optimizer = create()
    batch = NamedSharding(mesh, P("data") if "data" in mesh.shape else P())

    def place(start: int) -> tuple[jax.Array, jax.Array]:
        return (
            jax.device_put(x[start : start + batch_size], batch),
            jax.device_put(y[start : start + batch_size], batch),
        )

    params = nnx.state(model, nnx.Param)
    compiled = train_step.lower(model, optimizer, *place(0)).compile()
    on_tpu: dict[str, Any] = {}
    if tpu_topology is not None:
        tpu_compiled = tpu.compile_like(
            train_step, model, optimizer, *place(0), topology=tpu_topology, mesh=mesh
        )
        on_tpu = dict(
            tpu_topology=tpu_topology,
            tpu_temporary_bytes=tpu_compiled.memory_analysis().temp_size_in_bytes,
            tpu_step_bytes=step_bytes(tpu_compiled.memory_analysis()),
            tpu_collectives=count_collectives(tpu_compiled),
            tpu_program=tpu_compiled.as_text(),
        )
    measurement = dict(
        strategy=strategy,
        mesh_shape=tuple(mesh.shape.values()),
        param_bytes=max(bytes_per_device(params).values()),
        optimizer_bytes=max(bytes_per_device(nnx.state(optimizer, nnx.OptState)).values()),
        temporary_bytes=compiled.memory_analysis().temp_size_in_bytes,
        step_bytes=step_bytes(compiled.memory_analysis()),
        total_param_bytes=total_bytes(params),
        collectives=count_collectives(compiled),
        program=compiled.as_text(),
    )
    batches = len(x) // batch_size
    losses = [
        float(train_step(model, optimizer, *place((i % batches) * batch_size)))
        for i in range(steps)
    ]
    return StrategyMeasurement(**measurement, **on_tpu, losses=tuple(losses))


def markdown_table(measurements: Sequence[StrategyMeasurement]) -> str:
    """The measurements as a Markdown table, one row each.

    A collective that no measurement contains has no column. When the measurements were also
    compiled for a TPU slice, the temporaries have a column per compiler and each collective's
    cell reads ``CPU / TPU``, this machine's count first.

    Raises:
        ValueError: if some measurements were compiled for a TPU slice and others were not, or
            for different slices: their columns would not compare like with like.
    """
    topologies = {m.tpu_topology for m in measurements}
    if len(topologies) > 1:
        raise ValueError(
            "measurements compiled for different TPU slices (or some for none): "
            f"{sorted(map(str, topologies))}; measure them all with the same tpu_topology"
        )
    on_tpu = topologies != {None}
    present = [
        name
        for name in COLLECTIVES
        if any(
            m.collectives[name] or (m.tpu_collectives and m.tpu_collectives[name])
            for m in measurements
        )
    ]
    # Every measurement ran on jax.devices(), the default backend's.
    here = jax.default_backend().upper()
    header = ["strategy", "mesh", "params / device", "share", "optimizer / device"]
    if on_tpu:
        header += [f"temporaries / device, {here}", "temporaries / device, TPU"]
        header += [f"step / device, {here}", "step / device, TPU"]
        header += [f"{name}, {here} / TPU" for name in present]
    else:
        header += ["temporaries / device", "step / device", *present]
    lines = ["| " + " | ".join(header) + " |", "|" + " --- |" * len(header)]
    for m in measurements:
        cells = [
            m.strategy,
            str(m.mesh_shape),
            f"{m.param_bytes:,} B",
            f"{m.param_share:.1%}",
            f"{m.optimizer_bytes:,} B",
            f"{m.temporary_bytes:,} B",
        ]
        if m.tpu_collectives is not None:
            cells += [
                f"{m.tpu_temporary_bytes:,} B",
                f"{m.step_bytes:,} B",
                f"{m.tpu_step_bytes:,} B",
            ]
            cells += [f"{m.collectives[name]} / {m.tpu_collectives[name]}" for name in present]
        else:
            cells.append(f"{m.step_bytes:,} B")
            cells += [str(m.collectives[name]) for name in present]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)

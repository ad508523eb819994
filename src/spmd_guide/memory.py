"""Will a training step fit? Bytes per device for a model too large to run here, from the compiler.

:func:`estimate_training_memory` lowers and compiles one Adam training step of a
:class:`ResidualMLP` for abstract inputs (``jax.ShapeDtypeStruct`` with shardings): nothing
the size of the model is ever allocated, so a billion-parameter model compiles for 64 CPU
devices in seconds. ``python -m spmd_guide.memory`` is the child process that
``in_child_process=True`` starts. With ``topology=`` the step is compiled by the TPU compiler
for a TPU slice that is described, not attached (:mod:`spmd_guide.tpu`), in this process.
"""

from __future__ import annotations

import json
import math
import sys
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import optax
from jax.sharding import AxisType, NamedSharding
from jax.sharding import PartitionSpec as P

from spmd_guide.environment import run_python

STRATEGIES = {
    "dp": "data parallel: every weight whole on every device, the batch split over 'data'",
    "fsdp": "fully sharded: every weight split over 'data' along the model width, like the batch",
    "tp": "tensor parallel: every weight split over 'model' along the hidden width, the batch "
    "over 'data' (2D when both axes are larger than 1)",
}
"""The strategies :func:`estimate_training_memory` knows, with what each lays out where."""

MESH_AXES = ("data", "model")
"""The mesh axes a strategy may use, in the order ``MemoryEstimate.mesh_shape`` gives them."""

GiB = 2**30
"""Bytes in a gibibyte, so a budget of 16 GiB is ``16 * GiB``."""


@dataclass(frozen=True)
class ResidualMLP:
    """The model estimated: ``depth`` blocks ``h + gelu(h @ up) @ down`` with no biases.

    ``up`` is ``(width, hidden)`` and ``down`` ``(hidden, width)``; the blocks' weights are
    stacked, and the step runs them with ``jax.lax.scan``, as large models do, so compiling
    takes the same time for any depth. The loss is the mean squared error against targets of
    the input's shape.
    """

    depth: int
    width: int
    hidden: int

    def __post_init__(self) -> None:
        for name in ("depth", "width", "hidden"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(
                    f"ResidualMLP {name} must be a positive whole number, got {value!r}"
                )

    @property
    def parameter_count(self) -> int:
        return 2 * self.depth * self.width * self.hidden


@dataclass(frozen=True)
class MemoryEstimate:
    """Bytes per device of one training step, by bucket.

    Stored bytes (``parameter_bytes``, ``optimizer_bytes``, ``batch_bytes``) are the shards'
    sizes under the strategy's layout: exact, and the same on every backend. ``gradient_bytes``
    is what the gradients take laid out like the parameters, as the update consumes them; inside
    the compiled step they are transient, part of ``temporary_bytes``. The compiler's figures
    (``argument_bytes``, ``output_bytes``, ``alias_bytes``, ``temporary_bytes``) come from
    ``memory_analysis()`` of the step compiled by ``compiler`` (``"cpu"``, or a TPU topology
    such as ``"v5e:2x4"``); ``temporary_bytes`` is that compiler's plan, and another compiler
    plans differently.
    """

    compiler: str
    strategy: str
    mesh_shape: tuple[int, int]
    batch_size: int
    parameter_count: int
    parameter_bytes: int
    gradient_bytes: int
    optimizer_bytes: int
    batch_bytes: int
    argument_bytes: int
    output_bytes: int
    alias_bytes: int
    temporary_bytes: int

    @property
    def total_bytes(self) -> int:
        """The most the step holds at once, as planned.

        Its inputs, its outputs not written over its donated inputs, and its temporaries.
        """
        return self.argument_bytes + self.output_bytes - self.alias_bytes + self.temporary_bytes

    def fits(self, budget_bytes: float) -> bool:
        """Whether :attr:`total_bytes` is within ``budget_bytes`` of device memory.

        Leave headroom below a device's capacity: its runtime and other buffers take some too.

        Raises:
            ValueError: if ``budget_bytes`` is not a positive number.
        """
        if isinstance(budget_bytes, bool) or not isinstance(budget_bytes, int | float):
            raise ValueError(
                f"memory budget must be a number of bytes, got {budget_bytes!r}; "
                "for 16 GiB pass 16 * GiB"
            )
        if not budget_bytes > 0:
            raise ValueError(
                f"memory budget must be a positive number of bytes, got {budget_bytes}; "
                "give one device's memory, such as 16 * GiB for 16 GiB"
            )
        return self.total_bytes <= budget_bytes


def _check_layout(
    model: ResidualMLP, strategy: str, data: int, model_axis: int, batch_size: int
) -> None:
    """Raise a ValueError naming the fix when the strategy cannot lay the model out on the mesh."""
    if strategy not in STRATEGIES:
        raise ValueError(
            f"unknown strategy {strategy!r}; choose one of {', '.join(map(repr, STRATEGIES))}"
        )
    for axis, size in zip(MESH_AXES, (data, model_axis), strict=True):
        if isinstance(size, bool) or not isinstance(size, int) or size < 1:
            raise ValueError(f"mesh axis {axis!r} needs a positive whole size, got {size!r}")
    if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
        raise ValueError(f"batch_size must be a positive whole number, got {batch_size!r}")
    if strategy in ("dp", "fsdp") and model_axis != 1:
        raise ValueError(
            f"strategy {strategy!r} uses no 'model' axis, but the mesh gives it {model_axis} "
            "devices, which would only hold copies; set model_axis=1, or choose 'tp'"
        )
    splits = [("the batch", batch_size, "data", data)]
    if strategy == "fsdp":
        splits.append(("the model width", model.width, "data", data))
    if strategy == "tp":
        splits.append(("the hidden width", model.hidden, "model", model_axis))
    for what, size, axis, devices in splits:
        if size % devices:
            nearest = min(
                (d for d in range(1, size + 1) if size % d == 0), key=lambda d: abs(d - devices)
            )
            raise ValueError(
                f"{what} ({size}) is not divisible by the {devices} devices of mesh axis "
                f"{axis!r} (strategy {strategy!r}); give that axis a size that divides "
                f"{size}, such as {nearest}, or change {what}"
            )


def estimate_training_memory(
    model: ResidualMLP,
    strategy: str,
    *,
    batch_size: int,
    data: int = 1,
    model_axis: int = 1,
    in_child_process: bool = False,
    topology: str | None = None,
) -> MemoryEstimate:
    """Compile one Adam training step of ``model`` for abstract inputs and measure it per device.

    Args:
        model: the model's sizes.
        strategy: one of :data:`STRATEGIES`.
        batch_size: rows of the global batch, each of ``model.width`` float32 inputs and targets.
        data, model_axis: the sizes of the mesh axes ``"data"`` and ``"model"``.
        in_child_process: compile in a new Python process with ``data * model_axis`` CPU
            devices, for a mesh larger than this process has devices for. Nothing is executed,
            so CPU devices can stand in for any accelerator's; only ``temporary_bytes`` is
            particular to the CPU compiler.
        topology: compile with the TPU compiler for this TPU slice instead (e.g. ``"v5e:2x4"``,
            ``"v5e:16x16"``), whose chips must number ``data * model_axis``; no child process
            is needed, whatever the slice's size.

    Raises:
        jax.errors.JaxRuntimeError: with ``RESOURCE_EXHAUSTED`` in its message, if the TPU
            compiler finds that the step does not fit in a chip's memory.
        spmd_guide.tpu.TpuCompilerUnavailable: if ``topology`` is given without libtpu.
        ValueError: if the strategy is unknown, it uses an axis it has no use for, a mesh axis
            does not divide the dimension it splits, or the mesh needs more devices than this
            process has (the message names ``in_child_process=True``).
    """
    _check_layout(model, strategy, data, model_axis, batch_size)
    devices = data * model_axis
    if topology is not None:
        from spmd_guide import tpu

        chips = tpu.compile_only_devices(topology)
        if len(chips) != devices:
            raise ValueError(
                f"a {data} x {model_axis} mesh needs {devices} devices, and {topology!r} has "
                f"{len(chips)} chips; choose axis sizes that multiply to {len(chips)}"
            )
        return _estimate_here(model, strategy, batch_size, data, model_axis, topology, chips)
    if in_child_process:
        return _estimate_in_child(model, strategy, batch_size, data, model_axis)

    if devices > jax.device_count():
        raise ValueError(
            f"a {data} x {model_axis} mesh needs {devices} devices, and this process has "
            f"{jax.device_count()}; pass in_child_process=True to compile in a new process "
            f"with {devices} CPU devices"
        )
    return _estimate_here(
        model, strategy, batch_size, data, model_axis, "cpu", jax.devices()[:devices]
    )


def _estimate_here(
    model: ResidualMLP,
    strategy: str,
    batch_size: int,
    data: int,
    model_axis: int,
    compiler: str,
    devices: Sequence[jax.Device],
) -> MemoryEstimate:
    mesh = jax.make_mesh(
        (data, model_axis),
        MESH_AXES,
        axis_types=(AxisType.Auto, AxisType.Auto),
        devices=devices,
    )
    up, down = {
        "dp": (P(), P()),
        "fsdp": (P(None, "data", None), P(None, None, "data")),
        "tp": (P(None, None, "model"), P(None, "model", None)),
    }[strategy]

    def abstract(shape: tuple[int, ...], spec: P) -> jax.ShapeDtypeStruct:
        return jax.ShapeDtypeStruct(shape, jnp.float32, sharding=NamedSharding(mesh, spec))

    params = {
        "up": abstract((model.depth, model.width, model.hidden), up),
        "down": abstract((model.depth, model.hidden, model.width), down),
    }
    batch = abstract((batch_size, model.width), P("data"))
    optimizer = optax.adam(1e-3)
    replicated = NamedSharding(mesh, P())
    opt_state = optax.tree_map_params(
        optimizer,
        lambda state, param: jax.ShapeDtypeStruct(
            state.shape, state.dtype, sharding=param.sharding
        ),
        jax.eval_shape(optimizer.init, params),
        params,
        transform_non_params=lambda state: jax.ShapeDtypeStruct(
            state.shape, state.dtype, sharding=replicated
        ),
    )

    def loss(params: Any, x: jax.Array, y: jax.Array) -> jax.Array:
        def block(h: jax.Array, weights: tuple[jax.Array, jax.Array]) -> tuple[jax.Array, None]:
            w_up, w_down = weights
            return h + jax.nn.gelu(h @ w_up) @ w_down, None

        h, _ = jax.lax.scan(block, x, (params["up"], params["down"]))
        return jnp.mean((h - y) ** 2)

    def step(params: Any, opt_state: Any, x: jax.Array, y: jax.Array) -> Any:
        value, grads = jax.value_and_grad(loss)(params, x, y)
        updates, opt_state = optimizer.update(grads, opt_state, params)
        return optax.apply_updates(params, updates), opt_state, value

    shardings = jax.tree.map(lambda leaf: leaf.sharding, (params, opt_state))
    compiled = (
        jax.jit(step, donate_argnums=(0, 1), out_shardings=(*shardings, replicated))
        .lower(params, opt_state, batch, batch)
        .compile()
    )
    analysis = compiled.memory_analysis()
    if analysis is None:
        raise RuntimeError(
            f"the {jax.default_backend()} compiler reports no memory analysis; estimate on the "
            "CPU with in_child_process=True"
        )
    param_bytes = _shard_bytes(params)
    return MemoryEstimate(
        compiler=compiler,
        strategy=strategy,
        mesh_shape=(data, model_axis),
        batch_size=batch_size,
        parameter_count=model.parameter_count,
        parameter_bytes=param_bytes,
        gradient_bytes=param_bytes,
        optimizer_bytes=_shard_bytes(opt_state),
        batch_bytes=2 * _shard_bytes(batch),
        argument_bytes=analysis.argument_size_in_bytes,
        output_bytes=analysis.output_size_in_bytes,
        alias_bytes=analysis.alias_size_in_bytes,
        temporary_bytes=analysis.temp_size_in_bytes,
    )


def _shard_bytes(tree: Any) -> int:
    """The bytes one device stores of ``tree``'s abstract arrays (their shards are equal)."""
    return sum(
        math.prod(leaf.sharding.shard_shape(leaf.shape)) * leaf.dtype.itemsize
        for leaf in jax.tree.leaves(tree)
    )


def _estimate_in_child(
    model: ResidualMLP, strategy: str, batch_size: int, data: int, model_axis: int
) -> MemoryEstimate:
    request = {"model": asdict(model), "strategy": strategy, "batch_size": batch_size}
    request |= {"data": data, "model_axis": model_axis}
    run = run_python(
        "-m", "spmd_guide.memory", json.dumps(request), devices=data * model_axis, cwd=Path.cwd()
    )
    fields = json.loads(run.stdout)
    return MemoryEstimate(**{**fields, "mesh_shape": tuple(fields["mesh_shape"])})


def _main(argv: list[str]) -> int:
    if len(argv) != 1:
        print(
            "usage: python -m spmd_guide.memory '<json request>'; "
            "call spmd_guide.memory.estimate_training_memory(..., in_child_process=True) instead",
            file=sys.stderr,
        )
        return 2
    request = json.loads(argv[0])
    model = ResidualMLP(**request.pop("model"))
    print(json.dumps(asdict(estimate_training_memory(model, **request))))
    return 0


if __name__ == "__main__":
    sys.exit(_main(sys.argv[1:]))

"""Measuring sharding strategies side by side on one model: memory, collectives and loss."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import optax
from flax import nnx

from spmd_guide.analysis import COLLECTIVES, bytes_per_device, count_collectives, total_bytes
from spmd_guide.meshes import make_mesh
from spmd_guide.models import MLP
from spmd_guide.strategies import plan_sharding
from spmd_guide.training import ShardedTrainer


@dataclass(frozen=True)
class StrategyMeasurement:
    """What one strategy on one mesh cost, measured on this machine's devices.

    ``param_bytes`` and ``optimizer_bytes`` are the largest over the devices; ``total_param_bytes``
    is the model's parameters counted once.
    """

    strategy: str
    mesh_shape: tuple[int, ...]
    param_bytes: int
    optimizer_bytes: int
    total_param_bytes: int
    collectives: dict[str, int]
    losses: tuple[float, ...]

    @property
    def param_share(self) -> float:
        """The fraction of all parameter bytes that one device holds."""
        return self.param_bytes / self.total_param_bytes


def measure_strategy(
    strategy: str,
    mesh_shape: tuple[int, ...],
    sizes: Sequence[int],
    x: np.ndarray,
    y: np.ndarray,
    *,
    steps: int = 10,
    batch_size: int = 256,
    learning_rate: float = 1e-3,
) -> StrategyMeasurement:
    """Build ``MLP(sizes)``, shard it by ``strategy`` on a mesh of ``mesh_shape``, and measure.

    The mesh's axes are ``("data",)`` for one axis and ``("data", "model")`` for two, with Auto
    axis types. The model is trained for ``steps`` steps of Adam on ``(x, y)``.

    Raises:
        ValueError: if the mesh does not fit the devices, the strategy does not apply to it, or
            the batch does not divide over it.
    """
    names = ("data",) if len(mesh_shape) == 1 else ("data", "model")
    mesh = make_mesh(mesh_shape, names, axis_types="auto")
    model = MLP(sizes, rngs=nnx.Rngs(0))
    trainer = ShardedTrainer(model, optax.adam(learning_rate), plan_sharding(model, strategy, mesh))
    params = nnx.state(trainer.model, nnx.Param)
    opt_state = nnx.state(trainer.optimizer, nnx.OptState)
    compiled = trainer.compile(x[:batch_size], y[:batch_size])
    return StrategyMeasurement(
        strategy=strategy,
        mesh_shape=tuple(mesh_shape),
        param_bytes=max(bytes_per_device(params).values()),
        optimizer_bytes=max(bytes_per_device(opt_state).values()),
        total_param_bytes=total_bytes(params),
        collectives=count_collectives(compiled),
        losses=tuple(trainer.fit(x, y, steps=steps, batch_size=batch_size)),
    )


def markdown_table(measurements: Sequence[StrategyMeasurement]) -> str:
    """The measurements as a Markdown table, one row each."""
    header = ["strategy", "mesh", "params / device", "share", "optimizer / device", *COLLECTIVES]
    lines = ["| " + " | ".join(header) + " |", "|" + " --- |" * len(header)]
    for m in measurements:
        cells = [
            m.strategy,
            str(m.mesh_shape),
            f"{m.param_bytes:,} B",
            f"{m.param_share:.1%}",
            f"{m.optimizer_bytes:,} B",
            *(str(m.collectives[name]) for name in COLLECTIVES),
        ]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)

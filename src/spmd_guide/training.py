"""A jitted, sharded training step for an NNX model, placed by a
:class:`~spmd_guide.strategies.ShardingPlan`.
"""

from __future__ import annotations

from typing import Any

import jax
import numpy as np
import optax
from flax import nnx
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P

from spmd_guide.strategies import ShardingPlan, apply_plan


def cross_entropy_loss(model: nnx.Module, x: jax.Array, y: jax.Array) -> jax.Array:
    """Mean softmax cross-entropy of ``model(x)`` against integer labels ``y``."""
    return optax.softmax_cross_entropy_with_integer_labels(model(x), y).mean()


def train_step(model: nnx.Module, optimizer: nnx.Optimizer, x: jax.Array, y: jax.Array):
    """One step of gradient descent, updating ``model`` and ``optimizer`` in place.

    Written for one device: sharding comes from where the arrays live, not from this code.
    Returns the loss before the update.
    """
    loss, grads = nnx.value_and_grad(cross_entropy_loss)(model, x, y)
    optimizer.update(model, grads)
    return loss


class ShardedTrainer:
    """Trains ``model`` with ``tx``, its parameters and batches placed as ``plan`` says.

    The trainer moves the parameters into place, builds ``nnx.Optimizer(model, tx,
    wrt=nnx.Param)`` (whose state is then sharded like the parameters), and compiles
    :func:`train_step` with ``jax.jit``. The jitted step takes and returns the whole
    model-and-optimizer state with explicit shardings, the batch split as ``plan.batch`` says,
    and the loss replicated on every device.

    Read the current model and optimizer from :attr:`model` and :attr:`optimizer`.
    """

    def __init__(self, model: nnx.Module, tx: optax.GradientTransformation, plan: ShardingPlan):
        self.plan = plan
        mesh = plan.mesh
        apply_plan(model, plan)
        optimizer = nnx.Optimizer(model, tx, wrt=nnx.Param)
        self._graphdef, state = nnx.split((model, optimizer))
        # Step counters and other small optimizer leaves start on one device; replicate them.
        self.state_shardings = jax.tree.map(
            lambda leaf: (
                leaf.sharding
                if isinstance(leaf.sharding, NamedSharding) and leaf.sharding.mesh == mesh
                else NamedSharding(mesh, P())
            ),
            state,
        )
        self.state = jax.device_put(state, self.state_shardings)
        self._replicated = NamedSharding(mesh, P())
        self._compiled_steps: dict[int, Any] = {}

    @property
    def model(self) -> nnx.Module:
        """The model with the current parameters."""
        return nnx.merge(self._graphdef, self.state)[0]

    @property
    def optimizer(self) -> nnx.Optimizer:
        """The optimizer with the current state."""
        return nnx.merge(self._graphdef, self.state)[1]

    def shard_batch(self, x: Any, y: Any) -> tuple[jax.Array, jax.Array]:
        """Place a batch as the plan says.

        Raises:
            ValueError: if the batch size does not divide over the batch axes, or ``x`` and
                ``y`` disagree on it.
        """
        if len(x) != len(y):
            raise ValueError(f"x has {len(x)} examples but y has {len(y)}; give one label each")
        sharding = self.plan.batch_sharding(len(x))
        return jax.device_put(x, sharding), jax.device_put(y, sharding)

    def jitted_step(self, batch_size: int):
        """The ``jax.jit``-compiled step for batches of ``batch_size``, with its shardings."""
        if batch_size not in self._compiled_steps:
            batch = self.plan.batch_sharding(batch_size)
            graphdef = self._graphdef

            def step(state, x, y):
                model, optimizer = nnx.merge(graphdef, state)
                # Say inside the step, too, how the batch is split, so the layout holds
                # even if a caller passes an unplaced batch.
                x = jax.lax.with_sharding_constraint(x, batch)
                loss = train_step(model, optimizer, x, y)
                return nnx.state((model, optimizer)), loss

            self._compiled_steps[batch_size] = jax.jit(
                step,
                in_shardings=(self.state_shardings, batch, batch),
                out_shardings=(self.state_shardings, self._replicated),
            )
        return self._compiled_steps[batch_size]

    def step(self, x: Any, y: Any) -> jax.Array:
        """Run one training step on the batch ``(x, y)`` and return its (replicated) loss."""
        x, y = self.shard_batch(x, y)
        self.state, loss = self.jitted_step(len(x))(self.state, x, y)
        return loss

    def compile(self, x: Any, y: Any):
        """The compiled step for this batch's shapes, for inspecting its HLO and collectives."""
        x, y = self.shard_batch(x, y)
        return self.jitted_step(len(x)).lower(self.state, x, y).compile()

    def fit(self, x: np.ndarray, y: np.ndarray, *, steps: int, batch_size: int) -> list[float]:
        """Train for ``steps`` steps on batches cycled through ``(x, y)``; return the losses.

        Raises:
            ValueError: if ``batch_size`` is larger than the data or does not divide over the
                batch axes.
        """
        if batch_size > len(x):
            raise ValueError(f"batch_size {batch_size} is larger than the {len(x)} examples")
        self.plan.batch_sharding(batch_size)
        batches = len(x) // batch_size
        losses = []
        for i in range(steps):
            start = (i % batches) * batch_size
            loss = self.step(x[start : start + batch_size], y[start : start + batch_size])
            losses.append(float(loss))
        return losses

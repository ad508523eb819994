from __future__ import annotations

import numpy as np
import optax
import pytest
from flax import nnx
from jax.sharding import PartitionSpec as P

from spmd_guide import make_mesh
from spmd_guide.models import MLP, synthetic_classification
from spmd_guide.strategies import plan_sharding
from spmd_guide.training import ShardedTrainer

SIZES = (16, 64, 64, 8)


def strategy_meshes(n):
    """Each strategy with a mesh it applies to on n devices."""
    yield "dp", make_mesh((n,), ("data",), axis_types="auto")
    yield "fsdp", make_mesh((n,), ("data",), axis_types="auto")
    yield "tp", make_mesh((1, n), ("data", "model"), axis_types="auto")
    if n % 2 == 0:
        yield "2d", make_mesh((n // 2, 2), ("data", "model"), axis_types="auto")


def train(strategy, mesh, steps=20):
    x, y = synthetic_classification(256, SIZES[0], SIZES[-1])
    model = MLP(SIZES, rngs=nnx.Rngs(0))
    trainer = ShardedTrainer(model, optax.adam(1e-2), plan_sharding(model, strategy, mesh))
    return trainer, trainer.fit(x, y, steps=steps, batch_size=64)


@pytest.fixture(scope="module")
def one_device_losses(cpu_devices):
    mesh = make_mesh((1,), ("data",), axis_types="auto", devices=cpu_devices[:1])
    return train("dp", mesh)[1]


def test_the_loss_falls(one_device_losses):
    assert one_device_losses[-1] < 0.6 * one_device_losses[0]


def test_every_strategy_trains_like_one_device(cpu_devices, one_device_losses):
    for strategy, mesh in strategy_meshes(len(cpu_devices)):
        _, losses = train(strategy, mesh)
        np.testing.assert_allclose(losses, one_device_losses, rtol=2e-4, err_msg=strategy)


def test_parameters_keep_their_planned_shardings_and_the_loss_is_replicated(cpu_devices):
    n = len(cpu_devices)
    mesh = make_mesh((1, n), ("data", "model"), axis_types="auto")
    trainer, _ = train("tp", mesh, steps=2)
    x, y = synthetic_classification(64, SIZES[0], SIZES[-1])
    loss = trainer.step(x, y)
    assert loss.sharding.is_fully_replicated
    kernel = trainer.model.layers[1].kernel[...]
    assert kernel.sharding.spec == (P("model") if n > 1 else P())
    mu = trainer.optimizer.opt_state[0].mu["layers"][1]["kernel"][...]
    assert mu.sharding.is_equivalent_to(kernel.sharding, 2)


def test_a_batch_that_does_not_divide_is_refused_before_running(cpu_devices):
    n = len(cpu_devices)
    if n == 1:
        pytest.skip("every batch divides over one device")
    trainer, _ = train("dp", make_mesh((n,), ("data",), axis_types="auto"), steps=1)
    x, y = synthetic_classification(n + 1, SIZES[0], SIZES[-1])
    with pytest.raises(ValueError, match=f"batch {n + 1} is not divisible"):
        trainer.step(x, y)


def test_inputs_and_labels_must_pair_up(cpu_devices):
    trainer, _ = train("dp", make_mesh((len(cpu_devices),), ("data",), axis_types="auto"), steps=1)
    x, y = synthetic_classification(64, SIZES[0], SIZES[-1])
    with pytest.raises(ValueError, match="x has 64 examples but y has 32"):
        trainer.step(x, y[:32])

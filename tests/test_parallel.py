"""Each hand-written strategy equals the one-device computation, at this run's device count."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.sharding import AxisType

from spmd_guide.analysis import bytes_per_device, count_collectives
from spmd_guide.parallel import data_parallel, fsdp, mlp, pipeline, tensor_parallel


def mesh_of(name, devices, kind=AxisType.Explicit):
    return jax.make_mesh((len(devices),), (name,), axis_types=(kind,), devices=devices)


@pytest.fixture
def problem(cpu_devices):
    params = mlp.init_params(16, 32, 4)
    x, y = mlp.regression_data(64, 16, 4)
    return params, x, y, mlp.sgd_step(params, x, y, 0.1)


def assert_same_params(got, want):
    assert set(got) == set(want)
    for name in want:
        np.testing.assert_allclose(
            np.asarray(got[name]), np.asarray(want[name]), rtol=2e-5, atol=1e-6
        )


@pytest.mark.parametrize("kind", [AxisType.Explicit, AxisType.Auto])
def test_data_parallel_both_ways_equals_one_device(cpu_devices, problem, kind):
    params, x, y, want = problem
    mesh = mesh_of("data", cpu_devices, kind)
    assert_same_params(data_parallel.step_shard_map(params, x, y, mesh, 0.1), want)
    assert_same_params(data_parallel.step_jit(params, x, y, mesh, 0.1), want)


def test_data_parallel_parameters_stay_replicated(cpu_devices, problem):
    params, x, y, _ = problem
    updated = data_parallel.step_shard_map(params, x, y, mesh_of("data", cpu_devices), 0.1)
    assert all(p.sharding.is_fully_replicated for p in updated.values())


def test_fsdp_equals_one_device_and_keeps_weights_split(cpu_devices, problem):
    params, x, y, want = problem
    mesh = mesh_of("data", cpu_devices)
    updated = fsdp.step(fsdp.shard_params(params, mesh), x, y, mesh, 0.1)
    assert_same_params(updated, want)
    n = len(cpu_devices)
    assert updated["w1"].addressable_shards[0].data.shape == (16 // n, 32)
    assert updated["b1"].sharding.is_fully_replicated


def test_fsdp_stores_an_nth_of_the_weights(cpu_devices, problem):
    params, *_ = problem
    n = len(cpu_devices)
    mesh = mesh_of("data", cpu_devices)
    fsdp_bytes = max(bytes_per_device(fsdp.shard_params(params, mesh)).values())
    weights = (16 * 32 + 32 * 4) * 4
    biases = (32 + 4) * 4
    assert fsdp_bytes == weights // n + biases


def test_fsdp_refuses_rows_that_do_not_split(cpu_devices):
    if len(cpu_devices) == 1:
        pytest.skip("every row count splits over one device")
    params = mlp.init_params(len(cpu_devices) + 1, 8, 2)
    with pytest.raises(ValueError, match="rows, which do not split"):
        fsdp.shard_params(params, mesh_of("data", cpu_devices))


def test_tensor_parallel_equals_one_device_with_one_all_reduce(cpu_devices, problem):
    params, x, *_ = problem
    mesh = mesh_of("model", cpu_devices)
    sharded = tensor_parallel.shard_params(params, mesh)
    np.testing.assert_allclose(
        np.asarray(tensor_parallel.forward(sharded, x, mesh)),
        np.asarray(mlp.forward(params, x)),
        rtol=1e-5,
        atol=1e-5,
    )
    compiled = jax.jit(lambda p, v: tensor_parallel.forward(p, v, mesh)).lower(sharded, x).compile()
    counts = count_collectives(compiled)
    assert counts["all-reduce"] == 1
    assert sum(counts.values()) == 1


def test_tensor_parallel_refuses_a_hidden_size_that_does_not_split(cpu_devices):
    if len(cpu_devices) == 1:
        pytest.skip("every size splits over one device")
    params = mlp.init_params(4, len(cpu_devices) + 1, 2)
    with pytest.raises(ValueError, match="hidden size"):
        tensor_parallel.shard_params(params, mesh_of("model", cpu_devices))


@pytest.mark.parametrize("microbatches", [1, 4, 8])
def test_pipeline_equals_the_sequential_model(cpu_devices, microbatches):
    n = len(cpu_devices)
    layers = pipeline.init_layers(n, 8)
    x = jnp.asarray(np.random.default_rng(0).normal(size=(32, 8)), jnp.float32)
    out, busy = pipeline.forward(layers, x, mesh_of("stage", cpu_devices), microbatches)
    np.testing.assert_allclose(
        np.asarray(out), np.asarray(pipeline.sequential(layers, x)), atol=1e-5
    )
    # Every stage works on every microbatch once; the rest of the ticks are bubble.
    assert np.asarray(busy).tolist() == [microbatches] * n
    ticks = microbatches + n - 1
    assert pipeline.bubble_fraction(n, microbatches) == pytest.approx(1 - microbatches / ticks)


def test_pipeline_refuses_mismatched_layers_and_batches(cpu_devices):
    n = len(cpu_devices)
    mesh = mesh_of("stage", cpu_devices)
    with pytest.raises(ValueError, match="one per device"):
        pipeline.forward(pipeline.init_layers(n + 1, 4), jnp.ones((8, 4)), mesh, 2)
    with pytest.raises(ValueError, match="does not split into 3 microbatches"):
        pipeline.forward(pipeline.init_layers(n, 4), jnp.ones((8, 4)), mesh, 3)

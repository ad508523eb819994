from __future__ import annotations

import re

import jax
import pytest
from flax import nnx
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P

from spmd_guide import make_mesh
from spmd_guide.analysis import bytes_per_device, total_bytes
from spmd_guide.models import MLP
from spmd_guide.strategies import (
    STRATEGIES,
    apply_plan,
    batch_sharding,
    check_spec,
    local_shape,
    plan_sharding,
)

SIZES = (16, 64, 64, 8)


@pytest.fixture
def model():
    return MLP(SIZES, rngs=nnx.Rngs(0))


@pytest.fixture
def n(cpu_devices):
    return len(cpu_devices)


def data_mesh(n):
    return make_mesh((n,), ("data",), axis_types="auto")


def model_mesh(n):
    return make_mesh((1, n), ("data", "model"), axis_types="auto")


def test_data_parallel_replicates_every_parameter(model, n):
    plan = plan_sharding(model, "dp", data_mesh(n))
    assert set(plan.param_specs().values()) == {P()}
    assert plan.batch == P("data")


def test_tensor_parallel_alternates_columns_and_rows(model, n):
    specs = plan_sharding(model, "tp", model_mesh(n)).param_specs()
    assert specs["layers/0/kernel"] == P(None, "model")
    assert specs["layers/0/bias"] == P("model")
    assert specs["layers/1/kernel"] == P("model", None)
    assert specs["layers/1/bias"] == P()
    # The last layer has 8 outputs: split when 8 divides over the model axis, else whole.
    assert specs["layers/2/kernel"] == (P(None, "model") if 8 % n == 0 else P())


def test_two_d_splits_parameters_over_model_and_batch_over_data(model, n):
    if n % 2:
        pytest.skip("a 2D mesh of data x 2 needs an even device count")
    plan = plan_sharding(model, "2d", make_mesh((n // 2, 2), ("data", "model"), axis_types="auto"))
    assert plan.param_specs()["layers/0/kernel"] == P(None, "model")
    assert plan.batch == P("data")


def test_fsdp_shards_large_parameters_over_all_devices_and_keeps_small_ones_whole(model, n):
    plan = plan_sharding(model, "fsdp", data_mesh(n), fsdp_min_size=1024)
    specs = plan.param_specs()
    assert specs["layers/0/kernel"] == P("data")  # (16, 64): 1024 elements, 16 rows
    assert specs["layers/1/kernel"] == P("data")
    assert specs["layers/0/bias"] == P()  # 64 elements: below the threshold
    assert plan.batch == P("data")


def test_fsdp_on_a_2d_mesh_uses_both_axes(model, n):
    if n % 2:
        pytest.skip("needs an even device count")
    mesh = make_mesh((n // 2, 2), ("data", "model"), axis_types="auto")
    plan = plan_sharding(model, "fsdp", mesh)
    assert plan.param_specs()["layers/1/kernel"] == P(("data", "model"))
    assert plan.batch == P(("data", "model"))


def test_fsdp_memory_per_device_is_near_an_nth_of_the_total(n):
    model = MLP((64, 256, 256, 16), rngs=nnx.Rngs(0))
    apply_plan(model, plan_sharding(model, "fsdp", data_mesh(n)))
    params = nnx.state(model, nnx.Param)
    per_device = bytes_per_device(params)
    assert len(per_device) == n
    # Only the small biases (256 + 256 + 16 floats) stay whole on every device.
    replicated = (256 + 256 + 16) * 4
    assert max(per_device.values()) == (total_bytes(params) - replicated) // n + replicated


def test_apply_plan_places_each_parameter_as_planned(model, n):
    plan = plan_sharding(model, "tp", model_mesh(n))
    apply_plan(model, plan)
    for path, spec in plan.param_specs().items():
        layer, leaf = path.split("/")[1:]
        array = getattr(model.layers[int(layer)], leaf)[...]
        assert array.sharding.is_equivalent_to(NamedSharding(plan.mesh, spec), array.ndim)
        assert array.addressable_shards[0].data.shape == local_shape(array.shape, spec, plan.mesh)


def test_plan_prints_as_a_table(model, n):
    text = str(plan_sharding(model, "tp", model_mesh(n)))
    assert text.startswith(f"strategy 'tp' on mesh (data=1, model={n}); batch P('data')")
    row = rf"layers/1/kernel\s+\(64, 64\)\s+P\('model', None\)\s+\({64 // n}, 64\)"
    assert re.search(row, text), text


def test_unknown_strategy_lists_the_known_ones(model, n):
    with pytest.raises(ValueError, match="unknown strategy 'zero'; choose one of dp, tp, 2d, fsdp"):
        plan_sharding(model, "zero", data_mesh(n))
    assert STRATEGIES == ("dp", "tp", "2d", "fsdp")


@pytest.mark.parametrize(("strategy", "axis"), [("tp", "model"), ("2d", "model")])
def test_a_strategy_on_a_mesh_without_its_axis_says_which_mesh_to_build(model, n, strategy, axis):
    with pytest.raises(ValueError, match=rf"shards over mesh axis '{axis}'.*e\.g\. make_mesh"):
        plan_sharding(model, strategy, data_mesh(n))


def test_an_unknown_axis_in_a_spec_is_named(n):
    with pytest.raises(ValueError, match=r"names axis 'batch', but the mesh has axes \('data',\)"):
        check_spec(data_mesh(n), P("batch"))


def test_a_batch_that_does_not_divide_says_how_to_pad(n):
    if n == 1:
        pytest.skip("every batch divides over one device")
    with pytest.raises(ValueError) as error:
        batch_sharding(data_mesh(n), 10 * n + 1)
    message = str(error.value)
    assert f"batch {10 * n + 1} is not divisible by the {n} devices on axis 'data'" in message
    assert f"pad to {11 * n}" in message


def test_the_batch_error_lists_device_counts_that_would_divide(n):
    if n < 4:
        pytest.skip("needs 4 devices")
    mesh = make_mesh((4,), ("data",), devices=jax.devices()[:4])
    with pytest.raises(
        ValueError, match=r"pad to 32 or use a mesh of 2, 3, 5, 6, 10 or 15 devices"
    ):
        batch_sharding(mesh, 30)
    assert batch_sharding(mesh, 32).spec == P("data")


def test_a_plan_for_another_model_is_refused(model, n):
    other = MLP((16, 8), rngs=nnx.Rngs(0))
    with pytest.raises(ValueError, match="made for another model"):
        apply_plan(other, plan_sharding(model, "dp", data_mesh(n)))

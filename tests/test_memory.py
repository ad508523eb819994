from __future__ import annotations

import jax
import pytest

from spmd_guide.memory import (
    STRATEGIES,
    GiB,
    MemoryEstimate,
    ResidualMLP,
    _main,
    estimate_training_memory,
)

SMALL = ResidualMLP(depth=3, width=64, hidden=256)


def closed_form_parameter_bytes(model: ResidualMLP, shards: int) -> float:
    return model.parameter_count * 4 / shards


@pytest.mark.parametrize(
    ("strategy", "data", "model_axis", "shards"),
    [("dp", "n", 1, 1), ("fsdp", "n", 1, "n"), ("tp", 1, "n", "n")],
)
def test_stored_bytes_match_the_closed_form_and_the_compilers_arguments(
    strategy, data, model_axis, shards
):
    n = jax.device_count()
    data, model_axis, shards = (n if v == "n" else v for v in (data, model_axis, shards))
    estimate = estimate_training_memory(
        SMALL, strategy, batch_size=8 * n, data=data, model_axis=model_axis
    )

    expected = closed_form_parameter_bytes(SMALL, shards)
    assert estimate.parameter_bytes == expected
    # Adam's two moments, laid out like the parameters, and its replicated step count.
    assert 2 * expected <= estimate.optimizer_bytes <= 2 * expected + 8
    assert estimate.batch_bytes == 2 * (8 * n // data) * SMALL.width * 4
    assert estimate.argument_bytes == (
        estimate.parameter_bytes + estimate.optimizer_bytes + estimate.batch_bytes
    )
    assert estimate.alias_bytes == estimate.parameter_bytes + estimate.optimizer_bytes
    assert estimate.temporary_bytes > 0
    assert estimate.mesh_shape == (data, model_axis)
    assert estimate.total_bytes == (
        estimate.argument_bytes
        + estimate.output_bytes
        - estimate.alias_bytes
        + estimate.temporary_bytes
    )


def test_fits_compares_the_total_with_the_budget():
    estimate = estimate_training_memory(SMALL, "dp", batch_size=jax.device_count())
    assert estimate.fits(estimate.total_bytes)
    assert not estimate.fits(estimate.total_bytes - 1)
    assert estimate.fits(16 * GiB)


@pytest.mark.parametrize("budget", [-1, 0, -16 * GiB])
def test_a_budget_that_is_not_positive_is_refused(budget):
    estimate = estimate_training_memory(SMALL, "dp", batch_size=jax.device_count())
    with pytest.raises(ValueError, match=r"positive number of bytes.*16 \* GiB"):
        estimate.fits(budget)


def test_a_budget_that_is_not_a_number_is_refused():
    estimate = estimate_training_memory(SMALL, "dp", batch_size=jax.device_count())
    with pytest.raises(ValueError, match=r"number of bytes, got '16GB'"):
        estimate.fits("16GB")  # type: ignore[arg-type]


def test_an_unknown_strategy_names_the_known_ones():
    with pytest.raises(ValueError, match=r"unknown strategy 'zero3'.*'dp', 'fsdp', 'tp'"):
        estimate_training_memory(SMALL, "zero3", batch_size=8)
    assert set(STRATEGIES) == {"dp", "fsdp", "tp"}


@pytest.mark.parametrize(
    ("model", "strategy", "batch_size", "mesh", "message"),
    [
        (
            ResidualMLP(depth=2, width=100, hidden=256),
            "fsdp",
            8,
            {"data": 8},
            r"the model width \(100\) is not divisible by the 8 devices of mesh axis 'data' "
            r"\(strategy 'fsdp'\); give that axis a size that divides 100, such as 10",
        ),
        (
            ResidualMLP(depth=2, width=64, hidden=300),
            "tp",
            8,
            {"model_axis": 8},
            r"the hidden width \(300\) is not divisible by the 8 devices of mesh axis 'model'",
        ),
        (
            SMALL,
            "dp",
            12,
            {"data": 8},
            r"the batch \(12\) is not divisible by the 8 devices of mesh axis 'data'.*such as 6",
        ),
    ],
)
def test_a_mesh_that_does_not_divide_a_dimension_names_the_dimension_and_a_fix(
    model, strategy, batch_size, mesh, message
):
    with pytest.raises(ValueError, match=message):
        estimate_training_memory(model, strategy, batch_size=batch_size, **mesh)


def test_a_strategy_given_an_axis_it_does_not_use_says_so():
    with pytest.raises(
        ValueError, match=r"'fsdp' uses no 'model' axis.*set model_axis=1, or choose 'tp'"
    ):
        estimate_training_memory(SMALL, "fsdp", batch_size=8, data=2, model_axis=4)


@pytest.mark.parametrize(
    ("sizes", "message"),
    [
        ({"data": 0}, r"mesh axis 'data' needs a positive whole size, got 0"),
        ({"model_axis": 2.5}, r"mesh axis 'model' needs a positive whole size, got 2.5"),
        ({"batch_size": -4}, r"batch_size must be a positive whole number, got -4"),
    ],
)
def test_sizes_that_are_not_positive_whole_numbers_are_refused(sizes, message):
    arguments = {"batch_size": 8, **sizes}
    with pytest.raises(ValueError, match=message):
        estimate_training_memory(SMALL, "dp", **arguments)


def test_a_model_of_no_size_is_refused():
    with pytest.raises(
        ValueError, match=r"ResidualMLP width must be a positive whole number, got 0"
    ):
        ResidualMLP(depth=2, width=0, hidden=8)


def test_a_mesh_larger_than_this_process_points_to_a_child_process():
    more = 2 * jax.device_count()
    with pytest.raises(ValueError, match=rf"needs {more} devices.*in_child_process=True"):
        estimate_training_memory(SMALL, "fsdp", batch_size=more, data=more)


@pytest.mark.once
def test_a_child_process_compiles_for_more_devices_than_this_one_has():
    estimate = estimate_training_memory(
        SMALL, "fsdp", batch_size=64, data=16, in_child_process=True
    )
    assert isinstance(estimate, MemoryEstimate)
    assert estimate.mesh_shape == (16, 1)
    assert estimate.parameter_bytes == closed_form_parameter_bytes(SMALL, 16)
    assert estimate.argument_bytes == (
        estimate.parameter_bytes + estimate.optimizer_bytes + estimate.batch_bytes
    )


def test_the_child_entry_point_explains_its_usage(capsys):
    assert _main([]) == 2
    assert "in_child_process=True" in capsys.readouterr().err


@pytest.mark.once
def test_the_tpu_compiler_plans_a_whole_pod_in_this_process():
    estimate = estimate_training_memory(
        SMALL, "fsdp", batch_size=256, data=64, model_axis=1, topology="v5e:8x8"
    )
    assert estimate.compiler == "v5e:8x8"
    assert estimate.mesh_shape == (64, 1)
    assert estimate.parameter_bytes == closed_form_parameter_bytes(SMALL, 64)


@pytest.mark.once
def test_the_tpu_compiler_refuses_a_step_larger_than_a_chip():
    big = ResidualMLP(depth=30, width=2048, hidden=8192)  # 12 GiB of state per chip unsplit
    with pytest.raises(jax.errors.JaxRuntimeError, match=r"RESOURCE_EXHAUSTED"):
        estimate_training_memory(big, "dp", batch_size=4096, data=8, topology="v5e:2x4")
    split = estimate_training_memory(big, "fsdp", batch_size=4096, data=8, topology="v5e:2x4")
    assert split.fits(16e9)


@pytest.mark.once
def test_a_mesh_that_is_not_the_slice_is_refused_with_its_chip_count():
    with pytest.raises(ValueError, match=r"'v5e:2x4' has 8 chips"):
        estimate_training_memory(SMALL, "fsdp", batch_size=64, data=4, topology="v5e:2x4")

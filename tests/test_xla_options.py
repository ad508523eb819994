"""XLA's options read from jaxlib: the descriptor's fields, and values that follow XLA_FLAGS."""

from __future__ import annotations

import pytest

from spmd_guide import xla_options


def test_the_descriptor_names_every_option_with_its_number_and_type():
    options = xla_options.options()
    assert len(options) > 200
    threshold = options["xla_gpu_all_reduce_combine_threshold_bytes"]
    assert (threshold.type, threshold.repeated) == ("int64", False)
    assert options["xla_gpu_enable_latency_hiding_scheduler"].type == "bool"
    assert options["xla_gpu_pipeline_all_gather"].enum[2] == "COLLECTIVE_PIPELINING_MODE_ON"
    assert options["xla_gpu_enable_command_buffer"].repeated
    assert len({option.number for option in options.values()}) == len(options)


def test_values_follow_xla_flags_field_by_field():
    # Each flag set to a value its default is not, in one process: the reading must move exactly
    # these options, so a field read under the wrong number or type shows up here.
    defaults = xla_options.read().values
    changed = {
        "xla_gpu_all_reduce_combine_threshold_bytes": 12345,
        "xla_gpu_all_gather_combine_threshold_bytes": 23456,
        "xla_gpu_reduce_scatter_combine_threshold_bytes": 34567,
        "xla_gpu_threshold_for_windowed_einsum_mib": 7,
        "xla_gpu_enable_latency_hiding_scheduler": True,
        "xla_gpu_multi_streamed_windowed_einsum": False,
        "xla_gpu_pipeline_reduce_scatter": "COLLECTIVE_PIPELINING_MODE_OFF",
        "xla_gpu_pgle_profile_file_or_directory_path": "profile.pb",
    }
    assert all(defaults[name] != value for name, value in changed.items())

    def flag(value):
        if isinstance(value, bool):
            return str(value).lower()
        if isinstance(value, str) and value.startswith("COLLECTIVE_PIPELINING_MODE_"):
            return value.removeprefix("COLLECTIVE_PIPELINING_MODE_").lower()
        return value

    flags = " ".join(f"--{name}={flag(value)}" for name, value in changed.items())
    moved = xla_options.read(flags).values
    assert {name: v for name, v in moved.items() if defaults[name] != v} == changed


def test_a_flag_xla_refuses_is_reported_with_what_it_said():
    with pytest.raises(xla_options.XlaOptionsUnreadable, match="xla_no_such_flag"):
        xla_options.read("--xla_no_such_flag=1")


def test_a_serialized_message_decodes_to_zeros_where_unset():
    values = xla_options.decode_debug_options(b"")
    assert values["xla_gpu_enable_latency_hiding_scheduler"] is False
    assert values["xla_gpu_pipeline_all_gather"] == "COLLECTIVE_PIPELINING_MODE_DEFAULT"
    assert values["xla_gpu_disable_async_collectives"] == []

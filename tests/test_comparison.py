from __future__ import annotations

import numpy as np
import pytest

from spmd_guide.analysis import COLLECTIVES
from spmd_guide.comparison import markdown_table, measure_strategy
from spmd_guide.models import synthetic_classification

SIZES = (16, 64, 64, 8)


@pytest.fixture(scope="module")
def data():
    return synthetic_classification(256, SIZES[0], SIZES[-1])


def test_data_parallel_holds_everything_and_only_all_reduces(cpu_devices, data):
    n = len(cpu_devices)
    m = measure_strategy("dp", (n,), SIZES, *data, steps=3, batch_size=64)
    assert m.param_bytes == m.total_param_bytes
    assert m.param_share == 1.0
    # Adam keeps two moments per parameter, plus a step count.
    assert 2 * m.param_bytes <= m.optimizer_bytes <= 2 * m.param_bytes + 16
    assert m.collectives["all-gather"] == 0
    assert len(m.losses) == 3


def test_fsdp_divides_parameter_memory_and_trains_like_data_parallel(cpu_devices, data):
    n = len(cpu_devices)
    dp = measure_strategy("dp", (n,), SIZES, *data, steps=3, batch_size=64)
    fsdp = measure_strategy("fsdp", (n,), SIZES, *data, steps=3, batch_size=64)
    # Under the 1024-element threshold, kept whole: the biases and the (64, 8) last kernel.
    whole = (64 + 64 + 8 + 64 * 8) * 4
    assert fsdp.param_bytes == (fsdp.total_param_bytes - whole) // n + whole
    np.testing.assert_allclose(fsdp.losses, dp.losses, rtol=1e-4)


def test_the_table_has_a_row_per_measurement(cpu_devices, data):
    n = len(cpu_devices)
    m = measure_strategy("tp", (1, n), SIZES, *data, steps=1, batch_size=64)
    table = markdown_table([m, m]).splitlines()
    assert len(table) == 4
    assert table[0].split(" | ")[-len(COLLECTIVES) :][0] == COLLECTIVES[0]
    assert table[2].startswith(f"| tp | (1, {n}) | {m.param_bytes:,} B |")


def test_a_mesh_that_does_not_fit_is_refused(cpu_devices, data):
    with pytest.raises(ValueError, match="needs"):
        measure_strategy("dp", (len(cpu_devices) + 1,), SIZES, *data)

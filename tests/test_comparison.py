from __future__ import annotations

import jax
import numpy as np
import optax
import pytest
from flax import nnx
from jax.sharding import AxisType

from spmd_guide import tpu
from spmd_guide.analysis import COLLECTIVES
from spmd_guide.comparison import markdown_table, measure_strategy

RULES = {
    "dp": (("embed", None), ("hidden", None)),
    "fsdp": (("embed", "data"), ("hidden", None)),
}


class TwoLayers(nnx.Module):
    def __init__(self, rngs: nnx.Rngs):
        def dense(n_in, n_out, axes):
            return nnx.Linear(
                n_in,
                n_out,
                kernel_init=nnx.with_partitioning(nnx.initializers.lecun_normal(), axes),
                bias_init=nnx.with_partitioning(nnx.initializers.zeros_init(), axes[1:]),
                rngs=rngs,
            )

        self.up = dense(16, 64, ("embed", "hidden"))
        self.down = dense(64, 8, ("hidden", None))

    def __call__(self, x):
        return self.down(nnx.relu(self.up(x)))


@nnx.jit
def train_step(model, optimizer, x, y):
    def loss_fn(model):
        return optax.softmax_cross_entropy_with_integer_labels(model(x), y).mean()

    loss, grads = nnx.value_and_grad(loss_fn)(model)
    optimizer.update(model, grads)
    return loss


def model_and_optimizer():
    model = TwoLayers(nnx.Rngs(0))
    return model, nnx.Optimizer(model, optax.adam(1e-2), wrt=nnx.Param)


def creator(strategy: str, mesh):
    def create():
        # The rules are read when jit traces, so each layout gets a jit of its own.
        with jax.set_mesh(mesh), nnx.logical_axis_rules(RULES[strategy]):
            return nnx.jit(model_and_optimizer)()

    return create


@pytest.fixture(scope="module")
def mesh(cpu_devices):
    return jax.make_mesh((len(cpu_devices),), ("data",), axis_types=(AxisType.Auto,))


@pytest.fixture(scope="module")
def data():
    rng = np.random.default_rng(0)
    x = rng.normal(size=(128, 16)).astype(np.float32)
    return x, np.argmax(x @ rng.normal(size=(16, 8)), axis=-1).astype(np.int32)


def measure(strategy, mesh, data, **kwargs):
    kwargs = {"steps": 3, "batch_size": 64, **kwargs}
    return measure_strategy(strategy, mesh, creator(strategy, mesh), train_step, *data, **kwargs)


def test_data_parallel_holds_everything_and_communicates_only_by_all_reduce(mesh, data):
    m = measure("dp", mesh, data)
    assert m.param_bytes == m.total_param_bytes == (16 * 64 + 64 + 64 * 8 + 8) * 4
    assert m.param_share == 1.0
    # Adam keeps two moments per parameter, plus a step count.
    assert 2 * m.param_bytes <= m.optimizer_bytes <= 2 * m.param_bytes + 16
    assert m.temporary_bytes > 0
    others = {name: n for name, n in m.collectives.items() if name != "all-reduce"}
    assert set(others.values()) == {0}
    assert (m.collectives["all-reduce"] > 0) == (mesh.size > 1)
    assert len(m.losses) == 3 and m.losses[-1] < m.losses[0]


def test_fsdp_divides_the_embed_weights_and_trains_like_data_parallel(mesh, data):
    dp, fsdp = measure("dp", mesh, data), measure("fsdp", mesh, data)
    # The up kernel (16, 64) is split over its "embed" rows; the rest is whole.
    whole = (64 + 64 * 8 + 8) * 4
    assert fsdp.param_bytes == 16 * 64 * 4 // mesh.size + whole
    np.testing.assert_allclose(fsdp.losses, dp.losses, rtol=1e-5)


def test_the_table_has_a_row_per_measurement(mesh, data):
    m = measure("dp", mesh, data, steps=1)
    table = markdown_table([m, m]).splitlines()
    assert len(table) == 4
    assert table[2].startswith(f"| dp | ({mesh.size},) | {m.param_bytes:,} B | 100.0% |")
    assert f"{m.temporary_bytes:,} B" in table[2] and f"{m.step_bytes:,} B" in table[2]
    # The step's whole memory: its arguments are at least the parameters and Adam's state.
    assert m.step_bytes >= m.temporary_bytes + m.param_bytes + m.optimizer_bytes


def test_the_table_has_no_column_for_a_collective_no_step_contains(mesh, data):
    dp, fsdp = measure("dp", mesh, data, steps=1), measure("fsdp", mesh, data, steps=1)
    header = markdown_table([dp, fsdp]).splitlines()[0].strip("| ").split(" | ")
    present = [name for name in COLLECTIVES if dp.collectives[name] or fsdp.collectives[name]]
    assert header[header.index("step / device") + 1 :] == present
    assert "all-to-all" not in header and "collective-permute" not in header


tpu_compiler = pytest.mark.skipif(not tpu.libtpu_installed(), reason="libtpu is not installed")


@pytest.mark.once
@tpu_compiler
def test_the_step_is_also_compiled_for_a_tpu_slice(mesh, data):
    fsdp = measure("fsdp", mesh, data, steps=1, tpu_topology="v5e:2x4")
    assert fsdp.tpu_topology == "v5e:2x4"
    assert fsdp.tpu_temporary_bytes is not None and fsdp.tpu_temporary_bytes >= 0
    # Both compilers must bring the split kernel together before the first matmul.
    assert fsdp.tpu_collectives is not None
    assert fsdp.tpu_collectives["all-gather"] > 0 and fsdp.collectives["all-gather"] > 0
    header, _, row = (line.strip("| ").split(" | ") for line in markdown_table([fsdp]).splitlines())
    assert header[5:10] == [
        "temporaries / device, CPU",
        "temporaries / device, TPU",
        "step / device, CPU",
        "step / device, TPU",
        "all-reduce, CPU / TPU",
    ]
    assert row[6] == f"{fsdp.tpu_temporary_bytes:,} B"
    assert row[8] == f"{fsdp.tpu_step_bytes:,} B"
    cells = dict(zip(header, row, strict=True))
    gathers = fsdp.collectives["all-gather"], fsdp.tpu_collectives["all-gather"]
    assert cells["all-gather, CPU / TPU"] == "{} / {}".format(*gathers)


@pytest.mark.once
@tpu_compiler
def test_measurements_for_different_slices_make_no_table(mesh, data):
    on_tpu = measure("dp", mesh, data, steps=1, tpu_topology="v5e:2x4")
    here_only = measure("dp", mesh, data, steps=1)
    with pytest.raises(ValueError, match="measure them all with the same tpu_topology"):
        markdown_table([on_tpu, here_only])


@pytest.mark.once
@tpu_compiler
def test_a_slice_with_another_number_of_chips_is_refused(data, cpu_devices):
    four = jax.make_mesh((4,), ("data",), axis_types=(AxisType.Auto,), devices=cpu_devices[:4])
    with pytest.raises(ValueError, match="multiply to 8"):
        measure("dp", four, data, steps=1, tpu_topology="v5e:2x4")


def test_a_batch_that_does_not_divide_over_data_is_refused(mesh, data):
    if mesh.size == 1:
        pytest.skip("every batch divides over one device")
    with pytest.raises(ValueError, match=r"is not divisible by the \d+ devices on axis 'data'"):
        measure("dp", mesh, data, batch_size=mesh.size + 1)


def test_mismatched_data_is_refused(mesh, data):
    x, y = data
    with pytest.raises(ValueError, match="x has 128 examples but y has 127"):
        measure("dp", mesh, (x, y[:-1]))

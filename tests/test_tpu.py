"""The TPU compiler, run on this CPU machine through libtpu's compile-only devices."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys

import jax
import jax.numpy as jnp
import pytest
from jax.sharding import AxisType, NamedSharding
from jax.sharding import PartitionSpec as P

from spmd_guide import make_mesh, tpu
from spmd_guide.analysis import collectives_by_axis, collectives_per_step, count_collectives
from spmd_guide.environment import COMPILE_ONLY_LIBTPU_ENV, run_python

pytestmark = pytest.mark.once


def fsdp_step(weights, x):
    def loss(weights):
        h = x
        for w in weights:
            h = jnp.tanh(h @ w)
        return (h**2).mean()

    grads = jax.grad(loss)(weights)
    return [w - 0.1 * g for w, g in zip(weights, grads, strict=True)]


def fsdp_inputs(mesh, width, layers=3):
    rows = NamedSharding(mesh, P("fsdp", None))
    weights = [jax.ShapeDtypeStruct((width, width), jnp.float32, sharding=rows)] * layers
    return weights, jax.ShapeDtypeStruct((width // 8, width), jnp.float32, sharding=rows)


def test_a_v5e_slice_has_eight_chips_with_coordinates():
    devices = tpu.compile_only_devices("v5e:2x4")
    assert [d.id for d in devices] == list(range(8))
    assert {d.device_kind for d in devices} == {"TPU v5 lite"}
    assert sorted(tuple(d.coords[:2]) for d in devices) == [
        (x, y) for x in (0, 1) for y in range(4)
    ]


def test_make_mesh_orders_a_v5e_slice_by_jaxs_table_for_8_chips():
    mesh = tpu.tpu_mesh("v5e:2x4", (2, 4), ("data", "model"))
    assert mesh.device_ids.tolist() == [[0, 1, 2, 3], [7, 6, 5, 4]]
    assert mesh.axis_types == (AxisType.Explicit, AxisType.Explicit)


def test_a_mesh_that_does_not_use_the_slice_is_refused():
    with pytest.raises(ValueError, match=r"multiply to 8"):
        tpu.tpu_mesh("v5e:2x4", (2, 2), ("data", "model"))


def test_an_unknown_topology_is_refused_with_examples():
    with pytest.raises(ValueError, match=r"v5e:2x4"):
        tpu.compile_only_devices("v99:3x3")


def test_without_libtpu_the_error_says_what_to_install(monkeypatch):
    tpu.compile_only_devices.cache_clear()
    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name == "libtpu" else real(name, *a)
    )
    try:
        with pytest.raises(tpu.TpuCompilerUnavailable, match=r"jax\[tpu\]"):
            tpu.compile_only_devices("v5e:2x4")
    finally:
        monkeypatch.undo()
        tpu.compile_only_devices.cache_clear()


def test_the_tpu_compiler_gathers_fsdp_weights_in_bf16_and_reduce_scatters_gradients():
    # Explicit axes (the default) make every device gather each weight before its matmul; on
    # Auto axes the compiler may choose otherwise (moving activations with all-to-alls).
    mesh = tpu.tpu_mesh("v5e:2x4", (8,), ("fsdp",))
    weights, x = fsdp_inputs(mesh, width=4096)
    rows = NamedSharding(mesh, P("fsdp", None))
    compiled = jax.jit(fsdp_step, out_shardings=[rows] * 3).lower(weights, x).compile()
    counts = count_collectives(compiled)
    assert counts["reduce-scatter"] == 3
    assert counts["all-reduce"] == 0
    found = collectives_by_axis(compiled, mesh)
    gathered = [c.shapes for c in found if c.op == "all-gather"]
    assert gathered and all(shape[0].startswith("bf16[4096,4096]") for shape in gathered)
    scattered = {c.shapes for c in found if c.op == "reduce-scatter"}
    assert scattered == {("f32[4096,512]",)}
    assert {c.axes for c in found} == {("fsdp",)}


def test_the_cpu_compiler_keeps_the_all_reduce_for_the_same_step(cpu_devices):
    if len(cpu_devices) != 8:
        pytest.skip("compares with the 8-chip slice")
    mesh = make_mesh((8,), ("fsdp",))
    weights, x = fsdp_inputs(mesh, width=256)
    rows = NamedSharding(mesh, P("fsdp", None))
    compiled = jax.jit(fsdp_step, out_shardings=[rows] * 3).lower(weights, x).compile()
    counts = count_collectives(compiled)
    assert counts == {**counts, "all-gather": 3, "all-reduce": 1, "reduce-scatter": 0}
    (reduced,) = [c for c in collectives_by_axis(compiled, mesh) if c.op == "all-reduce"]
    assert reduced.shapes == ("f32[256,256]",) * 3


def test_compile_like_gives_the_same_program_for_a_slice_of_the_same_shape(cpu_devices):
    if len(cpu_devices) != 8:
        pytest.skip("the slice has 8 chips")
    mesh = make_mesh((2, 4), ("data", "model"))
    x = jax.device_put(jnp.ones((16, 32)), NamedSharding(mesh, P("data", "model")))
    compiled = tpu.compile_like(jax.jit(lambda x: x.sum(0)), x, topology="v5e:2x4", mesh=mesh)
    assert {d.platform for d in compiled.input_shardings[0][0].device_set} == {"tpu"}
    assert count_collectives(compiled)["all-reduce"] == 1


def test_arrays_without_a_named_sharding_are_refused(cpu_devices):
    mesh = tpu.tpu_mesh("v5e:2x4", (8,), ("data",))
    with pytest.raises(ValueError, match=r"NamedSharding"):
        tpu.abstract_on(jnp.ones(3), mesh)


def test_published_figures_are_looked_up_by_chip():
    assert tpu.chip("v5e:16x16").bf16_flops_per_second == 1.97e14
    with pytest.raises(ValueError, match=r"v5e, v5p, v6e"):
        tpu.chip("v4:2x2x1")


_START_LIBTPU = (
    "import jax; from jax.experimental import topologies; "
    "print(len(topologies.get_topology_desc('v5e:2x4', 'tpu').devices), flush=True)"
)


def test_libtpu_warns_of_a_missing_tpu_unless_told_what_to_assume():
    # This process has started libtpu already: the second one needs the lock lifted either way.
    told = COMPILE_ONLY_LIBTPU_ENV
    untold = {"TPU_ACCELERATOR_TYPE": "", "TPU_WORKER_HOSTNAMES": ""}
    loud = run_python("-c", _START_LIBTPU, devices=1, env={**told, **untold})
    quiet = run_python("-c", _START_LIBTPU, devices=1, env=told)
    assert loud.stdout.split() == quiet.stdout.split() == ["8"]
    assert "TPU_ACCELERATOR_TYPE" in loud.stderr
    assert quiet.stderr.strip() == ""


def test_without_lifting_its_lock_a_second_process_cannot_start_libtpu(monkeypatch):
    monkeypatch.delenv("ALLOW_MULTIPLE_LIBTPU_LOAD", raising=False)
    with subprocess.Popen(
        [sys.executable, "-c", _START_LIBTPU + "; import time; time.sleep(60)"],
        env={**os.environ, "JAX_PLATFORMS": "cpu"},
        stdout=subprocess.PIPE,
        text=True,
    ) as holder:
        try:
            assert holder.stdout is not None and holder.stdout.readline().split() == ["8"]
            second = run_python("-c", _START_LIBTPU, devices=1, check=False)
        finally:
            holder.kill()
    assert second.returncode != 0
    assert "libtpu_lockfile" in second.stderr


def test_a_collective_in_a_tpu_loop_counts_once_per_trip():
    mesh = tpu.tpu_mesh("v5e:2x4", (8,), ("data",))

    def summed_five_times(x):
        def body(_, carry):
            return carry + jax.lax.psum(carry, "data")

        return jax.lax.fori_loop(0, 5, body, x)

    program = jax.jit(
        jax.shard_map(summed_five_times, mesh=mesh, in_specs=P("data"), out_specs=P("data"))
    )
    x = jax.ShapeDtypeStruct((8 * 128,), jnp.float32, sharding=NamedSharding(mesh, P("data")))
    compiled = program.lower(x).compile()
    assert count_collectives(compiled)["all-reduce"] == 1
    assert collectives_per_step(compiled)["all-reduce"] == 5
    assert [c.runs for c in collectives_by_axis(compiled, mesh)] == [5]


def test_libtpu_writes_no_logs_when_told_so(tmp_path):
    logged = run_python(
        "-c",
        _START_LIBTPU,
        devices=1,
        env={**COMPILE_ONLY_LIBTPU_ENV, "TPU_LOG_DIR": str(tmp_path)},
    )
    assert logged.stdout.split() == ["8"] and any(tmp_path.iterdir())
    quiet = tmp_path / "quiet"
    quiet.mkdir()
    run_python("-c", _START_LIBTPU, devices=1, env=COMPILE_ONLY_LIBTPU_ENV, cwd=quiet)
    assert not any(quiet.iterdir())


@pytest.mark.once
def test_collectives_are_read_from_both_compilers_with_their_mesh_axes(cpu_devices):
    if len(cpu_devices) != 8:
        pytest.skip("compares with the 8-chip slice")
    mesh = jax.make_mesh((2, 4), ("data", "model"), devices=cpu_devices)
    with jax.set_mesh(mesh):
        rows = jax.device_put(jnp.ones((8, 4)), P("data", "model"))
    programs, found = tpu.collectives_here_and_on_tpu(
        jax.jit(lambda r: r.sum(axis=0)), rows, mesh=mesh
    )
    assert set(programs) == set(found) == {"CPU", "TPU"}
    assert found["CPU"] == found["TPU"] == [("all-reduce", ("data",))]
    assert "all-reduce" in programs["TPU"].as_text()

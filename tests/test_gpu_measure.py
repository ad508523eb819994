"""benchmarks/gpu_measure.py on CPU devices, small models: the code a GPU run takes, so it
cannot rot while no GPU is at hand."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest

from spmd_guide import gpu_runs

SCRIPT = Path(__file__).resolve().parents[1] / "benchmarks" / "gpu_measure.py"
pytestmark = pytest.mark.once


def _load():
    spec = importlib.util.spec_from_file_location("gpu_measure", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


script = _load()


def test_the_async_reading_counts_what_a_start_and_done_bracket():
    text = (
        "HloModule m\n\nENTRY %main (p: f32[8]) -> f32[8] {\n"
        "  %p = f32[8]{0} parameter(0)\n"
        "  %ag-start = (f32[1]{0}, f32[8]{0}) all-gather-start(f32[1]{0} %p), dimensions={0}\n"
        "  %f = f32[8]{0} fusion(f32[8]{0} %p), kind=kLoop, calls=%c\n"
        "  %d = f32[8,8]{1,0} dot(f32[8]{0} %p, f32[8]{0} %p)\n"
        "  %ag-done = f32[8]{0} all-gather-done((f32[1]{0}, f32[8]{0}) %ag-start)\n"
        "  ROOT %r = f32[8]{0} add(f32[8]{0} %ag-done, f32[8]{0} %f)\n}\n"
    )
    assert script.async_pairs(text) == [
        {"op": "all-gather", "compute_between": 2, "matmuls_between": 1}
    ]


PROGRAM = """HloModule m

%gemm_body (a: f32[8,8], b: f32[8,8]) -> f32[8,8] {
  %a = f32[8,8]{1,0} parameter(0)
  %b = f32[8,8]{1,0} parameter(1)
  ROOT %d = f32[8,8]{1,0} dot(f32[8,8]{1,0} %a, f32[8,8]{1,0} %b)
}

%dotted_add (a: f32[8,8]) -> f32[8,8] {
  %a = f32[8,8]{1,0} parameter(0)
  ROOT %s = f32[8,8]{1,0} add(f32[8,8]{1,0} %a, f32[8,8]{1,0} %a)
}

ENTRY %main (p: f32[8,8]) -> f32[8,8] {
  %p = f32[8,8]{1,0} parameter(0)
  %triton = f32[8,8]{1,0} fusion(%p, %p), kind=kCustom, calls=%gemm_body
  %named_dot = f32[8,8]{1,0} fusion(%p), kind=kLoop, calls=%dotted_add, metadata={op_name="dot"}
  %lt = (f32[8,8]{1,0}, s8[16]{0}) custom-call(%p, %p), custom_call_target="__cublas$lt$matmul"
  %sort = f32[8,8]{1,0} custom-call(%p), custom_call_target="__gpu$xla.gpu.sort_dot"
  %plain = f32[8,8]{1,0} dot(%p, %p)
  ROOT %r = f32[8,8]{1,0} add(%plain, %triton)
}
"""


def test_matmuls_are_counted_by_the_instructions_own_kind():
    bodies = script.computations(PROGRAM)
    schedule = script.entry_schedule(PROGRAM)
    found = {name: script.is_matmul(op, line, bodies) for name, op, line in schedule}
    assert found == {
        "p": False,
        "triton": True,  # a fusion whose root is a dot
        "named_dot": False,  # "dot" in its metadata, an add at its root
        "lt": True,  # cuBLASLt's matmul
        "sort": False,  # another library call, "dot" in its name
        "plain": True,
        "r": False,
    }


def test_an_async_start_records_each_value_once():
    text = (
        "HloModule m\n\nENTRY %main (p: f32[4]) -> f32[4] {\n"
        "  %p = f32[4]{0} parameter(0)\n"
        "  %ar = (f32[4]{0}, f32[4]{0}) all-reduce-start(f32[4]{0} %p), replica_groups={}\n"
        "  ROOT %d = f32[4]{0} all-reduce-done((f32[4]{0}, f32[4]{0}) %ar)\n}\n"
    )
    from spmd_guide import analysis

    ((op, line, shapes, *_),) = [c for c in analysis._collectives_produced(text) if "start" in c[1]]
    assert len(shapes) == 2  # the start's type: its operand, then its result
    assert script.recorded_shapes(op, line, shapes) == ("f32[4]",)


def test_a_whole_run_on_cpu_writes_a_file_the_pages_can_read(tmp_path):
    out = tmp_path / "run.json"
    done = subprocess.run(
        [
            *(sys.executable, str(SCRIPT), "--cpu", "--small", "--steps", "1", "--out", str(out)),
            *("--drawn", "3", "--drawn-meshes", "2"),
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    run = gpu_runs.load(out)  # holds everything the pages read
    assert f"--out {out} --drawn 3 --drawn-meshes 2" in run.provenance["command"]
    assert run.provenance["recorded_by"] == "benchmarks/gpu_measure.py"
    assert "CPU" in run.provenance["gpu"] and json.loads(out.read_text())["format"] == 2

    # What XLA:CPU does with each program, as the pages assert it.
    plans = run.data["plans_for_8_gpus"]
    ops = {
        name: {(c["op"], c["count"]) for c in plan["collectives"]}
        for name, plan in plans.items()
        if name != "how"
    }
    assert ("reduce-scatter", 1) in ops["fsdp_by_shard_map"]
    assert {op for op, _ in ops["fsdp_by_jit"]} == {"all-gather", "all-reduce"}
    assert plans["fsdp_by_jit"]["reduce_scatters"] == 0
    assert ops["constraint_to_reduce_scatter"] == {("all-reduce", 1)}
    assert ops["tensor_parallel_two_blocks"] == {("all-reduce", 3)}
    ring = plans["collective_matmul_ring"]
    assert ops["collective_matmul_ring"] == {("collective-permute", 7)}
    assert ring["matmuls"] == 8 and ring["async_pairs"] == []  # XLA:CPU runs them in line
    assert ring["same_with_latency_hiding_scheduler"] is True  # XLA:CPU ignores the flag
    assert plans["windowed_einsum_threshold_zero"]["windowed_loop"] is False
    assert plans["data_parallel_large"]["combine_threshold_bytes"] == 30 * 2**20 + 7
    # Collectives run in order of size: the biases' before the weights'.
    small_model = [c["shapes"] for c in plans["data_parallel_small"]["collectives"]]
    assert small_model == sorted(small_model, key=lambda shapes: sum(map(script.elements, shapes)))
    grid = [name for name in plans if name.startswith("planner_")]
    assert grid and {"data", "tensor"} <= {c["axes"] for c in plans[grid[0]]["collectives"]}

    # The step on one device, beside the planner's figures for it.
    (step,) = run.data["steps_on_one_gpu"]
    assert step["argument_bytes"] == step["planner_stored_bytes"]
    assert step["steps_timed"] == 1
    low, high = step["step_seconds_range"]
    assert 0 < low <= step["step_seconds_median"] <= high
    assert step["model_flops_per_step"] < step["flops_per_step_with_recompute"]
    # The planner's expected step is recorded beside its bound, and is not below it.
    assert step["planner_step_seconds"] <= step["planner_expected_seconds"]
    assert step["final_loss"] == step["final_loss"]  # not NaN: the state starts as Adam's does
    assert run.figure("steps_on_one_gpu.0.model_flops_utilisation") > 0
    # The drawn steps: three configurations the planner says fit, each timed in its own process.
    drawn = run.data["steps_drawn"]["steps"]
    assert len(drawn) == 3 and len({json.dumps(s["configuration"]) for s in drawn}) == 3
    for step in drawn:
        assert step["what"].startswith("drawn") and step["steps_timed"] == 1
        low, high = step["step_seconds_range"]  # an ordering, not a bound on the time
        assert low <= step["step_seconds_median"] <= high
        assert step["argument_bytes"] == step["planner_stored_bytes"]
    # The drawn meshes: two 8-device configurations, compiled, beside the planner's figures.
    meshes = run.data["meshes_drawn"]["meshes"]
    assert len(meshes) == 2
    for mesh in meshes:
        c = mesh["configuration"]
        assert c["pipe"] * c["data"] * c["tensor"] == 8
        assert mesh["argument_bytes"] > 0 and mesh["planner_total_bytes"] > 0
    observed = run.data["observations"]
    # On CPU, float32 matmuls are exact to float32 at either precision. The memory-fraction
    # variables are read from jaxlib itself, which names both, the older one as deprecated.
    assert observed["float32_matmul_default_relative_error"] < 1e-5
    assert observed["memory_fraction_variable"] == "XLA_CLIENT_MEM_FRACTION"
    assert observed["memory_fraction_variable_deprecated"] == "XLA_PYTHON_CLIENT_MEM_FRACTION"


def test_a_program_the_script_does_not_have_is_refused_naming_those_it_has():
    with pytest.raises(script.MeasureError, match=r"no program ring.*collective_matmul_ring"):
        script.measure_plans(small=True, chosen=["ring"])


@pytest.mark.parametrize(
    "arguments, message",
    [
        (["--steps", "0"], "--steps must be at least 1"),
        (["--configurations", "0"], "--configurations must be at least 1"),
        (["--cpu"], "--out is required"),
    ],
)
def test_bad_arguments_are_refused_naming_the_fix(arguments, message):
    done = subprocess.run(
        [sys.executable, str(SCRIPT), *arguments], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 2 and message in done.stderr, done.stderr

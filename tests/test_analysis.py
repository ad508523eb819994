from __future__ import annotations

import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P

from spmd_guide import make_mesh
from spmd_guide.analysis import (
    COLLECTIVES,
    LayerTraffic,
    bytes_per_device,
    collective_elements_per_step,
    collective_instructions,
    collectives_by_axis,
    collectives_per_step,
    count_collectives,
    ledger_table,
    matmul_result_shapes,
    total_bytes,
    trace_threads,
    trace_timeline,
    traffic_by_layer,
    values_by_layer,
)


@pytest.fixture
def mesh(cpu_devices):
    return make_mesh((len(cpu_devices),), ("data",), axis_types="auto")


def test_a_sharded_array_costs_each_device_its_block(mesh):
    n = mesh.size
    x = jax.device_put(jnp.zeros((8 * n, 4), jnp.float32), NamedSharding(mesh, P("data")))
    assert bytes_per_device(x) == {d.id: 8 * 4 * 4 for d in mesh.devices.flat}
    assert total_bytes(x) == 8 * n * 4 * 4


def test_a_replicated_array_costs_every_device_in_full(mesh):
    x = jax.device_put(jnp.zeros(10, jnp.float32), NamedSharding(mesh, P()))
    assert set(bytes_per_device(x).values()) == {40}


def test_bytes_add_up_over_a_pytree(mesh):
    tree = {
        "sharded": jax.device_put(
            jnp.zeros(mesh.size * 2, jnp.int32), NamedSharding(mesh, P("data"))
        ),
        "replicated": jax.device_put(jnp.zeros(3, jnp.float32), NamedSharding(mesh, P())),
    }
    assert set(bytes_per_device(tree).values()) == {2 * 4 + 3 * 4}


def test_a_numpy_leaf_is_refused_with_a_fix():
    with pytest.raises(TypeError, match=r"jax\.device_put"):
        bytes_per_device({"w": np.zeros(3)})


def test_a_psum_compiles_to_one_all_reduce(mesh):
    def total(x):
        return jax.shard_map(
            lambda block: jax.lax.psum(block.sum(), "data"),
            mesh=mesh,
            in_specs=P("data"),
            out_specs=P(),
        )(x)

    compiled = jax.jit(total).lower(jnp.arange(8.0 * mesh.size)).compile()
    counts = count_collectives(compiled)
    assert set(counts) == set(COLLECTIVES)
    assert counts["all-reduce"] == 1
    assert sum(counts.values()) == counts["all-reduce"]


def test_counting_reads_instructions_not_names():
    hlo = """
  %all-gather-start.1 = (f32[4]{0}, f32[32]{0}) all-gather-start(f32[4]{0} %p), dimensions={0}
  %all-gather-done.1 = f32[32]{0} all-gather-done((f32[4]{0}, f32[32]{0}) %all-gather-start.1)
  %ar = f32[] all-reduce(f32[] %x), to_apply=%add
  %rs = f32[4]{0} reduce-scatter(f32[32]{0} %y), dimensions={0}, to_apply=%add
  %cp = f32[4]{0} collective-permute(f32[4]{0} %z), source_target_pairs={{0,1},{1,0}}
  %fusion.all-reduce.2 = f32[] fusion(f32[] %w), calls=%fused
"""
    assert count_collectives(hlo) == {
        "all-reduce": 1,
        "all-gather": 1,
        "reduce-scatter": 1,
        "collective-permute": 1,
        "all-to-all": 0,
    }


def _gather_each_layer(mesh, layers, x):
    def per_device(layers, x):
        def layer(x, rows):
            return jnp.tanh(x @ jax.lax.all_gather(rows, "data", tiled=True)), None

        return jax.lax.scan(layer, x, layers)[0]

    return jax.shard_map(
        per_device, mesh=mesh, in_specs=(P(None, "data"), P("data")), out_specs=P("data")
    )(layers, x)


def test_a_collective_in_a_loop_counts_once_per_iteration(mesh):
    if mesh.size == 1:
        pytest.skip("XLA removes collectives over a single device")
    n = mesh.size
    layers = jax.device_put(jnp.ones((5, 2 * n, 2 * n)), NamedSharding(mesh, P(None, "data")))
    x = jax.device_put(jnp.ones((n, 2 * n)), NamedSharding(mesh, P("data")))
    compiled = jax.jit(lambda w, v: _gather_each_layer(mesh, w, v)).lower(layers, x).compile()
    assert count_collectives(compiled)["all-gather"] == 1
    assert collectives_per_step(compiled)["all-gather"] == 5
    # The backward pass runs a second loop: the gradient of each gather is a reduce-scatter.
    grad = jax.jit(jax.grad(lambda w, v: _gather_each_layer(mesh, w, v).sum()))
    per_step = collectives_per_step(grad.lower(layers, x).compile())
    assert per_step["all-gather"] == 5 and per_step["reduce-scatter"] == 5


def test_elements_moved_count_each_result_once_per_iteration(mesh):
    if mesh.size == 1:
        pytest.skip("XLA removes collectives over a single device")
    n = mesh.size
    layers = jax.device_put(jnp.ones((5, 2 * n, 2 * n)), NamedSharding(mesh, P(None, "data")))
    x = jax.device_put(jnp.ones((n, 2 * n)), NamedSharding(mesh, P("data")))
    compiled = jax.jit(lambda w, v: _gather_each_layer(mesh, w, v)).lower(layers, x).compile()
    # Each of the 5 iterations gathers a whole (2n, 2n) layer onto every device.
    moved = collective_elements_per_step(compiled)
    assert moved["all-gather"] == 5 * (2 * n) ** 2
    assert sum(moved.values()) == moved["all-gather"]


def test_matmul_shapes_are_per_device(mesh):
    n = mesh.size
    x = jax.device_put(jnp.ones((4 * n, 6)), NamedSharding(mesh, P("data")))
    w = jax.device_put(jnp.ones((6, 5)), NamedSharding(mesh, P()))
    compiled = jax.jit(lambda x, w: jnp.tanh(x @ w)).lower(x, w).compile()
    assert matmul_result_shapes(compiled) == [(4, 5)]


def test_each_value_a_combined_collective_carries_is_traced_to_its_layer(cpu_devices):
    n = len(cpu_devices)
    if n == 1:
        pytest.skip("XLA removes collectives over a single device")
    explicit = jax.make_mesh((n,), ("data",), devices=cpu_devices)
    rows = jax.device_put(jnp.ones((2 * n, 3)), NamedSharding(explicit, P("data")))
    weights = jax.device_put((jnp.ones((3, 5)), jnp.ones((5, 2))), NamedSharding(explicit, P()))

    def loss(weights, rows):
        with jax.named_scope("first"):
            hidden = jnp.tanh(rows @ weights[0])
        with jax.named_scope("second"):
            return jnp.sum(hidden @ weights[1])

    compiled = jax.jit(jax.grad(loss)).lower(weights, rows).compile()
    carried = [
        (
            t.layer,
            t.direction,
            t.op,
            t.axes,
            t.elements,
        )
        for t in traffic_by_layer(compiled, explicit, ("first", "second"))
    ]
    # Each replicated weight's gradient is summed over the rows' devices in the backward pass,
    # the two in one combined all-reduce or in two: each value is traced to its own layer.
    assert sorted(carried) == [
        ("first", "backward", "all-reduce", ("data",), 3 * 5),
        ("second", "backward", "all-reduce", ("data",), 5 * 2),
    ]


# Written the way TPU's compiler writes them: a reduce-scatter as a fusion whose computation
# all-reduces and slices, with no name inside; a combined all-reduce whose operands were made by
# one fusion, and whose parts the compiler named after the layers they belong to; an async
# combined all-gather whose -done's parts are named.
_TPU_STYLE_STEP = """
HloModule step

%all-reduce-scatter (input: f32[4,8]) -> f32[2,8] {
  %input = f32[4,8]{1,0} parameter(0)
  %all-reduce.1 = f32[4,8]{1,0} all-reduce(%input), channel_id=1, replica_groups={{0,1}}, use_global_device_ids=true, to_apply=%add
  %offset = u32[] partition-id()
  ROOT %slice = f32[2,8]{1,0} dynamic-slice(%all-reduce.1, %offset, %offset), dynamic_slice_sizes={2,8}
}

ENTRY %main (p: f32[4,8], q: f32[8]) -> (f32[2,8], f32[8], f32[3]) {
  %p = f32[4,8]{1,0} parameter(0)
  %q = f32[8]{0} parameter(1)
  %product = f32[4,8]{1,0} multiply(%p, %p)
  %fusion = f32[2,8]{1,0} fusion(%product), kind=kCustom, calls=%all-reduce-scatter, metadata={op_name="jit(step)/jvp(out)/dot_general"}
  %sums = (f32[8]{0}, f32[3]{0}) fusion(%q), kind=kLoop, calls=%reductions, metadata={op_name="jit(step)/transpose(jvp(proj))/reduce_sum"}
  %first = f32[8]{0} get-tuple-element(%sums), index=0
  %second = f32[3]{0} get-tuple-element(%sums), index=1
  %all-reduce.2 = (f32[8]{0}, f32[3]{0}) all-reduce(%first, %second), channel_id=2, replica_groups={{0,1}}, use_global_device_ids=true, to_apply=%add
  %proj-sum = f32[8]{0} get-tuple-element(%all-reduce.2), index=0, metadata={op_name="jit(step)/transpose(jvp(proj))/reduce_sum"}
  %out-sum = f32[3]{0} get-tuple-element(%all-reduce.2), index=1, metadata={op_name="jit(step)/transpose(jvp(out))/reduce_sum"}
  %gather-start = ((f32[2]{0}, f32[1]{0}), (f32[4]{0}, f32[2]{0})) all-gather-start(%first-half, %second-half), channel_id=3, replica_groups={{0,1}}, dimensions={0}, use_global_device_ids=true
  %first-half = f32[2]{0} slice(%q), slice={[0:2]}
  %second-half = f32[1]{0} slice(%q), slice={[2:3]}
  %gather-done = (f32[4]{0}, f32[2]{0}) all-gather-done(%gather-start)
  %proj-gathered = f32[4]{0} get-tuple-element((f32[4]{0}, f32[2]{0}) %gather-done), index=0, metadata={op_name="jit(step)/jvp(proj)/all_gather"}
  %out-gathered = f32[2]{0} get-tuple-element(%gather-done), index=1, metadata={op_name="jit(step)/transpose(jvp(out))/all_gather"}
  ROOT %result = (f32[2,8]{1,0}, f32[8]{0}, f32[3]{0}, f32[4]{0}, f32[2]{0}) tuple(%fusion, %proj-sum, %out-sum, %proj-gathered, %out-gathered)
}
"""  # noqa: E501 (compiler output keeps its lines whole)


def test_values_take_the_names_of_a_fused_collective_and_of_a_combined_ones_parts(cpu_devices):
    if len(cpu_devices) < 2:
        pytest.skip("needs a mesh of 2 devices")
    pair = make_mesh((2,), ("model",), devices=cpu_devices[:2])
    found = traffic_by_layer(_TPU_STYLE_STEP, pair, ("proj", "out"))
    assert sorted((t.layer, t.direction, t.op, t.axes, t.elements) for t in found) == [
        ("out", "backward", "all-gather", ("model",), 2),
        ("out", "backward", "all-reduce", ("model",), 3),
        ("out", "forward", "reduce-scatter", ("model",), 2 * 8),
        ("proj", "backward", "all-reduce", ("model",), 8),
        ("proj", "forward", "all-gather", ("model",), 4),
    ]
    assert values_by_layer(found) == {
        ("out", "forward"): {"reduce-scatter over model": 16},
        ("out", "backward"): {"all-reduce over model": 3, "all-gather over model": 2},
        ("proj", "forward"): {"all-gather over model": 4},
        ("proj", "backward"): {"all-reduce over model": 8},
    }
    table = ledger_table({"TPU": found}, ("proj", "out")).splitlines()
    assert table[0] == "| layer | pass | TPU: values per device |"
    assert table[2:] == [
        "| `proj` | forward | all-gather over model: 4 |",
        "| `proj` | backward | all-reduce over model: 8 |",
        "| `out` | forward | reduce-scatter over model: 16 |",
        "| `out` | backward | all-reduce over model: 3; all-gather over model: 2 |",
    ]
    with pytest.raises(ValueError, match=r"not in layers=\('proj',\)"):
        ledger_table({"TPU": found}, ("proj",))


_TUPLE_REDUCE_SCATTER = """
HloModule step

%all-reduce-scatter.1 (first: f32[4,2], second: f32[2,4]) -> (f32[2,2], f32[2,2]) {
  %first = f32[4,2]{1,0} parameter(0)
  %second = f32[2,4]{1,0} parameter(1)
  %all-reduce.3 = (f32[4,2]{1,0}, f32[2,4]{1,0}) all-reduce(%first, %second), channel_id=1, replica_groups={{0,1}}, use_global_device_ids=true, to_apply=%add
  ROOT %slices = (f32[2,2]{1,0}, f32[2,2]{1,0}) custom-call(%all-reduce.3), custom_call_target="slices"
}

%all-reduce-scatter (input: f32[8]) -> f32[4] {
  %input = f32[8]{0} parameter(0)
  %all-reduce.4 = f32[8]{0} all-reduce(%input), channel_id=2, replica_groups={{0,1}}, use_global_device_ids=true, to_apply=%add
  ROOT %slice = f32[4]{0} slice(%all-reduce.4), slice={[0:4]}
}

ENTRY %main (p: f32[4,2], q: f32[2,4], r: f32[8]) -> ((f32[2,2], f32[2,2]), f32[4]) {
  %p = f32[4,2]{1,0} parameter(0)
  %q = f32[2,4]{1,0} parameter(1)
  %r = f32[8]{0} parameter(2)
  %both = (f32[2,2]{1,0}, f32[2,2]{1,0}) fusion(%p, %q), kind=kCustom, calls=%all-reduce-scatter.1
  %one = f32[4]{0} fusion(%r), kind=kCustom, calls=%all-reduce-scatter
  ROOT %result = ((f32[2,2]{1,0}, f32[2,2]{1,0}), f32[4]{0}) tuple(%both, %one)
}
"""  # noqa: E501 (compiler output keeps its lines whole)


def test_a_fused_reduce_scatter_produces_its_fusions_result(cpu_devices):
    if len(cpu_devices) < 2:
        pytest.skip("needs a mesh of 2 devices")
    pair = make_mesh((2,), ("model",), devices=cpu_devices[:2])
    found = collectives_by_axis(_TUPLE_REDUCE_SCATTER, pair)
    # Each from its own fusion, though one computation's name begins the other's.
    assert [(c.op, c.shapes) for c in found] == [
        ("reduce-scatter", ("f32[2,2]", "f32[2,2]")),
        ("reduce-scatter", ("f32[4]",)),
    ]


def test_values_of_a_collective_run_an_unknown_number_of_times_are_refused():
    unknown = LayerTraffic("out", "forward", "all-reduce", ("data",), "f32[4]", None)
    with pytest.raises(ValueError, match="unknown number of times"):
        values_by_layer([unknown])


def test_a_loop_without_a_known_trip_count_is_refused(mesh):
    if mesh.size == 1:
        pytest.skip("XLA removes collectives over a single device")

    def until_large(x):
        def per_device(block):
            return jax.lax.while_loop(
                lambda v: jax.lax.psum(v.sum(), "data") < 100.0, lambda v: v * 2.0 + 1.0, block
            )

        return jax.shard_map(per_device, mesh=mesh, in_specs=P("data"), out_specs=P("data"))(x)

    x = jax.device_put(jnp.ones(mesh.size), NamedSharding(mesh, P("data")))
    compiled = jax.jit(until_large).lower(x).compile()
    with pytest.raises(ValueError, match="trip count is not known"):
        collectives_per_step(compiled)


def test_text_without_a_program_is_refused():
    with pytest.raises(ValueError, match="no ENTRY computation"):
        collectives_per_step("%x = f32[] all-reduce(f32[] %y)")


@pytest.fixture
def grid(cpu_devices):
    if len(cpu_devices) < 4 or len(cpu_devices) % 2:
        pytest.skip("needs an even number of at least 4 devices for a 2D mesh")
    return make_mesh((2, len(cpu_devices) // 2), ("rows", "cols"), axis_types="auto")


def _reduce_over(grid, axes):
    def per_device(block):
        return jax.lax.psum(block, axes)

    return jax.jit(
        jax.shard_map(
            per_device, mesh=grid, in_specs=P("rows", "cols"), out_specs=P("rows", "cols")
        )
    )


@pytest.mark.parametrize("axes", [("rows",), ("cols",), ("rows", "cols")])
def test_collectives_are_named_by_the_mesh_axes_they_span(grid, axes):
    x = jnp.ones((2 * 3, grid.shape["cols"] * 5))
    compiled = _reduce_over(grid, axes).lower(x).compile()
    (found,) = collectives_by_axis(compiled, grid)
    assert (found.op, found.axes, found.shapes) == ("all-reduce", axes, ("f32[3,5]",))


def test_a_permute_is_named_by_the_axis_its_pairs_move_along(grid):
    cols = grid.shape["cols"]

    def per_device(block):
        return jax.lax.ppermute(block, "cols", [(i, (i + 1) % cols) for i in range(cols)])

    shifted = jax.jit(
        jax.shard_map(
            per_device, mesh=grid, in_specs=P("rows", "cols"), out_specs=P("rows", "cols")
        )
    )
    compiled = shifted.lower(jnp.ones((2, cols))).compile()
    assert [(c.op, c.axes) for c in collectives_by_axis(compiled, grid)] == [
        ("collective-permute", ("cols",))
    ]


def test_every_printed_form_of_replica_groups_is_read(grid):
    # The same groups (each row of a 2 x 4 mesh) as XLA may print them.
    if grid.shape["cols"] != 4:
        pytest.skip("the printed groups below are for a 2 x 4 mesh")
    forms = [
        "replica_groups=mesh['axis_0'=2,'axis_1'=4] {'axis_1'}",
        "replica_groups=[2,4]<=[8]",
        "replica_groups={{0,1,2,3},{4,5,6,7}}",
    ]
    for form in forms:
        line = f"  %all-reduce.1 = f32[3]{{0}} all-reduce(%p), channel_id=1, {form}, to_apply=%add"
        assert collectives_by_axis(line, grid) == [
            collectives_by_axis(line, grid)[0].__class__("all-reduce", ("cols",), ("f32[3]",))
        ], form
    across = "  %ar = f32[3]{0} all-reduce(%p), replica_groups=[4,2]<=[2,4]T(1,0), to_apply=%add"
    assert collectives_by_axis(across, grid)[0].axes == ("rows",)


def test_groups_number_devices_by_their_place_in_the_mesh_not_by_id(cpu_devices):
    # A TPU v5e 2x4 slice's ring order: what jax.make_mesh gives there, on CPU devices here.
    if len(cpu_devices) != 8:
        pytest.skip("the ring order below is for 8 devices")
    ring = np.asarray(cpu_devices)[[0, 1, 2, 3, 7, 6, 5, 4]].reshape(4, 2)
    mesh = jax.sharding.Mesh(ring, ("data", "model"))
    # Groups of the places {0, 2, 4, 6} and {1, 3, 5, 7}: each column, so along data; by id,
    # devices 4 and 6 sit in the other column.
    line = "  %ag = f32[8]{0} all-gather(%p), replica_groups=[2,4]<=[4,2]T(1,0), dimensions={0}"
    assert collectives_by_axis(line, mesh)[0].axes == ("data",)
    listed = "  %ar = f32[3]{0} all-reduce(%p), replica_groups={{0,2,4,6},{1,3,5,7}}"
    assert collectives_by_axis(listed, mesh)[0].axes == ("data",)


def test_an_axis_of_size_one_left_out_of_the_printed_mesh_does_not_shift_the_names(cpu_devices):
    n = len(cpu_devices)
    if n < 2:
        pytest.skip("needs a model axis of more than one device")
    flat = make_mesh((1, n), ("data", "model"), axis_types="auto")
    by_name = f"replica_groups=mesh['model'={n}] {{'model'}}"
    by_position = f"replica_groups=mesh['axis_0'={n}] {{'axis_0'}}"
    for form in (by_name, by_position):
        line = f"  %ar = f32[3]{{0}} all-reduce(%p), channel_id=1, {form}, to_apply=%add"
        assert collectives_by_axis(line, flat)[0].axes == ("model",), form


def test_groups_naming_devices_outside_the_mesh_are_refused(grid):
    line = "  %ar = f32[3]{0} all-reduce(%p), replica_groups={{0,99}}, to_apply=%add"
    with pytest.raises(ValueError, match="not in the mesh"):
        collectives_by_axis(line, grid)


def test_a_trace_shows_each_devices_instructions_in_order(mesh):
    n = mesh.size

    def per_device(block):
        return jax.lax.psum(jnp.tanh(block) @ block.T, "data")

    step = jax.jit(jax.shard_map(per_device, mesh=mesh, in_specs=P("data"), out_specs=P()))
    x = jax.device_put(jnp.ones((4 * n, 16)), NamedSharding(mesh, P("data")))
    threads = trace_threads(step, x)
    assert 1 <= len(threads) <= n
    for ran in threads.values():
        assert [op.start_us for op in ran] == sorted(op.start_us for op in ran)
        assert all(op.end_us >= op.start_us >= 0 for op in ran)
    if n > 1:
        text = step.lower(x).compile().as_text()
        (reduce,) = re.findall(r"%(\S+) = \S+ all-reduce\(", text)
        # Each device runs the program once: every thread that ran the all-reduce ran it once.
        runs = [sum(op.name == reduce for op in ran) for ran in threads.values()]
        assert sum(runs) == n and set(runs) <= {0, 1}, runs


def test_tracing_needs_a_jitted_function():
    with pytest.raises(TypeError, match=r"jax\.jit"):
        trace_threads(lambda x: x + 1, jnp.ones(3))


def test_a_trace_directory_gives_the_last_calls_instructions_device_by_device(mesh, tmp_path):
    n = mesh.size

    def per_device(block):
        return jax.lax.psum(jnp.tanh(block) @ block.T, "data")

    step = jax.jit(jax.shard_map(per_device, mesh=mesh, in_specs=P("data"), out_specs=P()))
    x = jax.device_put(jnp.ones((4 * n, 16)), NamedSharding(mesh, P("data")))
    step(x).block_until_ready()
    with jax.profiler.trace(str(tmp_path)):
        for _ in range(2):
            step(x).block_until_ready()
    devices = trace_timeline(str(tmp_path))
    assert sorted(devices) == list(range(n))
    program = step.lower(x).compile().as_text()
    collectives = collective_instructions(program)
    # Even on one device the psum is an all-reduce (of one participant).
    assert sorted(collectives.values()) == ["all-reduce"]
    for ops in devices.values():
        names = [op.name for op in ops]
        # One call: each instruction at most once per device, in the order they started.
        assert len(names) == len(set(names))
        assert set(names) <= set(re.findall(r"%([\w.\-]+) =", program))
        assert [op.start_us for op in ops] == sorted(op.start_us for op in ops)
        assert all(op.end_us >= op.start_us >= 0 for op in ops)
        assert [collectives[name] for name in names if name in collectives] == ["all-reduce"]


def test_a_directory_without_a_trace_is_refused_with_the_fix(tmp_path):
    with pytest.raises(ValueError, match=r"jax\.profiler\.trace"):
        trace_timeline(str(tmp_path))


def test_collectives_are_known_by_their_operation_not_their_name():
    program = """
  %psum.3 = f32[4]{0} all-reduce(%x), replica_groups={{0,1}}, to_apply=%add
  %all-gather-start.1 = (f32[2]{0}, f32[4]{0}) all-gather-start(%psum.3), dimensions={0}
  %all-gather-done.1 = f32[4]{0} all-gather-done(%all-gather-start.1)
  %all-reduce.7 = f32[4]{0} add(%psum.3, %all-gather-done.1)
  ROOT %ppermute.2 = f32[4]{0} collective-permute(%all-reduce.7), source_target_pairs={{0,1}}
"""
    assert collective_instructions(program) == {
        "psum.3": "all-reduce",
        "all-gather-start.1": "all-gather",
        "all-gather-done.1": "all-gather",
        "ppermute.2": "collective-permute",
    }

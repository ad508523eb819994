"""Reading a compiled program's schedule, on hand-written programs and on small steps compiled
by the CPU's compiler and by the TPU's (through libtpu's compile-only devices)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import pytest
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P

from spmd_guide import tpu
from spmd_guide.schedule import Program, matmuls

pytestmark = pytest.mark.once

ASYNC_ON_CPU_OR_GPU = """
HloModule m, is_scheduled=true

%body (p: (s32[], f32[8,16])) -> (s32[], f32[8,16]) {
  %p = (s32[], f32[8,16]{1,0}) parameter(0)
  %i = s32[] get-tuple-element(%p), index=0
  %h = f32[8,16]{1,0} get-tuple-element(%p), index=1
  %ag-start = (f32[2,16]{1,0}, f32[16,16]{1,0:S(1)}) all-gather-start(%h), channel_id=3
  %m = f32[8,16]{1,0} dot(%h, %h), metadata={op_name="jit(f)/dot_general"}
  %ag-done = f32[16,16]{1,0:S(1)} all-gather-done(%ag-start)
  %one = s32[] constant(1)
  %next = s32[] add(%i, %one)
  ROOT %t = (s32[], f32[8,16]{1,0}) tuple(%next, %m)
}

%cond (c: (s32[], f32[8,16])) -> pred[] {
  %c = (s32[], f32[8,16]{1,0}) parameter(0)
  %ci = s32[] get-tuple-element(%c), index=0
  %limit = s32[] constant(5)
  ROOT %lt = pred[] compare(%ci, %limit), direction=LT
}

ENTRY %main (x: f32[8,16]) -> f32[8,16] {
  %x = f32[8,16]{1,0} parameter(0)
  %zero = s32[] constant(0)
  %init = (s32[], f32[8,16]{1,0}) tuple(%zero, %x)
  %loop = (s32[], f32[8,16]{1,0}) while(%init), condition=%cond, body=%body
  ROOT %out = f32[8,16]{1,0} get-tuple-element(%loop), index=1
}
"""


def test_an_instruction_names_its_operands_calls_channel_op_and_memory_spaces():
    program = Program.read(ASYNC_ON_CPU_OR_GPU)
    start = program.instruction("ag-start")
    assert start.opcode == "all-gather-start" and start.operands == ("h",)
    assert start.channel == 3
    assert start.arrays == ["f32[2,16]", "f32[16,16]"]
    assert start.memory_spaces == [0, 1]
    assert program.instruction("m").op_name == "jit(f)/dot_general"
    assert program.instruction("loop").body == "body"
    assert program.instruction("loop").calls == ("cond", "body")
    assert [i.name for i in program.users("ag-start")] == ["ag-done"]
    assert program.depends_on("next") == {"i", "one", "p"}


def test_a_loop_body_its_trip_count_and_what_runs_outside_it():
    program = Program.read(ASYNC_ON_CPU_OR_GPU)
    assert program.loops() == {"body": 5}
    assert program.scheduled() == ["main", "body"]
    assert program.loop_of("body") == "body" and program.loop_of("main") is None
    assert program.computation_of("ag-done") == "body"
    assert program.collectives("main") == []
    (gather,) = program.collectives("body")
    assert (gather.kind, gather.arrays, gather.asynchronous) == (
        "all-gather",
        ("f32[16,16]",),
        True,
    )


def test_an_async_pair_brackets_what_is_scheduled_between_its_start_and_done():
    program = Program.read(ASYNC_ON_CPU_OR_GPU)
    (pair,) = program.async_pairs()
    assert (pair.computation, pair.kind, pair.arrays) == ("body", "all-gather", ("f32[16,16]",))
    assert [i.name for i in pair.between] == ["m"]
    assert [i.name for i in matmuls(program, pair.between)] == ["m"]
    # The loop runs the matmul; outside the loop nothing does.
    entry = program.computations["main"]
    assert [i.name for i in matmuls(program, entry)] == ["loop"]
    assert matmuls(program, entry, through_loops=False) == []


def test_a_done_without_its_start_and_a_text_without_entry_are_refused():
    orphan = ASYNC_ON_CPU_OR_GPU.replace("all-gather-done(%ag-start)", "all-gather-done(%h)")
    with pytest.raises(ValueError, match="ag-done waits for no start"):
        Program.read(orphan).async_pairs()
    with pytest.raises(ValueError, match="no ENTRY computation"):
        Program.read("HloModule m\n")
    with pytest.raises(KeyError, match="no instruction named 'nothing'"):
        Program.read(ASYNC_ON_CPU_OR_GPU).instruction("nothing")


BLOCKS, WIDTH = 4, 256


def scanned_fsdp_step(weights, x):
    """A stack of residual MLP blocks under `scan`, weights stored split (FSDP) and gathered
    per block, each block rematerialised: the compile-for-tpu page's step, small."""

    @jax.checkpoint
    def block(h, pair):
        w_in, w_out = (jax.reshard(w, P()) for w in pair)
        return h + jax.nn.gelu(h @ w_in) @ w_out, None

    def loss(weights):
        h, _ = jax.lax.scan(block, x, weights)
        return jnp.mean(h**2)

    return jax.value_and_grad(loss)(weights)


def compiled_step(mesh):
    split = NamedSharding(mesh, P(None, "data"))
    weights = (
        jax.ShapeDtypeStruct((BLOCKS, WIDTH, 4 * WIDTH), jnp.float32, sharding=split),
        jax.ShapeDtypeStruct((BLOCKS, 4 * WIDTH, WIDTH), jnp.float32, sharding=split),
    )
    x = jax.ShapeDtypeStruct((64, WIDTH), jnp.float32, sharding=NamedSharding(mesh, P("data")))
    with jax.set_mesh(mesh):
        return jax.jit(scanned_fsdp_step).lower(*tpu.abstract_on((weights, x), mesh)).compile()


@pytest.fixture(scope="module")
def programs():
    cpu_mesh = jax.make_mesh((8,), ("data",))
    return {
        "cpu": Program.read(compiled_step(cpu_mesh)),
        "tpu": Program.read(compiled_step(tpu.like(cpu_mesh, "v5e:2x4"))),
    }


@pytest.mark.parametrize("compiler", ["cpu", "tpu"])
def test_both_compilers_gather_each_blocks_weights_inside_the_loops(programs, compiler):
    program = programs[compiler]
    assert sorted(program.loops().values()) == [BLOCKS, BLOCKS]
    (loss,) = program.collectives(program.entry)
    assert (loss.kind, loss.arrays) == ("all-reduce", ("f32[]",))
    for body in program.loops():
        gathers = [c for c in program.collectives(body) if c.kind == "all-gather"]
        assert len(gathers) == 2, (compiler, body)


def test_the_cpu_compiler_gathers_before_the_matmul_that_needs_it(programs):
    program = programs["cpu"]
    assert program.async_pairs() == []
    for body in program.loops():
        order = [i.name for i in program.computations[body]]
        for gather in (c.instruction for c in program.collectives(body) if c.kind == "all-gather"):
            using = [i for i in program.computations[body] if gather.name in i.operands]
            assert using and all(order.index(u.name) > order.index(gather.name) for u in using)


def test_the_tpu_compiler_overlaps_one_gather_with_a_matmul_of_the_same_block(programs):
    program = programs["tpu"]
    gathers = [p for p in program.async_pairs() if p.kind == "all-gather"]
    assert len(gathers) == 1
    (pair,) = gathers
    assert program.loop_of(pair.computation) is not None
    assert matmuls(program, pair.between)
    # Waited for in the iteration that started it: its result is not carried to the next.
    assert program.users(pair.done.name) and not any(u.root for u in program.users(pair.done.name))
    synchronous = [
        c
        for c in program.collectives(pair.computation)
        if c.kind == "all-gather" and not c.asynchronous
    ]
    assert len(synchronous) == 1


SHARED_CHANNEL = """
HloModule m

%sum (a: f32[], b: f32[]) -> f32[] {
  %a = f32[] parameter(0)
  %b = f32[] parameter(1)
  ROOT %c = f32[] add(%a, %b)
}

ENTRY %main (x: f32[4]) -> (f32[4], f32[4]) {
  %x = f32[4]{0} parameter(0)
  %one = f32[4]{0} all-reduce(%x), channel_id=1, to_apply=%sum
  %two = f32[4]{0} all-reduce(%one), channel_id=1, to_apply=%sum
  ROOT %t = (f32[4]{0}, f32[4]{0}) tuple(%one, %two)
}
"""


def test_two_collectives_outside_fusions_may_share_a_channel_and_are_both_listed():
    program = Program.read(SHARED_CHANNEL)
    found = program.collectives(program.entry)
    assert [(c.kind, c.instruction.name) for c in found] == [
        ("all-reduce", "one"),
        ("all-reduce", "two"),
    ]

"""The planner's formulas, run here, and the training step they describe, compiled to check them.

The planner on the site is one JavaScript file, ``docs/_static/planner/model.js``: a reader's
browser runs it, and :func:`plan` runs the same file here (in V8, through ``mini-racer``), so the
numbers the build checks are the numbers the page shows. :func:`lower_step` lowers the training
step the formulas describe (a decoder-only transformer, Adam, the configuration's layout) for
abstract inputs, and :func:`measure` compiles it, for this process's CPU devices or for a TPU
slice, and reads what the compiler planned.
"""

from __future__ import annotations

import functools
import hashlib
import json
import math
import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
from jax.ad_checkpoint import checkpoint_name
from jax.sharding import AxisType, NamedSharding
from jax.sharding import PartitionSpec as P

MODEL_JS = Path(__file__).resolve().parents[2] / "docs" / "_static" / "planner" / "model.js"
"""The planner's formulas, shared with the page's script."""

MESH_AXES = ("pipe", "data", "tensor")
"""The axes of a configuration's mesh, in this order; ``data`` also carries ZeRO's splits."""

DTYPES = {"float32": jnp.float32, "bfloat16": jnp.bfloat16}


class PlannerError(ValueError):
    """The planner refused a configuration; the message says what to change."""


def _call(function: str, *args: str) -> Any:
    """Call a function of ``spmdPlanner`` that takes and gives JSON text; parse its answer."""
    return json.loads(str(_context().call(f"spmdPlanner.{function}", *args)))


@functools.cache
def _context() -> Any:
    from py_mini_racer import MiniRacer

    if not MODEL_JS.is_file():
        raise FileNotFoundError(
            f"the planner's formulas are not at {MODEL_JS}: spmd_guide.planner runs them from a "
            "clone of the repository, with the package installed from it (pip install -e .)"
        )
    context = MiniRacer()
    context.eval(MODEL_JS.read_text())
    return context


def plan(config: Mapping[str, Any]) -> dict[str, Any]:
    """The planner's answer for ``config``, from the page's own script.

    Raises:
        PlannerError: with the script's message, if the script refuses the configuration.
    """
    answer: dict[str, Any] = _call("planJson", json.dumps(dict(config)))
    if "error" in answer:
        raise PlannerError(answer["error"])
    return answer


def fragment(config: Mapping[str, Any]) -> str:
    """The part of the planner page's address after ``#`` that opens ``config`` in its form."""
    return str(_context().call("spmdPlanner.fragmentJson", json.dumps(dict(config))))


def defaults() -> dict[str, Any]:
    """The configuration the page's form starts from."""
    configuration: dict[str, Any] = _call("defaultsJson")
    return configuration


def chips() -> dict[str, Any]:
    """The chips the planner knows, with the figures its estimates use."""
    figures: dict[str, Any] = _call("chipsJson")
    return figures


# The step the formulas describe. Each layer's weights are stacked over the layers and the
# layers run under jax.lax.scan, as large models run. The names given to checkpoint_name are the
# activations the formulas count; a remat policy says which of them the backward pass keeps.

SAVED = {
    "none": ("norm1", "q", "k", "v", "probs", "attn", "mid", "norm2", "up", "act"),
    "selective": ("norm1", "q", "k", "v", "attn", "mid", "norm2", "up", "act"),
    "full": (),
}
"""What each remat policy keeps of a layer for the backward pass, besides the layer's input."""


def _layer_shapes(c: Mapping[str, Any]) -> dict[str, tuple[int, ...]]:
    h, f, n = c["width"], c["mlp"], c["heads"]
    return {
        "q": (h, n, h // n),
        "k": (h, n, h // n),
        "v": (h, n, h // n),
        "o": (n, h // n, h),
        "up": (h, f),
        "down": (f, h),
    }


def _layer_specs(fsdp: str | None) -> dict[str, P]:
    return {
        "q": P(fsdp, "tensor", None),
        "k": P(fsdp, "tensor", None),
        "v": P(fsdp, "tensor", None),
        "o": P("tensor", None, fsdp),
        "up": P(fsdp, "tensor"),
        "down": P("tensor", fsdp),
    }


def _specs(c: Mapping[str, Any], fsdp: str | None) -> dict[str, Any]:
    layer = _layer_specs(fsdp)
    return {
        "embed": P("tensor", fsdp),
        "layers": {name: P("pipe", None, *spec) for name, spec in layer.items()},
        "unembed": P(fsdp, "tensor"),
    }


def _shapes(c: Mapping[str, Any]) -> dict[str, Any]:
    stages, per_stage = c["pipe"], c["layers"] // c["pipe"]
    return {
        "embed": (c["vocab"], c["width"]),
        "layers": {name: (stages, per_stage, *shape) for name, shape in _layer_shapes(c).items()},
        "unembed": (c["width"], c["vocab"]),
    }


def _rms(x: jax.Array) -> jax.Array:
    return x * jax.lax.rsqrt(jnp.mean(jnp.square(x), -1, keepdims=True) + 1e-6)


def _layer(x: jax.Array, w: dict[str, jax.Array], act: Any, between: P) -> jax.Array:
    w = jax.tree.map(lambda a: a.astype(act), w)
    y = checkpoint_name(_rms(x), "norm1")
    q = checkpoint_name(jnp.einsum("bsh,hnd->bsnd", y, w["q"]), "q")
    k = checkpoint_name(jnp.einsum("bsh,hnd->bsnd", y, w["k"]), "k")
    v = checkpoint_name(jnp.einsum("bsh,hnd->bsnd", y, w["v"]), "v")
    scores = jnp.einsum("bqnd,bknd->bnqk", q, k) / math.sqrt(q.shape[-1])
    causal = jnp.tril(jnp.ones((x.shape[1], x.shape[1]), bool))
    probs = checkpoint_name(jax.nn.softmax(jnp.where(causal, scores, -1e9)), "probs")
    o = checkpoint_name(jnp.einsum("bnqk,bknd->bqnd", probs, v), "attn")
    x = x + jnp.einsum("bsnd,ndh->bsh", o, w["o"])
    x = checkpoint_name(jax.lax.with_sharding_constraint(x, between), "mid")
    y = checkpoint_name(_rms(x), "norm2")
    u = checkpoint_name(y @ w["up"], "up")
    a = checkpoint_name(jax.nn.gelu(u), "act")
    out: jax.Array = jax.lax.with_sharding_constraint(x + a @ w["down"], between)
    return out


def _loss(params: Any, tokens: jax.Array, c: Mapping[str, Any]) -> jax.Array:
    act = DTYPES[c["act_dtype"]]
    between = P("data", "tensor" if c["sequence_parallel"] else None, None)
    layer = jax.checkpoint(
        functools.partial(_layer, act=act, between=between),
        policy=jax.checkpoint_policies.save_only_these_names(*SAVED[c["remat"]]),
    )
    x = params["embed"].astype(act)[tokens[:, :-1]]
    x = jax.lax.with_sharding_constraint(x, between)
    if c["pipe"] == 1:
        layers = jax.tree.map(lambda w: w.reshape(-1, *w.shape[2:]), params["layers"])
        x, _ = jax.lax.scan(lambda h, w: (layer(h, w), None), x, layers)
    else:
        x = _gpipe(x, params["layers"], layer, c["microbatches"], between)
    logits = (_rms(x) @ params["unembed"].astype(act)).astype(jnp.float32)
    labels = tokens[:, 1:]
    log_probs = jax.nn.log_softmax(logits)
    return -jnp.mean(jnp.take_along_axis(log_probs, labels[..., None], -1))


def _gpipe(x: jax.Array, layers: Any, layer: Any, count: int, between: P) -> jax.Array:
    """Run the layers as a GPipe pipeline over the mesh axis ``pipe``: ``count`` microbatches
    enter stage 0 one per tick, and each tick every stage runs its layers on what the stage
    before it passed on (a roll along the stage axis, which the compiler makes a
    collective-permute). ``jax.grad`` differentiates it as it is: every tick's stage inputs are
    kept for the backward pass, the bubble's ticks included."""
    stages = jax.tree.leaves(layers)[0].shape[0]
    rows = x.shape[0]
    micro = x.reshape(rows // count, count, *x.shape[1:]).swapaxes(0, 1)
    on_stages = P("pipe", *between)

    def stage(weights: Any, h: jax.Array) -> jax.Array:
        h, _ = jax.lax.scan(lambda h, w: (layer(h, w), None), h, weights)
        return h

    run_stages = jax.vmap(stage, spmd_axis_name="pipe")

    def tick(state: jax.Array, t: jax.Array) -> tuple[jax.Array, jax.Array]:
        entering = jnp.where(t < count, micro[jnp.minimum(t, count - 1)], 0)
        state = jnp.roll(state, 1, axis=0).at[0].set(entering)
        state = run_stages(layers, jax.lax.with_sharding_constraint(state, on_stages))
        return state, state[-1]

    empty = jax.lax.with_sharding_constraint(
        jnp.zeros((stages, *micro.shape[1:]), x.dtype), on_stages
    )
    _, leaving = jax.lax.scan(tick, empty, jnp.arange(count + stages - 1))
    out = leaving[stages - 1 :]
    return out.swapaxes(0, 1).reshape(x.shape)


def _adam(
    params: Any, grads: Any, state: dict[str, Any], opt_dtype: Any
) -> tuple[Any, dict[str, Any]]:
    """Adam's update, with its moments stored in ``opt_dtype`` and computed in float32."""
    b1, b2, lr, eps = 0.9, 0.999, 1e-4, 1e-8
    count = state["count"] + 1

    def moments(g: jax.Array, mu: jax.Array, nu: jax.Array) -> tuple[jax.Array, jax.Array]:
        g = g.astype(jnp.float32)
        return b1 * mu.astype(jnp.float32) + (1 - b1) * g, b2 * nu.astype(jnp.float32) + (
            1 - b2
        ) * g * g

    new = jax.tree.map(moments, grads, state["mu"], state["nu"])
    mu = jax.tree.map(lambda pair: pair[0], new, is_leaf=lambda leaf: isinstance(leaf, tuple))
    nu = jax.tree.map(lambda pair: pair[1], new, is_leaf=lambda leaf: isinstance(leaf, tuple))
    step = count.astype(jnp.float32)

    def update(p: jax.Array, m: jax.Array, v: jax.Array) -> jax.Array:
        m_hat, v_hat = m / (1 - b1**step), v / (1 - b2**step)
        new: jax.Array = (p.astype(jnp.float32) - lr * m_hat / (jnp.sqrt(v_hat) + eps)).astype(
            p.dtype
        )
        return new

    params = jax.tree.map(update, params, mu, nu)
    cast = functools.partial(jax.tree.map, lambda a: a.astype(opt_dtype))
    return params, {"mu": cast(mu), "nu": cast(nu), "count": count}


def _step(params: Any, opt_state: Any, tokens: jax.Array, c: Mapping[str, Any]) -> Any:
    grad_dtype = DTYPES[c["grad_dtype"]]
    loss_and_grads = jax.value_and_grad(functools.partial(_loss, c=c))
    as_grads = jax.tree.map(lambda p: p.astype(grad_dtype), params)
    count = c["microbatches"] if c["pipe"] == 1 else 1
    if count == 1:
        loss, grads = loss_and_grads(as_grads, tokens)
    else:
        # Microbatch k is rows k, k + count, ...: each device's rows stay on it.
        rows = tokens.shape[0]
        micro = tokens.reshape(rows // count, count, -1).swapaxes(0, 1)

        def accumulate(total: Any, batch: jax.Array) -> tuple[Any, None]:
            loss, grads = loss_and_grads(as_grads, batch)
            return jax.tree.map(jnp.add, total, (loss, grads)), None

        zero = jax.tree.map(jnp.zeros_like, (jnp.zeros((), jnp.float32), as_grads))
        (loss, grads), _ = jax.lax.scan(accumulate, zero, micro)
        loss = loss / count
    params, opt_state = _adam(params, grads, opt_state, DTYPES[c["opt_dtype"]])
    return params, opt_state, loss


def mesh_for(c: Mapping[str, Any], devices: Sequence[jax.Device]) -> jax.sharding.Mesh:
    """The configuration's mesh over ``devices``, with Auto axes: the compiler places what the
    layouts leave open (this check measures its plan, not a hand-written one)."""
    return jax.make_mesh(
        (c["pipe"], c["data"], c["tensor"]),
        MESH_AXES,
        axis_types=(AxisType.Auto,) * 3,
        devices=devices,
    )


def lower_step(c: Mapping[str, Any], mesh: jax.sharding.Mesh) -> Any:
    """Lower one training step of configuration ``c`` on ``mesh`` for abstract inputs.

    Nothing the size of the model is allocated. The parameters and optimizer state are donated,
    so the step writes its results over them, as a training loop does.
    """
    zero = c["zero"]
    param_fsdp = "data" if zero == 3 else None
    state_fsdp = "data" if zero >= 1 else None
    param_specs, state_specs, shapes = _specs(c, param_fsdp), _specs(c, state_fsdp), _shapes(c)

    def abstract(shape: tuple[int, ...], spec: P, dtype: Any) -> jax.ShapeDtypeStruct:
        return jax.ShapeDtypeStruct(shape, dtype, sharding=NamedSharding(mesh, spec))

    def tree(specs: Any, dtype: Any) -> Any:
        return jax.tree.map(
            lambda shape, spec: abstract(shape, spec, dtype),
            shapes,
            specs,
            is_leaf=lambda leaf: isinstance(leaf, tuple),
        )

    params = tree(param_specs, DTYPES[c["param_dtype"]])
    moments = tree(state_specs, DTYPES[c["opt_dtype"]])
    count = abstract((), P(), jnp.int32)
    opt_state = {"mu": moments, "nu": moments, "count": count}
    tokens = abstract((c["batch"], c["seq"] + 1), P("data"), jnp.int32)
    shardings = jax.tree.map(lambda leaf: leaf.sharding, (params, opt_state))
    step = jax.jit(
        functools.partial(_step, c=c),
        donate_argnums=(0, 1),
        out_shardings=(*shardings, NamedSharding(mesh, P())),
    )
    with jax.set_mesh(mesh):
        return step.lower(params, opt_state, tokens)


@dataclass(frozen=True)
class CompiledPlan:
    """What a compiler planned for one step, per device, or why it refused."""

    target: str
    """``"cpu"`` or a TPU topology such as ``"v5e:2x4"``."""
    argument_bytes: int = 0
    output_bytes: int = 0
    alias_bytes: int = 0
    temporary_bytes: int = 0
    collectives: tuple[tuple[str, str], ...] = ()
    """Each kind of collective the program runs, with the mesh axes it runs over."""
    refused: str = ""
    """The compiler's message when it found that the step does not fit, else empty."""

    @property
    def needed_temporary_bytes(self) -> float:
        """The temporaries the compiler planned, or those its refusal said the step needs.

        Raises:
            ValueError: if a refusal's message does not state the temporaries it needed.
        """
        if not self.refused:
            return self.temporary_bytes
        found = re.search(r"HLO temporaries \(([\d.]+)([KMGT])\)", self.refused)
        if found is None:
            raise ValueError(
                "the compiler's refusal does not state the temporaries it needed in the form "
                f"'HLO temporaries (16.49G)': {self.refused!r}"
            )
        # XLA writes sizes in binary units: its "G" is a gibibyte.
        unit: int = 2 ** (10 * ("KMGT".index(found[2]) + 1))
        return float(found[1]) * unit


def _read(compiled: Any, mesh: jax.sharding.Mesh, target: str) -> CompiledPlan:
    from spmd_guide.analysis import collectives_by_axis

    found = sorted(
        {(c.op, "+".join(c.axes)) for c in collectives_by_axis(compiled, mesh) if c.axes}
    )
    analysis = compiled.memory_analysis()
    return CompiledPlan(
        target=target,
        argument_bytes=analysis.argument_size_in_bytes,
        output_bytes=analysis.output_size_in_bytes,
        alias_bytes=analysis.alias_size_in_bytes,
        temporary_bytes=analysis.temp_size_in_bytes,
        collectives=tuple(found),
    )


def measure(c: Mapping[str, Any], target: str = "cpu") -> CompiledPlan:
    """Compile configuration ``c`` (as :func:`plan` completes it) and read the compiler's plan.

    ``target`` is ``"cpu"`` (this process's CPU devices, which must number the configuration's
    devices) or a TPU topology, compiled for a slice that is not attached
    (:mod:`spmd_guide.tpu`). CPU programs are compiled without LLVM's slow optimisations, which
    change the machine code and not the plan of buffers.

    When the environment variable ``SPMD_GUIDE_TPU_PLANS`` names a folder, a TPU result is kept
    there under a fingerprint of the lowered program, the topology, and the JAX and libtpu
    versions, and read back for the same program instead of compiling it again.

    Raises:
        ValueError: if the target's devices do not number the configuration's.
        jax.errors.JaxRuntimeError: if compiling fails for any reason but memory.
    """
    devices_needed = c["pipe"] * c["data"] * c["tensor"]
    if target == "cpu":
        devices = tuple(jax.devices()[:devices_needed])
    else:
        from spmd_guide import tpu

        devices = tpu.compile_only_devices(target)
    if len(devices) != devices_needed:
        raise ValueError(
            f"the configuration's mesh (pipe {c['pipe']} x data {c['data']} x tensor "
            f"{c['tensor']}) needs {devices_needed} devices, and {target!r} has {len(devices)}"
        )
    mesh = mesh_for(c, devices)
    lowered = lower_step(c, mesh)
    if target == "cpu":
        options = {"xla_backend_optimization_level": 0, "xla_llvm_disable_expensive_passes": True}
        return _read(lowered.compile(compiler_options=options), mesh, target)
    folder = os.environ.get("SPMD_GUIDE_TPU_PLANS")
    kept = None
    if folder:
        import importlib.metadata

        fingerprint = hashlib.sha256(
            "\0".join(
                [
                    lowered.as_text(),
                    target,
                    jax.__version__,
                    importlib.metadata.version("libtpu"),
                    # Flags change what the compiler plans.
                    os.environ.get("XLA_FLAGS", ""),
                    os.environ.get("LIBTPU_INIT_ARGS", ""),
                ]
            ).encode()
        ).hexdigest()
        kept = Path(folder) / f"{fingerprint}.json"
        if kept.is_file():
            fields = json.loads(kept.read_text())
            fields["collectives"] = tuple(tuple(pair) for pair in fields.get("collectives", ()))
            try:
                return CompiledPlan(**fields)
            except TypeError:
                pass  # kept by an older CompiledPlan: compile again and keep the new one
    try:
        result = _read(lowered.compile(), mesh, target)
    except jax.errors.JaxRuntimeError as error:
        if "RESOURCE_EXHAUSTED" not in str(error):
            raise
        result = CompiledPlan(target=target, refused=str(error).split("\n")[0])
    if kept is not None:
        kept.parent.mkdir(parents=True, exist_ok=True)
        kept.write_text(json.dumps(asdict(result)))
    return result

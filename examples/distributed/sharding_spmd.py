"""Train a small Flax NNX model sharded over a device mesh, by a strategy of your choice.

    python examples/distributed/sharding_spmd.py --strategy fsdp --steps 20
    python examples/distributed/sharding_spmd.py --strategy 2d --mesh 2x4

Every weight of the model names its dimensions with logical axes ("embed", "mlp", "classes").
A strategy is a table of rules that maps those names to the mesh's axes, so switching from data
parallel to tensor parallel or FSDP is switching the table. The model and its Adam optimizer are
created by a jitted function under the mesh, so every parameter and every moment comes out
already split, and no whole weight is moved to a device. Training is a plain jitted step; the
batch is split over the mesh's "data" axis. The mesh has Explicit axes, jax.make_mesh's default.

The script needs only jax, flax, optax and numpy. It runs on one host's GPUs or TPUs as it is
(give --mesh sizes that multiply to their count); on several hosts it would not join them, since
it never calls jax.distributed.initialize and feeds the whole batch from one process. On a
machine with only a CPU, JAX is given 8 CPU devices unless JAX_NUM_CPU_DEVICES says otherwise.
"""

from __future__ import annotations

import argparse
import math
import os
import sys

# Strategy -> (mesh axis names, default mesh shape, rules from logical axes to mesh axes).
# A mesh axis of None keeps that dimension whole (replicated).
STRATEGIES = {
    "dp": (
        ("data",),
        (8,),
        (("batch", "data"), ("embed", None), ("mlp", None), ("classes", None)),
    ),
    "fsdp": (
        ("data",),
        (8,),
        (("batch", "data"), ("embed", "data"), ("mlp", None), ("classes", None)),
    ),
    "tp": (
        ("data", "model"),
        (1, 8),
        (("batch", "data"), ("embed", None), ("mlp", "model"), ("classes", None)),
    ),
    "2d": (
        ("data", "model"),
        (4, 2),
        (("batch", "data"), ("embed", None), ("mlp", "model"), ("classes", None)),
    ),
}
EMBED, MLP_WIDTH, CLASSES = 128, 512, 16


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--strategy", choices=STRATEGIES, default="2d")
    parser.add_argument(
        "--mesh",
        help="mesh shape: 8 for dp and fsdp (one 'data' axis), DxM such as 4x2 for tp and 2d "
        "('data' x 'model'); default 8 for dp and fsdp, 1x8 for tp, 4x2 for 2d",
    )
    parser.add_argument("--steps", type=int, default=20, help="training steps (default: 20)")
    parser.add_argument("--batch-size", type=int, default=256, help="global batch (default: 256)")
    args = parser.parse_args(argv)
    axis_names, default_shape, _ = STRATEGIES[args.strategy]
    args.mesh_shape = parse_mesh(parser, args.mesh) if args.mesh else default_shape
    if len(args.mesh_shape) != len(axis_names):
        example = "x".join(map(str, default_shape))
        parser.error(
            f"strategy {args.strategy!r} uses mesh axes {axis_names}: give --mesh with "
            f"{len(axis_names)} size(s), e.g. {example}"
        )
    if args.steps < 1:
        parser.error(f"--steps must be at least 1, got {args.steps}")
    return args


def parse_mesh(parser: argparse.ArgumentParser, text: str) -> tuple[int, ...]:
    try:
        shape = tuple(int(part) for part in text.lower().split("x"))
    except ValueError:
        parser.error(f"--mesh {text!r} is not a shape; write 8 or 4x2")
    if min(shape) < 1:
        parser.error(f"--mesh {text!r} must have positive sizes, e.g. 8 or 4x2")
    return shape


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    axis_names, _, rules = STRATEGIES[args.strategy]

    # Imported after parsing, so --help and argument errors are instant.
    import jax
    import numpy as np
    import optax
    from flax import nnx
    from jax.sharding import NamedSharding
    from jax.sharding import PartitionSpec as P

    if "JAX_NUM_CPU_DEVICES" not in os.environ:
        jax.config.update("jax_num_cpu_devices", 8)  # used only when the CPU is the platform
    devices = jax.devices()
    needed = math.prod(args.mesh_shape)
    if needed != len(devices):
        print(
            f"error: --mesh {'x'.join(map(str, args.mesh_shape))} needs {needed} devices but "
            f"{len(devices)} are available; choose sizes whose product is {len(devices)}",
            file=sys.stderr,
        )
        return 2
    batch_axis = dict(rules)["batch"]
    mesh_sizes = dict(zip(axis_names, args.mesh_shape, strict=True))
    data_size = mesh_sizes[batch_axis]
    if args.batch_size % data_size:
        padded = math.ceil(args.batch_size / data_size) * data_size
        print(
            f"error: batch {args.batch_size} is not divisible by the {data_size} devices on "
            f"axis {batch_axis!r}; use --batch-size {padded}",
            file=sys.stderr,
        )
        return 2

    class MLP(nnx.Module):
        """embed -> mlp -> embed -> classes, every weight labelled with its logical axes."""

        def __init__(self, rngs: nnx.Rngs):
            def dense(n_in, n_out, axes, bias_axes):
                return nnx.Linear(
                    n_in,
                    n_out,
                    kernel_init=nnx.with_partitioning(nnx.initializers.lecun_normal(), axes),
                    bias_init=nnx.with_partitioning(nnx.initializers.zeros_init(), bias_axes),
                    rngs=rngs,
                )

            # Each bias is laid out as its layer's output features; down keeps those whole.
            self.up = dense(EMBED, MLP_WIDTH, ("embed", "mlp"), ("mlp",))
            self.down = dense(MLP_WIDTH, EMBED, ("mlp", "embed"), (None,))
            self.head = dense(EMBED, CLASSES, ("embed", "classes"), ("classes",))

        def __call__(self, x):
            hidden = nnx.relu(self.up(x))
            # down's output is laid out as x: under tp or fsdp JAX cannot infer a layout for it.
            back = nnx.relu(self.down(hidden, out_sharding=jax.typeof(x).sharding))
            return self.head(back)

    mesh = jax.make_mesh(args.mesh_shape, axis_names)

    @nnx.jit
    def create_model_and_optimizer():
        model = MLP(nnx.Rngs(0))
        return model, nnx.Optimizer(model, optax.adam(1e-3), wrt=nnx.Param)

    # Under the mesh and the rules, each weight's logical axes become a sharding, and jit
    # creates it already split.
    with jax.set_mesh(mesh), nnx.logical_axis_rules(rules):
        model, optimizer = create_model_and_optimizer()

    # Each step replaces every array of the model and the optimizer: donated, the old buffers
    # hold the new values, so a step needs no second copy of the state.
    @nnx.jit(donate_argnames=("model", "optimizer"))
    def train_step(model, optimizer, x, y):
        def loss_fn(model):
            logits = model(x)
            return optax.softmax_cross_entropy_with_integer_labels(logits, y).mean()

        loss, grads = nnx.value_and_grad(loss_fn)(model)
        optimizer.update(model, grads)
        return loss

    print(f"{len(devices)} {devices[0].platform.upper()} devices")
    shape_text = ", ".join(f"{name}={size}" for name, size in mesh_sizes.items())
    print(f"strategy {args.strategy!r} on mesh ({shape_text})")
    print("rules: " + ", ".join(f"{logical} -> {axis}" for logical, axis in rules))
    for path, param in nnx.to_flat_state(nnx.state(model, nnx.Param)):
        array = param[...]
        name = "/".join(map(str, path))
        local = array.addressable_shards[0].data.shape
        print(f"  {name:12} {array.shape!s:11} {array.sharding.spec!s:18} per device {local}")

    def bytes_by_device(tree):
        totals = dict.fromkeys(range(len(devices)), 0)
        for leaf in jax.tree.leaves(tree):
            for shard in leaf.addressable_shards:
                totals[shard.device.id] += shard.data.nbytes
        return totals

    params = nnx.state(model, nnx.Param)
    total = sum(leaf.nbytes for leaf in jax.tree.leaves(params))
    per_device = bytes_by_device(params)
    print(
        f"parameters: {total:,} bytes in all; per device: "
        + ", ".join(f"{d}:{b:,}" for d, b in per_device.items())
    )
    opt_bytes = bytes_by_device(nnx.state(optimizer, nnx.OptState))
    print(f"optimizer state per device: {max(opt_bytes.values()):,} bytes")

    # A learnable task: the label is the argmax of a fixed linear map of the input.
    rng = np.random.default_rng(0)
    teacher = rng.normal(size=(EMBED, CLASSES))
    x_all = rng.normal(size=(8 * args.batch_size, EMBED)).astype(np.float32)
    y_all = np.argmax(x_all @ teacher, axis=-1).astype(np.int32)
    batch_sharding = NamedSharding(mesh, P(batch_axis))
    every = max(1, math.ceil(args.steps / 5))
    for step in range(1, args.steps + 1):
        start = ((step - 1) % 8) * args.batch_size
        x = jax.device_put(x_all[start : start + args.batch_size], batch_sharding)
        y = jax.device_put(y_all[start : start + args.batch_size], batch_sharding)
        with jax.set_mesh(mesh):  # the step's layouts refer to the current mesh
            loss = train_step(model, optimizer, x, y)
        if step % every == 0 or step in (1, args.steps):
            print(f"step {step:4d}  loss {float(loss):.4f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Train a sharded Flax NNX model, checkpoint it with Orbax, and resume on any number of devices.

    python examples/checkpoints/train_and_resume.py --dir checkpoints --steps 4
    python examples/checkpoints/train_and_resume.py --dir checkpoints --steps 8 --resume

The model and its Adam state are laid out fully sharded (FSDP) over every device, and saved
every --save-every steps with the step number, keeping the last two checkpoints. With --resume
the latest checkpoint is read straight into the layout of the devices this run has, which may
be fewer or more than the run that saved it, and training continues from the step after it.

The script needs only jax, flax, optax, orbax-checkpoint and numpy. On a machine with only a
CPU, JAX is given 8 CPU devices unless JAX_NUM_CPU_DEVICES says otherwise.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

EMBED, MLP_WIDTH, CLASSES, BATCH = 128, 512, 16, 256
# Fully sharded: every weight's embed dimension, and the batch, split over the "data" axis.
RULES = (("batch", "data"), ("embed", "data"), ("mlp", None), ("classes", None))


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--dir", type=Path, required=True, help="the checkpoint folder")
    parser.add_argument("--steps", type=int, default=8, help="train up to this step (default 8)")
    parser.add_argument(
        "--save-every", type=int, default=2, help="save every this many steps (default 2)"
    )
    parser.add_argument(
        "--resume", action="store_true", help="continue from the latest checkpoint in --dir"
    )
    args = parser.parse_args(argv)
    if args.steps < 1 or args.save_every < 1:
        parser.error("--steps and --save-every must be at least 1")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    folder = args.dir.absolute()  # Orbax saves to absolute paths only
    if args.resume and not folder.is_dir():
        print(
            f"error: --resume: no checkpoint folder {folder}; run without --resume first",
            file=sys.stderr,
        )
        return 2

    # Imported after parsing, so --help and argument errors are instant.
    import jax
    import numpy as np
    import optax
    import orbax.checkpoint as ocp
    from flax import nnx
    from jax.sharding import AxisType, NamedSharding
    from jax.sharding import PartitionSpec as P

    if "JAX_NUM_CPU_DEVICES" not in os.environ:
        jax.config.update("jax_num_cpu_devices", 8)  # used only when the CPU is the platform
    devices = jax.devices()
    if EMBED % len(devices) or BATCH % len(devices):
        print(
            f"error: {len(devices)} devices cannot split the {EMBED}-wide embed dimension and "
            f"the batch of {BATCH}; use a device count that divides {EMBED}, such as 4 or 8",
            file=sys.stderr,
        )
        return 2
    mesh = jax.make_mesh((len(devices),), ("data",), axis_types=(AxisType.Auto,))

    class MLP(nnx.Module):
        def __init__(self, rngs: nnx.Rngs):
            def dense(n_in, n_out, axes):
                return nnx.Linear(
                    n_in,
                    n_out,
                    kernel_init=nnx.with_partitioning(nnx.initializers.lecun_normal(), axes),
                    bias_init=nnx.with_partitioning(nnx.initializers.zeros_init(), axes[1:]),
                    rngs=rngs,
                )

            self.up = dense(EMBED, MLP_WIDTH, ("embed", "mlp"))
            self.down = dense(MLP_WIDTH, EMBED, ("mlp", "embed"))
            self.head = dense(EMBED, CLASSES, ("embed", "classes"))

        def __call__(self, x):
            return self.head(nnx.relu(self.down(nnx.relu(self.up(x)))))

    def create_model_and_optimizer():
        model = MLP(nnx.Rngs(0))
        return model, nnx.Optimizer(model, optax.adam(1e-3), wrt=nnx.Param)

    @nnx.jit
    def train_step(model, optimizer, x, y):
        def loss_fn(model):
            logits = model(x)
            return optax.softmax_cross_entropy_with_integer_labels(logits, y).mean()

        loss, grads = nnx.value_and_grad(loss_fn)(model)
        optimizer.update(model, grads)
        return loss

    manager = ocp.CheckpointManager(folder, options=ocp.CheckpointManagerOptions(max_to_keep=2))
    print(f"{len(devices)} {devices[0].platform.upper()} devices")
    if args.resume:
        latest = manager.latest_step()
        if latest is None:
            print(
                f"error: --resume: {folder} holds no checkpoint; run without --resume first",
                file=sys.stderr,
            )
            return 2
        # An abstract target: shapes, dtypes and this mesh's shardings, nothing allocated.
        with nnx.logical_axis_rules(RULES):
            graphdef, target = nnx.get_abstract_model(create_model_and_optimizer, mesh)
        state = manager.restore(latest, args=ocp.args.StandardRestore(target))
        model, optimizer = nnx.merge(graphdef, state)
        print(f"restored step {latest} onto {len(devices)} devices")
        first = latest + 1
    else:
        with jax.set_mesh(mesh), nnx.logical_axis_rules(RULES):
            model, optimizer = nnx.jit(create_model_and_optimizer)()
        first = 1
    kernel = model.up.kernel[...]
    print(f"up kernel {kernel.shape}, each device holds {kernel.addressable_shards[0].data.shape}")

    # A learnable task: the label is the argmax of a fixed linear map of the input. Batch n is
    # the same on every run, so a resumed run sees what an uninterrupted one would.
    rng = np.random.default_rng(0)
    teacher = rng.normal(size=(EMBED, CLASSES))
    x_all = rng.normal(size=(8 * BATCH, EMBED)).astype(np.float32)
    y_all = np.argmax(x_all @ teacher, axis=-1).astype(np.int32)
    batch_sharding = NamedSharding(mesh, P("data"))
    for step in range(first, args.steps + 1):
        start = (step % 8) * BATCH
        x = jax.device_put(x_all[start : start + BATCH], batch_sharding)
        y = jax.device_put(y_all[start : start + BATCH], batch_sharding)
        loss = train_step(model, optimizer, x, y)
        print(f"step {step:4d}  loss {float(loss):.6f}")
        if step % args.save_every == 0:
            manager.save(step, args=ocp.args.StandardSave(nnx.state((model, optimizer))))
    manager.close()  # waits for the last save to be written
    print(f"checkpoints kept: {manager.all_steps()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

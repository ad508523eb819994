"""Train a small Flax NNX model sharded over a device mesh, by a strategy of your choice.

    python examples/distributed/sharding_spmd.py --strategy fsdp --mesh 8 --steps 20
    python examples/distributed/sharding_spmd.py --strategy 2d --mesh 4x2

Strategies: dp (data parallel), tp (tensor parallel), 2d (data x tensor), fsdp (fully
sharded). With no accelerator, the script runs on 8 CPU devices unless JAX_NUM_CPU_DEVICES
says otherwise. It prints the sharding plan, the bytes each device holds, and the loss.
"""

from __future__ import annotations

import argparse
import math
import sys

DEFAULT_MESH = {"dp": "8", "tp": "1x8", "2d": "4x2", "fsdp": "8"}


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--strategy", choices=("dp", "tp", "2d", "fsdp"), default="2d")
    parser.add_argument(
        "--mesh",
        help="mesh shape: 8 for one 'data' axis, or DxM (e.g. 4x2) for 'data' x 'model' "
        "(default: 8 for dp and fsdp, 1x8 for tp, 4x2 for 2d)",
    )
    parser.add_argument("--steps", type=int, default=20, help="training steps (default: 20)")
    parser.add_argument("--batch-size", type=int, default=256, help="global batch (default: 256)")
    args = parser.parse_args(argv)
    args.mesh_shape = parse_mesh(parser, args.mesh or DEFAULT_MESH[args.strategy])
    if args.steps < 1:
        parser.error(f"--steps must be at least 1, got {args.steps}")
    return args


def parse_mesh(parser: argparse.ArgumentParser, text: str) -> tuple[int, ...]:
    try:
        shape = tuple(int(part) for part in text.lower().split("x"))
    except ValueError:
        parser.error(f"--mesh {text!r} is not a shape; write 8 or 4x2")
    if not 1 <= len(shape) <= 2 or min(shape) < 1:
        parser.error(f"--mesh {text!r} must have one or two positive sizes, e.g. 8 or 4x2")
    return shape


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)

    import jax  # noqa: F401  (imported after parsing, so --help is instant)
    import optax
    from flax import nnx

    from spmd_guide import make_mesh, use_cpu_devices
    from spmd_guide.analysis import bytes_per_device, total_bytes
    from spmd_guide.models import MLP, synthetic_classification
    from spmd_guide.strategies import plan_sharding
    from spmd_guide.training import ShardedTrainer

    devices = use_cpu_devices()
    names = ("data",) if len(args.mesh_shape) == 1 else ("data", "model")
    try:
        mesh = make_mesh(args.mesh_shape, names, axis_types="auto")
        model = MLP((64, 512, 512, 16), rngs=nnx.Rngs(0))
        plan = plan_sharding(model, args.strategy, mesh)
        plan.batch_sharding(args.batch_size)
    except ValueError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2

    print(f"{len(devices)} {devices[0].platform.upper()} devices")
    print(plan)

    trainer = ShardedTrainer(model, optax.adam(1e-3), plan)
    params = nnx.state(trainer.model, nnx.Param)
    opt_state = nnx.state(trainer.optimizer, nnx.OptState)
    per_device = bytes_per_device(params)
    print(
        f"parameters: {total_bytes(params):,} bytes in all; per device: "
        + ", ".join(f"{d}:{b:,}" for d, b in per_device.items())
    )
    print(f"optimizer state per device: {max(bytes_per_device(opt_state).values()):,} bytes")

    x, y = synthetic_classification(args.batch_size * 8, 64, 16)
    losses = trainer.fit(x, y, steps=args.steps, batch_size=args.batch_size)
    every = max(1, math.ceil(args.steps / 5))
    for step, loss in enumerate(losses, start=1):
        if step % every == 0 or step in (1, args.steps):
            print(f"step {step:4d}  loss {loss:.4f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Train a sharded Flax NNX model, checkpoint it with Orbax, and resume on any number of devices.

    python examples/checkpoints/train_and_resume.py --dir checkpoints --steps 4
    python examples/checkpoints/train_and_resume.py --dir checkpoints --steps 8 --resume

The model and its Adam state are laid out fully sharded (FSDP) over every device, and saved
every --save-every steps with the step number, keeping the last two checkpoints. With --resume
the latest checkpoint is read straight into the layout of the devices this run has, which may
be fewer or more than the run that saved it, and training continues from the step after it.
Each save and each restore prints a digest of the whole state, so two runs can be compared.
A checkpoint is written under a temporary name and renamed when finished, or, with
--commit-file, written in place and marked finished by a file written last. With --fail-on P,
process P stops dead after step --fail-at-step, as a process whose machine fails does (SIGKILL:
no clean-up, no message), once the checkpoints saved before then are complete on disk, so that
every run loses the process at the same point.

It runs as one process or as several. Started plainly, as above, it runs alone. Started by srun
(SLURM), mpirun (Open MPI), a TPU pod's or Kubernetes' environment, or the repository's launcher
(python -m spmd_guide.launch), every process joins one job, trains on the global mesh, and
writes the shards it holds into the same checkpoint:

    srun -n 2 python examples/checkpoints/train_and_resume.py --dir checkpoints --steps 4
    mpirun -np 2 python examples/checkpoints/train_and_resume.py --dir checkpoints --steps 4

The script needs only jax, flax, optax, orbax-checkpoint and numpy. On a machine with only a
CPU, JAX is given 8 CPU devices unless JAX_NUM_CPU_DEVICES says otherwise.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import sys

from etils import epath

EMBED, MLP_WIDTH, CLASSES, BATCH = 128, 512, 16, 256
# Fully sharded: every weight's embed dimension, and the batch, split over the "data" axis.
RULES = (("batch", "data"), ("embed", "data"), ("mlp", None), ("classes", None))


def folder_path(text: str) -> epath.Path:
    """The checkpoint folder as Orbax takes it: a bucket's address (gs://, s3://) kept as it is,
    a local folder made absolute, since Orbax saves to absolute paths only."""
    if "://" in text:
        return epath.Path(text)
    return epath.Path(os.path.abspath(text))


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument(
        "--dir",
        type=folder_path,
        required=True,
        help="the checkpoint folder: a local path, or a bucket such as gs://bucket/run",
    )
    parser.add_argument("--steps", type=int, default=8, help="train up to this step (default 8)")
    parser.add_argument(
        "--save-every", type=int, default=2, help="save every this many steps (default 2)"
    )
    parser.add_argument(
        "--resume", action="store_true", help="continue from the latest checkpoint in --dir"
    )
    parser.add_argument(
        "--commit-file",
        action="store_true",
        help="write each checkpoint in place and mark it finished with a file written last, "
        "instead of renaming a temporary folder (for S3, which cannot rename a folder at once)",
    )
    parser.add_argument(
        "--heartbeat-timeout",
        type=int,
        default=100,
        help="seconds after which a silent process is taken for failed, and the job ended "
        "(default 100, JAX's)",
    )
    parser.add_argument(
        "--fail-on", type=int, help="this process stops dead (SIGKILL) after --fail-at-step"
    )
    parser.add_argument(
        "--fail-at-step", type=int, default=5, help="the step it stops after (default 5)"
    )
    args = parser.parse_args(argv)
    if args.steps < 1 or args.save_every < 1:
        parser.error("--steps and --save-every must be at least 1")
    if args.fail_on is not None and not 1 <= args.fail_at_step < args.steps:
        parser.error(
            f"--fail-at-step must be a step from 1 to {args.steps - 1} (before --steps), "
            f"got {args.fail_at_step}"
        )
    if args.heartbeat_timeout < 1:
        parser.error(f"--heartbeat-timeout must be at least 1 second, got {args.heartbeat_timeout}")
    return args


def join_the_job(heartbeat_timeout: int) -> None:
    """Join the other processes of a multi-process job, or go on alone if there is none."""
    import jax

    def number(name: str) -> int | None:
        value = os.environ.get(name)
        return int(value) if value else None

    # JAX reads JAX_COORDINATOR_ADDRESS itself but not these two, which the repository's
    # launcher sets; whatever is left None, JAX takes from the environment that srun, mpirun, a
    # TPU pod or Kubernetes gives each process.
    num_processes, process_id = number("JAX_NUM_PROCESSES"), number("JAX_PROCESS_ID")
    try:
        jax.distributed.initialize(
            num_processes=num_processes,
            process_id=process_id,
            # Peers that never arrive then end the job, instead of leaving it waiting.
            initialization_timeout=120,
            heartbeat_timeout_seconds=heartbeat_timeout,
        )
    except ValueError as error:
        nothing_set = num_processes is None and process_id is None
        if nothing_set and str(error) == "coordinator_address should be defined.":
            # Raised at once, before any network access, when nothing names a coordinator and no
            # cluster is detected: a plain `python train_and_resume.py`, the only process.
            return
        error.add_note(
            "Start every process under srun, mpirun, a TPU pod or Kubernetes, or set "
            "JAX_COORDINATOR_ADDRESS, JAX_NUM_PROCESSES and JAX_PROCESS_ID for each."
        )
        raise


def fail_like_a_machine(folder: epath.Path, saved: int | None) -> None:
    """End this process at once, as a failed machine ends it (SIGKILL: nothing runs after it),
    once step ``saved``'s checkpoint is complete: its folder holds the file Orbax writes last."""
    import signal
    import time

    deadline = time.monotonic() + 120
    while saved is not None and not (folder / str(saved) / "commit_success.txt").exists():
        if time.monotonic() > deadline:
            sys.exit(f"error: step {saved}'s checkpoint was not complete within 120 s")
        time.sleep(0.05)
    os.kill(os.getpid(), signal.SIGKILL)


def digest(state) -> str:
    """A short fingerprint of every value in ``state``, the same on any mesh or device count.

    For this demonstration only: it gathers the whole model and optimizer state onto every
    process. A real run would hash each process's own shards and gather the hashes.
    """
    import jax
    from jax.experimental import multihost_utils

    # Gathered, because with several processes no process holds every shard.
    whole = multihost_utils.process_allgather(state, tiled=True)
    hasher = hashlib.sha256()
    for leaf in jax.tree.leaves(whole):
        hasher.update(leaf.tobytes())
    return hasher.hexdigest()[:16]


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    folder = args.dir
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
    from jax.sharding import NamedSharding
    from jax.sharding import PartitionSpec as P

    if "JAX_NUM_CPU_DEVICES" not in os.environ:
        jax.config.update("jax_num_cpu_devices", 8)  # used only when the CPU is the platform
    join_the_job(args.heartbeat_timeout)
    if args.fail_on is not None and not 0 <= args.fail_on < jax.process_count():
        print(
            f"error: --fail-on {args.fail_on}: the job's processes are 0 to "
            f"{jax.process_count() - 1}",
            file=sys.stderr,
        )
        return 2
    devices = jax.devices()  # every process's devices
    if EMBED % len(devices) or BATCH % len(devices):
        print(
            f"error: {len(devices)} devices cannot split the {EMBED}-wide embed dimension and "
            f"the batch of {BATCH}; use a device count that divides {EMBED}, such as 4 or 8",
            file=sys.stderr,
        )
        return 2

    def log(message: str) -> None:
        if jax.process_index() == 0:  # one log for the job, not one per process
            print(message)

    mesh = jax.make_mesh((len(devices),), ("data",))

    class MLP(nnx.Module):
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

    def create_model_and_optimizer():
        model = MLP(nnx.Rngs(0))
        return model, nnx.Optimizer(model, optax.adam(1e-3), wrt=nnx.Param)

    # Each step replaces every array of the model and the optimizer: donated, the old buffers
    # hold the new values, so a step needs no second copy of the state. (Orbax's save has copied
    # the arrays to host memory before it returns, so the step after a save may reuse them.)
    @nnx.jit(donate_argnames=("model", "optimizer"))
    def train_step(model, optimizer, x, y):
        def loss_fn(model):
            logits = model(x)
            return optax.softmax_cross_entropy_with_integer_labels(logits, y).mean()

        loss, grads = nnx.value_and_grad(loss_fn)(model)
        optimizer.update(model, grads)
        return loss

    policies = ocp.checkpoint_managers
    options = ocp.CheckpointManagerOptions(
        # Every --save-every steps, and at once when the job is being preempted (which Orbax
        # learns through JAX's distributed preemption service).
        save_decision_policy=policies.AnySavePolicy(
            [
                policies.FixedIntervalPolicy(args.save_every),
                policies.PreemptionCheckpointingPolicy(),
            ]
        ),
        preservation_policy=policies.LatestN(2),
        # None: Orbax chooses, renaming a temporary folder except on Google Cloud Storage.
        atomicity_options=ocp.options.AtomicityOptions(mode=ocp.options.AtomicityMode.COMMIT_FILE)
        if args.commit_file
        else None,
    )
    manager = ocp.CheckpointManager(folder, options=options)
    print(
        f"process {jax.process_index()} of {jax.process_count()}: {jax.local_device_count()} "
        f"of {len(devices)} {devices[0].platform.upper()} devices"
    )
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
        # The model and the optimizer are separate items of the checkpoint (an evaluation job
        # restores the model alone); the target holds them as its items 0 and 1.
        restored = manager.restore(
            latest,
            args=ocp.args.Composite(
                model=ocp.args.StandardRestore(target[0]),
                optimizer=ocp.args.StandardRestore(target[1]),
            ),
        )
        state = nnx.State({0: restored.model, 1: restored.optimizer})
        model, optimizer = nnx.merge(graphdef, state)
        log(f"restored step {latest} onto {len(devices)} devices, state digest {digest(state)}")
        first = latest + 1
    else:
        with jax.set_mesh(mesh), nnx.logical_axis_rules(RULES):
            model, optimizer = nnx.jit(create_model_and_optimizer)()
        first = 1
    kernel = model.up.kernel[...]
    log(f"up kernel {kernel.shape}, each device holds {kernel.addressable_shards[0].data.shape}")

    # A learnable task: the label is the argmax of a fixed linear map of the input. Batch n is
    # the same on every run, so a resumed run sees what an uninterrupted one would.
    rng = np.random.default_rng(0)
    teacher = rng.normal(size=(EMBED, CLASSES))
    x_all = rng.normal(size=(8 * BATCH, EMBED)).astype(np.float32)
    y_all = np.argmax(x_all @ teacher, axis=-1).astype(np.int32)
    batch_sharding = NamedSharding(mesh, P("data"))

    def global_batch(rows):
        # Each process fills only the shards of its own devices.
        return jax.make_array_from_callback(rows.shape, batch_sharding, lambda i: rows[i])

    for step in range(first, args.steps + 1):
        start = (step % 8) * BATCH
        x = global_batch(x_all[start : start + BATCH])
        y = global_batch(y_all[start : start + BATCH])
        with jax.set_mesh(mesh):
            loss = train_step(model, optimizer, x, y)
        log(f"step {step:4d}  loss {float(loss):.6f}")
        # Every process calls save at every step, and the policy decides the same everywhere;
        # on a save step, each process writes the shards its devices hold.
        items = ocp.args.Composite(
            model=ocp.args.StandardSave(nnx.state(model)),
            optimizer=ocp.args.StandardSave(nnx.state(optimizer)),
        )
        if manager.save(step, args=items):
            log(f"saving step {step}, state digest {digest(nnx.state((model, optimizer)))}")
        if step == args.fail_at_step and jax.process_index() == args.fail_on:
            fail_like_a_machine(folder, manager.latest_step())
        if manager.reached_preemption(step):
            # Every process reaches this step before it stops, so the checkpoint is whole.
            log(f"preempted: every process stops after step {step}, saved")
            break
    manager.close()  # waits for the last save to be written
    log(f"checkpoints kept: {manager.all_steps()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

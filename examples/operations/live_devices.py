"""Training that goes on when a process fails, on the devices left: JAX's ``live_devices``.

    python -m spmd_guide.launch -n 2 --devices-per-process 4 --keep-going \
        examples/operations/live_devices.py --fail-on 1 --fail-at-step 3

Every process trains a data-parallel linear model whose weights every device holds whole, on
global batches that any process can make for itself. Each step runs inside
``multihost_utils.live_devices``, a block that starts on the devices found alive when the last
one ended, and on leaving checks which are alive now: if any has failed, every process leaves it
with ``ProcessFailureError``. With --fail-on P, process P exits at step --fail-at-step, after its
part of the step and before the block's check, as a process whose machine fails between two
steps does. The others' check finds it gone; they run the step again on a mesh of the devices
left, with the weights they hold, and finish with the weights of a run that lost no process.

With --mid-step, process P exits before its part of the step's all-reduce instead. On CPU
devices the others then never finish the step: their all-reduce waits for ever, or fails and the
block raises as before, but the step run again does not finish. The job waits until it is
stopped.

JAX calls this API experimental, and its documentation says that fault tolerance works fully
only on GPUs. It needs ``jax_enable_recoverability`` set before joining the job; without it, a
failed process ends every process of the job. It needs only jax and numpy, and a launcher that
lets the other processes run on when one fails (the repository's with --keep-going). On a
machine with only a CPU, JAX is given 4 CPU devices per process unless JAX_NUM_CPU_DEVICES says
otherwise.
"""

from __future__ import annotations

import argparse
import os
import sys

WIDTH, ROWS, STEPS = 16, 64, 6


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--fail-on", type=int, help="this process exits part way")
    parser.add_argument(
        "--fail-at-step", type=int, default=3, help="the step it exits at (default 3)"
    )
    parser.add_argument(
        "--mid-step", action="store_true", help="exit before the step's all-reduce, not after"
    )
    args = parser.parse_args(argv)
    if not 0 <= args.fail_at_step < STEPS:
        parser.error(
            f"--fail-at-step must be a step from 0 to {STEPS - 1}, got {args.fail_at_step}"
        )
    return args


def join_the_job() -> bool:
    """Join the other processes of a multi-process job, able to outlive a failed one; False if
    there is no job to join."""
    import jax

    def number(name: str) -> int | None:
        value = os.environ.get(name)
        return int(value) if value else None

    # Set before joining: it makes the job's runtime tolerate a process that fails. Process 0
    # reads it, when it starts the job's coordination service; set it in every process anyway.
    jax.config.update("jax_enable_recoverability", True)
    # JAX reads JAX_COORDINATOR_ADDRESS itself but not these two, which the repository's
    # launcher sets; whatever is left None, JAX takes from srun's, mpirun's, a TPU pod's or
    # Kubernetes' environment. A process silent for 5 s is taken for failed: 5 s for the
    # demonstration; a real job wants tens of seconds or more, so that a slow or briefly
    # unreachable host is not taken for dead.
    num_processes, process_id = number("JAX_NUM_PROCESSES"), number("JAX_PROCESS_ID")
    try:
        jax.distributed.initialize(
            num_processes=num_processes,
            process_id=process_id,
            initialization_timeout=60,
            heartbeat_timeout_seconds=5,
        )
    except ValueError as error:
        if num_processes is None and str(error) == "coordinator_address should be defined.":
            return False
        raise
    return True


def global_batch(step: int):
    """Step ``step``'s rows and targets, the same in every process and every run."""
    import numpy as np

    rng = np.random.default_rng(step)
    x = rng.normal(size=(ROWS, WIDTH)).astype(np.float32)
    return x, (x @ np.arange(WIDTH, dtype=np.float32) / WIDTH).astype(np.float32)


def train(fail_here: int | None, mid_step: bool) -> None:
    import jax
    import jax.numpy as jnp
    import numpy as np
    from jax.experimental import multihost_utils
    from jax.sharding import NamedSharding
    from jax.sharding import PartitionSpec as P

    def say(message: str) -> None:
        print(f"process {jax.process_index()}: {message}", flush=True)

    @jax.jit
    def train_step(w, x, y):
        loss, grad = jax.value_and_grad(lambda w: jnp.mean((x @ w - y) ** 2))(w)
        return w - 0.1 * grad, loss

    def on(mesh, value, spec):
        # Each process fills only the pieces of its own devices, from the value it holds.
        return jax.make_array_from_callback(
            value.shape, NamedSharding(mesh, spec), lambda index: value[index]
        )

    weights = np.zeros(WIDTH, np.float32)  # whole, on the host of every process
    devices = jax.devices()
    step = 0
    while step < STEPS:
        try:
            # Every live process gets the same devices, or every one raises.
            with multihost_utils.live_devices(devices) as devices:
                mesh = jax.make_mesh((len(devices),), ("data",), devices=devices)
                x, y = global_batch(step)
                if step == fail_here and mid_step:
                    os._exit(1)  # lost as the others start the step's all-reduce
                rows, targets = on(mesh, x, P("data")), on(mesh, y, P("data"))
                w, loss = train_step(on(mesh, weights, P()), rows, targets)
                new_weights = np.asarray(w.addressable_shards[0].data)
                loss_value = float(loss.addressable_shards[0].data)
                say(f"step {step} on {len(devices)} devices, loss {loss_value:.6f}")
                if step == fail_here:
                    os._exit(1)  # lost after its part of the step, before the block's check
        except multihost_utils.ProcessFailureError as failure:
            lost = sorted({d.process_index for d in failure.failed_devices})
            cause = failure.__cause__  # what the block raised, if anything did
            # Its first line, less the source file and line the runtime's messages go on with.
            first_line = str(cause).splitlines()[0].split(": [")[0] if cause else ""
            raised = f" (the step raised {first_line})" if cause else ""
            say(f"step {step}: the devices of process {lost} failed{raised}; again without them")
            devices = [d for d in devices if d not in failure.failed_devices]
            continue
        weights = new_weights
        step += 1
    say(f"finished, weights {np.round(weights[:4], 6).tolist()}")
    # Recoverable processes do not wait for each other at exit, and a process that shuts down
    # after process 0, which hosts the job's coordinator, has left is ended with an error. So
    # process 0 leaves last: its block's check waits for the others until they have shut down.
    # (JAX's guide advises one live_devices block in a program; this second one runs only in
    # process 0, after training, and every other process is leaving, so none can wait on it.)
    while jax.process_index() == 0 and any(d.process_index != 0 for d in devices):
        try:
            with multihost_utils.live_devices(devices):
                pass
        except multihost_utils.ProcessFailureError as shut_down:
            devices = [d for d in devices if d not in shut_down.failed_devices]


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    import jax

    if "JAX_NUM_CPU_DEVICES" not in os.environ:
        jax.config.update("jax_num_cpu_devices", 4)  # used only when the CPU is the platform
    if not join_the_job():
        print(
            "error: live_devices.py needs a job of several processes to lose one of; start it "
            "under srun, mpirun or python -m spmd_guide.launch -n 2 --keep-going",
            file=sys.stderr,
        )
        return 2
    fail_here = args.fail_at_step if args.fail_on == jax.process_index() else None
    train(fail_here, args.mid_step)
    return 0


if __name__ == "__main__":
    sys.exit(main())

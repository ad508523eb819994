"""A job whose processes disagree about the step: how it hangs, how to see where, how to stop it.

    python -m spmd_guide.launch -n 2 --devices-per-process 4 \
        examples/operations/uneven_steps.py --short-on 1 --deadline 20
    mpirun -np 2 python examples/operations/uneven_steps.py --short-on 1 --deadline 20

Every process trains a data-parallel model on its own share of the data. With --short-on P,
process P's share holds one batch fewer, as uneven files of a dataset do: P leaves the loop a
step early and waits to shut down, while every other process runs one more step and waits inside
its gradient all-reduce for P, which never comes. Nothing fails; the job stops making progress.

Three things make such a job tell where it is:
  * every process prints a fingerprint of the program it runs, the SHA-256 of its lowered text,
    of JAX's and jaxlib's versions and of the compiler's flags (--check-programs compares them
    across processes before the first step, and stops with the processes that differ: the
    processes of one job must run one program);
  * `kill -USR1 PID` makes a process print every thread's Python stack, and go on;
  * --deadline S makes a process that, once training has started, finishes no step for S
    seconds print its stacks, and exit 2 seconds later: a watchdog re-armed at every step, so a
    run of any length is stopped only by a step (or the wait to shut down) longer than S.
--agree-on-steps is the fix for uneven data: the processes agree on the fewest batches any of
them holds before they start. --extra-term-on P gives process P's step a different loss (a term
the others lack), a program that differs without hanging: each process goes on with different
weights, which --check-programs catches.

--shutdown-timeout and --heartbeat-timeout pass JAX's shutdown_timeout_seconds and
heartbeat_timeout_seconds (300 and 100 s unless given) to jax.distributed.initialize: without a
deadline, the hang above lasts until process P's shutdown gives up, and the runtime then ends
every process and logs which one never reached the shutdown barrier.

It needs only jax and numpy (and mpi4py under Open MPI 5 or later). Started plainly it runs
alone; under srun, mpirun, a TPU pod, Kubernetes or the repository's launcher, every process
joins one job. On a machine with only a CPU, JAX is given 4 CPU devices per process unless
JAX_NUM_CPU_DEVICES says otherwise.
"""

from __future__ import annotations

import argparse
import faulthandler
import hashlib
import os
import signal
import sys
import time
from collections.abc import Callable

ROWS_PER_DEVICE, WIDTH, BATCHES = 4, 16, 3
EXIT_GRACE = 2.0  # seconds between printing the stacks at the deadline and exiting


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--short-on", type=int, help="this process holds one batch fewer")
    parser.add_argument("--extra-term-on", type=int, help="this process's loss has an extra term")
    parser.add_argument(
        "--agree-on-steps", action="store_true", help="run the fewest batches any process holds"
    )
    parser.add_argument(
        "--check-programs", action="store_true", help="stop if the processes' programs differ"
    )
    parser.add_argument(
        "--deadline",
        type=float,
        help="print every stack and exit when no step finishes for this many seconds",
    )
    parser.add_argument(
        "--shutdown-timeout",
        type=int,
        default=300,
        help="seconds jax.distributed.shutdown() waits for every process (JAX's default 300)",
    )
    parser.add_argument(
        "--heartbeat-timeout",
        type=int,
        default=100,
        help="seconds after which a silent process is taken for dead (JAX's default 100)",
    )
    args = parser.parse_args(argv)
    if args.deadline is not None and args.deadline <= 0:
        parser.error("--deadline must be a positive number of seconds")
    return args


def join_the_job(shutdown_timeout: int = 300, heartbeat_timeout: int = 100) -> None:
    """Join the other processes of a multi-process job, or go on alone if there is none."""
    import jax

    def number(name: str) -> int | None:
        value = os.environ.get(name)
        return int(value) if value else None

    # JAX reads JAX_COORDINATOR_ADDRESS itself but not these two, which the repository's
    # launcher sets; whatever is left None, JAX takes from srun's, mpirun's, a TPU pod's or
    # Kubernetes' environment.
    num_processes, process_id = number("JAX_NUM_PROCESSES"), number("JAX_PROCESS_ID")
    try:
        jax.distributed.initialize(
            num_processes=num_processes,
            process_id=process_id,
            initialization_timeout=60,
            shutdown_timeout_seconds=shutdown_timeout,
            heartbeat_timeout_seconds=heartbeat_timeout,
        )
    except ValueError as error:
        if num_processes is None and str(error) == "coordinator_address should be defined.":
            return  # no job to join: run alone
        raise


def watch_for_hangs(deadline: float | None) -> Callable[[], None]:
    """Make this process say where it is when it hangs; return the watchdog's re-arming, to call
    when the training loop starts and after every step."""
    # `kill -USR1 PID` prints every thread's Python stack to stderr; the process goes on.
    faulthandler.register(signal.SIGUSR1, all_threads=True)

    def made_progress() -> None:
        if deadline is None:
            return
        # No progress for `deadline` seconds: print every stack. EXIT_GRACE seconds later the
        # alarm, whose default action ends the process, stops it: by then every process of the
        # job has printed its own stacks, before the first to exit brings the job down. Each
        # call replaces the timers the one before it set.
        faulthandler.dump_traceback_later(deadline)
        signal.setitimer(signal.ITIMER_REAL, deadline + EXIT_GRACE)

    return made_progress


def agree_on_batches(batches: int) -> int:
    """The fewest batches any process holds: the steps every process can run."""
    import numpy as np
    from jax.experimental import multihost_utils

    return int(multihost_utils.process_allgather(np.int32(batches)).min())


def fingerprint(lowered) -> bytes:
    """SHA-256 of what decides the compiled program: the lowered text, JAX's and jaxlib's
    versions, and the compiler flags (XLA_FLAGS, and LIBTPU_INIT_ARGS on TPUs)."""
    import jax
    import jax.lib

    flags = [
        " ".join(sorted(os.environ.get(name, "").split()))
        for name in ("XLA_FLAGS", "LIBTPU_INIT_ARGS")
    ]
    parts = [lowered.as_text(), jax.__version__, jax.lib.__version__, *flags]  # jaxlib's
    return hashlib.sha256("\n".join(parts).encode()).digest()


def processes_running_another_program(lowered) -> list[int]:
    """The processes whose program differs from this one's, compared by fingerprint."""
    import jax
    import numpy as np
    from jax.experimental import multihost_utils

    mine = fingerprint(lowered)
    every = multihost_utils.process_allgather(np.frombuffer(mine, np.uint8))
    return [p for p in range(jax.process_count()) if bytes(every[p]) != mine]


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    started = time.monotonic()
    made_progress = watch_for_hangs(args.deadline)

    import jax
    import jax.numpy as jnp
    import numpy as np
    from jax.sharding import NamedSharding
    from jax.sharding import PartitionSpec as P

    if "JAX_NUM_CPU_DEVICES" not in os.environ:
        jax.config.update("jax_num_cpu_devices", 4)  # used only when the CPU is the platform
    join_the_job(args.shutdown_timeout, args.heartbeat_timeout)
    me = jax.process_index()

    def say(message: str) -> None:
        # Seconds since this process started: the log then shows when each last made progress.
        print(f"{time.monotonic() - started:5.1f} s  process {me}: {message}", flush=True)

    mesh = jax.make_mesh((jax.device_count(),), ("data",))
    rows = ROWS_PER_DEVICE * jax.local_device_count()
    rng = np.random.default_rng(me)
    batches = BATCHES - (me == args.short_on)
    data = rng.normal(size=(batches, rows, WIDTH)).astype(np.float32)
    if args.agree_on_steps:
        batches = agree_on_batches(batches)

    extra = me == args.extra_term_on

    def loss(w, x):
        value = jnp.mean((x @ w - x) ** 2)
        if extra:  # a Python branch on the process: this process traces another program
            value = value + jnp.sum(w**2)
        return value

    @jax.jit
    def train_step(w, x):
        return w - 0.1 * jax.grad(loss)(w, x)

    w = jax.device_put(jnp.zeros((WIDTH, WIDTH)), NamedSharding(mesh, P()))

    def global_batch(step: int):
        return jax.make_array_from_process_local_data(NamedSharding(mesh, P("data")), data[step])

    lowered = train_step.lower(w, global_batch(0))
    say(f"{batches} batches, program {fingerprint(lowered).hex()[:16]}")
    if args.check_programs and (differing := processes_running_another_program(lowered)):
        say(f"stopping: processes {differing} run another program than this one")
        return 1
    compiled = lowered.compile()  # before the watchdog, so that no step waits on this compile
    made_progress()
    for step in range(batches):
        w = compiled(w, global_batch(step))
        say(f"step {step} done, loss {float(loss(w, global_batch(step))):.6f}")
        made_progress()
    # Replicated, so every process holds the whole of w: its digest should agree everywhere.
    say(f"finished, weights {hashlib.sha256(np.asarray(w).tobytes()).hexdigest()[:16]}")
    if jax.process_count() > 1:
        jax.distributed.shutdown()  # waits for every process to reach it
    faulthandler.cancel_dump_traceback_later()
    signal.setitimer(signal.ITIMER_REAL, 0)  # finished: no alarm
    return 0


if __name__ == "__main__":
    sys.exit(main())

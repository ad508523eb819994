"""A job slowed by one process, and a profile of every process that shows which one.

    python -m spmd_guide.launch -n 2 --devices-per-process 4 \
        examples/operations/straggler.py --trace-dir traces --slow 1
    mpirun -np 2 python examples/operations/straggler.py --trace-dir traces --slow 1

Every process trains a data-parallel step. With --slow P, process P spends --delay seconds on the
host before each step, as a process with a slow input pipeline or a busy disk does. Every process
then takes as long per step, since each step's gradient all-reduce waits for the last process to
arrive: the step times printed by each process cannot tell which one is slow.

Each process records its steps with the JAX profiler into a folder of its own under --trace-dir
(process_0, process_1, ...): the profiler names its files after the host, so processes that share
one host would otherwise write the same files. On a cluster, one process to a host, give every
process the same folder instead, and TensorBoard's profile plugin shows each host of the run. In
the traces the slow process's all-reduce is short, and every other process's is long: they wait
in it.

It needs only jax and numpy (and mpi4py under Open MPI 5 or later). Started plainly it runs
alone; under srun, mpirun, a TPU pod, Kubernetes or the repository's launcher, every process
joins one job. On a machine with only a CPU, JAX is given 4 CPU devices per process unless
JAX_NUM_CPU_DEVICES says otherwise.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

ROWS_PER_DEVICE, WIDTH, STEPS = 64, 256, 3


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--trace-dir", type=Path, required=True, help="folder for the traces")
    parser.add_argument("--slow", type=int, help="this process waits on its host before a step")
    parser.add_argument(
        "--delay", type=float, default=1.0, help="seconds the slow process waits (default 1)"
    )
    args = parser.parse_args(argv)
    if args.delay < 0:
        parser.error("--delay must be zero or more seconds")
    return args


def join_the_job() -> None:
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
            num_processes=num_processes, process_id=process_id, initialization_timeout=60
        )
    except ValueError as error:
        if num_processes is None and str(error) == "coordinator_address should be defined.":
            return  # no job to join: run alone
        raise


def profile_steps(train_step, w, batch, *, trace_dir: Path, slow: bool, delay: float):
    """Run STEPS steps under the profiler, this process's trace in a folder of its own."""
    import jax

    folder = trace_dir / f"process_{jax.process_index()}"
    seconds = []
    with jax.profiler.trace(str(folder)):
        for _ in range(STEPS):
            started = time.perf_counter()
            if slow:
                time.sleep(delay)  # the host busy elsewhere: reading, decoding, a slow disk
            w = jax.block_until_ready(train_step(w, batch))
            seconds.append(time.perf_counter() - started)
    return w, seconds


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    import jax
    import jax.numpy as jnp
    import numpy as np
    from jax.sharding import NamedSharding
    from jax.sharding import PartitionSpec as P

    if "JAX_NUM_CPU_DEVICES" not in os.environ:
        jax.config.update("jax_num_cpu_devices", 4)  # used only when the CPU is the platform
    join_the_job()
    me = jax.process_index()
    mesh = jax.make_mesh((jax.device_count(),), ("data",))
    rows = np.random.default_rng(me).normal(
        size=(ROWS_PER_DEVICE * jax.local_device_count(), WIDTH)
    )
    batch = jax.make_array_from_process_local_data(
        NamedSharding(mesh, P("data")), rows.astype(np.float32)
    )
    w = jax.device_put(jnp.zeros((WIDTH, WIDTH)), NamedSharding(mesh, P()))

    @jax.jit
    def train_step(w, x):
        return w - 0.01 * jax.grad(lambda w: jnp.mean((x @ w - x) ** 2))(w)

    w = jax.block_until_ready(train_step(w, batch))  # compiled outside the profile
    w, seconds = profile_steps(
        train_step, w, batch, trace_dir=args.trace_dir, slow=me == args.slow, delay=args.delay
    )
    steps = ", ".join(f"{s:.2f}" for s in seconds)
    print(f"process {me}: step seconds {steps}; trace in {args.trace_dir}/process_{me}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

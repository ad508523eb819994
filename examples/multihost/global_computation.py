"""One program, several processes: a global mesh, a global array, and collectives across both.

Run it with the launcher, which starts every process and tells each how to join:

    python -m spmd_guide.launch -n 2 --devices-per-process 4 \
        examples/multihost/global_computation.py

Under a cluster scheduler, start one copy per GPU (srun -n or mpirun -np the number of GPUs;
on a TPU pod, one per host): JAX's cluster detection gives each process the GPU its local rank
names. The coordinator address, process count and process id come from the flags below; the
flags default to JAX_COORDINATOR_ADDRESS, JAX_NUM_PROCESSES and JAX_PROCESS_ID. Whatever is
still unset, JAX detects from SLURM, Open MPI, Kubernetes or Cloud TPU. Started plainly, with
none of these, it runs alone, as process 0 of 1.
"""

from __future__ import annotations

import argparse
import os
import sys
import threading


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--coordinator-address", default=os.environ.get("JAX_COORDINATOR_ADDRESS"))
    parser.add_argument("--num-processes", type=int, default=_env_int("JAX_NUM_PROCESSES"))
    parser.add_argument("--process-id", type=int, default=_env_int("JAX_PROCESS_ID"))
    parser.add_argument(
        "--init-timeout",
        type=int,
        default=300,
        help="seconds to wait for the other processes (default 300, as JAX waits)",
    )
    parser.add_argument("--output", help="file the report is written to, by process 0 only")
    return parser.parse_args(argv)


def _env_int(name: str) -> int | None:
    value = os.environ.get(name)
    return int(value) if value else None


def _name(args: argparse.Namespace) -> str:
    return "?" if args.process_id is None else str(args.process_id)


def exit_unless_joined_within(seconds: int, args: argparse.Namespace) -> threading.Event:
    """Exit with one clear line if the returned event is not set within ``seconds``.

    If the other processes never come, JAX's runtime ends this process with a C++ abort and a
    stack trace; this says what went wrong first, and exits cleanly.
    """
    joined = threading.Event()

    def give_up() -> None:
        if not joined.wait(seconds):
            print(
                f"process {_name(args)}: could not join {args.num_processes} process(es) "
                f"through the coordinator at {args.coordinator_address} within {seconds} s. "
                "Check that every process was started with the same coordinator address and "
                "process count, and that process 0 is running.",
                file=sys.stderr,
                flush=True,
            )
            os._exit(1)

    threading.Thread(target=give_up, daemon=True).start()
    return joined


def join(args: argparse.Namespace) -> bool:
    """Join the other processes, or go on alone if nothing says how; say why and return False
    if joining fails."""
    import jax

    joined = exit_unless_joined_within(args.init_timeout, args)
    try:
        # Arguments left as None are filled in by JAX: the coordinator from
        # JAX_COORDINATOR_ADDRESS, everything else from a detected SLURM, Open MPI,
        # Kubernetes or Cloud TPU environment.
        jax.distributed.initialize(
            coordinator_address=args.coordinator_address,
            num_processes=args.num_processes,
            process_id=args.process_id,
            # Longer than the watchdog, so that its one-line message comes first.
            initialization_timeout=args.init_timeout + 30,
        )
    except (ValueError, TypeError, RuntimeError) as error:
        nothing_set = args.num_processes is None and args.process_id is None
        if nothing_set and str(error) == "coordinator_address should be defined.":
            # Raised at once, before any network access, when nothing names a coordinator and
            # no cluster is detected: a plain `python global_computation.py`, the only process.
            joined.set()
            return True
        print(
            f"process {_name(args)}: cannot start ({error}). Run it with python -m "
            "spmd_guide.launch, or pass --coordinator-address, --num-processes and --process-id.",
            file=sys.stderr,
        )
        return False
    joined.set()
    return True


def compute_globally(args: argparse.Namespace) -> None:
    """A global mesh and array from each process's own rows, and two computations on them."""
    import jax
    import jax.numpy as jnp
    import numpy as np
    from jax.sharding import NamedSharding
    from jax.sharding import PartitionSpec as P

    index, count = jax.process_index(), jax.process_count()
    print(
        f"process {index} of {count}: {jax.local_device_count()} local devices, "
        f"{jax.device_count()} global devices"
    )

    # A mesh over every process's devices. Each process can only address its own.
    mesh = jax.make_mesh((jax.device_count(),), ("data",))
    rows_per_process = 2 * jax.local_device_count()
    everything = np.arange(count * rows_per_process * 3, dtype=np.float32).reshape(-1, 3)
    # Each process loads only its own rows, as it would read its own shard of a dataset.
    mine = everything[index * rows_per_process : (index + 1) * rows_per_process]
    x = jax.make_array_from_process_local_data(NamedSharding(mesh, P("data")), mine)
    print(f"process {index}: local rows {mine.shape}, global array {jax.typeof(x)}")

    squares = jax.jit(lambda a: jnp.sum(a**2))(x)
    total = jax.shard_map(
        lambda block: jax.lax.psum(block.sum(), "data"),
        mesh=mesh,
        in_specs=P("data"),
        out_specs=P(),
    )(x)
    # Replicated results are addressable on every process; read them anywhere.
    result = f"global result: sum of squares {float(squares):.1f}, psum total {float(total):.1f}"
    print(result)

    if index == 0 and args.output:
        # Every process holds the answer, but only one should write it.
        with open(args.output, "w") as report:
            report.write(result + "\n")
        print(f"process 0 wrote {args.output}")


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if not join(args):
        return 2
    compute_globally(args)

    import jax

    jax.distributed.shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main())

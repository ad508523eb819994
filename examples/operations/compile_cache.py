"""Compiles kept across restarts: JAX's persistent compilation cache, in a folder every process
of a job shares.

    python -m spmd_guide.launch -n 2 --devices-per-process 4 \
        examples/operations/compile_cache.py --cache-dir cache
    mpirun -np 2 python examples/operations/compile_cache.py --cache-dir cache

Every process traces, lowers and compiles a training step of --layers layers, and says how long
each took and whether the compiled program was read from the cache. Run it again with the same
folder and the compile is read back instead, where the cache holds this process's key. Tracing
and lowering run at every start; only the compile is kept. Another program (--layers), another
jaxlib or other XLA flags make another key, and the cache misses.

Only process 0 writes to the cache; every process reads it. On a cluster the folder is one that
every process can read, on a shared file system (or in a bucket such as gs://, which JAX reaches
through etils' epath). With --explain, JAX logs each miss with its key, and each process that
does not write says so.

It needs only jax and numpy (and mpi4py under Open MPI 5 or later). Started plainly it runs
alone; under srun, mpirun, a TPU pod, Kubernetes or the repository's launcher, every process
joins one job. On a machine with only a
CPU, JAX is given 4 CPU devices per process unless JAX_NUM_CPU_DEVICES says otherwise.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections import Counter

WIDTH = 128


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--cache-dir", required=True, help="the cache's folder, shared by all")
    parser.add_argument("--layers", type=int, default=32, help="layers of the step (default 32)")
    parser.add_argument("--explain", action="store_true", help="log each miss and its key")
    args = parser.parse_args(argv)
    if args.layers < 1:
        parser.error(f"--layers must be at least 1, got {args.layers}")
    return args


def use_the_cache(folder: str, *, explain: bool) -> Counter[str]:
    """Keep every compiled program in ``folder``; return a count of the programs read from it."""
    import jax

    jax.config.update("jax_compilation_cache_dir", folder)
    # Unless told otherwise JAX keeps only programs that took a second or more to compile.
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0)
    jax.config.update("jax_explain_cache_misses", explain)
    events: Counter[str] = Counter()

    def count(event: str, **_: object) -> None:
        if event == "/jax/compilation_cache/cache_hits":
            events["hits"] += 1

    jax.monitoring.register_event_listener(count)
    return events


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


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    import jax
    import jax.numpy as jnp
    from jax.sharding import NamedSharding
    from jax.sharding import PartitionSpec as P

    if "JAX_NUM_CPU_DEVICES" not in os.environ:
        jax.config.update("jax_num_cpu_devices", 4)  # used only when the CPU is the platform
    events = use_the_cache(args.cache_dir, explain=args.explain)  # before anything compiles
    join_the_job()
    mesh = jax.make_mesh((jax.device_count(),), ("data",))

    def loss(weights, x):
        for w in weights:  # a Python loop, unrolled: each layer lengthens the program
            x = jnp.tanh(x @ w)
        return jnp.mean(x**2)

    @jax.jit
    def train_step(weights, x):
        grads = jax.grad(loss)(weights, x)
        return [w - 0.01 * g for w, g in zip(weights, grads, strict=True)]

    replicated = NamedSharding(mesh, P())
    weights = [
        jax.ShapeDtypeStruct((WIDTH, WIDTH), jnp.float32, sharding=replicated)
        for _ in range(args.layers)
    ]
    rows = jax.ShapeDtypeStruct(
        (8 * jax.device_count(), WIDTH), jnp.float32, sharding=NamedSharding(mesh, P("data"))
    )
    started = time.perf_counter()
    lowered = train_step.trace(weights, rows).lower()
    lowering = time.perf_counter() - started
    started = time.perf_counter()
    lowered.compile()
    compiling = time.perf_counter() - started
    found = "read from the cache" if events["hits"] else "compiled"
    print(
        f"process {jax.process_index()}: {args.layers} layers traced and lowered in "
        f"{lowering:.2f} s, {found} in {compiling:.2f} s"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())

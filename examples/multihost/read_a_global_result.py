"""Read a result that is sharded over several processes: what fails, and the two ways that work.

    python -m spmd_guide.launch -n 2 --devices-per-process 4 \
        examples/multihost/read_a_global_result.py

Each process builds its rows of a global array, and the job doubles it. Converting the sharded
result to NumPy fails in every process, since no process holds every shard; gathering it with
``process_allgather``, or asking ``jit`` for a replicated result, gives each process all of it.

Each process joins a job started by srun (SLURM), mpirun (Open MPI), a TPU pod's or Kubernetes'
environment, or the repository's launcher (above). Started plainly, ``python
read_a_global_result.py``, it runs alone, and the conversion works: one process holds every
shard. Needs only jax and numpy.
"""

from __future__ import annotations

import os
import sys


def join_the_job() -> None:
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
        )
    except ValueError as error:
        nothing_set = num_processes is None and process_id is None
        if nothing_set and str(error) == "coordinator_address should be defined.":
            # Raised at once, before any network access, when nothing names a coordinator and no
            # cluster is detected: a plain `python read_a_global_result.py`, the only process.
            return
        error.add_note(
            "Start every process under srun, mpirun, a TPU pod or Kubernetes, or set "
            "JAX_COORDINATOR_ADDRESS, JAX_NUM_PROCESSES and JAX_PROCESS_ID for each."
        )
        raise


def main() -> int:
    import jax
    import numpy as np
    from jax.experimental import multihost_utils
    from jax.sharding import NamedSharding
    from jax.sharding import PartitionSpec as P

    join_the_job()
    index = jax.process_index()
    mesh = jax.make_mesh((jax.device_count(),), ("data",))
    # Two rows per local device, numbered globally: process 0 has rows 0-7, process 1 rows 8-15.
    first = index * 2 * jax.local_device_count()
    mine = np.arange(first, first + 2 * jax.local_device_count(), dtype=np.float32)
    x = jax.make_array_from_process_local_data(NamedSharding(mesh, P("data")), mine)
    doubled = jax.jit(lambda a: 2 * a)(x)

    try:
        np.asarray(doubled)
    except RuntimeError as error:
        print(f"process {index}: np.asarray(doubled) raised RuntimeError: {error}")
    else:
        print(f"process {index}: np.asarray(doubled) worked: this one process holds every shard")

    # Fix 1: gather the shards to every process, as a NumPy array.
    whole = multihost_utils.process_allgather(doubled, tiled=True)
    print(f"process {index}: process_allgather: shape {whole.shape}, sum {whole.sum():.0f}")

    # Fix 2: ask for a replicated result; every process then holds all of it on its devices.
    replicated = jax.jit(lambda a: 2 * a, out_shardings=NamedSharding(mesh, P()))(x)
    print(f"process {index}: replicated result: sum {np.asarray(replicated).sum():.0f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

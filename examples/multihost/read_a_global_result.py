"""Read a result that is sharded over several processes: what fails, and the two ways that work.

    python -m spmd_guide.launch -n 2 --devices-per-process 4 \
        examples/multihost/read_a_global_result.py

Each process builds its rows of a global array, and the job doubles it. Converting the sharded
result to NumPy fails in every process, since no process holds every shard; gathering it with
``process_allgather``, or asking ``jit`` for a replicated result, gives each process all of it.
Needs only jax and numpy.
"""

from __future__ import annotations

import os
import sys


def main() -> int:
    if "JAX_NUM_PROCESSES" not in os.environ:
        print(
            "error: run this under a launcher that sets JAX_NUM_PROCESSES, JAX_PROCESS_ID and "
            "JAX_COORDINATOR_ADDRESS, such as the command in this file's docstring",
            file=sys.stderr,
        )
        return 2
    import jax
    import numpy as np
    from jax.experimental import multihost_utils
    from jax.sharding import NamedSharding
    from jax.sharding import PartitionSpec as P

    jax.distributed.initialize(
        num_processes=int(os.environ["JAX_NUM_PROCESSES"]),
        process_id=int(os.environ["JAX_PROCESS_ID"]),
    )
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

    # Fix 1: gather the shards to every process, as a NumPy array.
    whole = multihost_utils.process_allgather(doubled, tiled=True)
    print(f"process {index}: process_allgather: shape {whole.shape}, sum {whole.sum():.0f}")

    # Fix 2: ask for a replicated result; every process then holds all of it on its devices.
    replicated = jax.jit(lambda a: 2 * a, out_shardings=NamedSharding(mesh, P()))(x)
    print(f"process {index}: replicated result: sum {np.asarray(replicated).sum():.0f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""A hybrid mesh: one axis across processes (slow links), one within each process (fast).

Run it with the repository's launcher:

    python -m spmd_guide.launch -n 2 --devices-per-process 4 examples/multihost/hybrid_mesh.py

or start it under srun (SLURM), mpirun (Open MPI), a TPU pod or Kubernetes, whose environment
tells each process how to join (``srun -n 2 python examples/multihost/hybrid_mesh.py``). Started
plainly, it runs alone, as a mesh of one process.

Each process prints, for a psum over each axis, the device groups of the compiled collective and
the processes each group spans.
"""

from __future__ import annotations

import os
import re
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
            # cluster is detected: a plain `python hybrid_mesh.py`, the only process.
            return
        error.add_note(
            "Start every process under srun, mpirun, a TPU pod or Kubernetes, or set "
            "JAX_COORDINATOR_ADDRESS, JAX_NUM_PROCESSES and JAX_PROCESS_ID for each."
        )
        raise


def show_hybrid_mesh() -> None:
    import jax
    import numpy as np
    from jax.experimental import mesh_utils
    from jax.sharding import AxisType, Mesh, NamedSharding
    from jax.sharding import PartitionSpec as P

    # The multi-node (or multi-slice) layout: devices within a process on the `local` axis,
    # processes on the `process` axis.
    devices = mesh_utils.create_hybrid_device_mesh(
        mesh_shape=(1, jax.local_device_count()),
        dcn_mesh_shape=(jax.process_count(), 1),
        process_is_granule=True,
    )
    mesh = Mesh(devices, ("process", "local"), axis_types=(AxisType.Auto, AxisType.Auto))
    index = jax.process_index()
    for row in mesh.devices:
        ids, processes = [d.id for d in row], sorted({d.process_index for d in row})
        print(f"mesh row: devices {ids}, processes {processes}")

    x = jax.make_array_from_process_local_data(
        NamedSharding(mesh, P("process", "local")),
        np.full((1, jax.local_device_count()), index + 1, np.float32),
    )
    for axis in ("local", "process"):
        summed = jax.jit(
            jax.shard_map(
                lambda block, axis=axis: jax.lax.psum(block, axis),
                mesh=mesh,
                in_specs=P("process", "local"),
                out_specs=P("process", "local"),
            )
        )
        hlo = summed.lower(x).compile().as_text()
        # GPUs and TPUs run it asynchronously, as an all-reduce-start and its done.
        (line,) = [op for op in hlo.splitlines() if re.search(r" all-reduce(-start)?\(", op)]
        groups = line.split("replica_groups=")[1].split(", use_global")[0]
        result = summed(x)
        mine = sorted({float(s.data[0, 0]) for s in result.addressable_shards})
        print(f"psum over {axis}: replica_groups={groups}; this process's blocks now hold {mine}")


def main() -> int:
    join_the_job()
    show_hybrid_mesh()
    import jax

    jax.distributed.shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main())

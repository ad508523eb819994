"""Each process loads only its own slice of the global batch; JAX assembles the global array.

    python -m spmd_guide.launch -n 2 --devices-per-process 4 \
        examples/multihost/per_process_batches.py

Each process joins a job started by srun (SLURM), mpirun (Open MPI), a TPU pod's or Kubernetes'
environment, or the repository's launcher (above), such as ``mpirun -np 2 python
examples/multihost/per_process_batches.py``; started plainly, it runs alone and loads every row.

With --uneven, process 1 loads fewer rows than process 0, and the batch is refused with a
message naming each process's count and the counts to drop or pad to. With --rows N, every
process loads N rows of its share.
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
            # cluster is detected: a plain `python per_process_batches.py`, the only process.
            return
        error.add_note(
            "Start every process under srun, mpirun, a TPU pod or Kubernetes, or set "
            "JAX_COORDINATOR_ADDRESS, JAX_NUM_PROCESSES and JAX_PROCESS_ID for each."
        )
        raise


GLOBAL_ROWS, WIDTH = 32, 3


def dataset():
    """The whole dataset, which every process could read, though each reads only its part."""
    import numpy as np

    return np.arange(GLOBAL_ROWS * WIDTH, dtype=np.float32).reshape(GLOBAL_ROWS, WIDTH)


def row_blocks(sharding) -> int:
    """How many blocks of rows this process's devices hold: the extent, within this process, of
    the mesh axes that split the rows (all its devices on a mesh of ``data`` alone; fewer on a
    ``data`` by ``model`` mesh, whose ``model`` devices hold the same rows)."""
    import jax
    import numpy as np

    mesh, spec = sharding.mesh, sharding.spec
    row_axes = spec[0] if len(spec) else None
    row_axes = () if row_axes is None else (row_axes,) if isinstance(row_axes, str) else row_axes
    dims = [mesh.axis_names.index(name) for name in row_axes]
    mine = np.vectorize(lambda device: device.process_index == jax.process_index())(mesh.devices)
    return len({tuple(position[dims]) for position in np.argwhere(mine)})


def check_rows(rows: int, sharding) -> None:
    """Check, once at start-up, that every process loads ``rows`` rows a step and that its
    devices can share them; call it again only when the data configuration changes.

    It gathers every process's count, a device computation the host waits for: called every
    step, it would hold the host until the previous step is done.

    Raises:
        ValueError: if the processes load different numbers of rows (every process learns so,
            instead of one building a different global shape and the others waiting for it),
            or a number their devices cannot share; the message says what to drop or pad to.
    """
    import jax
    import numpy as np
    from jax.experimental import multihost_utils

    counts = multihost_utils.process_allgather(np.int32(rows)).tolist()
    blocks = row_blocks(sharding)
    dropped_to = min(counts) // blocks * blocks
    padded_to = -(-max(counts) // blocks) * blocks
    fix = (
        f"pad them so that each holds {padded_to} (a multiple of the {blocks} blocks of rows "
        "each process's devices hold)"
    )
    if dropped_to:
        fix = f"drop rows so that each holds {dropped_to}, or {fix}"
    if len(set(counts)) > 1:
        held = ", ".join(f"process {i}: {n}" for i, n in enumerate(counts))
        raise ValueError(
            f"every process must load the same number of rows, but they hold {held}; {fix}"
        )
    if counts[0] % blocks:
        raise ValueError(
            f"each process holds {counts[0]} rows, which its {jax.local_device_count()} "
            f"devices cannot share evenly; {fix}"
        )


def assemble_batch(local, sharding, global_shape):
    """The global array made from this process's ``local`` rows, every step.

    ``global_shape`` comes from the configuration, so that each process checks its own rows
    against it without asking the others (``check_rows`` did that once, at start-up).
    """
    import jax

    return jax.make_array_from_process_local_data(sharding, local, global_shape)


def load_and_check(uneven: bool, keep: int | None = None) -> int:
    import jax
    import numpy as np
    from jax.experimental import multihost_utils
    from jax.sharding import NamedSharding
    from jax.sharding import PartitionSpec as P

    index, count = jax.process_index(), jax.process_count()
    mesh = jax.make_mesh((jax.device_count(),), ("data",))
    sharding = NamedSharding(mesh, P("data"))
    per_process = GLOBAL_ROWS // count
    mine = dataset()[index * per_process : (index + 1) * per_process][:keep]
    if uneven and index == 1:
        mine = mine[:-2]
    first = index * per_process
    print(f"process {index}: loaded rows {first} to {first + len(mine) - 1}")
    try:
        check_rows(len(mine), sharding)  # once, at start-up
    except ValueError as error:
        print(f"process {index}: {error}")
        return 1
    batch = assemble_batch(mine, sharding, (len(mine) * count, WIDTH))  # every step
    # Or let JAX ask for exactly the blocks this process's devices hold.
    loaded = []

    def read_block(block_index):
        loaded.append(block_index[0])
        return dataset()[block_index]

    same = jax.make_array_from_callback((GLOBAL_ROWS, WIDTH), sharding, read_block)
    rows = sorted((s.start, s.stop) for s in loaded)
    print(
        f"process {index}: the callback read rows {rows[0][0]} to {rows[-1][1] - 1}, "
        f"in {len(rows)} blocks"
    )
    # Check the assembly: gathered to every process, the batch is every process's rows in turn.
    shares = [dataset()[i * per_process : i * per_process + len(mine)] for i in range(count)]
    whole = multihost_utils.process_allgather(batch, tiled=True)
    assert np.array_equal(whole, np.concatenate(shares))
    assert np.array_equal(multihost_utils.process_allgather(same, tiled=True), dataset())
    what = "the whole dataset" if len(mine) == per_process else f"each process's {len(mine)} rows"
    print(f"process {index}: global batch {jax.typeof(batch)}, equal to {what}")
    return 0


def main() -> int:
    import argparse

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--uneven", action="store_true", help="process 1 loads 2 rows fewer")
    parser.add_argument("--rows", type=int, help="rows each process loads of its share")
    arguments = parser.parse_args()
    if arguments.rows is not None and arguments.rows < 1:
        parser.error(f"--rows must be at least 1, got {arguments.rows}")
    join_the_job()
    return load_and_check(arguments.uneven, arguments.rows)


if __name__ == "__main__":
    sys.exit(main())

"""Train from a Grain pipeline that reads, in each process, only that process's records; save the
data's position with the model, and resume exactly, on the same or another number of processes.

    python -m spmd_guide.launch -n 2 --devices-per-process 4 \
        examples/multihost/grain_per_process.py --dir run --steps 8
    python -m spmd_guide.launch -n 2 --devices-per-process 4 \
        examples/multihost/grain_per_process.py --dir run --steps 8 --resume

Each process joins a job started by srun (SLURM), mpirun (Open MPI), a TPU pod's or Kubernetes'
environment, or the repository's launcher (above), such as ``mpirun -np 2 python
examples/multihost/grain_per_process.py --dir run``; started plainly, it runs alone.

The first process to need it writes ``records.array_record`` in ``--dir``: RECORDS records of a
made-up classification task, each tagged with its number. Every process then opens the file
itself. A checkpoint every SAVE_EVERY steps holds the model, its optimizer and each process's
position in the data. With ``--resume``, the job restores the newest one and trains on to
``--steps``. Each process prints, per global batch, a digest of the record numbers it holds.
When the job is preempted (a process gets SIGTERM), every process saves at the step they agree on
and stops; ``--stop-signal-after STEP`` sends that signal, to try it.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import signal
import sys
import time
from pathlib import Path

RECORDS, WIDTH, CLASSES = 256, 8, 4
GLOBAL_BATCH = 16
SAVE_EVERY = 4
SEED = 0


class Refused(ValueError):
    """What was asked cannot run as asked; the message says what to change."""


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
            num_processes=num_processes, process_id=process_id, initialization_timeout=120
        )
    except ValueError as error:
        nothing_set = num_processes is None and process_id is None
        if nothing_set and str(error) == "coordinator_address should be defined.":
            return  # no job to join: this is the only process
        error.add_note(
            "Start every process under srun, mpirun, a TPU pod or Kubernetes, or set "
            "JAX_COORDINATOR_ADDRESS, JAX_NUM_PROCESSES and JAX_PROCESS_ID for each."
        )
        raise


def write_records(path: Path) -> None:
    """Write the task's records, once, from process 0; the others wait until it is there."""
    import jax
    import numpy as np
    from array_record.python.array_record_module import ArrayRecordWriter
    from jax.experimental import multihost_utils

    if jax.process_index() == 0 and not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        rng = np.random.default_rng(SEED)
        features = rng.normal(size=(RECORDS, WIDTH)).astype(np.float32)
        labels = np.argmax(features[:, :CLASSES], axis=1)
        partial = path.with_suffix(".partial")
        writer = ArrayRecordWriter(str(partial), "group_size:1")
        for number in range(RECORDS):
            row = np.concatenate([[number, labels[number]], features[number]]).astype(np.float32)
            writer.write(row.tobytes())
        writer.close()
        partial.rename(path)  # whole or absent, for the processes that open it
    multihost_utils.sync_global_devices("records written")


class CountedSource:
    """A Grain data source that remembers which records this process read."""

    def __init__(self, source):
        self.source, self.read = source, []

    def __len__(self) -> int:
        return len(self.source)

    def __getitem__(self, number):
        self.read.append(number)
        return self.source[number]


def per_process_batches(source, start: int = 0):
    """This process's share of each global batch, from record ``start`` of the global order.

    The whole file is shuffled the same way in every process; process ``i`` of ``n`` takes
    places ``i, i + n, i + 2n, ...`` of that order. So global batch ``t`` holds places
    ``t * GLOBAL_BATCH`` to ``(t + 1) * GLOBAL_BATCH - 1`` whatever the number of processes.
    """
    import grain
    import jax
    import numpy as np

    index, count = jax.process_index(), jax.process_count()
    parse = lambda raw: np.frombuffer(raw, np.float32)  # noqa: E731
    order = grain.MapDataset.source(source).seed(SEED).shuffle()
    mine = order[start:][index::count].map(parse)
    batches = mine.batch(GLOBAL_BATCH // count, drop_remainder=True)
    # Without read-ahead, what a process has read is what it has trained on.
    return batches.to_iter_dataset(grain.ReadOptions(prefetch_buffer_size=0))


def digest(numbers) -> str:
    """A short name for a set of record numbers."""
    text = ",".join(str(int(n)) for n in sorted(numbers))
    return hashlib.sha256(text.encode()).hexdigest()[:12]


def train(folder: Path, steps: int, resume: bool, stop_signal_after: int | None = None) -> None:
    import grain
    import jax
    import numpy as np
    import optax
    import orbax.checkpoint as ocp
    from flax import nnx
    from jax.experimental import multihost_utils
    from jax.sharding import NamedSharding
    from jax.sharding import PartitionSpec as P

    index, count = jax.process_index(), jax.process_count()
    if GLOBAL_BATCH % jax.device_count():
        raise Refused(
            f"a global batch of {GLOBAL_BATCH} rows does not split over {jax.device_count()} "
            f"devices ({count} processes of {jax.local_device_count()}); run on a number of "
            f"devices that divides {GLOBAL_BATCH}"
        )
    if stop_signal_after is not None and count == 1:
        raise Refused(
            "--stop-signal-after needs a job of several processes, whose preemption JAX's "
            "distributed runtime coordinates: start the script under a launcher, mpirun or srun"
        )
    if steps * GLOBAL_BATCH > RECORDS:
        raise Refused(
            f"{steps} steps of {GLOBAL_BATCH} records need {steps * GLOBAL_BATCH}, and the file "
            f"holds {RECORDS}: train at most {RECORDS // GLOBAL_BATCH} steps"
        )
    mesh = jax.make_mesh((jax.device_count(),), ("data",))
    jax.set_mesh(mesh)
    rows = NamedSharding(mesh, P("data"))
    path = folder / "records.array_record"
    write_records(path)
    source = CountedSource(grain.sources.ArrayRecordDataSource(str(path)))

    model = nnx.Linear(WIDTH, CLASSES, rngs=nnx.Rngs(SEED))
    optimizer = nnx.Optimizer(model, optax.adam(1e-2), wrt=nnx.Param)

    # Donated, the old buffers hold the new values: no second copy of the state during a step.
    # (Orbax's save has copied the arrays to host memory before it returns.)
    @nnx.jit(donate_argnames=("model", "optimizer"))
    def step(model, optimizer, features, labels):
        def loss_fn(model):
            logits = model(features)
            return optax.softmax_cross_entropy_with_integer_labels(logits, labels).mean()

        loss, grads = nnx.value_and_grad(loss_fn)(model)
        optimizer.update(model, grads)
        return loss

    options = ocp.CheckpointManagerOptions(
        save_interval_steps=SAVE_EVERY,
        preservation_policy=ocp.checkpoint_managers.LatestN(2),
    )
    manager = ocp.CheckpointManager(folder.resolve() / "checkpoints", options=options)
    done, start = 0, 0
    if resume:
        done = manager.latest_step()
        if done is None:
            raise Refused(
                f"no checkpoint in {folder / 'checkpoints'} to resume from: give the --dir of "
                "an earlier run, or start without --resume"
            )
        # How the saved pipeline was built: Grain's position counts batches of that pipeline.
        saved = manager.restore(done, args=ocp.args.Composite(pipeline=ocp.args.JsonRestore()))
        # The model and optimizer as they are now, as the targets of their items: the restore
        # reads the saved values into these arrays' layouts.
        weights = ocp.args.StandardRestore(nnx.state(model))
        moments = ocp.args.StandardRestore(nnx.state(optimizer))
        if saved.pipeline["processes"] == count:
            start = saved.pipeline["start"]
            iterator = iter(per_process_batches(source, start))
            restored = manager.restore(
                done,
                args=ocp.args.Composite(
                    model=weights,
                    optimizer=moments,
                    data=grain.checkpoint.CheckpointRestore(iterator),
                ),
            )
            print(f"process {index}: resumed at step {done}, data where this process left it")
        else:
            # Grain saved each process's position in a pipeline cut for another number of
            # processes. The step says where the global order stands; each process starts
            # there, with its new share.
            start = done * GLOBAL_BATCH
            iterator = iter(per_process_batches(source, start))
            restored = manager.restore(
                done, args=ocp.args.Composite(model=weights, optimizer=moments)
            )
            print(
                f"process {index}: resumed at step {done}; the data's position was saved by "
                f"{saved.pipeline['processes']} processes, so this one starts at record {start} "
                "of the global order"
            )
        nnx.update(model, restored.model)
        nnx.update(optimizer, restored.optimizer)
    else:
        iterator = iter(per_process_batches(source))

    consumed: list[int] = []
    for number in range(done + 1, steps + 1):
        local = next(iterator)
        features = jax.make_array_from_process_local_data(rows, local[:, 2:])
        labels = jax.make_array_from_process_local_data(rows, local[:, 1].astype(np.int32))
        loss = step(model, optimizer, features, labels)
        held = multihost_utils.process_allgather(local[:, 0], tiled=True)
        assert len(set(held.tolist())) == GLOBAL_BATCH  # no record twice in a batch
        consumed.extend(local[:, 0].astype(int).tolist())
        print(f"process {index}: step {number} records {digest(held)} loss {float(loss):.6f}")
        manager.save(
            number,
            args=ocp.args.Composite(
                model=ocp.args.StandardSave(nnx.state(model)),
                optimizer=ocp.args.StandardSave(nnx.state(optimizer)),
                data=grain.checkpoint.CheckpointSave(iterator),
                pipeline=ocp.args.JsonSave({"processes": count, "start": start}),
            ),
        )
        if manager.reached_preemption(number):
            # Every process reaches this step before it stops, so the checkpoint is whole.
            print(f"process {index}: preempted: saved step {number} and stopped")
            break
        if number == stop_signal_after and index == count - 1:
            os.kill(os.getpid(), signal.SIGTERM)  # JAX's preemption service takes it as notice
            time.sleep(2)  # while the notice reaches the other processes, as a scheduler's grace
    manager.close()  # waits for the last save to be written

    read = sorted(int(n) for n in source.read)
    everyone = multihost_utils.process_allgather(np.int32(len(read))).tolist()
    own = read == sorted(consumed)
    print(f"process {index}: read {len(read)} records, exactly those it trained on: {own}")
    print(f"process {index}: the processes read {everyone} records, of {RECORDS}")
    kernel = np.asarray(multihost_utils.process_allgather(model.kernel[...], tiled=True))
    print(f"process {index}: weights {hashlib.sha256(kernel.tobytes()).hexdigest()[:12]}")


def shared_folder(text: str) -> Path:
    """``--dir``: a folder of a file system, which every process of the job must see."""
    if "://" in text:
        raise argparse.ArgumentTypeError(
            f"{text!r} is an address, not a folder: this example writes its record file with "
            "local file operations, so give a folder of a file system every process sees (a "
            "shared file system, or a bucket mounted as one, e.g. with gcsfuse)"
        )
    return Path(text)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--dir",
        type=shared_folder,
        required=True,
        help="where the records and checkpoints go: a folder every process sees",
    )
    parser.add_argument("--steps", type=int, default=8, help="train until this step")
    parser.add_argument("--resume", action="store_true", help="resume from the newest checkpoint")
    parser.add_argument(
        "--stop-signal-after",
        type=int,
        metavar="STEP",
        help="the last process sends itself SIGTERM after this step, as a cluster scheduler does "
        "before it takes a machine back: try the save on preemption",
    )
    arguments = parser.parse_args()
    join_the_job()
    try:
        train(arguments.dir, arguments.steps, arguments.resume, arguments.stop_signal_after)
    except Refused as refusal:
        print(f"{parser.prog}: {refusal}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())

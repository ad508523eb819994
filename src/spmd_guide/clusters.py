"""Running one program as several processes under the launchers clusters use.

Open MPI's ``mpirun``, and SLURM's ``srun`` and ``sbatch`` on a one-node SLURM cluster that
:func:`local_slurm` starts on this machine (controller, node daemon and MUNGE, all on
localhost) and stops again. Each process of a job gets ``devices_per_process`` CPU devices and
finds the others with a bare ``jax.distributed.initialize()``: JAX detects the launcher from
the environment it sets.
"""

from __future__ import annotations

import contextlib
import os
import pathlib
import pwd
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

from spmd_guide.environment import _child_environment, repository_root
from spmd_guide.launch import free_port

PROGRAMS = {
    "mpirun": "openmpi-bin",
    "srun": "slurm-wlm",
    "sbatch": "slurm-wlm",
    "sinfo": "slurm-wlm",
    "slurmctld": "slurm-wlm",
    "slurmd": "slurm-wlm",
    "munged": "munge",
}
"""The programs this module runs, and the Debian package of each."""

# Daemons live in sbin, which a non-login PATH may lack.
_SEARCH_PATH = os.pathsep.join([os.environ.get("PATH", ""), "/usr/sbin", "/sbin"])


def missing_programs() -> dict[str, str]:
    """The programs of :data:`PROGRAMS` not installed here, each with its Debian package."""
    return {
        program: package
        for program, package in PROGRAMS.items()
        if shutil.which(program, path=_SEARCH_PATH) is None
    }


def _require(*programs: str) -> None:
    missing = {p: PROGRAMS[p] for p in programs if p in missing_programs()}
    if missing:
        packages = " ".join(sorted(set(missing.values())))
        raise RuntimeError(
            f"{', '.join(missing)} not found: install them with "
            f"`apt-get install {packages}` (Debian or Ubuntu), or run `nox -s launchers`, "
            "which installs them when run as root"
        )


def mpirun(
    num_processes: int,
    command: Sequence[str],
    devices_per_process: int,
    timeout: float = 120.0,
) -> tuple[subprocess.CompletedProcess[str], dict[int, str]]:
    """Run ``command`` as ``num_processes`` processes under Open MPI's ``mpirun``.

    Each process gets ``devices_per_process`` CPU devices. Runs in the repository's root and
    returns whatever the exit status: the finished ``mpirun``, and each process's standard
    output by rank (kept apart with ``--output-filename``, since processes writing to one
    stream can interleave inside a line).

    Raises:
        RuntimeError: if ``mpirun`` is not installed (the message says how to install it).
        subprocess.TimeoutExpired: if the job runs longer than ``timeout`` seconds.
    """
    _require("mpirun")
    env = _child_environment(devices_per_process)
    # mpirun hands its processes only the variables named with -x.
    forwarded = [arg for name in ("JAX_PLATFORMS", "JAX_NUM_CPU_DEVICES") for arg in ("-x", name)]
    as_root = ["--allow-run-as-root"] if os.geteuid() == 0 else []
    with tempfile.TemporaryDirectory(prefix="spmd-guide-mpirun-") as folder:
        finished = _run(
            [
                "mpirun",
                *as_root,
                "--oversubscribe",
                *("--output-filename", folder),
                *("-np", str(num_processes)),
                *forwarded,
                *command,
            ],
            env,
            timeout,
        )
        outputs = {
            int(path.parent.name.removeprefix("rank.")): path.read_text(errors="replace")
            for path in Path(folder).glob("*/rank.*/stdout")
        }
    return finished, dict(sorted(outputs.items()))


def _run(
    command: list[str], env: dict[str, str], timeout: float
) -> subprocess.CompletedProcess[str]:
    """Run ``command`` in a session of its own; past ``timeout``, stop all of it and raise.

    A launcher killed alone can leave the processes it started running; stopping the whole
    session stops them too.
    """
    process = subprocess.Popen(
        command,
        cwd=repository_root(),
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        stdout, stderr = process.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        _stop(process)
        process.communicate()
        raise
    return subprocess.CompletedProcess(command, process.returncode, stdout, stderr)


class LocalSlurm:
    """A running one-node SLURM cluster: run jobs on it with :meth:`srun` and :meth:`sbatch`."""

    def __init__(self, folder: pathlib.Path, env: dict[str, str]):
        self.folder = folder
        self.env = env
        """The environment SLURM's commands need to find this cluster (``SLURM_CONF``)."""

    def srun(
        self,
        num_tasks: int,
        command: Sequence[str],
        devices_per_process: int,
        timeout: float = 120.0,
    ) -> subprocess.CompletedProcess[str]:
        """Run ``command`` as ``num_tasks`` tasks with ``srun -n``; returned whatever the exit."""
        # --label puts each line's task number in front of it: "0: ...".
        command = ["srun", "--label", "-n", str(num_tasks), *command]
        return _run(command, _job_environment(devices_per_process, self.env), timeout)

    def sbatch(
        self, script: pathlib.Path, devices_per_process: int, timeout: float = 120.0
    ) -> tuple[subprocess.CompletedProcess[str], str]:
        """Submit ``script`` with ``sbatch --wait``: (the submission, the job's output file)."""
        output = self.folder / "job-%j.out"
        submitted = _run(
            ["sbatch", "--wait", f"--output={output}", str(script)],
            _job_environment(devices_per_process, self.env),
            timeout,
        )
        job = submitted.stdout.split()[-1] if submitted.stdout.strip() else "?"
        written = self.folder / f"job-{job}.out"
        return submitted, written.read_text() if written.exists() else ""


@contextlib.contextmanager
def local_slurm(timeout: float = 60.0) -> Iterator[LocalSlurm]:
    """Start a one-node SLURM cluster on this machine; stop it on leaving, whatever happens.

    Writes a MUNGE key and a minimal ``slurm.conf`` to a new temporary folder, starts
    ``munged``, ``slurmctld`` and ``slurmd`` in the foreground as child processes, on free
    ports, as the current user (who runs the jobs too; root is not needed), and waits until the
    node is idle. On leaving, each daemon is stopped by its process
    id (SIGTERM, then SIGKILL after 10 s), latest first, and the folder removed.

    Raises:
        RuntimeError: if a program is missing, or if the node is not idle within ``timeout``
            seconds (the message holds the end of the daemons' logs).
    """
    _require("srun", "sinfo", "slurmctld", "slurmd", "munged")
    folder = Path(tempfile.mkdtemp(prefix="spmd-guide-slurm-"))
    daemons: list[subprocess.Popen[bytes]] = []

    def start(*command: str) -> None:
        log = open(folder / f"{command[0]}.out", "wb")  # noqa: SIM115 - the daemon holds it
        daemons.append(
            subprocess.Popen(
                [shutil.which(command[0], path=_SEARCH_PATH) or command[0], *command[1:]],
                stdout=log,
                stderr=subprocess.STDOUT,
                # A session of its own, so that stopping it also stops the job steps it started.
                start_new_session=True,
            )
        )
        log.close()

    try:
        key = folder / "munge.key"
        key.write_bytes(secrets.token_bytes(1024))
        key.chmod(0o400)
        munge_socket = folder / "munge.socket"
        start(
            "munged",
            "--foreground",
            "--force",
            f"--key-file={key}",
            f"--socket={munge_socket}",
            f"--pid-file={folder / 'munged.pid'}",
            f"--log-file={folder / 'munged.log'}",
            f"--seed-file={folder / 'munged.seed'}",
        )
        config = folder / "slurm.conf"
        config.write_text(_slurm_conf(folder, munge_socket))
        for name in ("state", "spool"):
            (folder / name).mkdir()
        env = {"SLURM_CONF": str(config)}
        _wait_for(munge_socket.exists, timeout, folder, daemons, "munged to open its socket")
        start("slurmctld", "-D", "-f", str(config))
        start("slurmd", "-D", "-f", str(config))
        _wait_for(
            lambda: _node_state(env) == "idle", timeout, folder, daemons, "the node to be idle"
        )
        yield LocalSlurm(folder, env)
    finally:
        for daemon in reversed(daemons):
            _stop(daemon)
        shutil.rmtree(folder, ignore_errors=True)


def _job_environment(devices_per_process: int, slurm: dict[str, str]) -> dict[str, str]:
    """What a job's processes start with: this interpreter first on PATH, as `python`."""
    env = {**_child_environment(devices_per_process), **slurm}
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])
    return env


def _slurm_conf(folder: Path, munge_socket: Path) -> str:
    host = socket.gethostname()
    user = pwd.getpwuid(os.geteuid()).pw_name
    controller_port = node_port = free_port()
    while node_port == controller_port:
        node_port = free_port()
    return f"""\
ClusterName=spmdguide
SlurmctldHost={host}
SlurmctldPort={controller_port}
SlurmdPort={node_port}
AuthType=auth/munge
AuthInfo=socket={munge_socket}
SlurmUser={user}
SlurmdUser={user}
StateSaveLocation={folder / "state"}
SlurmdSpoolDir={folder / "spool"}
SlurmctldPidFile={folder / "slurmctld.pid"}
SlurmdPidFile={folder / "slurmd.pid"}
SlurmctldLogFile={folder / "slurmctld.log"}
SlurmdLogFile={folder / "slurmd.log"}
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SwitchType=switch/none
MpiDefault=none
ReturnToService=2
SchedulerType=sched/builtin
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
JobCompType=jobcomp/none
AccountingStorageType=accounting_storage/none
NodeName={host} CPUs={os.cpu_count() or 1} State=UNKNOWN
PartitionName=local Nodes={host} Default=YES MaxTime=INFINITE State=UP OverSubscribe=FORCE
"""


def _node_state(env: dict[str, str]) -> str:
    try:
        listed = subprocess.run(
            ["sinfo", "--noheader", "--format=%T"],
            env={**os.environ, **env},
            capture_output=True,
            text=True,
            timeout=10,
            check=False,
        )
    except subprocess.TimeoutExpired:
        return ""
    return listed.stdout.strip()


def _wait_for(
    ready: Callable[[], bool],
    timeout: float,
    folder: Path,
    daemons: list[subprocess.Popen[bytes]],
    what: str,
) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if ready():
            return
        if any(daemon.poll() is not None for daemon in daemons):
            break
        time.sleep(0.5)
    logs = "\n".join(
        f"--- {log.name}\n{log.read_text(errors='replace')[-1500:]}"
        for log in sorted(folder.glob("*.log")) + sorted(folder.glob("*.out"))
    )
    raise RuntimeError(f"the local SLURM cluster did not start: waited for {what}.\n{logs}")


def _stop(process: subprocess.Popen[str] | subprocess.Popen[bytes]) -> None:
    """Stop ``process`` and everything in its session: SIGTERM, then SIGKILL after 10 s."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGTERM)
    try:
        process.wait(10)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        process.wait()
    # Whatever of the session outlived its leader.
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGKILL)

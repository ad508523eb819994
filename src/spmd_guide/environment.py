"""The process environment that gives JAX a known machine, and fresh Python processes run in it.

Standard library only: the noxfile, the benchmarks and the docs build load this file before, or
without, installing JAX, so each setting here is stated once for all of them.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Mapping
from pathlib import Path

DEFAULT_DEVICE_COUNT = 8
"""The device count every page of the guide is written for."""

CHECKED_DEVICE_COUNTS = (1, 2, 4, 8)
"""The device counts the tests and the practice checker run on."""

DEVICE_COUNT_VARIABLE = "JAX_NUM_CPU_DEVICES"


def cpu_devices_env(count: int) -> dict[str, str]:
    """The environment variables that give a new JAX process ``count`` CPU devices."""
    return {"JAX_PLATFORMS": "cpu", DEVICE_COUNT_VARIABLE: str(count)}


COMPILE_ONLY_LIBTPU_ENV = {
    "TPU_ACCELERATOR_TYPE": "v5litepod-8",
    "TPU_WORKER_HOSTNAMES": "localhost",
    "ALLOW_MULTIPLE_LIBTPU_LOAD": "1",
    "TPU_LOG_DIR": "disabled",
}
"""Variables for libtpu started only to compile for TPU slices that are described, not attached.

Without them libtpu warns that it cannot find out which TPU this machine has and which hosts it
works with (a slice's own description names its chips, so the values change nothing it
compiles), and it takes a lock file (``libtpu_lockfile``, in the temporary folder) that guards a
real TPU's chips, so that a second process (a parallel docs build, pytest-xdist) fails to start
it. It would also write a log folder for every process that starts it (``tpu_logs``, in the
temporary folder), which a build starts hundreds of.
"""


COMPILATION_CACHE_PREFIXES = ("JAX_COMPILATION_CACHE_", "JAX_PERSISTENT_CACHE_")
"""Beginnings of the JAX settings that say where compiled programs are kept, not what a program
computes; :func:`environment_without_jax_settings` keeps them."""


COMPILATION_CACHE_FOLDER = "jax-compilation-cache"
"""The folder, inside its nox environment, where ``nox -s tests`` keeps compiled programs."""


def compilation_cache_env(folder: Path) -> dict[str, str]:
    """The environment variables that make JAX keep every compiled program in ``folder``.

    A process that compiles a program some earlier process already compiled (same program, JAX,
    devices and options) loads it instead. No maximum size is set: with one, JAX reads every
    entry's access time on every write, which made a first run of the tests spend a third of
    the practice checks' time in that scan. Whoever keeps the folder bounds it
    (:func:`trim_compilation_cache`).
    """
    return {
        "JAX_COMPILATION_CACHE_DIR": str(folder),
        # Nearly every program here compiles in under JAX's default threshold of 1 s.
        "JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS": "0",
        "JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES": "0",
    }


def trim_compilation_cache(folder: Path, max_bytes: int = 2**30) -> bool:
    """Empty ``folder`` if its files hold more than ``max_bytes``; whether it was emptied.

    Programs change as the code does, so the entries of old ones pile up; emptying the folder
    now and then costs one run its reuse and keeps JAX's writes free of bookkeeping.
    """
    files = [path for path in folder.rglob("*") if path.is_file()] if folder.is_dir() else []
    if sum(path.stat().st_size for path in files) <= max_bytes:
        return False
    shutil.rmtree(folder)
    return True


def environment_without_jax_settings() -> dict[str, str]:
    """This process's environment, less every ``JAX_*`` and ``XLA_*`` variable.

    For starting a new Python process whose JAX should be configured afresh (by its own code or
    by settings added to this dict), not inherit this process's device count or platform. The
    compilation-cache settings (:data:`COMPILATION_CACHE_PREFIXES`) are kept.
    """
    return {
        k: v
        for k, v in os.environ.items()
        if k.startswith(COMPILATION_CACHE_PREFIXES) or not k.startswith(("JAX_", "XLA_"))
    }


def repository_root(start: Path | None = None) -> Path:
    """The nearest folder at or above ``start`` (the working directory) holding ``examples/``.

    Raises:
        FileNotFoundError: if there is none, as when the package is installed without the
            repository around it.
    """
    here = (start or Path.cwd()).resolve()
    for folder in (here, *here.parents):
        if (folder / "examples").is_dir() and (folder / "pyproject.toml").is_file():
            return folder
    raise FileNotFoundError(
        f"no spmd-guide repository (a folder with examples/ and pyproject.toml) at or above "
        f"{here}; run from inside a clone of the repository"
    )


def run_python(
    *args: str,
    devices: int | None = None,
    env: Mapping[str, str] | None = None,
    cwd: Path | None = None,
    timeout: float = 300.0,
    check: bool = True,
) -> subprocess.CompletedProcess[str]:
    """Run ``python *args`` in a new interpreter (this one's) and capture its output as text.

    The process gets this environment less its JAX settings
    (:func:`environment_without_jax_settings`), then :func:`cpu_devices_env` of ``devices``
    when given, then ``env``. It runs in ``cwd``, by default :func:`repository_root`, so
    paths such as ``examples/...`` work.

    Raises:
        RuntimeError: if ``check`` is true and the process exits non-zero; the message holds
            the end of its output. With ``check=False`` the result is returned whatever the exit.
        subprocess.TimeoutExpired: if the process runs longer than ``timeout`` seconds.
    """
    finished = subprocess.run(
        [sys.executable, *args],
        cwd=cwd or repository_root(),
        env=_child_environment(devices, env),
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    if check and finished.returncode != 0:
        raise RuntimeError(
            f"`python {' '.join(args)}` exited with status {finished.returncode}; the end of "
            f"its output:\n{finished.stdout[-2000:]}\n{finished.stderr[-2000:]}"
        )
    return finished


def kill_python_when(
    *args: str,
    condition: Callable[[], bool],
    devices: int | None = None,
    cwd: Path | None = None,
    timeout: float = 300.0,
) -> subprocess.CompletedProcess[str]:
    """Run ``python *args`` as :func:`run_python` does; kill it the moment ``condition()`` holds.

    ``condition`` is polled about every millisecond. When it returns true, the process is first
    frozen (``SIGSTOP``) and ``condition`` asked again, so that the process is killed
    (``SIGKILL``) in a state where the condition is known to hold, not one it has since left; if
    it no longer holds, the process is resumed and polling goes on. The result carries the output
    written before the kill and the return code ``-9``.

    Raises:
        RuntimeError: if the process exits before ``condition`` held; the message holds the end
            of its output.
        subprocess.TimeoutExpired: if ``condition`` has not held within ``timeout`` seconds (the
            process is killed first).
    """
    # Output goes to files, not pipes: a full pipe would block the process being watched.
    with tempfile.TemporaryFile("w+") as stdout, tempfile.TemporaryFile("w+") as stderr:
        process = subprocess.Popen(
            [sys.executable, *args],
            cwd=cwd or repository_root(),
            env=_child_environment(devices),
            stdout=stdout,
            stderr=stderr,
            text=True,
        )
        deadline = time.monotonic() + timeout
        try:
            while not _frozen_while(process, condition):
                if process.poll() is not None:
                    stdout.seek(0)
                    stderr.seek(0)
                    raise RuntimeError(
                        f"`python {' '.join(args)}` exited with status {process.returncode} "
                        f"before the condition held; the end of its output:\n"
                        f"{stdout.read()[-2000:]}\n{stderr.read()[-2000:]}"
                    )
                if time.monotonic() > deadline:
                    raise subprocess.TimeoutExpired(process.args, timeout)
                time.sleep(0.001)
        finally:
            process.kill()
            process.wait()
        stdout.seek(0)
        stderr.seek(0)
        return subprocess.CompletedProcess(
            process.args, process.returncode, stdout.read(), stderr.read()
        )


def _child_environment(devices: int | None, env: Mapping[str, str] | None = None) -> dict[str, str]:
    """This environment less its JAX settings, then ``devices`` CPU devices, then ``env``."""
    child = environment_without_jax_settings()
    if devices is not None:
        child.update(cpu_devices_env(devices))
    child.update(env or {})
    return child


def _frozen_while(process: subprocess.Popen[str], condition: Callable[[], bool]) -> bool:
    """True with ``process`` left frozen if ``condition`` holds while it is frozen."""
    if process.poll() is not None or not condition():
        return False
    process.send_signal(signal.SIGSTOP)
    if condition():
        return True
    process.send_signal(signal.SIGCONT)
    return False

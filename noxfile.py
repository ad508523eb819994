"""Developer sessions for spmd-guide. `nox -l` lists them; README.md explains the main two."""

from __future__ import annotations

import contextlib
import hashlib
import importlib.util
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from types import ModuleType

import nox
from nox.command import CommandFailed
from packaging.specifiers import SpecifierSet

ROOT = Path(__file__).parent
PYPROJECT = nox.project.load_toml(ROOT / "pyproject.toml")

# Sessions run on the Python that runs nox. On one too old for the locked JAX, the install
# would fail deep in the resolver; say so in one line instead.
REQUIRES_PYTHON = SpecifierSet(PYPROJECT["project"]["requires-python"])
(OLDEST_PYTHON,) = (spec.version for spec in REQUIRES_PYTHON if spec.operator == ">=")
if platform.python_version() not in REQUIRES_PYTHON:
    sys.exit(
        f"nox is running on Python {platform.python_version()} ({sys.executable}), but "
        f"spmd-guide needs Python {REQUIRES_PYTHON} (JAX 0.11 and newer dropped Python 3.11): "
        "install and run nox with a newer Python, e.g. `python3.13 -m pip install nox` then "
        "`python3.13 -m nox -s docs` (under pyenv, put `PYENV_VERSION=3.13` before each)."
    )
LOCK = ROOT / "requirements" / "lock.txt"
DOCS_BUILD = ROOT / "docs" / "_build"


def load_module(path: str) -> ModuleType:
    """Load one standard-library-only module of the project, without installing anything."""
    spec = importlib.util.spec_from_file_location(Path(path).stem, ROOT / path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# The device settings and the linked projects are stated once, in these modules.
ENVIRONMENT = load_module("src/spmd_guide/environment.py")
OFFLINE_INVENTORIES = load_module("docs/_ext/offline_inventories.py")

nox.needs_version = ">=2025.2.9"
nox.options.default_venv_backend = "uv|virtualenv"
nox.options.sessions = [
    "lint",
    "tests",
    "multihost",
    "launchers",
    "docs",
    "browser",
    "copied-pages",
]
# Keep each session's environment between runs; `install` skips what is already there.
nox.options.reuse_venv = "yes"
# uv must use the Python that runs nox, never fetch one.
os.environ.setdefault("UV_PYTHON_DOWNLOADS", "never")
# Compile bytecode at install time, as pip does: every JAX process the tests, the checker and
# the docs start then imports compiled modules, even where PYTHONDONTWRITEBYTECODE is set.
os.environ.setdefault("UV_COMPILE_BYTECODE", "1")


def jax_env(devices: int) -> dict[str, str]:
    """The environment of a session's JAX processes: ``devices`` CPU devices, and libtpu (which
    compiles for TPU slices that are not attached) kept from warning that there is no TPU."""
    return {**ENVIRONMENT.cpu_devices_env(devices), **ENVIRONMENT.COMPILE_ONLY_LIBTPU_ENV}


def install(session: nox.Session, *groups: str, locked: bool = True, project: bool = True) -> None:
    """Install the project (unless `project` is false) and the named dependency groups, at the
    locked versions unless `locked` is false (then at the newest releases the index serves).

    A locked install is skipped when the environment already holds it: same lock, pyproject,
    interpreter and groups as when it was made. The project is installed editable, so its
    sources need no reinstall.
    """
    requirements = [
        req for group in groups for req in nox.project.dependency_groups(PYPROJECT, group)
    ]
    constraints = ["-c", str(LOCK)] if locked else []
    project_args = ["-e", "."] if project else []
    stamp = Path(session.virtualenv.location) / ".spmd-guide-installed"
    wanted = hashlib.sha256(
        b"\0".join(
            [LOCK.read_bytes(), (ROOT / "pyproject.toml").read_bytes(), sys.version.encode()]
            + [arg.encode() for arg in project_args + requirements]
        )
    ).hexdigest()
    if locked and stamp.is_file() and stamp.read_text() == wanted:
        session.log("the environment matches the lock and pyproject.toml; nothing to install")
        return
    stamp.unlink(missing_ok=True)
    session.install(*constraints, *project_args, *requirements)
    if locked:
        # As an install step, so that `nox -R` (which skips installs) never stamps an
        # environment it did not install.
        write = f"import pathlib; pathlib.Path({str(stamp)!r}).write_text({wanted!r})"
        session.run_install("python", "-c", write, silent=True, log=False)


def run_tests(session: nox.Session) -> None:
    """pytest at each of the checked device counts, each count in its own process.

    Tests marked `once` run only in the pass on the guide's own count, which holds most of the
    suite and spreads its test files over every core (pytest-xdist). Every JAX process the
    tests start shares one compilation cache, kept with the session's environment: most of the
    suite's time is XLA compiling the same small programs in process after process.
    """
    folder = Path(session.virtualenv.location) / ENVIRONMENT.COMPILATION_CACHE_FOLDER
    if ENVIRONMENT.trim_compilation_cache(folder):
        session.log(f"emptied {folder}: it held programs of more than 1 GiB")
    cache = ENVIRONMENT.compilation_cache_env(folder)
    # Jobs of several processes run in `nox -s multihost`; the launcher tests, which need Open
    # MPI, SLURM and root, in `nox -s launchers`.
    chosen = ["-m", "not launchers and not processes"]
    main = ENVIRONMENT.DEFAULT_DEVICE_COUNT
    session.log(f"pytest on {main} CPU devices")
    spread = ["-n", "auto", "--dist", "loadfile"]
    session.run("pytest", *chosen, *spread, *session.posargs, env={**jax_env(main), **cache})
    # The other counts run few tests each, one process apiece: side by side, they share the
    # cores that one of them alone would leave idle.
    others = [count for count in ENVIRONMENT.CHECKED_DEVICE_COUNTS if count != main]
    session.log(f"pytest on {', '.join(map(str, others))} CPU device(s), side by side")
    path = os.pathsep.join([session.bin, os.environ.get("PATH", "")])
    failed = []
    with contextlib.ExitStack() as logs:
        running = []
        for count in others:
            log = logs.enter_context(tempfile.TemporaryFile())
            env = {**os.environ, **jax_env(count), **cache, "PATH": path}
            command = [os.path.join(session.bin, "pytest"), *chosen, *session.posargs]
            process = subprocess.Popen(command, env=env, stdout=log, stderr=log)
            running.append((count, log, process))
        for count, log, process in running:
            process.wait()
            log.seek(0)
            lines = log.read().decode(errors="replace").rstrip().splitlines()
            last = lines[-1] if lines else "(no output)"
            session.log(f"pytest on {count} CPU device(s): {last}")
            if process.returncode:
                print("\n".join(lines))
                failed.append(count)
    if failed:
        session.error(f"the tests failed on {', '.join(map(str, failed))} CPU device(s)")


def build_docs(
    session: nox.Session, out: Path, *args: str, env: dict[str, str] | None = None
) -> None:
    """sphinx-build the site into out/html, warnings as errors, pages executed on CPU devices."""
    started = time.time()
    try:
        _sphinx_build(session, out, *args, env=env)
    except CommandFailed:
        # A page that fails while pages are read in parallel reaches the console as its path
        # alone; Sphinx keeps the failing cell and its error in a crash log.
        for log in sorted(Path(tempfile.gettempdir()).glob("sphinx-err-*.log")):
            if log.stat().st_mtime >= started:
                session.log(f"{log}:\n{log.read_text(errors='replace')}")
        raise


def _sphinx_build(
    session: nox.Session, out: Path, *args: str, env: dict[str, str] | None = None
) -> None:
    session.run(
        "sphinx-build",
        "-W",
        "-n",
        "--keep-going",
        # Pages execute while they are read; reading in parallel runs them side by side.
        "-j",
        "auto",
        "-b",
        "html",
        "-d",
        str(out / "doctrees"),
        "docs",
        str(out / "html"),
        *args,
        env={
            **jax_env(ENVIRONMENT.DEFAULT_DEVICE_COUNT),
            # The TPU compiler's plans for the planner page, kept with the environment.
            "SPMD_GUIDE_TPU_PLANS": str(Path(session.virtualenv.location) / "tpu-plans"),
            **(env or {}),
        },
    )


@nox.session
def lint(session: nox.Session) -> None:
    """Check style and formatting with ruff, and type-check src/ with mypy (strict)."""
    # mypy reads JAX's, Flax's and Optax's own annotations, so the project goes in too.
    install(session, "lint")
    session.run("ruff", "check", ".")
    session.run("ruff", "format", "--check", ".")
    session.run("mypy")


@nox.session
def tests(session: nox.Session) -> None:
    """Run the test suite at 1, 2, 4 and 8 CPU devices, each count in its own process."""
    install(session, "test")
    run_tests(session)


@nox.session
def multihost(session: nox.Session) -> None:
    """Run the multi-process example as 2 processes x 4 CPU devices (pass if both agree), then
    the tests that start jobs of several processes."""
    install(session, "test")
    session.run(
        "python",
        "-m",
        "spmd_guide.launch",
        "-n",
        "2",
        "--devices-per-process",
        "4",
        "--timeout",
        "300",
        "--check-agree",
        "global result",
        "examples/multihost/global_computation.py",
    )
    env = jax_env(ENVIRONMENT.DEFAULT_DEVICE_COUNT)
    # Two tests at a time: most of these tests wait (for a deadline, a heartbeat timeout, a peer
    # that never joins) rather than compute, so a second one uses the time the first leaves idle.
    spread = ["-n", "2", "--dist", "load"]
    session.run("pytest", "-m", "processes and not launchers", *spread, *session.posargs, env=env)


def ensure_cluster_programs(session: nox.Session) -> None:
    """Install Open MPI, SLURM and MUNGE from Debian where missing (as root), else say how.

    The multi-process page and `nox -s launchers` run real `mpirun` and `srun` jobs.
    """
    packages = session.run(
        "python",
        "-c",
        "from spmd_guide.clusters import missing_programs; "
        "print(' '.join(sorted(set(missing_programs().values()))))",
        silent=True,
    )
    packages = (packages or "").split()
    if not packages:
        return
    if os.geteuid() != 0 or shutil.which("apt-get") is None:
        session.error(
            f"the multi-process jobs need {', '.join(packages)}: install them with "
            f"`sudo apt-get install {' '.join(packages)}` (Debian or Ubuntu); nox installs them "
            "itself when run as root"
        )
    env = {"DEBIAN_FRONTEND": "noninteractive"}
    session.run("apt-get", "update", "-q", external=True, env=env)
    session.run("apt-get", "install", "-y", "-q", *packages, external=True, env=env)


@nox.session
def launchers(session: nox.Session) -> None:
    """Run the multi-process examples under mpirun -np 2 and a local SLURM cluster's srun -n 2."""
    install(session, "test")
    ensure_cluster_programs(session)
    session.run("pytest", "-m", "launchers", *session.posargs)


@nox.session
def docs(session: nox.Session) -> None:
    """Build the site into docs/_build/html, pages executed on 8 CPU devices (-- --fresh)."""
    install(session, "docs")
    ensure_cluster_programs(session)
    args = list(session.posargs)
    if "--fresh" in args:
        args.remove("--fresh")
        session.log(f"removing {DOCS_BUILD} for a fully fresh build")
        shutil.rmtree(DOCS_BUILD, ignore_errors=True)
    build_docs(session, DOCS_BUILD, *args)


@nox.session(name="docs-latest")
def docs_latest(session: nox.Session) -> None:
    """Drift canary: run the tests and build the site on the newest releases, ignoring the lock."""
    install(session, "docs", "test", locked=False)
    ensure_cluster_programs(session)
    session.run(
        "python",
        "-c",
        "import flax, jax, jaxlib, optax, sphinx; print('newest releases: jax', jax.__version__,"
        " 'jaxlib', jaxlib.__version__, 'flax', flax.__version__, 'optax', optax.__version__,"
        " 'sphinx', sphinx.__version__)",
    )
    run_tests(session)
    # Its own build directory, every page executed afresh, so the locked build's cache stays.
    build_docs(session, DOCS_BUILD / "latest", env={"SPMD_GUIDE_EXECUTION_MODE": "force"})


@nox.session(name="docs-live")
def docs_live(session: nox.Session) -> None:
    """Serve the site on 127.0.0.1:8000, rebuilding and re-executing only what a save changed."""
    install(session, "docs")
    ensure_cluster_programs(session)
    session.run(
        "sphinx-autobuild",
        "-n",
        "-d",
        str(DOCS_BUILD / "doctrees"),
        "--host",
        "127.0.0.1",
        "--port",
        "8000",
        # The build writes its HTML, doctrees, notebook cache and kernel profile under
        # docs/_build; watching that would rebuild forever.
        "--ignore",
        str(DOCS_BUILD),
        "--ignore",
        "*.ipynb_checkpoints*",
        "--watch",
        "src/spmd_guide",
        "docs",
        str(DOCS_BUILD / "html"),
        *session.posargs,
        env=jax_env(ENVIRONMENT.DEFAULT_DEVICE_COUNT),
    )


@nox.session
def browser(session: nox.Session) -> None:
    """Test the built site in headless Chromium: loads, search, themes, copy, links."""
    if not Path("/usr/bin/chromium").exists():
        session.error("needs Debian's Chromium at /usr/bin/chromium: apt-get install chromium")
    if not (DOCS_BUILD / "html" / "index.html").exists():
        session.error("no built site: run `nox -s docs` first")
    install(session, "browser", project=False)
    # The tests that read every page at one width share one reading of the site (survey.py):
    # loadgroup keeps each width's tests on one worker.
    spread = ["-n", "2", "--dist", "loadgroup"]
    session.run("pytest", "browser_tests", "-p", "no:cacheprovider", *spread, *session.posargs)


@nox.session(name="copied-pages")
def copied_pages(session: nox.Session) -> None:
    """Run each page's visible cells as a reader's copy: fresh process, no spmd_guide installed."""
    install(session, "copied-pages", project=False)
    session.run("python", "copied_pages/check.py", *session.posargs)


@nox.session
def stress(session: nox.Session) -> None:
    """Run the pages that start processes or time things 5 times beside two CPU-bound processes,
    and report their failures and each timing check's tightest value against its bound."""
    install(session, "docs", "test")
    ensure_cluster_programs(session)
    session.run("python", "benchmarks/stress.py", *session.posargs)


@nox.session
def bench(session: nox.Session) -> None:
    """Time the practice checker, TPU compiles, docs builds (a fresh clone's first among them),
    `nox -s tests`, a no-change docs, `nox -s multihost` and `nox -s launchers`; then run the
    stress check (`nox -s stress`)."""
    install(session, "docs", "test")
    session.run("python", "benchmarks/fresh_clone.py")
    session.run("python", "benchmarks/practice_check.py")
    session.run(
        "python", "benchmarks/tpu_compile.py", env=jax_env(ENVIRONMENT.DEFAULT_DEVICE_COUNT)
    )
    session.run("python", "benchmarks/docs_build.py", *session.posargs)
    session.run("python", "benchmarks/developer_loop.py")
    ensure_cluster_programs(session)
    session.run("python", "benchmarks/stress.py")


@nox.session(venv_backend="none")
def lock(session: nox.Session) -> None:
    """Re-resolve requirements/lock.txt from pyproject.toml (needs uv and the network)."""
    session.run(
        "uv",
        "pip",
        "compile",
        "pyproject.toml",
        "--group",
        "docs",
        "--group",
        "test",
        "--group",
        "lint",
        "--group",
        "browser",
        "--group",
        "copied-pages",
        # The oldest supported Python, so the lock installs on every supported one.
        "--python-version",
        OLDEST_PYTHON,
        "--upgrade",
        "--output-file",
        str(LOCK.relative_to(ROOT)),
        *session.posargs,
        external=True,
    )


@nox.session(venv_backend="none")
def inventories(session: nox.Session) -> None:
    """Download the intersphinx inventories into docs/_inventories (needs the network)."""
    OFFLINE_INVENTORIES.INVENTORIES.mkdir(exist_ok=True)
    failed = []
    for name, root_url in OFFLINE_INVENTORIES.INVENTORY_URLS.items():
        url = root_url + "objects.inv"
        target = OFFLINE_INVENTORIES.inventory_file(name)
        try:
            with urllib.request.urlopen(url, timeout=30) as response:
                data = response.read()
        except OSError as error:
            failed.append(name)
            session.warn(f"{name}: could not fetch {url} ({error}); keeping what is there")
            continue
        if not data.startswith(b"# Sphinx inventory version 2"):
            failed.append(name)
            session.warn(f"{name}: {url} did not return a Sphinx inventory; keeping what is there")
            continue
        target.write_bytes(data)
        session.log(f"{name}: wrote {target.relative_to(ROOT)} ({len(data)} bytes)")
    if failed:
        session.error(f"not refreshed: {', '.join(failed)}")

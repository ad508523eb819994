"""What every page's kernel starts with: CPU devices, and warnings that fail the build.

Before any page runs, this extension

- sets ``JAX_PLATFORMS=cpu`` and ``JAX_NUM_CPU_DEVICES`` (8) unless the caller set them, so a
  plain ``sphinx-build`` gets the machine ``nox -s docs`` does; kernels inherit them;
- keeps libtpu, which compiles for TPU slices described but not attached, from warning that this
  machine has no TPU, and stops the build at once if libtpu is not installed: pages state what
  the TPU compiler chose, and would otherwise fail one by one;
- points ``IPYTHONDIR`` at a profile under the build folder whose start-up folder holds
  ``kernel_startup.py`` (warnings become errors, tracebacks are short, cells are named
  ``<cell>``), so a reader's own IPython profile is never read or written, and whose
  ``ipython_kernel_config.py`` is ``kernel_config.py`` (no kernel warns that the build's local
  connection to it is unencrypted, a line per page).
"""

from __future__ import annotations

import importlib.util
import os
import shutil
from pathlib import Path
from typing import Any

from sphinx.application import Sphinx
from sphinx.config import Config
from sphinx.errors import ConfigError

from spmd_guide.environment import COMPILE_ONLY_LIBTPU_ENV, DEFAULT_DEVICE_COUNT, cpu_devices_env

HERE = Path(__file__).resolve().parent
STARTUP = HERE / "kernel_startup.py"
KERNEL_CONFIG = HERE / "kernel_config.py"


def _prepare_kernels(app: Sphinx, config: Config) -> None:
    if importlib.util.find_spec("libtpu") is None:
        raise ConfigError(
            "the pages compile for TPUs with libtpu, the TPU compiler, which is not installed: "
            "`nox -s docs` installs it from the lock on Linux (x86-64 or ARM64); elsewhere "
            "there is no libtpu wheel, so build the site on Linux"
        )
    for name, value in {**cpu_devices_env(DEFAULT_DEVICE_COUNT), **COMPILE_ONLY_LIBTPU_ENV}.items():
        os.environ.setdefault(name, value)
    os.environ["IPYTHONDIR"] = str(prepare_ipython_dir(Path(app.doctreedir).parent / "ipython"))


def prepare_ipython_dir(ipython_dir: Path) -> Path:
    """Write the profile every page's kernel starts with into ``ipython_dir``, and return it:
    the folder to give kernels as ``IPYTHONDIR``."""
    startup = ipython_dir / "profile_default" / "startup"
    startup.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(STARTUP, startup / "00-warnings-are-errors.py")
    shutil.copyfile(KERNEL_CONFIG, startup.parent / "ipython_kernel_config.py")
    return ipython_dir


def setup(app: Sphinx) -> dict[str, Any]:
    app.connect("config-inited", _prepare_kernels, priority=400)
    return {"parallel_read_safe": True, "parallel_write_safe": True}

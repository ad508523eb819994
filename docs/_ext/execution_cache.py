"""The notebook execution cache, keyed on everything besides a page's code that decides its outputs.

myst-nb's cache matches a page by its code cells alone. This extension gives it a cache folder
named after a fingerprint of the rest: the package and example sources, the planner's and the
explorer's formulas, the lock, the kernel start-up file, the JAX and Flax versions, the Python
version and the device settings. A change to any of them starts an empty cache, and the caches
for older fingerprints, which can never be hit again, are deleted. Nothing happens unless
``nb_execution_mode`` is ``"cache"``.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import sys
from pathlib import Path
from typing import Any

from sphinx.application import Sphinx
from sphinx.config import Config

from spmd_guide.environment import DEFAULT_DEVICE_COUNT, cpu_devices_env

DOCS = Path(__file__).resolve().parents[1]
ROOT = DOCS.parent


def execution_fingerprint() -> str:
    """A digest of what, besides a page's code cells, decides its outputs."""
    import flax
    import jax
    import jaxlib

    digest = hashlib.sha256()
    sources = [
        *(ROOT / "src" / "spmd_guide").rglob("*.py"),
        # The recorded GPU runs, which pages print and assert.
        *sorted((ROOT / "src" / "spmd_guide" / "recorded_gpu_runs").rglob("*.json")),
        *(ROOT / "examples").rglob("*.py"),
        # The planner's and the explorer's formulas, which their pages run through
        # spmd_guide.planner and spmd_guide.explorer.
        DOCS / "_static" / "planner" / "model.js",
        DOCS / "_static" / "explorer" / "model.js",
    ]
    for path in sorted(sources):
        digest.update(str(path.relative_to(ROOT)).encode())
        digest.update(path.read_bytes())
    lock = ROOT / "requirements" / "lock.txt"
    if lock.exists():
        digest.update(lock.read_bytes())
    digest.update((DOCS / "_ext" / "kernel_startup.py").read_bytes())
    for part in (jax.__version__, jaxlib.__version__, flax.__version__, sys.version):
        digest.update(part.encode())
    for name in cpu_devices_env(DEFAULT_DEVICE_COUNT):
        digest.update(f"{name}={os.environ.get(name, '')}".encode())
    return digest.hexdigest()[:16]


def _use_fingerprinted_cache(app: Sphinx, config: Config) -> None:
    if config.nb_execution_mode != "cache":
        return
    root = Path(app.doctreedir).parent / "jupyter_cache"
    fingerprint = execution_fingerprint()
    if root.is_dir():
        for stale in root.iterdir():
            if stale.name != fingerprint:
                shutil.rmtree(stale, ignore_errors=True)
    config.nb_execution_cache_path = str(root / fingerprint)
    # Made here, before pages are read in parallel, so no two readers race to create it.
    from jupyter_cache import get_cache

    get_cache(config.nb_execution_cache_path)


def setup(app: Sphinx) -> dict[str, Any]:
    # After kernel_environment (priority 400) has set the device variables the key includes.
    app.connect("config-inited", _use_fingerprinted_cache, priority=450)
    return {"parallel_read_safe": True, "parallel_write_safe": True}

"""What executed the pages: JAX, jaxlib, Flax and Python versions and the device count.

Pages name them as MyST substitutions (``{{ jax_version }}``); every page's footer names them
through ``html_context["built_with"]`` (``_templates/page.html``).
"""

from __future__ import annotations

import os
import platform
from typing import Any

from sphinx.application import Sphinx
from sphinx.config import Config

from spmd_guide.environment import DEVICE_COUNT_VARIABLE


def built_with() -> dict[str, str]:
    """The versions and device count this build executes its pages with."""
    import flax
    import jax
    import jaxlib

    return {
        "jax_version": jax.__version__,
        "jaxlib_version": jaxlib.__version__,
        "flax_version": flax.__version__,
        "python_version": platform.python_version(),
        "device_count": os.environ[DEVICE_COUNT_VARIABLE],
    }


def _publish(app: Sphinx, config: Config) -> None:
    versions = built_with()
    config.myst_substitutions = {**config.myst_substitutions, **versions}
    config.html_context = {**config.html_context, "built_with": versions}


def setup(app: Sphinx) -> dict[str, Any]:
    # After kernel_environment (priority 400) has settled the device count.
    app.connect("config-inited", _publish, priority=450)
    return {"parallel_read_safe": True, "parallel_write_safe": True}

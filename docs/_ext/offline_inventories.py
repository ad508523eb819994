"""Cross-references to other projects' docs, resolved offline from inventories kept here.

``INVENTORY_URLS`` is the one list of projects the site links to: ``nox -s inventories`` (when
online) downloads each ``objects.inv`` into ``docs/_inventories/``, and this extension maps only
the projects whose inventory is there, so a build never reaches the network. Names from a project
with no inventory cannot resolve; they are listed in ``nitpick_ignore_regex`` instead of warning.

This module imports nothing from Sphinx at import time, so the noxfile can read the list.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from sphinx.application import Sphinx
    from sphinx.config import Config

INVENTORIES = Path(__file__).resolve().parents[1] / "_inventories"

INVENTORY_URLS = {
    "python": "https://docs.python.org/3/",
    "numpy": "https://numpy.org/doc/stable/",
    "jax": "https://docs.jax.dev/en/latest/",
    "flax": "https://flax.readthedocs.io/en/latest/",
    "matplotlib": "https://matplotlib.org/stable/",
}
"""Each project's documentation root; its inventory is ``objects.inv`` under it."""

# The module names (and the aliases type hints use, like `nnx.Module`) each project documents.
_NAMES = {
    "jax": ("jax", "jaxlib"),
    "flax": ("flax", "nnx"),
    "numpy": ("numpy", "np"),
    "optax": ("optax",),
    "matplotlib": ("matplotlib",),
}


def inventory_file(project: str) -> Path:
    """Where ``project``'s inventory is kept."""
    return INVENTORIES / f"{project}.inv"


def _map_present_inventories(app: Sphinx, config: Config) -> None:
    mapping = {
        name: (url, (str(inventory_file(name)),))
        for name, url in INVENTORY_URLS.items()
        if inventory_file(name).exists()
    }
    config.intersphinx_mapping = mapping
    config.nitpick_ignore_regex = [
        *config.nitpick_ignore_regex,
        *(
            (r"py:.*", rf"{prefix}(\..*)?")
            for project, prefixes in _NAMES.items()
            if project not in mapping
            for prefix in prefixes
        ),
    ]


def setup(app: Sphinx) -> dict[str, Any]:
    app.setup_extension("sphinx.ext.intersphinx")
    # Before intersphinx normalises the mapping (priority 800).
    app.connect("config-inited", _map_present_inventories, priority=450)
    return {"parallel_read_safe": True, "parallel_write_safe": True}

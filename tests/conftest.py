"""Every test process runs on the CPU device count the nox session asked for.

``nox -s tests`` runs the suite once per count in ``CHECKED_DEVICE_COUNTS``. A test marked
``once`` gives the same result on any count (it starts processes of its own, or uses no device),
so it runs in the pass on the guide's own count only.
"""

from __future__ import annotations

import jax
import pytest

from spmd_guide import use_cpu_devices
from spmd_guide.environment import DEFAULT_DEVICE_COUNT


@pytest.fixture(scope="session", autouse=True)
def cpu_devices() -> list[jax.Device]:
    """The CPU devices for this run (JAX_NUM_CPU_DEVICES, 8 when unset)."""
    return use_cpu_devices()


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if len(use_cpu_devices()) == DEFAULT_DEVICE_COUNT:
        return
    elsewhere = pytest.mark.skip(reason=f"runs once, in the {DEFAULT_DEVICE_COUNT}-device pass")
    for item in items:
        if item.get_closest_marker("once"):
            item.add_marker(elsewhere)

"""Every test process runs on the CPU device count the nox session asked for."""

from __future__ import annotations

import pytest

from spmd_guide import use_cpu_devices


@pytest.fixture(scope="session", autouse=True)
def cpu_devices():
    """The CPU devices for this run (JAX_NUM_CPU_DEVICES, 8 when unset)."""
    return use_cpu_devices()

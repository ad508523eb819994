"""Getting a known number of CPU devices, so every page and test sees the same machine.

JAX fixes its device count when the first backend starts, so these helpers must run
before any array is made. The docs build sets ``JAX_NUM_CPU_DEVICES=8`` in the
environment; a reader who opens a page as a notebook gets the same count from the
page's first cell, which calls :func:`use_cpu_devices`.
"""

from __future__ import annotations

import os

import jax

from spmd_guide.environment import DEFAULT_DEVICE_COUNT, DEVICE_COUNT_VARIABLE


def requested_device_count(default: int = DEFAULT_DEVICE_COUNT) -> int:
    """The CPU device count asked for by ``JAX_NUM_CPU_DEVICES``, or ``default``.

    Raises:
        ValueError: if the variable is set to something other than a positive integer.
    """
    raw = os.environ.get(DEVICE_COUNT_VARIABLE)
    if raw is None or raw.strip() == "":
        return _check_count(default)
    try:
        count = int(raw)
    except ValueError:
        raise ValueError(
            f"{DEVICE_COUNT_VARIABLE}={raw!r} is not a whole number; set it to a device count "
            "such as 8"
        ) from None
    return _check_count(count, source=f"{DEVICE_COUNT_VARIABLE}={raw!r}")


def use_cpu_devices(count: int | None = None) -> list[jax.Device]:
    """Make JAX run on ``count`` CPU devices and return them.

    With ``count=None`` the count comes from ``JAX_NUM_CPU_DEVICES`` (8 when unset), so a
    page run by the docs build and the same page opened in Jupyter agree.

    Call it right after ``import jax``, before any computation. If JAX has already started
    with exactly ``count`` CPU devices it returns them unchanged, so calling it twice is safe.

    Raises:
        ValueError: if ``count`` is not a positive integer, or JAX has already started with
            a different number of devices (restart the process, then call this first).
    """
    count = requested_device_count() if count is None else _check_count(count)
    try:
        jax.config.update("jax_platforms", "cpu")
        jax.config.update("jax_num_cpu_devices", count)
    except RuntimeError:
        # The backend is already running; that is fine only if it has what was asked for.
        pass
    devices = jax.devices()
    platform = devices[0].platform
    if platform != "cpu" or len(devices) != count:
        raise ValueError(
            f"JAX is already running on {len(devices)} {platform} device(s), so it cannot "
            f"switch to {count} CPU devices. Restart the Python process (or notebook kernel) "
            f"and call use_cpu_devices({count}) right after `import jax`, or start it with "
            f"JAX_PLATFORMS=cpu {DEVICE_COUNT_VARIABLE}={count}."
        )
    return devices


def _check_count(count: object, source: str | None = None) -> int:
    if isinstance(count, bool) or not isinstance(count, int) or count < 1:
        where = source or f"count={count!r}"
        raise ValueError(f"{where}: a device count must be a positive whole number, such as 8")
    return count

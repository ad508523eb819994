"""Building device meshes that fit the machine, with errors that say which shapes would."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Literal

import jax
from jax.sharding import AxisType, Mesh

AxisKind = Literal["explicit", "auto"]

_AXIS_TYPES = {"explicit": AxisType.Explicit, "auto": AxisType.Auto}


def mesh_shapes(device_count: int, ndim: int) -> list[tuple[int, ...]]:
    """Every mesh shape with ``ndim`` axes whose sizes multiply to ``device_count``.

    >>> mesh_shapes(8, 2)
    [(1, 8), (2, 4), (4, 2), (8, 1)]

    Raises:
        ValueError: if ``device_count`` or ``ndim`` is not a positive integer.
    """
    if not isinstance(device_count, int) or device_count < 1:
        raise ValueError(f"device_count must be a positive integer, got {device_count!r}")
    if not isinstance(ndim, int) or ndim < 1:
        raise ValueError(f"ndim must be a positive integer, got {ndim!r}")
    if ndim == 1:
        return [(device_count,)]
    shapes: list[tuple[int, ...]] = []
    for first in range(1, device_count + 1):
        if device_count % first == 0:
            shapes.extend((first, *rest) for rest in mesh_shapes(device_count // first, ndim - 1))
    return shapes


def make_mesh(
    shape: Sequence[int],
    axis_names: Sequence[str],
    *,
    axis_types: AxisKind = "explicit",
    devices: Sequence[jax.Device] | None = None,
) -> Mesh:
    """A mesh of ``shape`` over ``devices`` (all of JAX's devices by default).

    Unlike :func:`jax.make_mesh`, which quietly uses the first devices when the shape needs
    fewer than there are, the shape here must use every device given, so a mesh never leaves
    devices idle by accident. Pass ``devices=jax.devices()[:4]`` to use a subset on purpose.

    Args:
        shape: the size of each mesh axis, e.g. ``(2, 4)``.
        axis_names: one distinct name per axis, e.g. ``("data", "model")``.
        axis_types: ``"explicit"`` (JAX's default: shardings are part of array types) or
            ``"auto"`` (the compiler chooses, steered by sharding constraints).
        devices: the devices to lay out; every one of them is used.

    Raises:
        ValueError: if names and sizes do not pair up, or the sizes do not multiply to the
            number of devices; the message lists the shapes that would fit.
    """
    shape = tuple(shape)
    axis_names = tuple(axis_names)
    devices = list(jax.devices() if devices is None else devices)
    if len(shape) != len(axis_names):
        raise ValueError(
            f"mesh shape {shape} has {len(shape)} axes but {len(axis_names)} names were given "
            f"{axis_names}; give one name per axis"
        )
    if not shape:
        raise ValueError("a mesh needs at least one axis, e.g. shape=(8,), axis_names=('data',)")
    if any(not isinstance(size, int) or isinstance(size, bool) or size < 1 for size in shape):
        raise ValueError(f"mesh axis sizes must be positive integers, got {shape}")
    if not all(isinstance(name, str) and name for name in axis_names):
        raise ValueError(f"mesh axis names must be non-empty strings, got {axis_names}")
    if len(set(axis_names)) != len(axis_names):
        raise ValueError(f"mesh axis names must be distinct, got {axis_names}")
    if axis_types not in _AXIS_TYPES:
        raise ValueError(f"axis_types must be 'explicit' or 'auto', got {axis_types!r}")
    needed = math.prod(shape)
    if needed != len(devices):
        fitting = ", ".join(str(s) for s in mesh_shapes(len(devices), len(shape)))
        raise ValueError(
            f"mesh shape {shape} needs {needed} devices but {len(devices)} are available. "
            f"Shapes with {len(shape)} axes that fit {len(devices)} devices: {fitting}"
        )
    kinds = (_AXIS_TYPES[axis_types],) * len(shape)
    return jax.make_mesh(shape, axis_names, axis_types=kinds, devices=devices)

"""Meshes and inputs for the problems' cases: what a case varies so that mistakes show."""

from __future__ import annotations

import jax
import numpy as np
from jax.sharding import AxisType, Mesh


def one_axis_meshes(devices: int, name: str) -> list[Mesh]:
    """Meshes with the one axis ``name``: over every device, Auto and Explicit; and, when there
    are several devices, an Explicit one over the last half of them, which a solution that
    builds its own mesh over all devices does not match."""
    every = jax.devices()[:devices]
    meshes = [
        jax.make_mesh((devices,), (name,), axis_types=(AxisType.Auto,), devices=every),
        jax.make_mesh((devices,), (name,), axis_types=(AxisType.Explicit,), devices=every),
    ]
    if devices > 1:
        half = every[devices // 2 :]
        meshes.append(jax.make_mesh((len(half),), (name,), devices=half))
    return meshes


def two_axis_meshes(devices: int, names: tuple[str, str]) -> list[Mesh]:
    """Every (rows, columns) mesh over all devices with names ``names``, Explicit axes: at 8
    devices 1x8, 2x4, 4x2 and 8x1, so a size written as a number fails somewhere."""
    every = np.array(jax.devices()[:devices])
    shapes = [(rows, devices // rows) for rows in range(1, devices + 1) if devices % rows == 0]
    return [
        Mesh(every.reshape(shape), names, axis_types=(AxisType.Explicit,) * 2) for shape in shapes
    ]


def normal(seed: int, *shape: int) -> np.ndarray:
    """Standard normal float32 values, the same for the same seed."""
    return np.random.default_rng(seed).normal(size=shape).astype(np.float32)


def kind(mesh: Mesh) -> str | None:
    """The requirement a case on ``mesh`` exercises: ``explicit_mesh`` when its axes are
    Explicit (see :data:`spmd_guide.practice.requirements.EXPLICIT_MESHES`)."""
    return "explicit_mesh" if AxisType.Explicit in mesh.axis_types else None

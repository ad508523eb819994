"""How values travel between the checker's processes: JSON lines, arrays as .npy bytes.

Nothing here unpickles: the parent decodes only numbers, strings, arrays of numbers and mesh
descriptions, so whatever a learner's code writes can at worst be a wrong answer. This module
imports nothing but NumPy, because the solution's process loads it by its file path, where the
rest of :mod:`spmd_guide` is not importable.
"""

from __future__ import annotations

import base64
import io
from typing import Any

import numpy as np


def encode(value: Any) -> Any:
    """``value`` as JSON-ready data: arrays, numbers, dicts, tuples and meshes."""
    if isinstance(value, dict):
        return {"dict": {str(k): encode(v) for k, v in value.items()}}
    if isinstance(value, tuple | list):
        return {"tuple": [encode(v) for v in value]}
    if isinstance(value, str | bool | int | float) or value is None:
        return {"plain": value}
    mesh_axes = getattr(value, "shape", None)
    if hasattr(value, "axis_names") and hasattr(value, "devices") and isinstance(mesh_axes, dict):
        return {
            "mesh": {
                "axes": dict(mesh_axes),
                "devices": [int(d.id) for d in value.devices.flat],
                "types": [t.name for t in value.axis_types],
            }
        }
    buffer = io.BytesIO()
    np.save(buffer, np.asarray(value), allow_pickle=False)
    return {"npy": base64.b64encode(buffer.getvalue()).decode("ascii")}


def decode(data: Any) -> Any:
    """The value :func:`encode` made; a mesh comes back as ``{"axes": ..., "devices": ...,
    "types": ...}``, axis sizes, device ids in mesh order and axis types by name."""
    if not isinstance(data, dict) or len(data) != 1:
        raise ValueError(f"not an encoded value: {str(data)[:80]}")
    ((kind, body),) = data.items()
    if kind == "dict":
        return {k: decode(v) for k, v in body.items()}
    if kind == "tuple":
        return tuple(decode(v) for v in body)
    if kind == "plain":
        return body
    if kind == "mesh":
        return {
            "axes": {str(k): int(v) for k, v in dict(body["axes"]).items()},
            "devices": [int(d) for d in body["devices"]],
            "types": [str(t) for t in body["types"]],
        }
    if kind == "npy":
        return np.load(io.BytesIO(base64.b64decode(body)), allow_pickle=False)
    raise ValueError(f"not an encoded value: {kind!r}")


def is_mesh(value: Any) -> bool:
    """Whether ``value`` is a decoded mesh."""
    return isinstance(value, dict) and set(value) == {"axes", "devices", "types"}

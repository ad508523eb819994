"""The mesh the problems run on, and the checks every problem makes of its input."""

from __future__ import annotations

import jax
import numpy as np
from jax.sharding import Mesh, NamedSharding
from jax.sharding import PartitionSpec as P

AXIS = "data"
"""The mesh axis every problem shards over."""


def data_mesh(mesh: Mesh | None) -> Mesh:
    """``mesh``, checked to have an axis ``'data'``; or, if None, a one-device mesh with one.

    Raises:
        ValueError: if ``mesh`` has no axis named ``'data'``.
    """
    if mesh is None:
        return Mesh(np.array(jax.devices()[:1]), (AXIS,))
    if AXIS not in mesh.axis_names:
        raise ValueError(
            f"the mesh has axes {mesh.axis_names} but these problems shard over an axis named "
            f"{AXIS!r}; build it with e.g. jax.make_mesh((4,), ({AXIS!r},))"
        )
    return mesh


def split_over_data(x: jax.Array, mesh: Mesh) -> jax.Array:
    """``x`` placed with its first dimension split over the mesh's ``'data'`` axis.

    Placing it first means the same call works on a mesh with Auto or Explicit axes.

    Raises:
        ValueError: if the first dimension does not divide evenly, saying how to pad.
    """
    size = mesh.shape[AXIS]
    length = x.shape[0]
    if length % size:
        padded = -(-length // size) * size
        raise ValueError(
            f"the first dimension of x has length {length}, which does not divide over the "
            f"{size} devices of mesh axis {AXIS!r}; pad it to {padded} (with values that do not "
            f"change the answer, such as zeros for a sum) or use a mesh whose {AXIS!r} axis "
            f"divides {length}"
        )
    return jax.device_put(x, NamedSharding(mesh, P(AXIS)))

"""The TPU compiler on a machine without a TPU: compile-only devices, meshes over them, and the
published figures of the chips, so that a page can state what a TPU's compiler chose.

libtpu (installed by ``pip install "jax[tpu]"``) holds the TPU compiler. With it,
``jax.experimental.topologies.get_topology_desc`` describes a slice that is not attached:
its devices cannot run anything, but ``jax.jit(f).lower(...).compile()`` compiles for them and
the compiled program, ``memory_analysis()`` and ``cost_analysis()`` are the TPU compiler's own.
"""

from __future__ import annotations

import functools
import importlib.util
import os
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import jax
from jax.sharding import AxisType, Mesh, NamedSharding

from spmd_guide.environment import COMPILE_ONLY_LIBTPU_ENV


class TpuCompilerUnavailable(RuntimeError):
    """libtpu, which holds the TPU compiler, is not installed in this environment."""


@dataclass(frozen=True)
class Chip:
    """One TPU chip's published rates, for estimates; the compiler knows its own memory limit
    (what a program may use is in the planner's model, docs/_static/planner/model.js).

    From How to Scale Your Model, part 2 ("How to Think About TPUs", jax-ml/scaling-book
    ``tpus.md``), the table under "Key Takeaways".
    """

    name: str
    hbm_bytes_per_second: float
    bf16_flops_per_second: float
    ici_bytes_per_second: float
    """Bandwidth of one inter-chip link, one way."""


CHIPS = {
    "v5e": Chip("TPU v5e", 8.1e11, 1.97e14, 4.5e10),
    "v5p": Chip("TPU v5p", 2.8e12, 4.59e14, 9e10),
    "v6e": Chip("TPU v6e", 1.6e12, 9.20e14, 9e10),
}
"""Published figures by the prefix of a topology name (``"v5e:2x4"`` is a TPU v5e slice)."""


def chip(topology: str) -> Chip:
    """The published figures of the chips a topology such as ``"v5e:2x4"`` is made of.

    Raises:
        ValueError: if the topology names a chip not in :data:`CHIPS`.
    """
    name = topology.split(":")[0]
    if name not in CHIPS:
        raise ValueError(
            f"no published figures for {name!r} (from {topology!r}); known chips: "
            f"{', '.join(CHIPS)}"
        )
    return CHIPS[name]


def libtpu_installed() -> bool:
    """Whether libtpu, the TPU compiler, can be loaded here."""
    return importlib.util.find_spec("libtpu") is not None


@functools.cache
def compile_only_devices(topology: str) -> tuple[jax.Device, ...]:
    """The devices of a TPU slice that is not attached, e.g. ``"v5e:2x4"`` (8 v5e chips).

    They carry their ids and coordinates in the slice; programs compile for them, none runs.
    The first call starts libtpu, with the variables of
    :data:`~spmd_guide.environment.COMPILE_ONLY_LIBTPU_ENV` that are not already set: no warnings
    about a machine that has no TPU, and no lock against other processes doing the same.

    Raises:
        TpuCompilerUnavailable: if libtpu is not installed.
        ValueError: if the topology's name or shape is not one libtpu knows.
    """
    if not libtpu_installed():
        raise TpuCompilerUnavailable(
            "compiling for a TPU needs libtpu, the TPU compiler, which is not installed in "
            "this environment: `pip install 'jax[tpu]'` installs the libtpu release that "
            "matches your jax (libtpu has wheels for Linux on x86-64 and ARM64 only)"
        )
    for name, value in COMPILE_ONLY_LIBTPU_ENV.items():
        os.environ.setdefault(name, value)
    from jax.experimental import topologies

    try:
        description = topologies.get_topology_desc(topology, "tpu")
    except Exception as error:  # libtpu raises its own runtime errors for unknown names
        raise ValueError(
            f"libtpu does not know the topology {topology!r} ({error}); name a chip and a "
            "shape, such as 'v5e:2x4', 'v5e:16x16', 'v5p:2x2x2' or 'v6e:4x4'"
        ) from error
    return tuple(description.devices)


def tpu_mesh(
    topology: str,
    axis_shapes: Sequence[int],
    axis_names: Sequence[str],
    axis_types: Sequence[AxisType] | None = None,
) -> Mesh:
    """A mesh over a TPU slice's compile-only devices, ordered as ``jax.make_mesh`` orders them
    on the real slice.

    Raises:
        TpuCompilerUnavailable: if libtpu is not installed.
        ValueError: if the shape does not use every device of the slice.
    """
    devices = compile_only_devices(topology)
    size = 1
    for length in axis_shapes:
        size *= length
    if size != len(devices):
        raise ValueError(
            f"a mesh of shape {tuple(axis_shapes)} has {size} devices, but {topology!r} has "
            f"{len(devices)}; use a shape whose sizes multiply to {len(devices)}"
        )
    return jax.make_mesh(
        tuple(axis_shapes),
        tuple(axis_names),
        axis_types=tuple(axis_types) if axis_types is not None else None,
        devices=devices,
    )


def like(mesh: Mesh, topology: str) -> Mesh:
    """A mesh with ``mesh``'s axis names, sizes and types over a TPU slice's devices."""
    return tpu_mesh(topology, tuple(mesh.shape.values()), mesh.axis_names, mesh.axis_types)


def abstract_on(tree: Any, mesh: Mesh) -> Any:
    """``tree`` with each array (or ``ShapeDtypeStruct``) replaced by a ``ShapeDtypeStruct`` of
    the same shape, dtype and ``PartitionSpec`` on ``mesh``: the inputs for compiling the same
    program for another mesh of the same axes. Leaves that are not arrays stay as they are.

    Raises:
        ValueError: if an array's sharding is not a ``NamedSharding`` (its layout has no spec
            to carry over).
    """

    def convert(leaf: Any) -> Any:
        if not isinstance(leaf, (jax.Array, jax.ShapeDtypeStruct)):
            return leaf
        sharding = leaf.sharding
        if not isinstance(sharding, NamedSharding):
            raise ValueError(
                f"an array of shape {leaf.shape} has a {type(sharding).__name__}, not a "
                "NamedSharding; place it with jax.device_put(x, NamedSharding(mesh, spec)) first"
            )
        return jax.ShapeDtypeStruct(
            leaf.shape, leaf.dtype, sharding=NamedSharding(mesh, sharding.spec)
        )

    return jax.tree.map(convert, tree)


def compile_like(function: Any, *args: Any, topology: str, mesh: Mesh) -> Any:
    """Compile a jitted ``function`` for ``args`` laid out on ``mesh``, but for a TPU slice:
    the same program, axes and specs, partitioned and compiled by the TPU compiler.

    ``args`` may hold live arrays on ``mesh`` or ``ShapeDtypeStruct`` s. The function is traced
    under ``jax.set_mesh`` of the TPU mesh, so constraints and ``out_sharding`` s that name axes
    by spec follow it there.

    Returns:
        The compiled program (``as_text()``, ``memory_analysis()``, ``cost_analysis()``).

    Raises:
        TpuCompilerUnavailable: if libtpu is not installed.
    """
    target = like(mesh, topology)
    abstract = abstract_on(args, target)
    with jax.set_mesh(target):
        return function.lower(*abstract).compile()


def collectives_here_and_on_tpu(
    function: Any, *args: Any, mesh: Mesh, topology: str = "v5e:2x4"
) -> tuple[dict[str, Any], dict[str, list[tuple[str, tuple[str, ...]]]]]:
    """Compile a jitted ``function`` for ``args`` laid out on ``mesh`` twice: by this process's
    compiler (the pages' CPU build) and, as :func:`compile_like` does, by the TPU compiler for
    ``topology``; read each program's collectives with the mesh axes they run over.

    Returns:
        The two compiled programs, and each one's collectives as sorted ``(op, axes)`` pairs,
        both keyed ``"CPU"`` and ``"TPU"``.

    Raises:
        TpuCompilerUnavailable: if libtpu is not installed.
    """
    from spmd_guide.analysis import collectives_by_axis

    programs = {
        "CPU": function.lower(*args).compile(),
        "TPU": compile_like(function, *args, topology=topology, mesh=mesh),
    }
    meshes = {"CPU": mesh, "TPU": like(mesh, topology)}
    found = {
        name: sorted((c.op, c.axes) for c in collectives_by_axis(program, meshes[name]))
        for name, program in programs.items()
    }
    return programs, found

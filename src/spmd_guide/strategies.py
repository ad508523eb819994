"""Sharding strategies: which mesh axes split each parameter of a model, and the batch.

A strategy turns a model and a mesh into a :class:`ShardingPlan`, a printable table of one
``PartitionSpec`` per parameter plus one for the batch. :func:`apply_plan` then moves the
parameters into place. Four strategies are defined:

``dp`` (data parallel)
    Every parameter replicated; the batch split over the ``data`` axis.
``tp`` (tensor parallel)
    Kernels split over the ``model`` axis, alternating column- and row-wise as in Megatron-LM:
    layer 0's kernel by output columns (its bias with it), layer 1's by input rows, and so on, so
    a pair of layers needs one reduction. The batch is split over ``data`` if the mesh has it.
``2d``
    ``tp`` for the parameters and ``dp`` for the batch, on a mesh with both axes.
``fsdp`` (fully sharded data parallel)
    Every parameter with at least ``fsdp_min_size`` elements split over *all* devices, along
    its first dimension that divides evenly; smaller ones replicated. The batch is split over all
    devices too.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass

import jax
from flax import nnx
from jax.sharding import Mesh, NamedSharding
from jax.sharding import PartitionSpec as P

STRATEGIES = ("dp", "tp", "2d", "fsdp")
"""The strategy names :func:`plan_sharding` accepts."""

_NEEDED_AXES = {"dp": ("data",), "tp": ("model",), "2d": ("data", "model"), "fsdp": ()}
_EXAMPLE_MESH = {
    "dp": "make_mesh((8,), ('data',))",
    "tp": "make_mesh((1, 8), ('data', 'model'))",
    "2d": "make_mesh((4, 2), ('data', 'model'))",
    "fsdp": "make_mesh((8,), ('data',))",
}


@dataclass(frozen=True)
class ParamPlacement:
    """Where one parameter goes: its path in the model, its shape and its ``PartitionSpec``."""

    path: str
    shape: tuple[int, ...]
    spec: P

    def local_shape(self, mesh: Mesh) -> tuple[int, ...]:
        """The shape of the block each device holds under ``spec`` on ``mesh``."""
        return local_shape(self.shape, self.spec, mesh)


@dataclass(frozen=True)
class ShardingPlan:
    """A strategy applied to one model and mesh: a ``PartitionSpec`` per parameter and batch.

    ``str(plan)`` is a table of every parameter's global shape, spec and per-device shape.
    """

    strategy: str
    mesh: Mesh
    params: tuple[ParamPlacement, ...]
    batch: P

    def param_specs(self) -> dict[str, P]:
        """The spec of each parameter, by path (``"layers/0/kernel"``)."""
        return {p.path: p.spec for p in self.params}

    def batch_sharding(self, batch_size: int) -> NamedSharding:
        """The sharding for a batch of ``batch_size`` examples (leading dimension).

        Raises:
            ValueError: if ``batch_size`` does not divide evenly over the batch axes; the
                message says how much to pad and which device counts would divide it.
        """
        return batch_sharding(self.mesh, batch_size, self.batch)

    def __str__(self) -> str:
        axes = ", ".join(f"{name}={size}" for name, size in self.mesh.shape.items())
        rows = [("parameter", "shape", "spec", "per device")]
        rows += [
            (p.path, str(p.shape), _spec_str(p.spec), str(p.local_shape(self.mesh)))
            for p in self.params
        ]
        widths = [max(len(row[i]) for row in rows) for i in range(4)]
        lines = [f"strategy {self.strategy!r} on mesh ({axes}); batch {_spec_str(self.batch)}"]
        lines += [
            "  " + "  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip()
            for row in rows
        ]
        return "\n".join(lines)


def plan_sharding(
    model: nnx.Module, strategy: str, mesh: Mesh, *, fsdp_min_size: int = 1024
) -> ShardingPlan:
    """Plan how ``strategy`` shards ``model``'s parameters and batch on ``mesh``.

    The model's ``nnx.Linear`` layers are numbered in order for the tensor-parallel
    alternation; any other parameter is replicated by ``tp`` and ``2d``. A dimension that does
    not divide evenly over its axis is left whole rather than padded.

    Raises:
        ValueError: if the strategy is unknown, or the mesh lacks an axis it needs (``tp``
            needs ``model``, ``dp`` needs ``data``, ``2d`` both).
    """
    if strategy not in STRATEGIES:
        raise ValueError(f"unknown strategy {strategy!r}; choose one of {', '.join(STRATEGIES)}")
    missing = [axis for axis in _NEEDED_AXES[strategy] if axis not in mesh.axis_names]
    if missing:
        raise ValueError(
            f"strategy {strategy!r} shards over mesh axis {missing[0]!r}, but the mesh has axes "
            f"{mesh.axis_names}; build one with that axis, e.g. {_EXAMPLE_MESH[strategy]}"
        )
    linear_index = {
        _path_str(path): i
        for i, (path, _) in enumerate(
            (p, m) for p, m in nnx.iter_modules(model) if isinstance(m, nnx.Linear)
        )
    }
    placements = []
    for path, variable in _params(model):
        shape = tuple(variable[...].shape)
        owner, _, leaf = path.rpartition("/")
        if strategy == "dp":
            spec = P()
        elif strategy in ("tp", "2d"):
            spec = _tensor_parallel_spec(shape, leaf, linear_index.get(owner), mesh)
        else:
            spec = _fsdp_spec(shape, mesh, fsdp_min_size)
        placements.append(ParamPlacement(path, shape, spec))
    if strategy == "fsdp":
        batch = P(_all_axes(mesh))
    else:
        batch = P("data") if "data" in mesh.axis_names else P()
    return ShardingPlan(strategy, mesh, tuple(placements), batch)


def apply_plan(model: nnx.Module, plan: ShardingPlan) -> None:
    """Move each of ``model``'s parameters to its place in ``plan``, in place.

    Raises:
        ValueError: if the model's parameters do not match the plan's (a plan made for
            another model).
    """
    specs = plan.param_specs()
    params = dict(_params(model))
    if set(params) != set(specs):
        raise ValueError(
            "the plan was made for another model: parameters "
            f"{sorted(set(params) ^ set(specs))} are in one but not the other; "
            "make the plan with plan_sharding(model, ...) for this model"
        )
    for path, variable in params.items():
        variable[...] = jax.device_put(variable[...], NamedSharding(plan.mesh, specs[path]))


def batch_sharding(mesh: Mesh, batch_size: int, spec: P | None = None) -> NamedSharding:
    """A sharding that splits the leading (batch) dimension as ``spec`` says (``P("data")``).

    Raises:
        ValueError: if ``spec`` names an axis the mesh does not have, or ``batch_size`` is not
            divisible by the number of devices it is split over.
    """
    spec = P("data") if spec is None else spec
    check_spec(mesh, spec)
    first = spec[0] if len(spec) else None
    names = () if first is None else (first if isinstance(first, tuple) else (first,))
    parts = math.prod(mesh.shape[name] for name in names)
    if batch_size % parts:
        padded = -(-batch_size // parts) * parts
        divisors = [d for d in range(2, batch_size + 1) if batch_size % d == 0][:6]
        hint = f"use a mesh of {_or_list(divisors)} devices" if divisors else "use one device"
        raise ValueError(
            f"batch {batch_size} is not divisible by the {parts} devices on axis "
            f"{_axes_str(names)}; pad to {padded} or {hint} along that axis"
        )
    return NamedSharding(mesh, spec)


def check_spec(mesh: Mesh, spec: P) -> None:
    """Check that every axis ``spec`` names is an axis of ``mesh``.

    Raises:
        ValueError: naming the unknown axis and the mesh's axes.
    """
    for entry in spec:
        for name in entry if isinstance(entry, tuple) else (entry,):
            if name is not None and name not in mesh.axis_names:
                raise ValueError(
                    f"PartitionSpec {spec} names axis {name!r}, but the mesh has axes "
                    f"{mesh.axis_names}; use one of those names, or None to keep a dimension whole"
                )


def local_shape(shape: tuple[int, ...], spec: P, mesh: Mesh) -> tuple[int, ...]:
    """The shape of the block each device holds when ``shape`` is split by ``spec``."""
    dims = list(shape)
    for i, entry in enumerate(spec):
        if entry is None:
            continue
        names = entry if isinstance(entry, tuple) else (entry,)
        dims[i] //= math.prod(mesh.shape[name] for name in names)
    return tuple(dims)


def _tensor_parallel_spec(shape: tuple[int, ...], leaf: str, layer: int | None, mesh: Mesh) -> P:
    size = mesh.shape["model"]
    if layer is None:
        return P()
    column_wise = layer % 2 == 0
    if leaf == "kernel" and len(shape) == 2:
        dim = 1 if column_wise else 0
        if shape[dim] % size == 0:
            return P(None, "model") if column_wise else P("model", None)
    if leaf == "bias" and column_wise and len(shape) == 1 and shape[0] % size == 0:
        return P("model")
    return P()


def _fsdp_spec(shape: tuple[int, ...], mesh: Mesh, min_size: int) -> P:
    if math.prod(shape) < min_size:
        return P()
    everything = _all_axes(mesh)
    for dim, extent in enumerate(shape):
        if extent % mesh.size == 0:
            return P(*([None] * dim), everything)
    return P()


def _all_axes(mesh: Mesh) -> str | tuple[str, ...]:
    names = tuple(mesh.axis_names)
    return names[0] if len(names) == 1 else names


def _params(model: nnx.Module) -> Iterator[tuple[str, nnx.Variable]]:
    for path, variable in nnx.to_flat_state(nnx.state(model, nnx.Param)):
        yield _path_str(path), variable


def _path_str(path: tuple) -> str:
    return "/".join(str(key) for key in path)


def _spec_str(spec: P) -> str:
    return "P(" + ", ".join(repr(entry) for entry in spec) + ")"


def _axes_str(names: tuple[str, ...]) -> str:
    return repr(names[0]) if len(names) == 1 else repr(names)


def _or_list(values: list[int]) -> str:
    words = [str(v) for v in values]
    return words[0] if len(words) == 1 else ", ".join(words[:-1]) + " or " + words[-1]

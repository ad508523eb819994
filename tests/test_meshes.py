from __future__ import annotations

import math

import jax
import pytest
from jax.sharding import AxisType

from spmd_guide import make_mesh, mesh_shapes


def test_mesh_shapes_lists_every_factorisation():
    assert mesh_shapes(8, 1) == [(8,)]
    assert mesh_shapes(8, 2) == [(1, 8), (2, 4), (4, 2), (8, 1)]
    assert mesh_shapes(6, 2) == [(1, 6), (2, 3), (3, 2), (6, 1)]
    three_axes = mesh_shapes(8, 3)
    assert len(three_axes) == 10
    assert all(math.prod(shape) == 8 for shape in three_axes)
    assert len(set(three_axes)) == len(three_axes)


@pytest.mark.parametrize("ndim", [1, 2, 3])
def test_every_listed_shape_builds_a_mesh(cpu_devices, ndim):
    names = ("a", "b", "c")[:ndim]
    for shape in mesh_shapes(len(cpu_devices), ndim):
        mesh = make_mesh(shape, names)
        assert mesh.devices.shape == shape
        assert sorted(d.id for d in mesh.devices.flat) == sorted(d.id for d in cpu_devices)


def test_axis_types_default_to_explicit_and_can_be_auto(cpu_devices):
    n = len(cpu_devices)
    assert make_mesh((n,), ("data",)).axis_types == (AxisType.Explicit,)
    assert make_mesh((n,), ("data",), axis_types="auto").axis_types == (AxisType.Auto,)


def test_a_shape_that_does_not_fit_names_the_shapes_that_would(cpu_devices):
    n = len(cpu_devices)
    with pytest.raises(ValueError) as error:
        make_mesh((n + 1, 2), ("x", "y"))
    message = str(error.value)
    assert f"needs {2 * (n + 1)} devices but {n} are available" in message
    for shape in mesh_shapes(n, 2):
        assert str(shape) in message


def test_a_subset_of_devices_can_be_chosen_on_purpose(cpu_devices):
    subset = cpu_devices[:1]
    mesh = make_mesh((1,), ("data",), devices=subset)
    assert list(mesh.devices.flat) == subset


@pytest.mark.parametrize(
    ("shape", "names", "match"),
    [
        ((2, 4), ("x",), "one name per axis"),
        ((), (), "at least one axis"),
        ((0,), ("x",), "positive integers"),
        ((2.0,), ("x",), "positive integers"),
        ((1, 1), ("x", "x"), "distinct"),
        ((1,), ("",), "non-empty strings"),
    ],
)
def test_malformed_meshes_are_rejected(shape, names, match):
    with pytest.raises(ValueError, match=match):
        make_mesh(shape, names, devices=jax.devices()[:1])


def test_unknown_axis_type_is_rejected():
    with pytest.raises(ValueError, match="'explicit' or 'auto'"):
        make_mesh((1,), ("x",), axis_types="manual", devices=jax.devices()[:1])

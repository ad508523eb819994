from __future__ import annotations

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.sharding import Mesh

from spmd_guide.problems import shard_map_psum, shard_map_simulate, shard_map_vs_vmap


def meshes(devices):
    """One-axis 'data' meshes over 1, 2, 4 ... of this process's devices, Auto and Explicit."""
    size = 1
    while size <= len(devices):
        yield Mesh(np.array(devices[:size]), ("data",))
        yield jax.make_mesh((size,), ("data",), devices=devices[:size])
        size *= 2


def test_psum_matches_numpy_on_every_mesh(cpu_devices):
    x = np.random.default_rng(0).normal(size=16).astype(np.float32)
    assert np.isclose(float(shard_map_psum(x)), x.sum(), rtol=1e-5)
    for mesh in meshes(cpu_devices):
        total = shard_map_psum(x, mesh=mesh)
        assert total.shape == ()
        assert np.isclose(float(total), x.sum(), rtol=1e-5), mesh


def test_psum_as_the_seed_calls_it():
    assert float(shard_map_psum(jnp.array([1.0, 2.0, 3.0]))) == 6.0


def test_vs_vmap_returns_both_rows_on_every_mesh(cpu_devices):
    x = np.random.default_rng(1).normal(size=(8, 3)).astype(np.float32)
    expected = (x**2).sum(axis=1)
    for mesh in meshes(cpu_devices):
        out = np.asarray(shard_map_vs_vmap(x, mesh=mesh))
        assert out.shape == (2, 8)
        np.testing.assert_allclose(out, np.stack([expected, expected]), rtol=1e-5)


def test_vs_vmap_as_the_seed_calls_it():
    out = shard_map_vs_vmap(jnp.array([[1.0, 0.0], [0.0, 1.0]]))
    assert np.asarray(out).tolist() == [[1.0, 1.0], [1.0, 1.0]]


@pytest.mark.parametrize("function", [shard_map_psum, shard_map_vs_vmap])
def test_an_uneven_split_says_how_to_pad(cpu_devices, function):
    if len(cpu_devices) == 1:
        pytest.skip("every length divides over one device")
    n = len(cpu_devices)
    x = np.ones((n + 1,) if function is shard_map_psum else (n + 1, 2), np.float32)
    with pytest.raises(ValueError, match=rf"length {n + 1}.*pad it to {2 * n}"):
        function(x, mesh=Mesh(np.array(cpu_devices), ("data",)))


def test_a_mesh_without_a_data_axis_is_refused(cpu_devices):
    with pytest.raises(ValueError, match=r"axis named 'data'"):
        shard_map_psum(np.ones(8), mesh=Mesh(np.array(cpu_devices[:1]), ("batch",)))


def test_wrong_ranks_are_refused():
    with pytest.raises(ValueError, match="1-D"):
        shard_map_psum(np.ones((2, 2)))
    with pytest.raises(ValueError, match="2-D"):
        shard_map_vs_vmap(np.ones(4))


def test_simulate_applies_one_dense_layer_to_every_chunk():
    x = np.random.default_rng(2).normal(size=(12, 5)).astype(np.float32)
    out = shard_map_simulate(3.0, x, 4.0, 6.0)
    assert out.shape == (12 * 6,)
    layer = nn.Dense(6)
    params = layer.init(jax.random.PRNGKey(3), x[:3])
    np.testing.assert_allclose(out, np.asarray(layer.apply(params, x)).reshape(-1), rtol=1e-5)


def test_simulate_is_the_same_whatever_the_shard_count():
    x = np.random.default_rng(4).normal(size=(8, 3)).astype(np.float32)
    outs = [np.asarray(shard_map_simulate(0.0, x, float(k), 2.0)) for k in (1, 2, 4, 8)]
    for out in outs[1:]:
        np.testing.assert_allclose(out, outs[0], rtol=1e-6)


def test_simulate_refuses_rows_that_do_not_split():
    with pytest.raises(
        ValueError, match=r"N = 10 rows do not split into 4 equal chunks; pad x to 12"
    ):
        shard_map_simulate(0.0, np.ones((10, 2)), 4.0, 3.0)


def test_simulate_refuses_fractional_counts():
    with pytest.raises(ValueError, match="num_shards must be a whole number"):
        shard_map_simulate(0.0, np.ones((4, 2)), 2.5, 3.0)

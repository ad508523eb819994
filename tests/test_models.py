from __future__ import annotations

import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

from spmd_guide.models import MLP, synthetic_classification


def test_mlp_maps_inputs_to_logits_through_its_layers():
    model = MLP((8, 32, 4), rngs=nnx.Rngs(0))
    assert [layer.kernel[...].shape for layer in model.layers] == [(8, 32), (32, 4)]
    assert model(jnp.ones((5, 8))).shape == (5, 4)


def test_mlp_applies_relu_between_layers_but_not_after_the_last():
    model = MLP((1, 1, 1), rngs=nnx.Rngs(0))
    first, last = model.layers
    first.kernel[...] = jnp.full((1, 1), -1.0)
    first.bias[...] = jnp.zeros(1)
    last.kernel[...] = jnp.ones((1, 1))
    last.bias[...] = jnp.full(1, -3.0)
    # relu(-x) is 0 for positive x, so the output is the last bias alone, negative.
    assert float(model(jnp.array([[2.0]]))[0, 0]) == -3.0


@pytest.mark.parametrize("sizes", [(), (4,), (4, 0), (4, 2.5), (True, 2)])
def test_mlp_rejects_bad_sizes(sizes):
    with pytest.raises(ValueError, match=r"MLP needs|positive integers"):
        MLP(sizes, rngs=nnx.Rngs(0))


def test_synthetic_data_is_reproducible_and_well_formed():
    x, y = synthetic_classification(100, 6, 3, seed=1)
    x2, y2 = synthetic_classification(100, 6, 3, seed=1)
    assert x.shape == (100, 6) and x.dtype == np.float32
    assert y.shape == (100,) and y.dtype == np.int32
    assert (x == x2).all() and (y == y2).all()
    assert set(np.unique(y)) <= {0, 1, 2}
    assert len(np.unique(y)) == 3

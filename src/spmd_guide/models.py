"""The small Flax NNX model the guide shards, and synthetic data to train it on."""

from __future__ import annotations

import itertools
from collections.abc import Sequence

import jax
import numpy as np
from flax import nnx


class MLP(nnx.Module):
    """A multilayer perceptron classifier: ``Linear`` layers with a ReLU between each pair.

    ``MLP((64, 512, 512, 16), rngs=nnx.Rngs(0))`` maps 64 input features through two hidden
    layers of 512 to 16 class logits. Its layers live in ``self.layers``, an ``nnx.List`` of
    ``nnx.Linear``, each with a ``kernel`` of shape (inputs, outputs) and a ``bias``.

    Raises:
        ValueError: if fewer than two sizes are given, or a size is not a positive integer.
    """

    def __init__(self, sizes: Sequence[int], *, rngs: nnx.Rngs):
        sizes = tuple(sizes)
        if len(sizes) < 2:
            raise ValueError(f"an MLP needs an input and an output size, got sizes={sizes}")
        if any(isinstance(s, bool) or not isinstance(s, int) or s < 1 for s in sizes):
            raise ValueError(f"layer sizes must be positive integers, got sizes={sizes}")
        self.sizes = sizes
        self.layers = nnx.List(
            [nnx.Linear(n_in, n_out, rngs=rngs) for n_in, n_out in itertools.pairwise(sizes)]
        )

    def __call__(self, x: jax.Array) -> jax.Array:
        *hidden, last = self.layers
        for layer in hidden:
            x = nnx.relu(layer(x))
        return last(x)


def synthetic_classification(
    num_examples: int, num_features: int, num_classes: int, *, seed: int = 0
) -> tuple[np.ndarray, np.ndarray]:
    """Inputs and labels for a learnable task: the label is the argmax of a fixed linear map.

    The data is made with NumPy on the host, so it is the same whatever the device count.

    Returns:
        ``(x, y)``: ``x`` of shape (num_examples, num_features), float32; ``y`` of shape
        (num_examples,), int32, with values in ``range(num_classes)``.
    """
    rng = np.random.default_rng(seed)
    teacher = rng.normal(size=(num_features, num_classes))
    x = rng.normal(size=(num_examples, num_features)).astype(np.float32)
    y = np.argmax(x @ teacher, axis=-1).astype(np.int32)
    return x, y

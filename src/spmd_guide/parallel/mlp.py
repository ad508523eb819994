"""A functional two-layer MLP: the one-device reference every hand-written strategy matches."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

Params = dict[str, jax.Array]


def init_params(d_in: int, d_hidden: int, d_out: int, *, seed: int = 0) -> Params:
    """Weights ``w1`` (d_in, d_hidden), ``w2`` (d_hidden, d_out) and biases, drawn with NumPy."""
    rng = np.random.default_rng(seed)
    return {
        "w1": jnp.asarray(rng.normal(size=(d_in, d_hidden)) / np.sqrt(d_in), jnp.float32),
        "b1": jnp.zeros(d_hidden, jnp.float32),
        "w2": jnp.asarray(rng.normal(size=(d_hidden, d_out)) / np.sqrt(d_hidden), jnp.float32),
        "b2": jnp.zeros(d_out, jnp.float32),
    }


def forward(params: Params, x: jax.Array) -> jax.Array:
    """``relu(x @ w1 + b1) @ w2 + b2``."""
    return jax.nn.relu(x @ params["w1"] + params["b1"]) @ params["w2"] + params["b2"]


def loss(params: Params, x: jax.Array, y: jax.Array) -> jax.Array:
    """Mean squared error of :func:`forward` against targets ``y``."""
    return jnp.mean((forward(params, x) - y) ** 2)


def sgd_step(params: Params, x: jax.Array, y: jax.Array, lr: float) -> Params:
    """One step of gradient descent on one device: the reference for the strategies."""
    grads = jax.grad(loss)(params, x, y)
    return jax.tree.map(lambda p, g: p - lr * g, params, grads)


def regression_data(
    n: int, d_in: int, d_out: int, *, seed: int = 1
) -> tuple[np.ndarray, np.ndarray]:
    """Inputs and targets of a random linear map plus noise, as float32 NumPy arrays."""
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, d_in)).astype(np.float32)
    y = (x @ rng.normal(size=(d_in, d_out)) + 0.1 * rng.normal(size=(n, d_out))).astype(np.float32)
    return x, y

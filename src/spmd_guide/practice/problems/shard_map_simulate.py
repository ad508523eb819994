"""Problem: simulate a data-parallel ``shard_map`` of a Flax Dense layer with a Python loop."""

from __future__ import annotations

# solution
import flax.linen as nn
import jax
import jax.numpy as jnp


def shard_map_simulate(seed, x, num_shards, features):
    """Apply one ``nn.Dense(features)`` to ``x`` in ``num_shards`` chunks, as devices would.

    ``seed``, ``num_shards`` and ``features`` arrive as floats: cast them to int. Initialise the
    layer once, with ``jax.random.PRNGKey(seed)``, on the first ``(N // num_shards, in_dim)``
    chunk; apply those same parameters to every chunk, as every device of a data-parallel
    ``shard_map`` holds the same replicated parameters; join the outputs on axis 0 (what
    ``out_specs=P('data')`` does) and flatten.

    Args:
        seed: the PRNG seed, a float.
        x: an array of shape (N, in_dim), N divisible by ``num_shards``.
        num_shards: how many chunks (simulated devices), a float.
        features: the Dense layer's output size, a float.
    """
    seed, num_shards, features = int(seed), int(num_shards), int(features)
    x = jnp.asarray(x)
    chunks = jnp.split(x, num_shards)
    layer = nn.Dense(features)
    params = layer.init(jax.random.PRNGKey(seed), chunks[0])
    outputs = [layer.apply(params, chunk) for chunk in chunks]
    return jnp.concatenate(outputs, axis=0).reshape(-1)


# end solution

import numpy as np

from spmd_guide.practice.cases import normal
from spmd_guide.practice.problem import Case, ErrorHint, Problem, ResultHint
from spmd_guide.practice.requirements import TRACEABLE, Program, Returns, matmuls_on_rows


def _cases(devices: int) -> list[Case]:
    return [
        Case((1.0, normal(10, 12, 6), 3.0, 2.0)),
        Case((7.0, normal(11, 16, 3), 4.0, 5.0)),
        Case((2.0, normal(12, 5, 2), 1.0, 4.0)),
        Case((0.0, normal(13, 8, 4), 8.0, 1.0)),
    ]


def _one_layer_fits(outcome) -> bool:
    """Whether a single ``x @ W + b`` explains every output row: one set of parameters."""
    x = np.asarray(outcome.args[1], np.float64)
    features = int(outcome.args[3])
    out = np.asarray(outcome.value, np.float64).reshape(len(x), features)
    design = np.hstack([x, np.ones((len(x), 1))])
    solution, *_ = np.linalg.lstsq(design, out, rcond=None)
    return np.allclose(design @ solution, out, rtol=1e-4, atol=1e-4)


def _right_size(outcome) -> bool:
    return np.size(outcome.value) == np.size(outcome.expected)


PROBLEM = Problem(
    reference=shard_map_simulate,
    title="shard_map simulation: manual SPMD with a loop",
    difficulty="easy",
    teaches="the per-device view: replicated parameters, a split batch, a joined output",
    lesson=("chunks",),
    make_cases=_cases,
    requirements=(
        Returns(
            "result",
            "It returns the layer's outputs for every row, joined on axis 0 and flattened: a "
            "1-D array of length `N * features`.",
        ),
        Program(
            "chunks",
            "It applies the layer chunk by chunk, as the devices would: every matrix product "
            "takes one chunk, `N / num_shards` rows.",
            test=matmuls_on_rows(
                lambda o: len(o.args[1]) // int(o.args[2]), "one chunk", inside=False
            ),
        ),
        TRACEABLE,
    ),
    hints=(
        ErrorHint(
            "TypeError",
            r"cannot be interpreted as an integer|slice indices must be integers|"
            r"integer type, got|seed must be an integer",
            "seed, num_shards and features arrive as floats: cast them with int() first",
        ),
        ResultHint(
            lambda o: np.shape(o.value) == (len(o.args[1]), int(o.args[3])),
            "flatten the joined output to 1-D with .reshape(-1)",
        ),
        ResultHint(
            lambda o: _right_size(o) and not _one_layer_fits(o),
            "no single Dense layer gives these outputs: the chunks were computed with "
            "different parameters. Initialise once, before the loop, and apply the same "
            "params to every chunk",
        ),
        ResultHint(
            lambda o: _right_size(o) and _one_layer_fits(o),
            "one layer was applied to every chunk, but not the expected one: initialise "
            "nn.Dense(features) with jax.random.PRNGKey(int(seed)) on the first chunk",
        ),
    ),
    starter_imports=("import flax.linen as nn", "import jax", "import jax.numpy as jnp"),
)

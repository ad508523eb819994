"""What the checker knows about each problem: its cases, and the mistakes it recognises.

A case is built inside the checker's worker process, after JAX has started with the device
count under test, so that its mesh spans exactly those devices.
"""

from __future__ import annotations

import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import jax
import numpy as np
from jax.sharding import Mesh

from spmd_guide.problems._mesh import AXIS


@dataclass(frozen=True)
class Case:
    """One call of a problem's function: its arguments and a description for the report."""

    args: tuple[Any, ...]
    kwargs: dict[str, Any] = field(default_factory=dict)

    def describe(self) -> str:
        parts = [_describe_value(a) for a in self.args]
        parts += [f"{k}={_describe_value(v)}" for k, v in self.kwargs.items()]
        return ", ".join(parts)


@dataclass(frozen=True)
class Problem:
    """A practice problem: how to call it, what it teaches, and how to check an answer."""

    name: str
    title: str
    difficulty: str
    teaches: str
    signature: str
    reference: Callable[..., Any]
    make_cases: Callable[[int], list[Case]]
    diagnose: Callable[[Case, Any, Any, BaseException | None, int], str | None]

    @property
    def doc(self) -> str:
        """The reference's docstring: the problem statement."""
        return self.reference.__doc__ or ""


def full_mesh() -> Mesh:
    """A mesh over every device, with one axis ``'data'`` (Auto axis type)."""
    return Mesh(np.array(jax.devices()), (AXIS,))


def _describe_value(value: Any) -> str:
    if isinstance(value, Mesh):
        return f"Mesh({AXIS!r}: {value.shape[AXIS]})"
    if isinstance(value, np.ndarray | jax.Array):
        array = np.asarray(value)
        body = np.array2string(array.reshape(-1)[:6], precision=3, separator=", ")
        more = ", ..." if array.size > 6 else ""
        return f"{array.dtype}{list(array.shape)} {body[:-1]}{more}]"
    return repr(value)


def _from_collective(error: BaseException) -> bool:
    frames = traceback.extract_tb(error.__traceback__)
    return any("lax/parallel.py" in frame.filename for frame in frames)


def _common_hint(error: BaseException | None) -> str | None:
    if isinstance(error, NotImplementedError):
        return "the function still raises NotImplementedError: replace the starter's body"
    if error is not None and _from_collective(error):
        return (
            f"the error came from a collective (psum or its kin). Check that its axis name is "
            f"exactly the mesh's axis, {AXIS!r}: a name the mesh does not have fails like this"
        )
    if error is not None and "unbound axis name" in str(error):
        return (
            "a collective ran outside the shard_map that binds its axis: call jax.lax.psum "
            f"only inside the function you pass to jax.shard_map, over {AXIS!r}"
        )
    return None


# -- shard_map_psum -----------------------------------------------------------------------------


def _psum_cases(devices: int) -> list[Case]:
    rng = np.random.default_rng(3)
    mesh = full_mesh()
    return [
        Case((np.arange(8, dtype=np.float32),), {"mesh": mesh}),
        Case((rng.normal(size=16).astype(np.float32),), {"mesh": mesh}),
        Case((np.ones(8 * devices, dtype=np.float32),), {"mesh": mesh}),
        Case((np.array([1.0, 2.0, 3.0], dtype=np.float32),)),
    ]


def _psum_diagnose(case, expected, got, error, devices) -> str | None:
    hint = _common_hint(error)
    if hint or error is not None:
        if error is not None and "out_specs" in str(error) and "replicat" in str(error):
            return (
                "out_specs=P() says every device ends with the same value, but each holds only "
                f"its own block's sum: add them with jax.lax.psum(local, {AXIS!r}) first"
            )
        return hint
    got = np.asarray(got)
    x = np.asarray(case.args[0])
    mesh = case.kwargs.get("mesh")
    parts = mesh.shape[AXIS] if mesh is not None else 1
    partials = x.reshape(parts, -1).sum(axis=1)
    if got.shape == partials.shape and parts > 1 and np.allclose(got, partials, rtol=1e-5):
        return (
            f"these are the {parts} per-device partial sums: out_specs=P({AXIS!r}) stacked them. "
            f"Add them with jax.lax.psum(local, {AXIS!r}) and return with out_specs=P()"
        )
    if got.shape == () and parts > 1 and np.isclose(got, partials[0], rtol=1e-5):
        return (
            "this is the first device's partial sum only, so psum was skipped (with "
            f"check_vma=False, shard_map took device 0's value): add jax.lax.psum(local, {AXIS!r})"
        )
    if got.shape == () and parts > 1 and np.isclose(got, parts * np.sum(x), rtol=1e-5):
        return (
            f"the total came out {parts} times too large: the value was already the same on "
            "every device when psum added it up again. psum the per-block sums, once"
        )
    if got.shape != ():
        return f"return a scalar (shape ()), not an array of shape {got.shape}"
    return None


# -- shard_map_vs_vmap --------------------------------------------------------------------------


def _vs_vmap_cases(devices: int) -> list[Case]:
    rng = np.random.default_rng(1)
    mesh = full_mesh()
    return [
        Case((np.array([[1.0, 0.0], [0.0, 1.0]], dtype=np.float32),)),
        Case((rng.normal(size=(8, 3)).astype(np.float32),), {"mesh": mesh}),
        Case((rng.normal(size=(2 * devices, 5)).astype(np.float32),), {"mesh": mesh}),
        Case((rng.normal(size=(16, 1)).astype(np.float32),), {"mesh": mesh}),
    ]


def _vs_vmap_diagnose(case, expected, got, error, devices) -> str | None:
    hint = _common_hint(error)
    if hint or error is not None:
        return hint
    got = np.asarray(got)
    expected = np.asarray(expected)
    rows = expected.shape[1]
    if got.shape == (rows,):
        return f"return both results stacked, jnp.stack([sharded, vmapped]), of shape (2, {rows})"
    if got.shape == (rows, 2):
        return "stack along axis 0, not 1: the result should be (2, B), one row per method"
    if got.shape != expected.shape:
        return f"the result should have shape {expected.shape}, got {got.shape}"
    if np.allclose(got[1], expected[1]) and not np.allclose(got[0], expected[0]):
        block_sums = np.asarray(case.args[0]) ** 2
        if np.allclose(got[0], block_sums.sum(axis=1)[::-1]):
            return "the shard_map row is reversed: out_specs must name the same axis as in_specs"
        return (
            "the vmap row is right but the shard_map row is not: map the per-row function over "
            "the rows of each block with jax.vmap inside the shard_map body"
        )
    return None


# -- shard_map_simulate -------------------------------------------------------------------------


def _simulate_cases(devices: int) -> list[Case]:
    rng = np.random.default_rng(0)
    return [
        Case((0.0, rng.normal(size=(8, 4)).astype(np.float32), 2.0, 3.0)),
        Case((1.0, rng.normal(size=(12, 6)).astype(np.float32), 3.0, 2.0)),
        Case((7.0, rng.normal(size=(16, 3)).astype(np.float32), 4.0, 5.0)),
        Case((2.0, rng.normal(size=(5, 2)).astype(np.float32), 1.0, 4.0)),
    ]


def _one_affine_map_fits(x: np.ndarray, out: np.ndarray) -> bool:
    """Whether a single ``x @ W + b`` explains every row of ``out``: one set of parameters."""
    design = np.hstack([x.astype(np.float64), np.ones((len(x), 1))])
    solution, *_ = np.linalg.lstsq(design, out.astype(np.float64), rcond=None)
    return np.allclose(design @ solution, out, rtol=1e-4, atol=1e-4)


def _simulate_diagnose(case, expected, got, error, devices) -> str | None:
    hint = _common_hint(error)
    if hint:
        return hint
    if error is not None:
        text = str(error)
        if "float" in text or "integer" in text or "'int'" in text:
            return "seed, num_shards and features arrive as floats: cast them with int() first"
        return None
    got = np.asarray(got)
    expected = np.asarray(expected)
    x = np.asarray(case.args[1])
    features = int(case.args[3])
    if got.shape == (x.shape[0], features):
        return "flatten the joined output to 1-D with .reshape(-1)"
    if got.shape != expected.shape:
        return f"the result should be 1-D of length N * features = {expected.size}, got {got.shape}"
    if not _one_affine_map_fits(x, got.reshape(x.shape[0], features)):
        return (
            "no single Dense layer gives these outputs: the chunks were computed with different "
            "parameters. Initialise once, before the loop, and apply the same params to every chunk"
        )
    return (
        "one layer was applied to every chunk, but not the expected one: initialise nn.Dense("
        "features) with jax.random.PRNGKey(int(seed)) on the first (N // num_shards, in_dim) chunk"
    )


def _catalog() -> dict[str, Problem]:
    from spmd_guide.problems.shard_map_psum import shard_map_psum
    from spmd_guide.problems.shard_map_simulate import shard_map_simulate
    from spmd_guide.problems.shard_map_vs_vmap import shard_map_vs_vmap

    problems = [
        Problem(
            name="shard_map_simulate",
            title="shard_map simulation: manual SPMD with a loop",
            difficulty="easy",
            teaches="the per-shard mental model: replicated parameters, split batch, joined output",
            signature="shard_map_simulate(seed, x, num_shards, features)",
            reference=shard_map_simulate,
            make_cases=_simulate_cases,
            diagnose=_simulate_diagnose,
        ),
        Problem(
            name="shard_map_vs_vmap",
            title="shard_map vs vmap",
            difficulty="easy",
            teaches="in_specs and out_specs, and vmap inside a shard_map body",
            signature="shard_map_vs_vmap(x, *, mesh=None)",
            reference=shard_map_vs_vmap,
            make_cases=_vs_vmap_cases,
            diagnose=_vs_vmap_diagnose,
        ),
        Problem(
            name="shard_map_psum",
            title="shard_map with a psum collective",
            difficulty="medium",
            teaches="collectives: psum across devices, and why out_specs=P() follows it",
            signature="shard_map_psum(x, *, mesh=None)",
            reference=shard_map_psum,
            make_cases=_psum_cases,
            diagnose=_psum_diagnose,
        ),
    ]
    return {problem.name: problem for problem in problems}


PROBLEMS: dict[str, Problem] = _catalog()
"""Every problem, by name."""


def get_problem(name: str) -> Problem:
    """The problem called ``name``.

    Raises:
        ValueError: for an unknown name, listing the known ones.
    """
    if name not in PROBLEMS:
        raise ValueError(f"no problem named {name!r}; the problems are: {', '.join(PROBLEMS)}")
    return PROBLEMS[name]

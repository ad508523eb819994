"""Every practice problem, in the order a learner should take them."""

from __future__ import annotations

import importlib
from pathlib import Path

from spmd_guide.practice.problem import Problem

ORDER = (
    "shard_map_simulate",
    "shard_map_vs_vmap",
    "shard_map_psum",
    "explicit_matmul",
    "explicit_layers",
    "explicit_model",
    "data_parallel_step",
    "accumulated_grads",
    "ring_all_reduce",
    "megatron_mlp",
    "matmul_2d",
    "predict_collectives",
    "predict_memory",
    "matmul_traffic",
    "no_traffic_matmul",
    "fsdp_step",
    "pipeline_forward",
    "one_f_one_b",
    "ring_attention",
    "moe_dispatch",
)
"""The problems' module names under :mod:`spmd_guide.practice.problems`, easiest first."""


def _load() -> dict[str, Problem]:
    problems = {}
    for module_name in ORDER:
        module = importlib.import_module(f"spmd_guide.practice.problems.{module_name}")
        problem: Problem = module.PROBLEM
        if problem.name != module_name:
            raise RuntimeError(f"{module_name}.PROBLEM is named {problem.name!r}")
        problems[problem.name] = problem
    return problems


PROBLEMS: dict[str, Problem] = _load()
"""Every problem, by the name of the function a learner writes."""


def get_problem(name: str) -> Problem:
    """The problem called ``name``.

    Raises:
        ValueError: for an unknown name, listing the known ones.
    """
    if name not in PROBLEMS:
        raise ValueError(f"no problem named {name!r}; the problems are: {', '.join(PROBLEMS)}")
    return PROBLEMS[name]


def reference_source(name: str) -> str:
    """The reference solution to problem ``name`` as a learner's file would hold it: the part of
    its module between ``# solution`` and ``# end solution``, imports included."""
    module = importlib.import_module(f"spmd_guide.practice.problems.{get_problem(name).name}")
    text = Path(module.__file__ or "").read_text()
    return text.split("# solution\n", 1)[1].split("# end solution", 1)[0]

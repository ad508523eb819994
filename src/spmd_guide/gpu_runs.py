"""GPU measurements kept in the repository: one JSON file per run, in ``recorded_gpu_runs/``,
each naming where and how it was measured. No build re-runs them; pages state a GPU figure only
through the role that docs/_ext/gpu_figures.py defines, which reads it from the file it names.

``benchmarks/gpu_measure.py`` writes new files on a machine with a GPU; the first file was typed
in from the notes of an earlier run, and says so in its provenance.
"""

from __future__ import annotations

import functools
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

RECORDED = Path(__file__).resolve().parent / "recorded_gpu_runs"
# Steps a person measured beside a recorded run and typed in from their note: fewer figures than
# a run (no plans, no observations), each file naming the run it was measured beside.
NOTED = RECORDED / "noted"

# The format benchmarks/gpu_measure.py writes. Format 1 files recorded by that script listed an
# asynchronous collective's operands and results alike; reading them, each value is kept once.
FORMAT = 2
READABLE_FORMATS = (1, 2)

# Every file names these; a typed-in file may leave "driver" and "command" null, and says why
# in "recorded_by".
PROVENANCE = ("gpu", "gpus", "driver", "jax", "jaxlib", "plugin", "date", "command", "recorded_by")
MAY_BE_UNRECORDED = ("driver", "command")
SECTIONS = ("plans_for_8_gpus", "steps_on_one_gpu", "observations")

# What the pages read from a run: each file, typed in or measured, holds at least these.
PLANS = {
    "fsdp_by_jit": ("collectives", "reduce_scatters"),
    "constraint_to_reduce_scatter": ("collectives",),
    "data_parallel_small": ("collectives",),
    "data_parallel_large": ("collectives", "combine_threshold_bytes"),
    "collective_matmul_ring": (
        "collectives",
        "matmuls",
        "permutes_before_first_matmul",
        "same_with_latency_hiding_scheduler",
    ),
    "windowed_einsum_threshold_zero": ("collectives", "windowed_loop"),
    "tensor_parallel_two_blocks": ("collectives",),
}
COLLECTIVE = ("op", "count")
STEP = (
    "configuration",
    "planner_chip",
    "argument_bytes",
    "temporary_bytes",
    "planner_stored_bytes",
    "planner_temporary_bytes",
    "planner_step_seconds",
    "step_seconds_median",
    "step_seconds_range",
    "steps_timed",
    "model_flops_per_step",
    "flops_per_step_with_recompute",
    "peak_flops_per_second",
    "bytes_limit",
)
NOTED_STEP = (
    "configuration",
    "planner_chip",
    "argument_bytes",
    "temporary_bytes",
    "without_preallocation",
    "with_preallocation",
)
OBSERVATIONS = (
    "memory_reserved_fraction",
    "memory_fraction_variable",
    "memory_fraction_variable_deprecated",
    "float32_matmul_side",
    "float32_matmul_default_relative_error",
    "float32_matmul_highest_relative_error",
)


class GpuRunError(ValueError):
    """A recorded GPU file, or a figure asked of one, is not what this module can read."""


def _check(data: Any, where: str) -> None:
    _check_provenance(data, where)
    absent = [section for section in SECTIONS if section not in data]
    if absent:
        raise GpuRunError(f"{where}: no {', '.join(absent)} section")
    plans, steps = data["plans_for_8_gpus"], data["steps_on_one_gpu"]
    lacking = [
        f"plans_for_8_gpus.{name}.{key}"
        for name, keys in PLANS.items()
        for key in keys
        if key not in plans.get(name, {})
    ]
    lacking += [
        f"plans_for_8_gpus.{name}.collectives.{at}.{key}"
        for name in PLANS
        for at, collective in enumerate(plans.get(name, {}).get("collectives", []))
        for key in COLLECTIVE
        if key not in collective
    ]
    if not isinstance(steps, list) or not steps:
        lacking.append("steps_on_one_gpu (a list of at least one step)")
    else:
        lacking += [
            f"steps_on_one_gpu.{at}.{key}"
            for at, step in enumerate(steps)
            for key in STEP
            if key not in step
        ]
    lacking += [f"observations.{key}" for key in OBSERVATIONS if key not in data["observations"]]
    if lacking:
        raise GpuRunError(f"{where}: the pages read what it lacks: {', '.join(lacking)}")


def _check_provenance(data: Any, where: str) -> None:
    if not isinstance(data, dict):
        raise GpuRunError(f"{where}: the file holds {type(data).__name__}, not a JSON object")
    if data.get("format") not in READABLE_FORMATS:
        raise GpuRunError(
            f"{where}: 'format' is {data.get('format')!r}; this module reads formats "
            f"{', '.join(map(str, READABLE_FORMATS))}"
        )
    provenance = data.get("provenance")
    if not isinstance(provenance, dict):
        raise GpuRunError(f"{where}: no 'provenance' object naming the GPU, versions and date")
    missing = [key for key in PROVENANCE if key not in provenance]
    if missing:
        raise GpuRunError(f"{where}: 'provenance' lacks {', '.join(missing)}")
    empty = [
        key for key in PROVENANCE if provenance[key] in (None, "") and key not in MAY_BE_UNRECORDED
    ]
    if empty:
        raise GpuRunError(f"{where}: 'provenance' leaves {', '.join(empty)} empty; fill them in")
    unrecorded = [key for key in MAY_BE_UNRECORDED if provenance[key] is None]
    if unrecorded and "typed in" not in provenance["recorded_by"]:
        raise GpuRunError(
            f"{where}: {', '.join(unrecorded)} left null in a file not typed in; a file "
            "written by benchmarks/gpu_measure.py records them"
        )


def _check_noted(data: Any, where: str) -> None:
    _check_provenance(data, where)
    if "typed in" not in data["provenance"]["recorded_by"]:
        raise GpuRunError(f"{where}: a noted step is typed in; 'recorded_by' must say so")
    if data.get("beside") not in recorded():
        raise GpuRunError(
            f"{where}: 'beside' is {data.get('beside')!r}; name the recorded run the step was "
            f"measured beside, one of {', '.join(recorded())}"
        )
    steps = data.get("steps_on_one_gpu")
    if not isinstance(steps, list) or not steps:
        raise GpuRunError(f"{where}: no 'steps_on_one_gpu' list of at least one step")
    lacking = [
        f"steps_on_one_gpu.{at}.{key}"
        for at, step in enumerate(steps)
        for key in NOTED_STEP
        if key not in step
    ]
    if lacking:
        raise GpuRunError(f"{where}: the pages read what it lacks: {', '.join(lacking)}")


@dataclass(frozen=True)
class GpuRun:
    """One recorded run on a GPU."""

    name: str
    data: dict[str, Any]

    @property
    def provenance(self) -> dict[str, Any]:
        provenance: dict[str, Any] = self.data["provenance"]
        return provenance

    @property
    def measured(self) -> bool:
        """Whether benchmarks/gpu_measure.py wrote the file, rather than a person typing it in."""
        return bool(self.provenance["recorded_by"] == RECORDED_BY_SCRIPT)

    @property
    def label(self) -> str:
        """Where, when and how, as a page labels the run's figures."""
        p = self.provenance
        gpus = "one" if p["gpus"] == 1 else str(p["gpus"])
        if self.measured:
            how = "by benchmarks/gpu_measure.py"
        elif "beside" in self.data:
            how = f"typed in from a note written beside the run {self.data['beside']}"
        else:
            how = "typed in from that run's notes"
        return (
            f"measured on {gpus} {p['gpu']} with JAX {p['jax']}, {p['date']}, {how}; "
            "recorded, not re-run by this build"
        )

    def figure(self, path: str) -> Any:
        """The value at a dotted ``path`` (list items by index), or a derived figure:
        ``steps_on_one_gpu.N.`` ``model_flops_utilisation``, ``flops_utilisation_with_recompute``,
        ``times_the_bound`` and ``temporaries_over_planner``."""
        node: Any = self.data
        parts = path.split(".")
        for at, part in enumerate(parts):
            if isinstance(node, list):
                if not part.isdigit() or int(part) >= len(node):
                    raise GpuRunError(
                        f"{self.name}: {path!r}: no item {part} in a list of {len(node)}"
                    )
                node = node[int(part)]
            elif isinstance(node, dict) and part in node:
                node = node[part]
            elif isinstance(node, dict) and part in _DERIVED and at == len(parts) - 1:
                return _DERIVED[part](node)
            else:
                raise GpuRunError(
                    f"{self.name}: {path!r}: no {part!r} here; the keys are "
                    f"{', '.join(sorted(node)) if isinstance(node, dict) else 'none'}"
                )
        return node


_DERIVED = {
    # Model FLOPs utilisation: the model's FLOPs per step (no recomputation) over what the chip's
    # peak rate would do in the measured step time.
    "model_flops_utilisation": lambda step: (
        step["model_flops_per_step"] / step["step_seconds_median"] / step["peak_flops_per_second"]
    ),
    "flops_utilisation_with_recompute": lambda step: (
        step["flops_per_step_with_recompute"]
        / step["step_seconds_median"]
        / step["peak_flops_per_second"]
    ),
    "times_the_bound": lambda step: step["step_seconds_median"] / step["planner_step_seconds"],
    "temporaries_over_planner": lambda step: (
        step["temporary_bytes"] / step["planner_temporary_bytes"]
    ),
}


RECORDED_BY_SCRIPT = "benchmarks/gpu_measure.py"


def _each_value_once(data: dict[str, Any]) -> dict[str, Any]:
    """A format 1 file as the script writes format 2: in a file that benchmarks/gpu_measure.py
    recorded, each asynchronous all-reduce, reduce-scatter or all-to-all listed its operands'
    shapes and then its results'; keep the results. Typed-in files listed each value once."""
    if data["format"] != 1 or data["provenance"]["recorded_by"] != RECORDED_BY_SCRIPT:
        return data
    for plan in data["plans_for_8_gpus"].values():
        for collective in plan.get("collectives", []) if isinstance(plan, dict) else []:
            shapes = collective.get("shapes", [])
            listed_twice = collective["op"] in ("all-reduce", "reduce-scatter", "all-to-all")
            if collective.get("asynchronous") and listed_twice and len(shapes) % 2 == 0:
                collective["shapes"] = shapes[len(shapes) // 2 :]
    return data


def load(path: Path) -> GpuRun:
    """Read and check one recorded file."""
    try:
        data = json.loads(Path(path).read_text())
    except (OSError, json.JSONDecodeError) as error:
        raise GpuRunError(f"{path}: cannot be read as JSON: {error}") from error
    _check(data, Path(path).name)
    return GpuRun(Path(path).stem, _each_value_once(data))


@functools.cache
def recorded() -> dict[str, GpuRun]:
    """Every recorded run, by file name without ``.json``."""
    runs = {path.stem: load(path) for path in sorted(RECORDED.glob("*.json"))}
    if not runs:
        raise GpuRunError(f"no recorded GPU run in {RECORDED}")
    return runs


@functools.cache
def noted() -> dict[str, GpuRun]:
    """Every noted step's file (``recorded_gpu_runs/noted/``), by file name without ``.json``."""
    found = {}
    for path in sorted(NOTED.glob("*.json")):
        try:
            data = json.loads(path.read_text())
        except (OSError, json.JSONDecodeError) as error:
            raise GpuRunError(f"{path}: cannot be read as JSON: {error}") from error
        _check_noted(data, path.name)
        found[path.stem] = GpuRun(path.stem, data)
    return found


def run(name: str) -> GpuRun:
    """The recorded run, or the noted steps, called ``name``."""
    runs = {**recorded(), **noted()}
    if name not in runs:
        raise GpuRunError(f"no recorded GPU run {name!r}; there are {', '.join(runs)}")
    return runs[name]


def measured() -> list[GpuRun]:
    """Every run benchmarks/gpu_measure.py recorded, by name: what a page's claim about GPU
    behaviour is asserted over, so that a new record either agrees or fails the build."""
    return [run for run in recorded().values() if run.measured]

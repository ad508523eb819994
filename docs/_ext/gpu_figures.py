"""GPU figures in a page's prose, read from the recorded runs (spmd_guide.gpu_runs).

No build has a GPU, so a page cannot measure what it says a GPU did. It states such a figure
with a role that reads it from the recorded file, so the figure cannot differ from the file:

    {gpu}`h100-2026-11-jax-0.11.2:steps_on_one_gpu.0.step_seconds_median` s      → 0.485 s
    {gpu}`h100-2026-11-jax-0.11.2:steps_on_one_gpu.0.model_flops_utilisation;.0%` → 30%
    {gpu-label}`h100-2026-11-jax-0.11.2`          → measured on one … with JAX …, …, typed in …

A role names its record (the file's name without ``.json``), so that a figure keeps meaning the
run its sentence describes when another record is added. After ``;`` comes a Python format
specification, or ``MB``, ``GB`` or ``GiB`` (one place). A path the file lacks fails the build,
naming the keys there are.
"""

from __future__ import annotations

from typing import Any

from docutils import nodes
from sphinx.application import Sphinx
from sphinx.util.docutils import SphinxRole

from spmd_guide import gpu_runs

_UNITS = {"MB": 1e6, "GB": 1e9, "GiB": 2**30}


def resolve(target: str) -> tuple[gpu_runs.GpuRun, str]:
    """The run and the dotted path a role's target names."""
    name, _, path = target.rpartition(":")
    if not name:
        raise gpu_runs.GpuRunError(
            f"{target!r} names no record: write RUN:{target}, RUN being one of "
            f"{', '.join(gpu_runs.recorded())}"
        )
    return gpu_runs.run(name), path


def render(target: str) -> str:
    """The text a ``{gpu}`` role shows for ``target``."""
    path, _, spec = target.partition(";")
    run, path = resolve(path.strip())
    value: Any = run.figure(path)
    if spec in _UNITS:
        return f"{value / _UNITS[spec]:.1f} {spec}"
    if isinstance(value, list) and not spec:
        return " to ".join(str(item) for item in value)
    return format(value, spec)


class GpuFigure(SphinxRole):
    def run(self) -> tuple[list[nodes.Node], list[nodes.system_message]]:
        try:
            text = render(self.text)
        except (gpu_runs.GpuRunError, ValueError, TypeError) as error:
            message = self.inliner.reporter.error(
                f"{{gpu}}`{self.text}`: {error}", line=self.lineno
            )
            return [nodes.problematic(self.rawtext, self.rawtext)], [message]
        return [nodes.inline(self.rawtext, text, classes=["gpu-figure"])], []


class GpuLabel(SphinxRole):
    def run(self) -> tuple[list[nodes.Node], list[nodes.system_message]]:
        try:
            run = gpu_runs.run(self.text)
        except gpu_runs.GpuRunError as error:
            message = self.inliner.reporter.error(f"{{gpu-label}}: {error}", line=self.lineno)
            return [nodes.problematic(self.rawtext, self.rawtext)], [message]
        return [nodes.emphasis(self.rawtext, run.label, classes=["gpu-label"])], []


def setup(app: Sphinx) -> dict[str, Any]:
    app.add_role("gpu", GpuFigure())
    app.add_role("gpu-label", GpuLabel())
    return {"parallel_read_safe": True, "parallel_write_safe": True}

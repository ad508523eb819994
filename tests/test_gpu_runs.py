"""The recorded GPU runs: each file parses and names its provenance, and every GPU figure a
page states comes from one of them, through the ``{gpu}`` role."""

from __future__ import annotations

import copy
import json
import re
import sys
from pathlib import Path

import pytest
from test_page_figures import _BACKTICK_FENCE, _COMMENT, _FIGURE, _RELEASE, prose

from spmd_guide import gpu_runs

DOCS = Path(__file__).resolve().parents[1] / "docs"
sys.path.insert(0, str(DOCS / "_ext"))

import gpu_figures  # noqa: E402  (found through the path above)

_ROLE = re.compile(r"\{gpu\}`(?P<target>[^`]+)`")
PAGES = sorted(p for p in DOCS.rglob("*.md") if "_build" not in p.parts)


@pytest.mark.parametrize("name", sorted(gpu_runs.recorded()))
def test_each_recorded_file_parses_and_names_where_and_when_it_was_measured(name):
    run = gpu_runs.run(name)
    provenance = run.provenance
    assert (
        provenance["gpu"]
        and provenance["jax"]
        and re.fullmatch(r"\d{4}-\d\d(-\d\d)?", provenance["date"])
    )
    assert provenance["gpu"] in run.label and provenance["jax"] in run.label
    assert "not re-run by this build" in run.label
    assert run.data["steps_on_one_gpu"] or run.data["plans_for_8_gpus"]


def _written(tmp_path, data):
    path = tmp_path / "run.json"
    path.write_text(json.dumps(data))
    return path


@pytest.mark.parametrize("name", sorted(gpu_runs.recorded()))
def test_a_format_1_file_the_script_recorded_lists_each_value_once_when_read(name, tmp_path):
    data = copy.deepcopy(gpu_runs.run(name).data)
    data["provenance"].update(recorded_by="benchmarks/gpu_measure.py", driver="1", command="x")
    both = {"op": "all-reduce", "asynchronous": True, "count": 1, "shapes": ["f32[8]", "f32[8]"]}
    scatter = dict(both, op="reduce-scatter", shapes=["f32[64,8]", "f32[8,8]"])
    in_line = dict(both, asynchronous=False, shapes=["f32[4]", "f32[4]"])  # two values, synchronous
    data["plans_for_8_gpus"]["data_parallel_large"]["collectives"] = [both, scatter, in_line]
    read = gpu_runs.load(_written(tmp_path, data)).data["plans_for_8_gpus"]["data_parallel_large"]
    assert [c["shapes"] for c in read["collectives"]] == [
        ["f32[8]"],
        ["f32[8,8]"],
        ["f32[4]", "f32[4]"],
    ]
    # The script's format 2 already lists each value once, and a typed-in file did: as written.
    for changed in (
        {"format": 2},
        {"provenance": {**data["provenance"], "recorded_by": "typed in"}},
    ):
        data_as_written = {**copy.deepcopy(data), **changed}
        data_as_written["plans_for_8_gpus"]["data_parallel_large"]["collectives"] = [both]
        again = gpu_runs.load(_written(tmp_path, data_as_written))
        shapes = again.data["plans_for_8_gpus"]["data_parallel_large"]["collectives"][0]["shapes"]
        assert shapes == ["f32[8]", "f32[8]"]


@pytest.mark.parametrize("name", sorted(gpu_runs.recorded()))
def test_a_file_missing_its_provenance_or_leaving_it_empty_is_refused(name, tmp_path):
    good = gpu_runs.run(name).data
    script = "benchmarks/gpu_measure.py"
    for change, message in [
        (lambda d: d["provenance"].pop("jax"), "lacks jax"),
        (lambda d: d["provenance"].update(gpu=""), "leaves gpu empty"),
        (lambda d: d["provenance"].update(recorded_by=script, driver=None), "not typed in"),
        (lambda d: d.update(format=3), "reads formats 1, 2"),
        (lambda d: d.pop("steps_on_one_gpu"), "no steps_on_one_gpu"),
    ]:
        data = copy.deepcopy(good)
        change(data)
        with pytest.raises(gpu_runs.GpuRunError, match=message):
            gpu_runs.load(_written(tmp_path, data))
    (tmp_path / "broken.json").write_text("{")
    with pytest.raises(gpu_runs.GpuRunError, match="cannot be read as JSON"):
        gpu_runs.load(tmp_path / "broken.json")


@pytest.mark.parametrize("name", sorted(gpu_runs.recorded()))
def test_a_figure_the_file_lacks_is_refused_naming_the_keys_there_are(name):
    run = gpu_runs.run(name)
    with pytest.raises(gpu_runs.GpuRunError, match="step_seconds_median"):
        run.figure("steps_on_one_gpu.0.step_time")
    with pytest.raises(gpu_runs.GpuRunError, match="no item 9"):
        run.figure("steps_on_one_gpu.9.step_seconds_median")
    step = run.data["steps_on_one_gpu"][0]
    assert run.figure("steps_on_one_gpu.0.model_flops_utilisation") == pytest.approx(
        step["model_flops_per_step"] / step["step_seconds_median"] / step["peak_flops_per_second"]
    )


@pytest.mark.parametrize("name", sorted(gpu_runs.recorded()))
def test_the_role_renders_the_named_run_s_figure_with_units_and_format_specifications(name):
    step = gpu_runs.run(name).data["steps_on_one_gpu"][0]
    path = "steps_on_one_gpu.0"
    assert gpu_figures.render(f"{name}:{path}.step_seconds_median") == str(
        step["step_seconds_median"]
    )
    assert gpu_figures.render(f"{name}:{path}.step_seconds_median;.3f") == (
        f"{step['step_seconds_median']:.3f}"
    )
    assert gpu_figures.render(f"{name}:{path}.argument_bytes;GB") == (
        f"{step['argument_bytes'] / 1e9:.1f} GB"
    )


def test_a_role_that_names_no_run_is_refused_naming_the_runs_there_are():
    with pytest.raises(gpu_runs.GpuRunError, match="names no record") as refused:
        gpu_figures.render("steps_on_one_gpu.0.step_seconds_median")
    assert all(name in str(refused.value) for name in gpu_runs.recorded())
    with pytest.raises(gpu_runs.GpuRunError, match="no recorded GPU run 'h300'"):
        gpu_figures.render("h300:steps_on_one_gpu.0.step_seconds_median")


def test_a_run_says_whether_it_was_measured_or_typed_in():
    for run in gpu_runs.recorded().values():
        assert run.measured == (run.provenance["recorded_by"] == "benchmarks/gpu_measure.py")
        assert ("typed in" in run.label) != run.measured, run.label
    assert gpu_runs.measured() == [run for run in gpu_runs.recorded().values() if run.measured]
    assert gpu_runs.run("h200-2026-11-28-jax-0.11.2").measured
    assert not gpu_runs.run("h100-2026-11-jax-0.11.2").measured


def test_the_typed_in_h100_file_says_which_of_its_figures_were_corrected_and_why():
    """Review GR-7: its combining threshold was typed in as 30 MiB, and its ring temporaries could
    not be that ring's; the file says so and holds neither."""
    h100, h200 = gpu_runs.run("h100-2026-11-jax-0.11.2"), gpu_runs.run("h200-2026-11-28-jax-0.11.2")
    said = h100.provenance["recorded_by"]
    assert said.startswith("typed in") and "corrected" in said
    for field in (
        "combine_threshold_bytes",
        "temporary_bytes_approx",
        "cpu_temporary_bytes_approx",
    ):
        assert field in said, field
    large = "plans_for_8_gpus.data_parallel_large.combine_threshold_bytes"
    # The same JAX, so the same default: the one the H200 run measured.
    assert h100.provenance["jax"] == h200.provenance["jax"]
    assert h100.figure(large) == h200.figure(large) == 30 * 2**20 + 7
    ring = h100.figure("plans_for_8_gpus.collective_matmul_ring")
    assert not {"temporary_bytes_approx", "cpu_temporary_bytes_approx"} & set(ring)


@pytest.mark.parametrize("page", PAGES, ids=lambda page: str(page.relative_to(DOCS)))
def test_every_gpu_figure_a_page_states_is_read_from_a_recorded_file(page):
    text = page.read_text(encoding="utf-8")
    for target in _ROLE.findall(text):
        gpu_figures.render(target)  # raises, naming the keys, for a figure no file holds
    models = {run.provenance["gpu"].split()[1] for run in gpu_runs.recorded().values()}
    text = _COMMENT.sub("", _BACKTICK_FENCE.sub("", text))
    for sentence in re.split(r"\n\s*\n|\n\s*(?:[-*]|\d+\.|\|) |(?<=[.;])\s+(?=[A-Z(*{])", text):
        if not any(model in sentence for model in models) and "{gpu}" not in sentence:
            continue
        written = prose(sentence)
        for model in models:
            written = written.replace(model, "")
        stated = [
            match.group()
            for match in _FIGURE.finditer(written)
            if len(match.group()) > 1 and not _RELEASE.fullmatch(match.group())
        ]
        assert not stated, (
            f"{page.relative_to(DOCS)} states {', '.join(stated)} beside a recorded GPU's "
            f"figures, not through the {{gpu}} role: {sentence[:300]!r}"
        )

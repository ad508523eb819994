"""The pages' claims about recorded GPU runs: every hidden cell that reads ``spmd_guide.gpu_runs``
is executed here on its own, against the recorded files, and again with one more record that
contradicts a claim. The cells that bear on the claim must then fail, so a new record either
agrees with the pages or fails the build.

These cells only read JSON: no JAX compiles, so the test is fast.
"""

from __future__ import annotations

import copy
import importlib.util
import json
import re
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from spmd_guide import gpu_runs

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
_spec = importlib.util.spec_from_file_location(
    "visible_cells", ROOT / "copied_pages" / "visible_cells.py"
)
assert _spec is not None and _spec.loader is not None
visible_cells = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(visible_cells)

HIDDEN = ("remove-cell", "remove-input")
H200 = "h200-2026-11-28-jax-0.11.2"
# Pages whose cells read gpu_runs together with the page's own state, so they cannot run alone:
# the planner page sets every recorded step against the answers it computes for the whole page
# (its fit, its memory checks), and the docs build runs those cells.
NOT_SELF_CONTAINED = {"guide/planner.md"}
PAGES = sorted(p for p in DOCS.rglob("*.md") if "_build" not in p.parts)


def gpu_cells() -> list[tuple[str, int, str]]:
    """Every hidden code cell of every page that reads gpu_runs: (page, its cell's index, code)."""
    found = []
    for page in PAGES:
        name = page.relative_to(DOCS).as_posix()
        if name in NOT_SELF_CONTAINED:
            continue
        for at, (tags, code) in enumerate(visible_cells.cells(page)):
            if any(tag in tags for tag in HIDDEN) and "gpu_runs" in code:
                found.append((name, at, code))
    return found


CELLS = gpu_cells()


def _run(code: str) -> None:
    exec(compile(code, "<page cell>", "exec"), {"__name__": "page_cell"})


@pytest.fixture
def records(tmp_path, monkeypatch):
    """A folder holding copies of the real records, read by gpu_runs in their place; returns a
    function that adds one more record, as gpu_measure.py would write it."""
    folder = tmp_path / "recorded_gpu_runs"
    shutil.copytree(gpu_runs.RECORDED, folder)
    monkeypatch.setattr(gpu_runs, "RECORDED", folder)
    gpu_runs.recorded.cache_clear()

    def add(name: str, data: dict[str, Any]) -> None:
        (folder / f"{name}.json").write_text(json.dumps(data, indent=1))
        gpu_runs.recorded.cache_clear()

    yield add
    gpu_runs.recorded.cache_clear()


def test_the_pages_have_cells_that_read_the_records():
    pages = {page for page, _, _ in CELLS}
    assert {
        "guide/gpus.md",
        "patterns/fsdp.md",
        "patterns/data-parallel.md",
        "patterns/tensor-parallel.md",
        "patterns/zero.md",
        "transformer-patterns/collective-matmul.md",
        "guide/backward-communication.md",
    } <= pages, pages


@pytest.mark.parametrize(("page", "at", "code"), CELLS, ids=[f"{p}[{at}]" for p, at, _ in CELLS])
def test_each_cell_runs_alone_and_holds_for_every_recorded_run(page, at, code):
    gpu_runs.recorded.cache_clear()  # the files in the repository, as the build reads them
    _run(code)  # a NameError here: the cell uses the page's state; import what it needs


def _h200_copy() -> dict[str, Any]:
    """The H200 record as its file holds it (format 1, each async value listed twice)."""
    return json.loads((gpu_runs.RECORDED / f"{H200}.json").read_text())


def _fsdp_by_jit_reduce_scatters(data: dict[str, Any]) -> None:
    plan = data["plans_for_8_gpus"]["fsdp_by_jit"]
    plan["reduce_scatters"] = 1
    plan["collectives"].append(
        {
            "op": "reduce-scatter",
            "axes": "x",
            "shapes": ["f32[32,256]"],
            "asynchronous": False,
            "count": 1,
        }
    )


def _ring_matmul_before_last_permute(data: dict[str, Any]) -> None:
    ring = data["plans_for_8_gpus"]["collective_matmul_ring"]
    permutes = sum(c["count"] for c in ring["collectives"] if c["op"] == "collective-permute")
    ring["permutes_before_first_matmul"] = permutes - 1


# Each contradiction, and the pages whose cells must then fail: every page that states the claim.
CONTRADICTIONS: dict[str, tuple[Callable[[dict[str, Any]], None], set[str]]] = {
    "fsdp's jax.jit route reduce-scatters": (
        _fsdp_by_jit_reduce_scatters,
        {
            "guide/gpus.md",
            "patterns/fsdp.md",
            "patterns/zero.md",
            "guide/backward-communication.md",
        },
    ),
    "the ring has a matmul before its last permute": (
        _ring_matmul_before_last_permute,
        {"guide/gpus.md", "transformer-patterns/collective-matmul.md"},
    ),
}


@pytest.mark.parametrize("claim", CONTRADICTIONS)
def test_a_record_that_contradicts_a_claim_fails_the_cells_that_state_it(claim, records):
    contradict, pages = CONTRADICTIONS[claim]
    data = _h200_copy()
    contradict(data)
    records("h200-2027-01-01-jax-9.9", data)
    assert gpu_runs.run("h200-2027-01-01-jax-9.9").measured
    failed = {}
    for page, at, code in CELLS:
        try:
            _run(code)
        except AssertionError as error:
            failed.setdefault(page, []).append((at, str(error)[:200]))
    assert set(failed) == pages, (
        f"with a record where {claim}, the cells of {sorted(failed)} failed; "
        f"expected those of {sorted(pages)}: {failed}"
    )
    # And the new record is what they name.
    for page, errors in failed.items():
        assert any("2027-01-01" in message for _, message in errors), (page, errors)


def test_the_contradicting_records_are_the_only_change(records):
    """Without a contradiction, a renamed copy of the H200 record passes every cell: the failures
    above come from the claim, not from a second measured run."""
    records("h200-2027-01-01-jax-9.9", copy.deepcopy(_h200_copy()))
    for _, _, code in CELLS:
        _run(code)


_ROLE = re.compile(r"\{gpu\}`(?P<target>[^`]+)`")
_LABEL = re.compile(r"\{gpu-label\}`(?P<name>[^`]+)`")


@pytest.mark.parametrize("page", PAGES, ids=lambda page: str(page.relative_to(DOCS)))
def test_no_page_reads_a_run_without_naming_it(page):
    """``gpu_runs.newest()`` is gone, and a role names its record: which run a figure comes from
    must not change when another record is added. (The build refuses both too.)"""
    text = page.read_text(encoding="utf-8")
    where = page.relative_to(DOCS)
    assert "gpu_runs.newest" not in text, f"{where} calls gpu_runs.newest(); name the run"
    for target in _ROLE.findall(text):
        name, _, path = target.partition(";")[0].strip().rpartition(":")
        assert name and path, f"{where}: {{gpu}}`{target}` names no record; write RUN:{target}"
    for name in _LABEL.findall(text):
        assert name != "newest" and ":" not in name, f"{where}: {{gpu-label}}`{name}`"

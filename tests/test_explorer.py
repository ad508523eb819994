"""The sharding explorer's formulas (docs/_static/explorer/model.js), run in V8 as the page runs
them: what the presets cover, blocks and bytes, and the refusals of bad input. Each preset is
compiled and compared with the explorer's answer by the explorer's page, as the site builds."""

from __future__ import annotations

import pytest

from spmd_guide import explorer

# The meshes span up to 8 devices: one pass, on the guide's own count.
pytestmark = pytest.mark.once

MESH = {"axes": [["x", 2], ["y", 4]], "types": "Explicit"}


def question(arrays, op, mesh=MESH):
    return {"mesh": mesh, "arrays": arrays, "op": op}


def test_the_presets_cover_the_four_matmul_cases_reductions_reshards_and_refusals():
    found = [(p, explorer.explain(p["question"])) for p in explorer.presets()]
    assert len(found) >= 30
    matmul_cases = {a.get("case") for p, a in found if p["question"]["op"]["kind"] == "matmul"}
    assert {1, 2, 3, 4} <= matmul_cases
    kinds = {p["question"]["op"]["kind"] for p, _ in found}
    assert kinds == {"add", "matmul", "sum", "reshard"}
    assert sum(1 for _, a in found if a["refused"]) >= 4
    assert {"Explicit", "Auto"} == {p["types"] for p, _ in found}
    collectives = {c["kind"] for _, a in found for c in a["collectives"]}
    assert {"all-gather", "all-reduce", "all-to-all"} <= collectives


def test_blocks_copies_and_bytes_follow_the_layout():
    answer = explorer.explain(
        question(
            [{"shape": [16, 32], "spec": ["x", "y"]}], {"kind": "reshard", "spec": ["x", None]}
        )
    )
    (shown,) = answer["inputs"]
    assert shown["local_shape"] == [8, 8]
    assert shown["copies"] == 1
    # Device 5 is at x = 1, y = 1 of the (2, 4) mesh.
    assert shown["blocks"][5] == [[8, 16], [8, 16]]
    (gather,) = answer["collectives"]
    assert (gather["kind"], gather["axes"], gather["shape"]) == ("all-gather", ["y"], [8, 32])
    assert gather["bytes"] == 8 * 32 * 4 * 3 / 4
    replicated = explorer.explain(
        question([{"shape": [16, 32], "spec": ["x", None]}], {"kind": "sum", "axis": 1})
    )
    assert replicated["inputs"][0]["copies"] == 4
    assert replicated["collectives"] == []


def test_out_sharding_is_refused_where_the_explorer_does_not_model_it():
    arrays = [{"shape": [16, 32], "spec": ["x", None]}, {"shape": [32, 64], "spec": [None, "y"]}]
    with pytest.raises(explorer.ExplorerError, match="leave it empty"):
        explorer.explain(question(arrays, {"kind": "matmul", "out_spec": ["x", None]}))
    auto = {"axes": [["x", 2], ["y", 4]], "types": "Auto"}
    split = [{"shape": [16, 32], "spec": ["x", "y"]}, {"shape": [32, 64], "spec": ["y", None]}]
    with pytest.raises(explorer.ExplorerError, match="Explicit axes only"):
        explorer.explain(question(split, {"kind": "matmul", "out_spec": ["x", None]}, auto))


@pytest.mark.parametrize(
    ("arrays", "op", "mesh", "words"),
    [
        (
            [{"shape": [16], "spec": ["x"]}],
            {"kind": "sum", "axis": 0},
            {"axes": [["x", 9]], "types": "Explicit"},
            "from 1 to 8",
        ),
        (
            [{"shape": [16], "spec": ["z"]}],
            {"kind": "sum", "axis": 0},
            MESH,
            "which the mesh has not",
        ),
        (
            [{"shape": [10], "spec": ["y"]}],
            {"kind": "sum", "axis": 0},
            MESH,
            "pad it to a multiple of 4",
        ),
        (
            [{"shape": [16, 8], "spec": ["x"]}],
            {"kind": "sum", "axis": 0},
            MESH,
            "one entry per dimension",
        ),
        (
            [{"shape": [16, 8], "spec": ["x", "x"]}],
            {"kind": "sum", "axis": 0},
            MESH,
            "uses 'x' twice",
        ),
        (
            [{"shape": [16], "spec": ["x"]}],
            {"kind": "sum", "axis": 3},
            MESH,
            "choose one from 0 to 0",
        ),
        ([{"shape": [16, 8], "spec": ["x", None]}], {"kind": "roll"}, MESH, "choose an operation"),
    ],
)
def test_bad_input_is_refused_with_what_to_change(arrays, op, mesh, words):
    with pytest.raises(explorer.ExplorerError, match=words):
        explorer.explain(question(arrays, op, mesh))

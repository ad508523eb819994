"""The search page's error matching (docs/_static/error-search.js), run in V8 on a few messages:
what it leaves out of a pasted error, and when it names a section or leaves the results to
Sphinx's search. The whole site's index is tested in the browser tests, on real pasted lines."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from py_mini_racer import MiniRacer

SCRIPT = Path(__file__).resolve().parents[1] / "docs" / "_static" / "error-search.js"

MESSAGES = [
    {
        "page": "troubleshooting",
        "anchor": "not-divisible",
        "title": "t",
        "message": "ValueError: Sharding spec ('x',) implies that array axis 0 is partitioned 8 "
        "times, but does not evenly divide the dimension size 10. Got shape: (10,) and sharding "
        "NamedSharding(mesh=AbstractMesh('x': 8, axis_types=(Explicit,)), spec=P('x',))",
    },
    {
        "page": "troubleshooting",
        "anchor": "loop-carry",
        "title": "t",
        "message": "TypeError: scan body function carry input and carry output must have equal "
        "types, but they differ: The input carry x has type float32[2]{V:x} but the corresponding "
        "output carry component has type float32[2], so the manual axis types do not match.",
    },
    {
        "page": "migrating",
        "anchor": "removed",
        "title": "t",
        "message": "AttributeError: module 'jax.lax' has no attribute 'pvary'",
    },
    {
        "page": "processes",
        "anchor": "join",
        "title": "t",
        "message": "DEADLINE_EXCEEDED",
    },
    {
        "page": "troubleshooting",
        "anchor": "full-remat",
        "title": "t",
        "message": "Involuntary full rematerialization. The compiler cannot go from sharding "
        "… efficiently",
    },
]


@pytest.fixture(scope="module")
def search():
    runner = MiniRacer()
    runner.eval(SCRIPT.read_text(encoding="utf-8").replace("const ErrorSearch", "var ErrorSearch"))
    runner.eval(f"var ERROR_MESSAGES = {json.dumps(MESSAGES)};")

    def closest(query: str) -> str | None:
        found = json.loads(runner.eval(f"JSON.stringify(ErrorSearch.closest({json.dumps(query)}))"))
        return found and found["anchor"]

    yield closest
    runner.close()


@pytest.mark.parametrize(
    ("pasted", "section"),
    [
        # The reader's own names, shapes, sizes and layout.
        (
            "ValueError: Sharding spec ('batch',) implies that array axis 0 is partitioned 4 "
            "times, but does not evenly divide the dimension size 19. Got shape: (19, 3) and "
            "sharding NamedSharding(mesh=Mesh('batch': 4, axis_types=(Auto,)), spec=P('batch',))",
            "not-divisible",
        ),
        # A whole traceback, frames and all: the message it ends with decides.
        (
            'Traceback (most recent call last): File "run.py", line 9, in <module> '
            "TypeError: scan body function carry input and carry output must have equal types, "
            "but they differ: The input carry h has type float32[8,128]{V:data} but the "
            "corresponding output carry component has type float32[8,128], so the manual axis "
            "types do not match.",
            "loop-carry",
        ),
        # A log line, with its level, time, thread and source file.
        (
            "E1127 12:00:00.000000 1234 spmd_partitioner.cc:666] [SPMD] Involuntary full "
            "rematerialization. The compiler cannot go from sharding {devices=[4,1]<=[4]} to "
            "{devices=[1,4]<=[4]} efficiently for HLO operation %copy = f32[16,1024]",
            "full-remat",
        ),
        # A status code alone is the whole of a short message.
        ("jax.errors.JaxRuntimeError: DEADLINE_EXCEEDED: Barrier timed out", "join"),
        # A phrase typed from the message.
        ("does not evenly divide the dimension size", "not-divisible"),
        # A message told apart by its names needs them: this one is pvary's.
        ("AttributeError: module 'jax.lax' has no attribute 'pvary'", "removed"),
        ("AttributeError: module 'jax' has no attribute 'named_scope'", None),
        # Words about a topic, not an error: Sphinx's search answers them.
        ("mesh axis name", None),
        ("scan carry type", None),
        ("out of memory", None),
    ],
)
def test_a_pasted_error_finds_its_section_or_none(search, pasted, section):
    assert search(pasted) == section

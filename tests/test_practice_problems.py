"""Every problem: its reference passes on every device count, a right solution written differently
passes, and the mistakes learners make fail with the hint that names them.

The solutions live in tests/practice_solutions/<problem>/; each file's docstring opens with
"Expected: pass" or "Expected hint: <words>". All of them are checked in one batch, so JAX starts
once per device count.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from spmd_guide.practice import DEVICE_COUNTS, PROBLEMS, check_many

# The checker starts its own processes for each device count.
pytestmark = pytest.mark.once

SOLUTIONS = Path(__file__).parent / "practice_solutions"


def expectation(path: Path) -> str:
    first = ast.get_docstring(ast.parse(path.read_text())).splitlines()[0]
    if first == "Expected: pass":
        return ""
    assert first.startswith("Expected hint: "), f"{path}: say what is expected"
    return first.removeprefix("Expected hint: ")


def solution_files() -> list[Path]:
    return sorted(SOLUTIONS.glob("*/*.py"))


@pytest.fixture(scope="module")
def reports(tmp_path_factory):
    """Reports on every reference and every solution file, by "reference:NAME" and by path."""
    folder = tmp_path_factory.mktemp("references")
    keyed = []
    for name in PROBLEMS:
        reference = folder / f"{name}.py"
        reference.write_text(f"from spmd_guide.practice.problems.{name} import {name}\n")
        keyed.append((f"reference:{name}", name, reference))
    keyed += [(str(path), path.parent.name, path) for path in solution_files()]
    # Every reference on every device count; the learners' solutions on 8 devices, where each
    # mistake shows (the meshes there include sub-meshes and, for 2D, 1x8, 2x4, 4x2 and 8x1).
    references, solutions = keyed[: len(PROBLEMS)], keyed[len(PROBLEMS) :]
    smaller = [c for c in DEVICE_COUNTS if c != 8]
    by_key = {}
    for group, counts in ((references, smaller), (references + solutions, (8,))):
        checked = check_many([(name, path) for _, name, path in group], device_counts=counts)
        for (key, _, _), report in zip(group, checked, strict=True):
            by_key.setdefault(key, []).append(report)
    return by_key


@pytest.mark.parametrize("name", list(PROBLEMS))
def test_the_reference_passes_on_every_device_count(reports, name):
    for report in reports[f"reference:{name}"]:
        assert report.passed, report.text()


@pytest.mark.parametrize("path", solution_files(), ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_a_learners_solution_gets_the_right_verdict(reports, path):
    (report,) = reports[str(path)]
    hint = expectation(path)
    text = report.text()
    if not hint:
        assert report.passed, text
    else:
        assert not report.passed, text
        assert hint in text, text


@pytest.mark.parametrize("name", list(PROBLEMS))
def test_each_problem_has_two_mistakes_and_a_second_right_solution(name):
    files = list((SOLUTIONS / name).glob("*.py"))
    hints = [expectation(path) for path in files]
    assert sum(1 for h in hints if h) >= 2 and sum(1 for h in hints if not h) >= 1, name


def test_the_problems_index_lists_every_problem_page():
    docs = Path(__file__).parents[1] / "docs" / "problems"
    toctree = (docs / "index.md").read_text().split("```{toctree}")[1].split("```")[0]
    pages = [
        line.strip() for line in toctree.splitlines() if line.strip() and not line.startswith(":")
    ]
    assert pages == [problem.page for problem in PROBLEMS.values()]
    for problem in PROBLEMS.values():
        assert (docs / f"{problem.page}.md").is_file(), problem.page

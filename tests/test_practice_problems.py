"""Every problem: its reference passes on every device count, a right solution written differently
passes, and the mistakes learners make fail with the hint that names them.

The solutions live in tests/practice_solutions/<problem>/; each file's docstring opens with
"Expected: pass" or "Expected: fails <requirement key>", and a line "Hint: <words>" names the
words the report's hint must contain. All of them are checked in one batch, so JAX starts
once per device count.
"""

from __future__ import annotations

import ast
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import jax
import pytest

from spmd_guide.practice import DEVICE_COUNTS, PROBLEMS, check_many
from spmd_guide.practice.catalog import reference_source
from spmd_guide.practice.requirements import CaseKind, Program, Refuses, Satisfies, WorkedOut

# The checker starts its own processes for each device count.
pytestmark = pytest.mark.once

SOLUTIONS = Path(__file__).parent / "practice_solutions"


def expectation(path: Path) -> tuple[str | None, str]:
    """What a solution file says the checker concludes: (None, "") for a pass, else the key of
    the requirement it fails and, if it names one, words its hint must contain."""
    lines = ast.get_docstring(ast.parse(path.read_text())).splitlines()
    if lines[0] == "Expected: pass":
        return None, ""
    assert lines[0].startswith("Expected: fails "), f"{path}: say what is expected"
    hint = next((line.removeprefix("Hint: ") for line in lines if line.startswith("Hint: ")), "")
    return lines[0].removeprefix("Expected: fails "), hint


def solution_files() -> list[Path]:
    return sorted(SOLUTIONS.glob("*/*.py"))


@pytest.fixture(scope="module")
def reports(tmp_path_factory):
    """Reports on every reference and every solution file, by "reference:NAME" and by path."""
    folder = tmp_path_factory.mktemp("references")
    keyed = []
    for name in PROBLEMS:
        reference = folder / f"{name}.py"
        reference.write_text(reference_source(name))
        keyed.append((f"reference:{name}", name, reference))
    keyed += [(str(path), path.parent.name, path) for path in solution_files()]
    # Every reference on 1, 2 and 4 devices (each problem's page checks it on 8 as the site
    # builds); the learners' solutions on 8 devices, where each mistake shows (the meshes there
    # include sub-meshes and, for 2D, 1x8, 2x4, 4x2 and 8x1), a right one among them.
    # The 8-device files are split over two processes so that both of CI's cores work, each
    # problem's files kept together: each process's reference worker makes the expected answers
    # of the problems it is given, so a problem split over both would have them made twice.
    references, solutions = keyed[: len(PROBLEMS)], keyed[len(PROBLEMS) :]
    smaller = [c for c in DEVICE_COUNTS if c != 8]
    by_problem: dict[str, list] = {}
    for entry in solutions:
        by_problem.setdefault(entry[1], []).append(entry)
    halves: tuple[list, list] = ([], [])
    for files in sorted(by_problem.values(), key=len, reverse=True):
        min(halves, key=len).extend(files)
    groups = [(references, smaller), (halves[0], (8,)), (halves[1], (8,))]

    def checked(group, counts):
        return check_many([(name, path) for _, name, path in group], device_counts=counts)

    by_key = {}
    with ThreadPoolExecutor(max_workers=2) as pool:
        results = list(pool.map(lambda g: (g[0], checked(*g)), groups))
    for group, reports in results:
        for (key, _, _), report in zip(group, reports, strict=True):
            by_key.setdefault(key, []).append(report)
    return by_key


@pytest.mark.parametrize("name", list(PROBLEMS))
def test_the_reference_passes_on_1_2_and_4_devices(reports, name):
    (report,) = reports[f"reference:{name}"]
    assert report.passed, report.text()
    assert [run.devices for run in report.runs] == [1, 2, 4]


@pytest.mark.parametrize("path", solution_files(), ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_a_learners_solution_gets_the_right_verdict(reports, path):
    (report,) = reports[str(path)]
    key, hint = expectation(path)
    text = report.text()
    if key is None:
        assert report.passed, text
        return
    assert not report.passed, text
    assert key in report.failed_requirements(), text
    assert f"not met: {key}: " in text, text
    assert hint in text, text


@pytest.mark.parametrize("name", list(PROBLEMS))
def test_every_requirement_has_a_wrong_solution_and_two_mistakes_are_named(name):
    """The statement's requirements are the checker's checks: each is shown failing by a
    solution that breaks it, and at least two common mistakes get a hint of their own."""
    expected = [expectation(path) for path in (SOLUTIONS / name).glob("*.py")]
    failed = {key for key, _ in expected if key is not None}
    assert failed == {r.key for r in PROBLEMS[name].requirements}, name
    assert sum(1 for key, hint in expected if key and hint) >= 2, name
    assert any(key is None for key, _ in expected), name


@pytest.mark.parametrize("name", list(PROBLEMS))
def test_the_lesson_is_checked_by_how_the_answer_was_made(reports, name):
    """What a problem's "Teaches" line names is a requirement on how the answer was made (its
    traced program, or what the function called), and a file that reaches the right answer
    another way fails that requirement and no other."""
    problem = PROBLEMS[name]
    assert problem.lesson, f"{name}: no requirement checks what it teaches ({problem.teaches})"
    for key in problem.lesson:
        assert isinstance(problem.requirement(key), Program | Satisfies | WorkedOut), (name, key)
        alone = [
            path
            for path in (SOLUTIONS / name).glob("wrong_*.py")
            if expectation(path)[0] == key and reports[str(path)][0].failed_requirements() == {key}
        ]
        assert alone, f"{name}: no wrong solution fails {key} and nothing else"


def test_every_case_exercises_a_requirement_of_its_kind():
    for problem in PROBLEMS.values():
        kinds = {r.key for r in problem.requirements if isinstance(r, Refuses | CaseKind)}
        for count in DEVICE_COUNTS:
            for case in problem.make_cases(min(count, jax.device_count())):
                assert case.exercises is None or case.exercises in kinds, problem.name
                assert (case.raises is None) or (case.exercises in kinds), problem.name


def test_each_page_states_its_problem_from_the_requirements():
    """A page's statement is the catalogue's: the page renders it, and says nothing of its own
    between its "The problem" heading and the hints."""
    docs = Path(__file__).parents[1] / "docs" / "problems"
    for problem in PROBLEMS.values():
        text = (docs / f"{problem.page}.md").read_text()
        section = text.split("## The problem", 1)[1].split(":::{dropdown}", 1)[0]
        assert f'statement_markdown(PROBLEMS["{problem.name}"])' in section, problem.page
        prose = [line for line in section.splitlines() if line.startswith(("- ", "* "))]
        assert not prose, (problem.page, prose)


def test_the_problems_index_lists_every_problem_page():
    docs = Path(__file__).parents[1] / "docs" / "problems"
    toctree = (docs / "index.md").read_text().split("```{toctree}")[1].split("```")[0]
    pages = [
        line.strip() for line in toctree.splitlines() if line.strip() and not line.startswith(":")
    ]
    assert pages == [problem.page for problem in PROBLEMS.values()]
    for problem in PROBLEMS.values():
        assert (docs / f"{problem.page}.md").is_file(), problem.page

"""Every teaching page ends with questions the reader answers, checked against asserted values.

A page's last section is "Check your understanding": two to four numbered questions, each with an
answer field (the ``answer`` directive of ``docs/_ext/answer_checks.py``), at least one of them a
prediction (``:predict:``), then at least one hidden cell (``remove-cell``) that computes the
answers, asserts them and stores each one (``glue``) under the name its field gives. The pages
are those the course table (docs/course.toml) puts on the path, less the practice index, which
is all questions.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

DOCS = Path(__file__).resolve().parents[1] / "docs"
sys.path.insert(0, str(DOCS / "_ext"))

import course  # noqa: E402

# Reads the pages as text; runs no JAX.
pytestmark = pytest.mark.once

HEADING = "## Check your understanding"
PAGES = [page.doc for page in course.load_course().path if page.doc != "problems/index"]
_SECTION = re.compile(r"^## .*$", re.M)
_ANSWER = re.compile(
    r"^[ \t]*:::\{answer\} (?P<key>\S+)[ \t]*\n(?P<options>(?:[ \t]*:[a-z]+:.*\n)*)", re.M
)
_QUESTION = re.compile(r"^\d+\. \S", re.M)
_HIDDEN_CELL = re.compile(
    r"^```\{code-cell\}[^\n]*\n:tags: \[remove-cell\]\n(?P<code>.*?)^```", re.M | re.S
)


def questions(text: str) -> tuple[int, list[tuple[str, bool]], list[str]]:
    """In the page's last section: how many questions, each answer field's stored name and
    whether it asks for a prediction, and the code of its hidden cells. (0, [], []) when the last
    section is not the questions."""
    headings = list(_SECTION.finditer(text))
    if not headings or headings[-1].group() != HEADING:
        return 0, [], []
    last = text[headings[-1].end() :]
    prose = re.sub(r"^```.*?^```", "", last, flags=re.M | re.S)
    checks = [match["code"] for match in _HIDDEN_CELL.finditer(last)]
    answers = [(m["key"], ":predict:" in m["options"]) for m in _ANSWER.finditer(prose)]
    return len(_QUESTION.findall(prose)), answers, checks


@pytest.mark.parametrize("page", PAGES)
def test_a_page_on_the_path_ends_with_questions_whose_answers_are_asserted(page):
    asked, answers, checks = questions((DOCS / f"{page}.md").read_text(encoding="utf-8"))
    assert 2 <= asked <= 4, f"{page}: its last section must be {HEADING!r} with 2 to 4 questions"
    assert len(answers) == asked, f"{page}: each question needs one answer field (:::{{answer}})"
    assert any(predict for _, predict in answers), f"{page}: no question asks for a prediction"
    assert any("assert" in code for code in checks), f"{page}: no hidden cell asserts the answers"
    for key, _ in answers:
        stored = re.compile(rf"""\bglue\(\s*["']{key}["']""")
        assert any(stored.search(code) for code in checks), (
            f"{page}: no hidden cell after the questions stores {key!r} with glue"
        )


def test_the_question_finder_reads_a_page_as_the_test_expects():
    page = (
        "# T\n\n## Body\n\ntext\n\n"
        + HEADING
        + "\n\n1. Predict?\n\n   :::{answer} sum\n   :predict:\n   :example: a number\n\n"
        "   Because.\n   :::\n\n2. How?\n\n   :::{answer} kind\n   :choices: a | b\n\n   So.\n"
        "   :::\n\n```{code-cell} ipython3\n:tags: [remove-cell]\n\nassert 1 + 1 == 2\n```\n"
    )
    assert questions(page) == (2, [("sum", True), ("kind", False)], ["\nassert 1 + 1 == 2\n"])
    assert questions(page.replace(HEADING, "## Summary")) == (0, [], [])

"""The questions of "Check your understanding": answered in a field or a choice, checked there.

Every question of every page is tried on a phone and a desktop with the keyboard alone: a wrong
answer is told wrong and reveals nothing; the right one (read from the value the build stored,
chosen here by the build's own matching rule) is told right and opens the explanation.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from conftest import SITE, content_pages, new_context

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "docs" / "_ext"))

import answer_matching

QUESTION_PAGES = [
    page for page in content_pages() if 'class="answer-check"' in (SITE / page).read_text()
]
WRONG = "no such answer"


def test_the_path_has_questions_to_answer():
    assert len(QUESTION_PAGES) >= 50, QUESTION_PAGES


def _verdict(question) -> str:
    return question.locator(".answer-check-verdict").inner_text()


def _explanation_open(question) -> bool:
    return question.locator("details.answer-check-explanation").evaluate("d => d.open")


def _answer_with_keys(page, question, value: str) -> None:
    """Answer as a keyboard user does: into the field, or arrow keys through the choices."""
    radios = question.locator("input[type=radio]")
    if radios.count():
        values = [radios.nth(i).get_attribute("value") for i in range(radios.count())]
        radios.nth(0).focus()
        page.keyboard.press("Space")
        for _ in range(values.index(value)):
            page.keyboard.press("ArrowDown")
        page.keyboard.press("Tab")  # to Check
        page.keyboard.press("Enter")
    else:
        field = question.locator("input[type=text]")
        field.focus()
        page.keyboard.press("Control+A")
        page.keyboard.type(value)
        page.keyboard.press("Enter")


@pytest.mark.parametrize("width", (390, 1280))
@pytest.mark.parametrize("page_path", QUESTION_PAGES)
def test_a_wrong_answer_reveals_nothing_and_the_right_one_opens_the_explanation(
    browser, site_url, page_path, width
):
    context = new_context(browser, site_url, width=width)
    page = context.new_page()
    page.goto(site_url + page_path)
    questions = page.locator(".answer-check")
    assert questions.count() >= 2, f"{page_path}: fewer than two questions"
    for n in range(questions.count()):
        question = questions.nth(n)
        where = f"{page_path} question {n + 1} at {width} px"
        answers = json.loads(question.get_attribute("data-answers"))
        tolerance = float(question.get_attribute("data-tolerance"))
        unit = question.get_attribute("data-unit") or ""
        form = question.locator(".answer-check-form")
        assert form.is_visible(), f"{where}: the answer field is not shown"
        assert not _explanation_open(question), f"{where}: the explanation starts open"
        radios = question.locator("input[type=radio]")
        choices = [radios.nth(i).get_attribute("value") for i in range(radios.count())]
        if choices:
            right = [c for c in choices if answer_matching.matches(c, answers, tolerance, unit)]
            assert len(right) == 1, f"{where}: {choices} against {answers}"
            wrong, right_value = next(c for c in choices if c not in right), right[0]
        else:
            wrong, right_value = WRONG, answers[0]
        question.scroll_into_view_if_needed()
        _answer_with_keys(page, question, wrong)
        assert _verdict(question).startswith("Not yet"), f"{where}: {_verdict(question)!r}"
        assert not _explanation_open(question), f"{where}: a wrong answer opened the explanation"
        _answer_with_keys(page, question, right_value)
        assert _verdict(question).startswith("Right"), f"{where}: {_verdict(question)!r}"
        assert _explanation_open(question), f"{where}: the right answer left the explanation shut"
        assert question.locator(".answer-check-explanation-body").is_visible()
    # The fields and buttons are big enough to tap, and nothing outside the page's column.
    for box in page.locator(".answer-check-form input[type=text], .answer-check-form button").all():
        assert box.bounding_box()["height"] >= 40, f"{page_path}: a control under 40 px tall"
    context.close()


def test_show_me_opens_the_explanation_without_an_answer(context, site_url):
    page = context.new_page()
    page.goto(site_url + QUESTION_PAGES[0])
    question = page.locator(".answer-check").first
    summary = question.locator("details.answer-check-explanation > summary")
    assert summary.inner_text() == "Show me the answer"
    summary.focus()
    page.keyboard.press("Enter")
    assert _explanation_open(question)
    assert _verdict(question) == ""


def test_a_wrong_answer_after_a_right_one_shuts_what_the_right_one_opened(context, site_url):
    page = context.new_page()
    page.goto(site_url + QUESTION_PAGES[0])
    question = page.locator(".answer-check").filter(has=page.locator("input[type=text]")).first
    _answer_with_keys(page, question, json.loads(question.get_attribute("data-answers"))[0])
    assert _explanation_open(question)
    _answer_with_keys(page, question, WRONG)
    assert _verdict(question).startswith("Not yet")
    assert not _explanation_open(question), "a wrong answer left the right one's explanation open"
    # An explanation the reader opened stays open, whatever is typed next.
    question.locator("details.answer-check-explanation > summary").click()
    assert _explanation_open(question)
    _answer_with_keys(page, question, WRONG)
    assert _explanation_open(question), "a wrong answer shut the explanation the reader opened"


def test_an_empty_answer_asks_for_one(context, site_url):
    page = context.new_page()
    page.goto(site_url + QUESTION_PAGES[0])
    question = page.locator(".answer-check").first
    question.locator("button[type=submit]").click()
    assert _verdict(question) in ("Type your answer, then Check.", "Choose one answer, then Check.")
    assert not _explanation_open(question)


CASES = [
    ("float32[8@y]", ["float32[8@y]"]),
    (" Float32[ 8@y ] ", ["float32[8@y]"]),
    ("`float32[8@y]`.", ["float32[8@y]"]),
    ("float32[8@x]", ["float32[8@y]"]),
    ('P("x", None)', ["P('x', None)"]),
    ("all-gather", ["all-gather", "all_gather"]),
    ("allgather", ["all-gather"]),
    ("4,096", ["4096"]),
    ("4096.0", ["4096"]),
    ("4_096", ["4096"]),
    ("4097", ["4096"]),
    ("1.01", ["1.0"]),
    ("nan", ["nan"]),
    ("", ["x"]),
    ("[64, 96]", ["(64, 96)"]),
    ("64\u00d796", ["(64, 96)"]),
    ("64x96", ["64, 96"]),
    ("64096", ["64, 96"]),
    ("11%", ["11.11"]),
    ("20 MiB", ["20"]),
    ("135,360 bytes", ["135360"]),
    ("17, 21, 25, 29", ["17, 21, 25, 29"]),
]
UNITS = {"20 MiB": "MiB", "135,360 bytes": "bytes"}


def test_the_page_script_matches_answers_by_the_builds_rule(context, site_url):
    page = context.new_page()
    page.goto(site_url + QUESTION_PAGES[0])
    for given, answers in CASES:
        for tolerance in (0.0, 0.02):
            unit = UNITS.get(given, "")
            in_page = page.evaluate(
                "([g, a, t, u]) => answerChecks.matches(g, a, t, u)",
                [given, answers, tolerance, unit],
            )
            assert in_page == answer_matching.matches(given, answers, tolerance, unit), (
                given,
                answers,
                tolerance,
            )

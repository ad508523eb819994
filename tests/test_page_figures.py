"""Every figure a page's prose states is one its code mentions: a tripwire for unchecked claims.

The pages promise that a hidden cell asserts each figure the text states. A figure the page's
code never mentions (no cell builds it, prints it or asserts it) cannot be checked by anything, so
this test fails on it, naming the page and the figure. What it cannot see: a number that appears
in some cell for another reason, and counts of one digit, which nearly every cell contains. Those
are the reviewers' to read.

A figure that is not the page's to assert (a published chip rate, a version in a changelog
entry) is declared on the page, in a MyST comment that says why:

    % not asserted: 197, 819 (TPU v5e's published bf16 TFLOP/s and HBM GB/s)
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

DOCS = Path(__file__).resolve().parents[1] / "docs"

_BACKTICK_FENCE = re.compile(r"^(?P<fence>`{3,}).*?^(?P=fence)[ \t]*$", re.M | re.S)
_FRONT_MATTER = re.compile(r"\A---\n.*?\n---\n", re.S)
_INLINE_CODE = re.compile(r"``.+?``|`[^`\n]+`")
_LINK_TARGET = re.compile(r"\]\([^)]*\)|<[a-z]+://[^>]*>|https?://\S+")
_ROLE_OR_LABEL = re.compile(r"\{[\w:-]+\}|^\([\w-]+\)=$|^#+ .*$", re.M)
_COMMENT = re.compile(r"^%.*$", re.M)
# An answer field's options: its choices and the form an answer takes, not statements; the right
# answer is the value a hidden cell stored (docs/_ext/answer_checks.py refuses any other).
_ANSWER_OPTION = re.compile(r"^[ \t]*:(?:choices|example|unit|tolerance):.*$", re.M)
_DECLARED = re.compile(r"^% not asserted: (?P<figures>[^(\n]+)\((?P<why>[^)\n]+)\)\s*$", re.M)
# A product named just before a number makes it a version, not a figure of the page.
_VERSION = re.compile(
    r"(?:JAX|jax|jaxlib|Flax|flax|Orbax|orbax|Optax|optax|Python|NumPy|libtpu|Sphinx|version|"
    r"versions|release|releases)(?:\s+and|\s*,|\s+to|\s+or|\s)*\s*v?$"
)
# No figure a page states has two decimal points; a release number such as 0.10.1 has.
_RELEASE = re.compile(r"\d+\.\d+\.\d+")
# A figure may carry its unit's letters (18.07G), but a name with digits (v5e, 2x4) is no figure.
_FIGURE = re.compile(r"(?<![\w.\-/])\d[\d,]*(?:\.\d+)*(?=[A-Za-z]*(?:[^\w]|$))")
_CODE_NUMBER = re.compile(r"\d[\d,_]*(?:\.\d+)*")


def _normal(number: str) -> str:
    """One spelling per value: 1,928 and 1_928 are 1928; 40.0 and 40.00 are 40."""
    number = number.replace(",", "").replace("_", "").rstrip(".")
    if re.fullmatch(r"\d+\.0+", number):
        number = number.split(".")[0]
    return number


def _as_fraction(percentage: str) -> float:
    return round(float(percentage) / 100, 9)


def prose(text: str) -> str:
    """The page's text as a reader reads it, less code, links' targets, labels and headings."""
    patterns = (
        _FRONT_MATTER,
        _BACKTICK_FENCE,
        _COMMENT,
        _ANSWER_OPTION,
        _INLINE_CODE,
        _LINK_TARGET,
    )
    for pattern in patterns:
        text = pattern.sub("", text)
    return _ROLE_OR_LABEL.sub("", text)


def unchecked_figures(page: Path) -> list[str]:
    text = page.read_text(encoding="utf-8")
    code = "\n".join(match.group() for match in _BACKTICK_FENCE.finditer(text))
    known = {_normal(number) for number in _CODE_NUMBER.findall(code)}
    for declaration in _DECLARED.finditer(text):
        known |= {_normal(figure.strip()) for figure in declaration["figures"].split(", ")}
    fractions = {round(float(number), 9) for number in known if number.count(".") == 1}
    written = prose(text)
    unchecked = []
    for match in _FIGURE.finditer(written):
        figure = _normal(match.group())
        if len(figure) == 1 or figure in known:
            continue
        # A percentage is checked as the fraction it is: 40% as 0.40.
        if written[match.end() : match.end() + 1] == "%" and _as_fraction(figure) in fractions:
            continue
        if _RELEASE.fullmatch(figure) or _VERSION.search(
            written[max(0, match.start() - 40) : match.start()]
        ):
            continue
        unchecked.append(figure)
    return unchecked


PAGES = sorted(
    page
    for page in DOCS.rglob("*.md")
    if "_build" not in page.parts and "{code-cell}" in page.read_text(encoding="utf-8")
)


@pytest.mark.parametrize("page", PAGES, ids=lambda page: str(page.relative_to(DOCS)))
def test_every_figure_in_the_prose_is_one_the_page_code_mentions(page):
    unchecked = unchecked_figures(page)
    assert not unchecked, (
        f"{page.relative_to(DOCS)} states {', '.join(unchecked)}, which no cell of the page "
        "mentions: assert each in a hidden cell (tag remove-cell), or, for a figure that is not "
        "the page's to check, declare it in a comment line "
        "'% not asserted: <figures> (<why>)'"
    )


def test_the_tripwire_finds_a_figure_no_cell_mentions_and_honours_declarations(tmp_path):
    page = tmp_path / "page.md"
    page.write_text(
        "---\nkernelspec:\n  name: python3\n---\n\n"
        "The step takes 1,928 pairs and 3.5 s on JAX 0.12.0 and v5e 4x4, needing 18.07G; see "
        "`f(417)` and [x](a/99.html).\n\n"
        "```{code-cell} ipython3\n:tags: [remove-cell]\n\n"
        "assert pairs == 1928 and extra > 0.10\n```\n\n"
        "The chip does 197 TFLOP/s, 10% more and 25% of what it could.\n"
    )
    assert unchecked_figures(page) == ["3.5", "18.07", "197", "25"]
    page.write_text(
        page.read_text() + "\n% not asserted: 197, 3.5, 18.07, 25 (published; timing)\n"
    )
    assert unchecked_figures(page) == []

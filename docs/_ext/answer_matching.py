"""How a reader's answer is compared with the one a page stored: the rule the build applies to a
question's choices (``answer_checks.py``) and the page's script to what a reader types
(``_static/answer-checks.js``, which repeats it; a browser test holds the two together)."""

from __future__ import annotations

import ast
import re


def stored_answers(text: str) -> list[str]:
    """The accepted answers from a glued value's ``text/plain`` form (its ``repr``)."""
    try:
        value = ast.literal_eval(text)
    except (ValueError, SyntaxError):
        value = text
    values = value if isinstance(value, (list, tuple)) else [value]
    answers = [str(item) for item in values]
    if not answers or any(not answer.strip() for answer in answers):
        raise ValueError(f"the stored answer {text!r} is empty")
    return answers


def normalised(text: str) -> str:
    """How an answer is compared; ``answer-checks.js`` normalises the same way."""
    drop = " \t\n`'\"\u2009\u00a0"
    return "".join(ch for ch in text.lower() if ch not in drop).rstrip(".")


_NUMBER = re.compile(r"[-+]?(\d+\.?\d*|\.\d+)(e[-+]?\d+)?")


def _as_number(text: str) -> float | None:
    plain = normalised(text).replace(",", "").replace("_", "")
    return float(plain) if _NUMBER.fullmatch(plain) else None


def matches(given: str, answers: list[str], tolerance: float = 0.0) -> bool:
    """Whether ``given`` counts as one of ``answers``: the rule the page's script applies."""
    number = _as_number(given)
    for answer in answers:
        expected = _as_number(answer)
        if number is not None and expected is not None:
            if abs(number - expected) <= tolerance * abs(expected):
                return True
        elif normalised(given) == normalised(answer):
            return True
    return False

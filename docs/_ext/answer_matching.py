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
# A shape as a reader writes one: "(64, 128)", "[64, 128]", "64, 128", "64x128", or with a
# multiplication sign (\u00d7) between the sizes.
# Commas alone with no space and no brackets ("4,096") are a number's thousands instead.
_SHAPE = re.compile(r"[(\[]?\s*\d+(?:\s*(?:,\s*|x|\u00d7)\s*\d+)+\s*,?\s*[)\]]?", re.I)


def _without_unit(text: str, unit: str) -> str:
    """``text`` less a trailing ``unit`` (or a percent sign), as a reader may type it."""
    plain = normalised(text)
    for suffix in (normalised(unit), "%"):
        if suffix and plain.endswith(suffix) and len(plain) > len(suffix):
            return plain[: -len(suffix)]
    return plain


def _as_shape(text: str) -> tuple[int, ...] | None:
    raw = text.strip().strip("`").rstrip(".")
    if not _SHAPE.fullmatch(raw):
        return None
    if not re.search(r"[(\[x\u00d7]|,\s", raw, re.I):
        return None  # "4,096": a number
    return tuple(int(n) for n in re.findall(r"\d+", raw))


def _as_number(text: str, unit: str = "") -> float | None:
    plain = _without_unit(text, unit).replace(",", "").replace("_", "")
    return float(plain) if _NUMBER.fullmatch(plain) else None


def matches(given: str, answers: list[str], tolerance: float = 0.0, unit: str = "") -> bool:
    """Whether ``given`` counts as one of ``answers``: the rule the page's script applies. A
    shape matches a shape however it is written; a number a number, within ``tolerance``
    (relative), with or without ``unit`` after it; anything else by its normalised text."""
    shape = _as_shape(given)
    number = _as_number(given, unit)
    for answer in answers:
        expected_shape = _as_shape(answer)
        if shape is not None or expected_shape is not None:
            if shape == expected_shape:
                return True
            continue
        expected = _as_number(answer, unit)
        if number is not None and expected is not None:
            if abs(number - expected) <= tolerance * abs(expected):
                return True
        elif normalised(given) == normalised(answer):
            return True
    return False

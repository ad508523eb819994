"""Questions the reader answers on the page, checked against what the page's own cells computed.

A question of "Check your understanding" is a numbered item whose answer is an ``answer``
directive::

    1. Predict `jax.typeof(x.sum(axis=1))`.

       :::{answer} summed_type
       :predict:
       :example: float32[8@y]

       The explanation, shown after a right answer or when the reader asks for it.
       :::

The argument names a value that a hidden cell computed, asserted and stored with
``myst_nb.glue(name, value, display=False)``: a string or number, or a list of the strings that
all count as right. The answer is never typed into the page's text. Options:

- ``:choices:`` the choices, separated by ``|``, shown as radio buttons; the stored value must be
  one of them, or the build fails. Without it the reader types into a text field.
- ``:predict:`` marks a question that asks for a prediction (a layout, a collective, a byte
  count, a schedule) before the page shows it; each page of the path needs one.
- ``:example:`` the text field's placeholder: the form an answer takes, not the answer.
- ``:unit:`` shown after the text field (``bytes``, ``MiB``).
- ``:tolerance:`` relative tolerance for a numeric answer (default 0: exact).

The page's script (``_static/answer-checks.js``) compares what the reader types or chooses with
the stored value: case, spaces, backticks, quotes and thousands separators aside, and numbers as
numbers. It says right or wrong, and opens the explanation only after a right answer; the
explanation's own "Show me the answer" fold opens it on request, and is all a reader without
scripts sees. A missing stored value, a value not among the choices or an answer directive
outside a numbered question is a warning, which fails the build (it runs with ``-W``).
"""

from __future__ import annotations

import json
from typing import Any, ClassVar

from answer_matching import matches, stored_answers
from docutils import nodes
from docutils.parsers.rst import directives
from sphinx.application import Sphinx
from sphinx.util import logging
from sphinx.util.docutils import SphinxDirective
from sphinx.writers.html5 import HTML5Translator

logger = logging.getLogger(__name__)

SCRIPT = "answer-checks.js"


class answer_check(nodes.General, nodes.Element):
    """A question's answer field and its folded explanation."""


class answer_choice(nodes.Inline, nodes.TextElement):
    """One of a question's choices."""


class answer_explanation(nodes.General, nodes.Element):
    """The explanation, folded until a right answer or the reader's request."""


class AnswerDirective(SphinxDirective):
    required_arguments = 1
    has_content = True
    option_spec: ClassVar[dict[str, Any]] = {
        "choices": directives.unchanged_required,
        "predict": directives.flag,
        "example": directives.unchanged_required,
        "unit": directives.unchanged_required,
        "tolerance": float,
    }

    def _warn(self, message: str) -> list[nodes.Node]:
        logger.warning(
            f"answer {self.arguments[0]!r}: {message}",
            location=(self.env.docname, self.lineno),
            type="answer_checks",
        )
        return []

    def run(self) -> list[nodes.Node]:
        key = self.arguments[0]
        from myst_nb.core.variables import RetrievalError
        from myst_nb.ext.glue.utils import retrieve_glue_data

        try:
            data = retrieve_glue_data(self.state.document, key).data
        except RetrievalError:
            return self._warn(
                "no hidden cell stored it: compute and assert the answer, then "
                f"`from myst_nb import glue; glue({key!r}, value, display=False)`"
            )
        plain = next((v for k, v in data.items() if k.endswith("text/plain")), None)
        if plain is None:
            return self._warn("its stored value has no text form: store a string or a number")
        try:
            answers = stored_answers(plain)
        except ValueError as error:
            return self._warn(str(error))
        choices = [c.strip() for c in self.options.get("choices", "").split("|") if c.strip()]
        tolerance = float(self.options.get("tolerance", 0.0))
        unit = self.options.get("unit", "")
        if "choices" in self.options:
            if len(choices) < 2:
                return self._warn("give at least two choices, separated by '|'")
            right = [c for c in choices if matches(c, answers, tolerance, unit)]
            if len(right) != 1:
                return self._warn(
                    f"exactly one of the choices {choices} must be the stored answer "
                    f"{answers}; {len(right)} are"
                )
        if not self.content:
            return self._warn("write the explanation in the directive's body")
        node = answer_check(
            key=key,
            answers=answers,
            choices=choices,
            predict="predict" in self.options,
            example=self.options.get("example", ""),
            unit=self.options.get("unit", ""),
            tolerance=tolerance,
        )
        self.set_source_info(node)
        for choice in choices:
            label = answer_choice(choice=choice)
            text_nodes, messages = self.state.inline_text(choice, self.lineno)
            label.extend(text_nodes)
            node += label
            node.extend(messages)
        explanation = answer_explanation()
        self.state.nested_parse(self.content, self.content_offset, explanation)
        node += explanation
        return [node]


def _attribute(text: str) -> str:
    return (
        text.replace("&", "&amp;").replace('"', "&quot;").replace("<", "&lt;").replace(">", "&gt;")
    )


def visit_answer_check_html(self: HTML5Translator, node: answer_check) -> None:
    serial = self.document.get("answer_check_serial", 0) + 1
    self.document["answer_check_serial"] = serial
    name = f"answer-check-{serial}"
    self.body.append(
        f'<div class="answer-check" id="{name}" '
        f'data-answers="{_attribute(json.dumps(node["answers"]))}" '
        f'data-tolerance="{node["tolerance"]}" data-unit="{_attribute(node["unit"])}"'
        + (' data-predict="true"' if node["predict"] else "")
        + ">\n"
        # The form stays hidden until the script runs: without it, the fold below is the answer.
        + '<form class="answer-check-form" hidden aria-label="Your answer to this question">\n'
    )
    if node["choices"]:
        self.body.append("<fieldset><legend>Your answer</legend>\n")
    else:
        placeholder = _attribute(node["example"])
        self.body.append(
            f'<label for="{name}-input">Your answer</label> '
            f'<input id="{name}-input" type="text" autocomplete="off" autocapitalize="off" '
            f'spellcheck="false" placeholder="{placeholder}">'
            + (
                f' <span class="answer-check-unit">{_attribute(node["unit"])}</span>'
                if node["unit"]
                else ""
            )
            + "\n"
        )


def depart_answer_check_html(self: HTML5Translator, node: answer_check) -> None:
    self.body.append("</div>\n")


def visit_choice_html(self: HTML5Translator, node: answer_choice) -> None:
    parent = node.parent
    index = parent.index(node)
    name = f"answer-check-{self.document['answer_check_serial']}"
    self.body.append(
        f'<label class="answer-check-choice"><input type="radio" name="{name}" '
        f'value="{_attribute(node["choice"])}" id="{name}-{index}"> <span>'
    )


def depart_choice_html(self: HTML5Translator, node: answer_choice) -> None:
    self.body.append("</span></label>\n")


def visit_explanation_html(self: HTML5Translator, node: answer_explanation) -> None:
    if node.parent["choices"]:
        self.body.append("</fieldset>\n")
    self.body.append(
        '<button type="submit">Check</button>\n</form>\n'
        '<p class="answer-check-verdict" role="status" aria-live="polite"></p>\n'
        '<details class="answer-check-explanation"><summary>Show me the answer</summary>\n'
        '<div class="answer-check-explanation-body">\n'
    )


def depart_explanation_html(self: HTML5Translator, node: answer_explanation) -> None:
    self.body.append("</div>\n</details>\n")


def _skip(self: Any, node: nodes.Node) -> None:
    pass


def _pass(self: Any, node: nodes.Node) -> None:
    """Other builders write the choices and the explanation as plain content."""


def _add_script(app: Sphinx, pagename: str, templatename: str, context: dict, doctree: Any) -> None:
    if doctree is not None and any(doctree.findall(answer_check)):
        app.add_js_file(SCRIPT, loading_method="defer")


def setup(app: Sphinx) -> dict[str, Any]:
    app.add_node(
        answer_check,
        html=(visit_answer_check_html, depart_answer_check_html),
        text=(_pass, _skip),
    )
    app.add_node(answer_choice, html=(visit_choice_html, depart_choice_html), text=(_pass, _skip))
    app.add_node(
        answer_explanation,
        html=(visit_explanation_html, depart_explanation_html),
        text=(_pass, _skip),
    )
    app.add_directive("answer", AnswerDirective)
    app.connect("html-page-context", _add_script)
    return {"parallel_read_safe": True, "parallel_write_safe": True}

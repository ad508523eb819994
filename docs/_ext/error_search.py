"""Search that takes a reader from an error message to the section that raises it.

Sphinx's search matches a query against section titles only when the query is part of a title,
so a pasted error line (with the reader's own names and shapes in it) finds pages, not the
section that explains it. This extension collects every error a page raises on purpose (the
traceback of each cell tagged ``raises-exception``) with the section it is raised in, and writes
them to ``_static/error-messages.js``. The search page's ``_static/error-search.js`` compares
the query with each message word by word and lists the closest section first.

An error a hidden cell asserts on (one it catches, or another process's output it reads) is
found by the phrase the assertion quotes, in the section the cell is in.

On the pages named in ``error_search_pages`` (conf.py), a section whose title quotes a message,
or whose prose quotes one as inline code, is found by that quote too, so an error shown from
another process's output, or an older version's words for it, is found as well.
Where one message is raised in several sections, the one whose title quotes it comes first, then
the pages in ``error_search_pages`` in their order, then the rest by name.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from docutils import nodes
from sphinx.application import Sphinx
from sphinx.environment import BuildEnvironment

QUOTED = re.compile(r"[\"\u201c\u201d]([^\"\u201c\u201d]{6,})[\"\u201c\u201d]")
# Sphinx's smart quotes turn a title's apostrophes into this one; messages keep "'".
APOSTROPHE = "\u2019"


def first_line(traceback: str) -> str:
    """The line a reader pastes: the last ``SomeError: …`` line's start, or the last line."""
    lines = [line.strip() for line in traceback.strip().splitlines() if line.strip()]
    for index in range(len(lines) - 1, -1, -1):
        if re.match(r"^[A-Za-z_][\w.]*(Error|Exception|Warning|Exit):", lines[index]):
            return lines[index]
    return lines[-1] if lines else ""


# A message's own lines after its first: a reader may paste any of them.
MESSAGE_LENGTH = 800


def message(traceback: str) -> str:
    """The whole message a traceback ends with: its ``SomeError: …`` line and the lines after
    it, joined, up to MESSAGE_LENGTH characters."""
    lines = [line.strip() for line in traceback.strip().splitlines() if line.strip()]
    start = first_line(traceback)
    if start not in lines:
        return start
    at = len(lines) - 1 - lines[::-1].index(start)
    return " ".join(lines[at:])[:MESSAGE_LENGTH]


# An error quoted in a page's prose, as inline code: a message's words, not a name.
QUOTED_ERROR = re.compile(
    r"(Error|Exception|Warning|[Ff]ailed|[A-Z]{4,}_[A-Z_]+\b|requires|must|not allowed)"
)


def title_quotes(title: str, message: str) -> bool:
    """Whether a section title quotes ``message`` (a quote may skip words with "…")."""
    message = message.lower().replace(APOSTROPHE, "'")
    for quote in QUOTED.findall(title.replace(APOSTROPHE, "'")):
        parts = [part.strip().lower() for part in quote.split("…") if part.strip()]
        if all(part in message for part in parts):
            return True
    return False


def section_of(node: nodes.Node) -> nodes.section | None:
    """The section ``node`` is in, if it has an id to link to."""
    section = node.parent
    while section is not None and not isinstance(section, nodes.section):
        section = section.parent
    return section if section is not None and section["ids"] else None


def raised_errors(doctree: nodes.document) -> list[dict[str, Any]]:
    """Each error raised on purpose in ``doctree``: its first line and the section around it."""
    found = []
    for cell in doctree.findall(nodes.container):
        if "tag_raises-exception" not in cell["classes"]:
            continue
        section = section_of(cell)
        if section is None:
            continue
        title = section[0].astext()
        for output in cell.findall(nodes.literal_block):
            if "traceback" in output["classes"] and (line := first_line(output.astext())):
                found.append(
                    {
                        "anchor": section["ids"][0],
                        "title": title,
                        "message": message(output.astext()),
                        "titled": title_quotes(title, line),
                    }
                )
    return found


def quoted_titles(doctree: nodes.document) -> list[dict[str, Any]]:
    """Each section whose title quotes a message: the quote, as that section's message. It finds
    sections whose error is printed (by another process, say) rather than raised in a cell."""
    found = []
    for section in doctree.findall(nodes.section):
        title = section[0].astext()
        for quote in QUOTED.findall(title.replace(APOSTROPHE, "'")):
            found.append(
                {"anchor": section["ids"][0], "title": title, "message": quote, "titled": True}
            )
    return found


def quoted_in_prose(doctree: nodes.document) -> list[dict[str, Any]]:
    """Each message a section quotes as inline code in its prose (an older version's words, an
    error from another process): the quote, as that section's message."""
    found = []
    for literal in doctree.findall(nodes.literal):
        text = literal.astext()
        if len(text) < 12 or " " not in text.strip():  # a phrase, not a name
            continue
        # A message's words, or a sentence of 4 or more words (an error page quotes messages).
        worded = QUOTED_ERROR.search(text) or len(text.split()) >= 4
        if not worded or not isinstance(literal.parent, nodes.paragraph):
            continue
        section = section_of(literal)
        if section is None:
            continue
        found.append(
            {
                "anchor": section["ids"][0],
                "title": section[0].astext(),
                "message": text,
                "titled": False,
            }
        )
    return found


# In a hidden cell, an assertion that an error's text holds a phrase: `assert "…" in …`.
ASSERTED_TEXT = re.compile(r"""assert\s+(?P<q>["'])(?P<text>(?:(?!(?P=q)).){12,})(?P=q)\s+in\b""")
HIDDEN_TAGS = re.compile(r"^:?tags:\s*\[(?P<tags>[^\]]*)\]", re.M)


def _plain_title(text: str) -> str:
    return " ".join(re.sub("[`\"'\u2018\u2019\u201c\u201d*]", "", text).split()).lower()


def asserted_in_hidden_cells(source: str, doctree: nodes.document) -> list[dict[str, Any]]:
    """Each error phrase a hidden cell asserts an error's text holds (an error caught, or another
    process's output read, where no cell shows it), with the section the cell is in."""
    anchors = {
        _plain_title(section[0].astext()): section["ids"][0]
        for section in doctree.findall(nodes.section)
        if section["ids"]
    }
    found: list[dict[str, Any]] = []
    heading, cell, in_cell = "", [], False
    for line in source.splitlines():
        if not in_cell and line.startswith("```{code-cell}"):
            in_cell, cell = True, []
        elif in_cell and line.strip() == "```":
            in_cell = False
            body = "\n".join(cell)
            tags = HIDDEN_TAGS.search(body)
            if not tags or "remove-cell" not in tags.group("tags") or heading not in anchors:
                continue
            for match in ASSERTED_TEXT.finditer(body):
                text = match.group("text")
                code = re.search(r"\w \= \w|\w\(", text)  # a line of source, not a message
                if " " in text and QUOTED_ERROR.search(text) and not code:
                    found.append(
                        {
                            "anchor": anchors[heading],
                            "title": heading,
                            "message": text,
                            "titled": False,
                        }
                    )
        elif in_cell:
            cell.append(line)
        elif re.match(r"^#{1,6} \S", line):
            heading = _plain_title(line.lstrip("#"))
    return found


def _read(app: Sphinx, doctree: nodes.document) -> None:
    env = app.env
    if not hasattr(env, "spmd_raised_errors"):
        env.spmd_raised_errors = {}
    records = raised_errors(doctree)
    source = Path(env.doc2path(env.docname))
    if source.suffix == ".md":
        records += asserted_in_hidden_cells(source.read_text(encoding="utf-8"), doctree)
    if env.docname in app.config.error_search_pages:
        records += quoted_titles(doctree) + quoted_in_prose(doctree)
    env.spmd_raised_errors[env.docname] = records


def _purge(app: Sphinx, env: BuildEnvironment, docname: str) -> None:
    getattr(env, "spmd_raised_errors", {}).pop(docname, None)


def _merge(app: Sphinx, env: BuildEnvironment, docnames: set[str], other: Any) -> None:
    if not hasattr(env, "spmd_raised_errors"):
        env.spmd_raised_errors = {}
    found = getattr(other, "spmd_raised_errors", {})
    env.spmd_raised_errors.update({d: found[d] for d in docnames if d in found})


def ordered_records(by_page: dict[str, list[dict[str, Any]]], first: list[str]) -> list[dict]:
    """Every raised error as one list, in the order that breaks a tie between equal matches."""

    def page_rank(docname: str) -> tuple[int, str]:
        return (first.index(docname) if docname in first else len(first), docname)

    records = [
        {"page": docname, **record}
        for docname in sorted(by_page, key=page_rank)
        for record in by_page[docname]
    ]
    return sorted(records, key=lambda record: not record["titled"])


def _write(app: Sphinx, exception: Exception | None) -> None:
    if exception is not None or app.builder.format != "html":
        return
    records = ordered_records(
        getattr(app.env, "spmd_raised_errors", {}), list(app.config.error_search_pages)
    )
    static = Path(app.outdir) / "_static"
    static.mkdir(exist_ok=True)
    # "first": the section is on a page the search prefers for errors (error_search_pages).
    first = set(app.config.error_search_pages)
    data = json.dumps(
        [
            {
                **{k: r[k] for k in ("page", "anchor", "title", "message")},
                "first": r["page"] in first,
            }
            for r in records
        ],
        indent=0,
    )
    (static / "error-messages.js").write_text(f"var ERROR_MESSAGES = {data};\n", encoding="utf-8")


def setup(app: Sphinx) -> dict[str, Any]:
    app.add_config_value("error_search_pages", [], "html", types=(list,))
    app.connect("doctree-read", _read)
    app.connect("env-purge-doc", _purge)
    app.connect("env-merge-info", _merge)
    app.connect("build-finished", _write)
    return {"parallel_read_safe": True, "parallel_write_safe": True, "env_version": 1}

"""The path through the site, built from one table, ``docs/course.toml``.

From that table the build makes:

- the home page's numbered path (the ``course-path`` directive): each step with its reading time,
  measured on the pages as built, and what it teaches;
- the sidebar (the ``course-toctrees`` directive): one caption per step, its pages in path order,
  then the reference pages;
- on every page the table places, an opening line (what the reader will be able to do, what to
  read first, how long the page takes) and a closing line (where to go next).

A page's reading time is its prose words / 140 plus the lines of code it shows / 12, in minutes:
the pace of a careful learner who traces the code (measured on 14 pages of the path, where
words / 200 + code / 20 understated the learner's own times 1.3 to 2.2 times). Cell outputs do
not count, nor do the folds a learner may skip: those whose title says "Under the hood" (the
proof) or offers a whole script "to copy". Every other fold counts: hidden cell inputs, answers.
The build fails on a teaching page over its limit, on a teaching page the table does not place,
and on a table that names a page that does not exist.
"""

from __future__ import annotations

import math
import re
import tomllib
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from docutils import nodes
from sphinx import addnodes
from sphinx.application import Sphinx
from sphinx.config import Config
from sphinx.environment import BuildEnvironment
from sphinx.errors import ExtensionError
from sphinx.util import docname_join, logging
from sphinx.util.docutils import SphinxDirective

DOCS = Path(__file__).resolve().parents[1]
TABLE = DOCS / "course.toml"
logger = logging.getLogger(__name__)

WORDS_PER_MINUTE = 140
CODE_LINES_PER_MINUTE = 12
SKIPPED_FOLD = re.compile(r"under the hood|to copy|whole script", re.IGNORECASE)
"""A fold whose title matches is left out of a page's reading time; any other fold counts."""
# A word may hold an apostrophe, straight or typographic (U+2019).
_WORD = re.compile("[A-Za-z0-9][\\w'\u2019.-]*")


@dataclass(frozen=True)
class Page:
    doc: str
    will: str
    first: tuple[str, ...]
    max_minutes: float
    step: int


@dataclass(frozen=True)
class Step:
    number: int
    title: str
    teaches: str
    pages: tuple[Page, ...]


@dataclass(frozen=True)
class Course:
    steps: tuple[Step, ...]
    reference: tuple[str, ...]
    exempt: tuple[str, ...]
    # Pages known to be over their limit and waiting to be split: each must still be over it.
    over_limit: tuple[str, ...] = ()
    pages: dict[str, Page] = field(default_factory=dict)

    @property
    def path(self) -> list[Page]:
        return [page for step in self.steps for page in step.pages]

    def before(self, doc: str) -> Page | None:
        path = [page.doc for page in self.path]
        at = path.index(doc)
        return self.pages[path[at - 1]] if at else None

    def after(self, doc: str) -> Page | None:
        path = [page.doc for page in self.path]
        at = path.index(doc)
        return self.pages[path[at + 1]] if at + 1 < len(path) else None


def _source_exists(doc: str) -> bool:
    return (DOCS / f"{doc}.md").is_file()


def load_course(table: Path = TABLE) -> Course:
    """Read and check the table; raise ExtensionError naming what is wrong and how to fix it."""
    try:
        data = tomllib.loads(table.read_text(encoding="utf-8"))
    except (OSError, tomllib.TOMLDecodeError) as error:
        raise ExtensionError(f"{table}: cannot read the course table: {error}") from error
    default_limit = float(data.get("max_minutes", 15))
    steps, pages = [], {}
    for number, step in enumerate(data.get("step", []), start=1):
        missing = {"title", "teaches", "page"} - step.keys()
        if missing:
            raise ExtensionError(
                f"{table}: step {number} lacks {', '.join(sorted(missing))}; every [[step]] needs "
                "a title, what it teaches, and at least one [[step.page]]"
            )
        step_pages = []
        for entry in step["page"]:
            doc = entry.get("doc", "")
            if not entry.get("will"):
                raise ExtensionError(
                    f"{table}: page {doc!r} in step {number} has no `will` (what the reader will "
                    "be able to do after it)"
                )
            if doc in pages:
                raise ExtensionError(f"{table}: {doc!r} is placed twice; a page has one place")
            page = Page(
                doc=doc,
                will=entry["will"],
                first=tuple(entry.get("first", ())),
                max_minutes=float(entry.get("max_minutes", default_limit)),
                step=number,
            )
            pages[doc] = page
            step_pages.append(page)
        steps.append(Step(number, step["title"], step["teaches"], tuple(step_pages)))
    if not steps:
        raise ExtensionError(f"{table}: no [[step]]: the path needs at least one")
    course = Course(
        steps=tuple(steps),
        reference=tuple(data.get("reference", ())),
        exempt=tuple(data.get("exempt", ())),
        over_limit=tuple(data.get("over_limit", ())),
        pages=pages,
    )
    named = [*pages, *course.reference, *(d for p in pages.values() for d in p.first)]
    for doc in course.over_limit:
        if doc not in pages:
            raise ExtensionError(
                f"{table}: over_limit names {doc!r}, which is on no step of the path; "
                "only a page on the path has a reading-time limit"
            )
    for doc in named:
        if not _source_exists(doc):
            raise ExtensionError(
                f"{table}: {doc!r} names no page (there is no docs/{doc}.md); "
                "fix the name or remove the entry"
            )
    return course


def unplaced_pages(course: Course, sources: list[str]) -> list[str]:
    """Teaching pages (every page but the home page, the reference pages and those the table
    exempts, such as the practice problems, which their index lists) that no step places."""
    placed = set(course.pages) | set(course.reference) | {"index"}
    return sorted(
        doc
        for doc in sources
        if doc not in placed and not any(doc.startswith(prefix) for prefix in course.exempt)
    )


# -- Reading time --------------------------------------------------------------------------------


def _skipped(node: nodes.Node) -> bool:
    """Whether a reader skips this subtree: cell outputs, and the folds :data:`SKIPPED_FOLD`
    names by their title (a fold's first child)."""
    if not isinstance(node, nodes.Element):
        return False
    classes = node.get("classes", [])
    if "cell_output" in classes:
        return True
    if node.get("design_component") == "dropdown" or node.tagname in ("dropdown_main", "details"):
        title = node.children[0].astext() if node.children else ""
        return SKIPPED_FOLD.search(title) is not None
    if node.get("nb_element") == "cell_code" and node.get("hide_mode") == "all":
        # A folded cell (tag hide-cell): its fold's title is the cell's code_prompt_show.
        return SKIPPED_FOLD.search(node.get("prompt_show", "")) is not None
    return isinstance(node, (nodes.comment, nodes.raw, nodes.system_message, addnodes.toctree))


# The words an answer field adds around its choices and explanation (answer_checks.py writes
# them): "Your answer", "Check", "Show me the answer".
ANSWER_FIELD_WORDS = 7


def reading_minutes(
    doctree: nodes.Node, link_text: Callable[[addnodes.pending_xref], str | None] | None = None
) -> tuple[float, int, int]:
    """Minutes, prose words and lines of code shown: words / 140 + code lines / 12.

    The doctree is read before its links are resolved: ``link_text`` gives the text a link will
    show (a page's or a section's title), where the source left it to the link."""
    words = code_lines = 0

    def visit(node: nodes.Node) -> None:
        nonlocal words, code_lines
        if _skipped(node):
            return
        if isinstance(node, course_minutes):
            words += 2  # filled in as "N min"
            return
        if node.tagname == "answer_check":
            words += ANSWER_FIELD_WORDS
        if isinstance(node, addnodes.pending_xref) and link_text is not None:
            text = link_text(node)
            if text is not None:
                words += len(_WORD.findall(text))
                return
        if isinstance(node, nodes.literal_block):
            code_lines += sum(1 for line in node.astext().splitlines() if line.strip())
            return
        if isinstance(node, nodes.Text):
            words += len(_WORD.findall(node.astext()))
            return
        for child in node.children:
            visit(child)

    visit(doctree)
    return words / WORDS_PER_MINUTE + code_lines / CODE_LINES_PER_MINUTE, words, code_lines


def shown_minutes(minutes: float) -> int:
    """Minutes as the pages state them: whole minutes, rounded up, never zero."""
    return max(1, math.ceil(minutes))


# -- Nodes filled in once every page's reading time is known ----------------------------------


class course_minutes(nodes.Inline, nodes.TextElement):
    """Placeholder for the reading time of ``docs`` (one page, or a whole step)."""


class course_path(nodes.General, nodes.Element):
    """Placeholder for the home page's numbered path."""


def _doc_link(env: BuildEnvironment, doc: str, text: str | None = None) -> addnodes.pending_xref:
    """A link to a page, titled with the page's title unless text is given."""
    ref = addnodes.pending_xref(
        "",
        refdomain="std",
        reftype="doc",
        reftarget="/" + doc,
        refexplicit=text is not None,
        refdoc=env.docname,
        refwarn=True,
    )
    ref += nodes.inline(text=text or doc, classes=["doc"])
    return ref


def _with_code(text: str) -> list[nodes.Node]:
    """The table's text, with `backticks` as inline code."""
    parts = re.split(r"`([^`]+)`", text)
    return [nodes.literal(text=part) if i % 2 else nodes.Text(part) for i, part in enumerate(parts)]


# This build's table and measured minutes; set in the main process before any reader or writer
# process forks.
_COURSE: list[Course] = []
_MINUTES: dict[str, float] = {}


def _course() -> Course:
    return _COURSE[0]


def _load(app: Sphinx, config: Config) -> None:
    _COURSE[:] = [load_course()]
    # The table's text as a setting: editing it re-reads every page (their lines come from it).
    config.course_table = TABLE.read_text(encoding="utf-8")


def _add_opening_and_closing_lines(app: Sphinx, doctree: nodes.document) -> None:
    course, env = _course(), app.env
    page = course.pages.get(env.docname)
    if page is None:
        return
    sections = [child for child in doctree.children if isinstance(child, nodes.section)]
    if not sections:
        raise ExtensionError(f"{env.docname}: a page on the path must open with a title")
    top = sections[0]
    step = course.steps[page.step - 1]

    opening = nodes.container(classes=["course-opening"])
    will = nodes.paragraph()
    will += nodes.strong(text="You will be able to ")
    will += _with_code(page.will)
    will += nodes.Text(".")
    opening += will
    first = nodes.paragraph()
    first += nodes.strong(text="Read first: ")
    before = course.before(page.doc)
    prerequisites = list(page.first) or ([before.doc] if before else [])
    if prerequisites:
        for i, doc in enumerate(prerequisites):
            if i:
                first += nodes.Text(" and ")
            first += _doc_link(env, doc)
        first += nodes.Text(".")
    else:
        first += nodes.Text("nothing else; the path starts here.")
    first += nodes.Text(f" Step {step.number} of {len(course.steps)}, ")
    first += _doc_link(env, "index", step.title)
    first += nodes.Text(" · about ")
    first += course_minutes(docs=[page.doc])
    first += nodes.Text(" of reading.")
    opening += first
    title_at = top.first_child_matching_class(nodes.title)
    top.insert((title_at or 0) + 1, opening)

    closing = nodes.container(classes=["course-closing"])
    line = nodes.paragraph()
    after = course.after(page.doc)
    line += nodes.strong(text="Next: ")
    if after is None:
        line += nodes.Text("the end of the path. When something raises, ")
        line += _doc_link(env, "troubleshooting")
        line += nodes.Text(" has the errors people meet most, each with its fix.")
    else:
        line += _doc_link(env, after.doc)
        line += nodes.Text(", where you will be able to ")
        line += _with_code(after.will)
        line += nodes.Text(".")
    closing += line
    sections[-1].append(closing)


class CoursePath(SphinxDirective):
    """The numbered path, for the home page."""

    def run(self) -> list[nodes.Node]:
        return [course_path()]


class CourseToctrees(SphinxDirective):
    """The sidebar: one hidden toctree per step, then the reference pages."""

    def run(self) -> list[nodes.Node]:
        course = _course()
        groups = [(f"{s.number}. {s.title}", [p.doc for p in s.pages]) for s in course.steps]
        if course.reference:
            groups.append(("Reference", list(course.reference)))
        wrappers = []
        for caption, docs in groups:
            toctree = addnodes.toctree()
            toctree["parent"] = self.env.docname
            toctree["entries"] = [(None, doc) for doc in docs]
            toctree["includefiles"] = list(docs)
            toctree["maxdepth"] = 1
            toctree["caption"] = caption
            toctree["glob"] = False
            toctree["hidden"] = True
            toctree["includehidden"] = False
            toctree["numbered"] = 0
            toctree["titlesonly"] = False
            self.set_source_info(toctree)
            wrapper = nodes.compound(classes=["toctree-wrapper"])
            wrapper += toctree
            wrappers.append(wrapper)
        return wrappers


def _measure_and_check(app: Sphinx, env: BuildEnvironment) -> list[str]:
    """Measure every placed page once all are read; fail on those over their limit."""
    course = _course()
    measured = {}
    std = env.get_domain("std")

    def link_text(node: addnodes.pending_xref) -> str | None:
        if node.get("refexplicit"):
            return None
        target = node.get("reftarget", "")
        if node.get("reftype") == "doc":
            title = env.titles.get(docname_join(node.get("refdoc", ""), target))
            return title.astext() if title is not None else None
        if node.get("reftype") == "ref" and target in std.labels:  # type: ignore[attr-defined]
            return std.labels[target][2]  # type: ignore[attr-defined]
        return None

    for doc in course.pages:
        minutes, words, code = reading_minutes(env.get_doctree(doc), link_text)
        measured[doc] = minutes
        limit = course.pages[doc].max_minutes
        if minutes > limit and doc not in course.over_limit:
            logger.warning(
                "%s takes %.1f min to read (%d words, %d lines of code), over its %g: split it "
                "or move a section to the page where it belongs (docs/course.toml sets limits)",
                doc,
                minutes,
                words,
                code,
                limit,
                location=doc,
            )
        elif minutes <= limit and doc in course.over_limit:
            logger.warning(
                "%s now takes %.1f min, within its %g: remove it from over_limit in "
                "docs/course.toml, so that it stays within",
                doc,
                minutes,
                limit,
                location=doc,
            )
    _MINUTES.clear()
    _MINUTES.update(measured)
    unplaced = unplaced_pages(course, sorted(env.found_docs))
    for doc in unplaced:
        logger.warning(
            "%s is on no step of the path: place it in docs/course.toml (or list it under "
            "`reference`)",
            doc,
            location=doc,
        )
    # The home page states every page's reading time: write it again whenever any page changed.
    return ["index"]


def _fill(app: Sphinx, doctree: nodes.document, docname: str) -> None:
    course = _course()
    measured = _MINUTES
    for node in list(doctree.findall(course_minutes)):
        total = sum(measured.get(doc, 0.0) for doc in node["docs"])
        node.replace_self(nodes.Text(f"{shown_minutes(total)} min"))
    for node in list(doctree.findall(course_path)):
        steps = nodes.enumerated_list(classes=["course-path"])
        for step in course.steps:
            item = nodes.list_item()
            line = nodes.paragraph()
            uri = app.builder.get_relative_uri(docname, step.pages[0].doc)
            link = nodes.reference("", "", internal=True, refuri=uri)
            link += nodes.strong(text=step.title)
            line += link
            minutes = sum(measured.get(page.doc, 0.0) for page in step.pages)
            pages = len(step.pages)
            count = f"{pages} pages, " if pages > 1 else ""
            line += nodes.Text(f" ({count}{shown_minutes(minutes)} min): ")
            line += _with_code(step.teaches)
            line += nodes.Text(".")
            item += line
            steps += item
        node.replace_self(steps)


def setup(app: Sphinx) -> dict[str, Any]:
    app.add_config_value("course_table", "", "env", types=(str,))
    app.add_node(course_minutes)
    app.add_node(course_path)
    app.add_directive("course-path", CoursePath)
    app.add_directive("course-toctrees", CourseToctrees)
    app.connect("config-inited", _load)
    app.connect("doctree-read", _add_opening_and_closing_lines)
    app.connect("env-updated", _measure_and_check)
    app.connect("doctree-resolved", _fill)
    return {"parallel_read_safe": True, "parallel_write_safe": True}

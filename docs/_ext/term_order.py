"""Terms before use: no page of the path uses a term before the path has taught it.

The glossary (``docs/glossary.md``, a ``glossary`` directive) gives each of the site's terms a
one-line definition ending "Taught on {doc}`<page>`", the first page of the path (the order that
``docs/course.toml`` gives, read by ``course.py``) that teaches it. While the pages are read, this
extension records each entry's teaching page, and on each page the terms it uses:

- through the ``{term}`` role, wherever it stands;
- through their notation in code, inline or in a code cell (not in a cell's output, which the page
  does not write): the marks of JAX's types, ``{V:x}`` for varying, ``{U:x}`` for unreduced and
  ``{R:x}`` for reduced (:data:`NOTATIONS`).

Once every page is read, a page of the path that uses a term whose teaching page comes later on
the path is a warning, which fails the build (it runs with ``-W``): the fix is to link to the
teaching page instead, or to move the use to that page or after it. A notation cannot carry a link
of its own, so one is accepted where the page has already linked to the term's teaching page (a
``{doc}`` or ``{ref}`` to it) or links to it in the same paragraph: the reader is told where the
mark is taught. A term taught on the page itself is fine, and so is any use on a page off the path
(the reference pages, the practice problems). Ordinary words outside ``{term}`` are not checked.

A glossary entry without its "Taught on" page, or whose page is not on the path, is a warning too.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any

import course
from docutils import nodes
from sphinx import addnodes
from sphinx.application import Sphinx
from sphinx.environment import BuildEnvironment
from sphinx.util import docname_join, logging

logger = logging.getLogger(__name__)

NOTATIONS = {"V": "varying", "U": "unreduced", "R": "reduced"}
"""The first letter of each mark in JAX's types (``{V:x}``, ``{U:x}``, ``{U_max:x}``, ``{R:x}``),
and the glossary term it stands for."""

# The braces JAX prints after a type's shape: marks such as "V:x", "V:(x,y)" or "U_max:x",
# separated by ", " (core.py's _vma_ur_str).
_MARKS = re.compile(r"\{((?:[VUR](?:_[a-z]+)?):[^{}]*)\}")
_MARK = re.compile(r"(?:^|,)\s*([VUR])(?:_[a-z]+)?:")
_TAUGHT_ON = "Taught on"
# The course extension's opening and closing lines link to neighbouring pages; they are not the
# page's own use of anything.
_COURSE_LINES = {"course-opening", "course-closing"}


@dataclass(frozen=True)
class Entry:
    """One glossary entry: its terms (lower case), the page that teaches it (None where the
    entry names none) and where it stands."""

    terms: tuple[str, ...]
    taught: str | None
    glossary: str
    line: int | None


@dataclass(frozen=True)
class Use:
    """A page's use of a term: through ``{term}`` (``kind`` "term") or a notation ("notation").
    ``at`` numbers it in the page's reading order; ``until`` is the last number in its
    paragraph, so that a link anywhere in that paragraph counts as before it."""

    kind: str
    term: str
    shown: str
    line: int | None
    at: int
    until: int


@dataclass(frozen=True)
class Link:
    """A link to a page (``kind`` "doc", ``target`` a page) or to a label (``kind`` "ref")."""

    kind: str
    target: str
    at: int


@dataclass(frozen=True)
class PageTerms:
    uses: tuple[Use, ...]
    links: tuple[Link, ...]


def normal(term: str) -> str:
    """A term as the ``{term}`` role looks it up: lower case, single spaces."""
    return " ".join(term.split()).lower()


def marks(text: str) -> Iterator[tuple[str, str]]:
    """(term, the mark as written) for each type mark in ``text``."""
    for group in _MARKS.finditer(text):
        for letter in _MARK.findall(group.group(1)):
            yield NOTATIONS[letter], group.group()


# -- Reading ----------------------------------------------------------------------------------


def _line(node: nodes.Node) -> int | None:
    while node is not None:
        if getattr(node, "line", None):
            return node.line
        node = node.parent
    return None


def _in_output_or_course_line(node: nodes.Node) -> bool:
    while node is not None:
        if isinstance(node, nodes.Element):
            classes = set(node.get("classes", []))
            if "cell_output" in classes or classes & _COURSE_LINES:
                return True
        node = node.parent
    return False


def _paragraph(node: nodes.Node) -> nodes.Node:
    """The paragraph that holds an inline node (the node itself for a block of code)."""
    if isinstance(node, nodes.literal_block):
        return node
    parent = node.parent
    while parent is not None and (
        not isinstance(parent, nodes.TextElement) or isinstance(parent, nodes.Inline)
    ):
        parent = parent.parent
    return parent if parent is not None else node


def page_terms(doctree: nodes.Node, docname: str) -> PageTerms:
    """The terms a page uses and the links it makes, each numbered in reading order."""
    order: dict[int, int] = {}
    for number, node in enumerate(doctree.findall()):
        order[id(node)] = number

    def last_in(node: nodes.Node) -> int:
        return max(order[id(n)] for n in node.findall())

    uses: list[Use] = []
    links: list[Link] = []
    for node in doctree.findall():
        if _in_output_or_course_line(node):
            continue
        at = order[id(node)]
        if isinstance(node, addnodes.pending_xref):
            kind, target = node.get("reftype"), node.get("reftarget", "")
            if kind == "term":
                until = last_in(_paragraph(node))
                uses.append(Use("term", normal(target), node.astext(), _line(node), at, until))
            elif kind == "doc":
                links.append(Link("doc", docname_join(node.get("refdoc", docname), target), at))
            elif kind in ("ref", "any"):
                links.append(Link("ref", target.lower(), at))
            elif kind == "myst":  # a Markdown link: to a page (already its name), or a label
                page = node.get("refdomain") == "doc"
                links.append(Link("doc", target, at) if page else Link("ref", target.lower(), at))
        elif isinstance(node, (nodes.literal, nodes.literal_block)):
            until = last_in(_paragraph(node))
            for term, shown in marks(node.astext()):
                uses.append(Use("notation", term, shown, _line(node), at, until))
    return PageTerms(tuple(uses), tuple(links))


def _text_before(node: nodes.Node) -> str:
    """The text of the node's paragraph before it, with single spaces (a line break in the
    source is a text node of its own)."""
    parent = node.parent
    if parent is None:
        return ""
    text = "".join(child.astext() for child in parent.children[: parent.index(node)])
    return " ".join(text.split())


def glossary_entries(doctree: nodes.Node, docname: str) -> list[Entry]:
    """Every entry of the page's glossaries, with the page its "Taught on" link names."""
    entries = []
    for glossary in doctree.findall(addnodes.glossary):
        for item in glossary.findall(nodes.definition_list_item):
            terms = tuple(normal(term.astext()) for term in item.findall(nodes.term))
            taught = None
            for definition in item.findall(nodes.definition):
                for ref in definition.findall(addnodes.pending_xref):
                    if ref.get("reftype") == "doc" and _text_before(ref).endswith(_TAUGHT_ON):
                        taught = docname_join(docname, ref["reftarget"])
                        break
            first = next(item.findall(nodes.term), item)
            entries.append(Entry(terms, taught, docname, _line(first)))
    return entries


# -- Checking ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Problem:
    """A warning: its text and where it stands (a page and a line)."""

    message: str
    docname: str
    line: int | None


def problems(
    path: list[str],
    entries: Iterable[Entry],
    pages: dict[str, PageTerms],
    label_page: Callable[[str], str | None] = lambda label: None,
) -> list[Problem]:
    """Every glossary entry without a teaching page on the path, and every use of a term on a
    page of the path before the path reaches the page that teaches it (the first use of each
    term on each page)."""
    order = {doc: number for number, doc in enumerate(path)}
    found: list[Problem] = []
    teaching: dict[str, str] = {}
    for entry in entries:
        name = " / ".join(entry.terms)
        if entry.taught is None:
            found.append(
                Problem(
                    f"the glossary entry '{name}' names no teaching page: end its definition "
                    f'with "{_TAUGHT_ON} {{doc}}`<page>`", the first page of the path that '
                    "teaches it",
                    entry.glossary,
                    entry.line,
                )
            )
            continue
        if entry.taught not in order:
            found.append(
                Problem(
                    f"the glossary entry '{name}' is taught on '{entry.taught}', which is not a "
                    "page of the path (docs/course.toml): name the first page of the path that "
                    "teaches it",
                    entry.glossary,
                    entry.line,
                )
            )
            continue
        for term in entry.terms:
            teaching[term] = entry.taught
    for doc in path:
        page = pages.get(doc)
        if page is None:
            continue
        reported = set()
        for use in page.uses:
            teacher = teaching.get(use.term)
            if teacher is None:
                if use.kind == "notation" and use.term not in reported:
                    reported.add(use.term)
                    found.append(
                        Problem(
                            f"{doc} writes `{use.shown}`, the notation for '{use.term}', which "
                            "the glossary does not define (or names no teaching page for): add "
                            "the entry to docs/glossary.md",
                            doc,
                            use.line,
                        )
                    )
                continue
            if order[teacher] <= order[doc] or use.term in reported:
                continue
            if use.kind == "notation" and any(
                link.at <= use.until
                and (link.target if link.kind == "doc" else label_page(link.target)) == teacher
                for link in page.links
            ):
                continue
            reported.add(use.term)
            how = (
                f"links to the term '{use.term}' with {{term}},"
                if use.kind == "term"
                else f"writes `{use.shown}`, the notation for '{use.term}',"
            )
            fix = (
                f"link to {{doc}}`/{teacher}` instead of the glossary"
                if use.kind == "term"
                else f"link to {{doc}}`/{teacher}` before it or in its paragraph"
            )
            found.append(
                Problem(
                    f"{doc} {how} but the path teaches it later, on {teacher} (page "
                    f"{order[teacher] + 1} of the path; this is page {order[doc] + 1}). "
                    f"{fix[0].upper()}{fix[1:]}, or move the use to {teacher} or after it "
                    "(docs/glossary.md names the page that teaches each term)",
                    doc,
                    use.line,
                )
            )
    return found


# -- Sphinx -----------------------------------------------------------------------------------


def _read(app: Sphinx, doctree: nodes.document) -> None:
    env = app.env
    docname = env.docname
    _pages(env)[docname] = page_terms(doctree, docname)
    entries = glossary_entries(doctree, docname)
    if entries:
        _entries(env)[docname] = entries
    else:
        _entries(env).pop(docname, None)


def _pages(env: BuildEnvironment) -> dict[str, PageTerms]:
    if not hasattr(env, "term_order_pages"):
        env.term_order_pages = {}
    return env.term_order_pages


def _entries(env: BuildEnvironment) -> dict[str, list[Entry]]:
    if not hasattr(env, "term_order_entries"):
        env.term_order_entries = {}
    return env.term_order_entries


def _purge(app: Sphinx, env: BuildEnvironment, docname: str) -> None:
    _pages(env).pop(docname, None)
    _entries(env).pop(docname, None)


def _merge(app: Sphinx, env: BuildEnvironment, docnames: set[str], other: Any) -> None:
    for mine, theirs in ((_pages(env), _pages(other)), (_entries(env), _entries(other))):
        mine.update({doc: theirs[doc] for doc in docnames if doc in theirs})


def _check(app: Sphinx, env: BuildEnvironment) -> None:
    path = list(app.config.term_order_path) or [page.doc for page in course.load_course().path]
    std = env.domaindata["std"]

    def label_page(label: str) -> str | None:
        found = std["labels"].get(label) or std["anonlabels"].get(label)
        return found[0] if found else None

    entries = [entry for doc in sorted(_entries(env)) for entry in _entries(env)[doc]]
    for problem in problems(path, entries, _pages(env), label_page):
        logger.warning(problem.message, location=(problem.docname, problem.line))


def setup(app: Sphinx) -> dict[str, Any]:
    # The path's pages in order; empty: the path of docs/course.toml.
    app.add_config_value("term_order_path", [], "env", types=(list,))
    app.connect("doctree-read", _read)
    app.connect("env-purge-doc", _purge)
    app.connect("env-merge-info", _merge)
    app.connect("env-check-consistency", _check)
    return {"parallel_read_safe": True, "parallel_write_safe": True, "env_version": 1}

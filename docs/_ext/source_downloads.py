"""Offer each page's source for download: as MyST Markdown, and as a Jupyter notebook that
holds the outputs of this build.

Sphinx already copies every source into ``_sources/`` (kept with its own ``.md`` suffix, see
``html_sourcelink_suffix`` in conf.py); that is the ``.md`` download, as written. The ``.ipynb``
download is the notebook as this build executed it, with the cells whose code the page hides
dropped (tags ``remove-cell`` and ``remove-input``): the checks that assert what the prose says,
and the code behind outputs the page shows without their code. Both are the site's business, not
the reader's, and may use this repository's ``spmd_guide`` package, which a reader does not
install. Because a reader runs the notebook without them, the build fails if a visible cell uses
a name that only a hidden cell defines.

The links go into the page's header actions (``components/view-this-page.html``), through the
``source_downloads`` template variable.
"""

from __future__ import annotations

import ast
import builtins
import re
from pathlib import Path

import nbformat
from sphinx.application import Sphinx
from sphinx.errors import ExtensionError

HIDDEN = ("remove-cell", "remove-input")
# A code cell's option lines (`:tags: [...]`, or a `---` block of them) up to its first blank line.
_CELL_OPTIONS = re.compile(r"^`{3,}\{code-cell\}[^\n]*\n((?:(?:---|:|tags:).*\n)*)", re.M)
_TAGS = re.compile(r"tags:\s*\[(?P<tags>[^\]]*)\]")


def _is_notebook(source: Path) -> bool:
    head = source.read_text(encoding="utf-8")[:400]
    return head.startswith("---") and "kernelspec:" in head


def _offers_notebook(source: Path) -> bool:
    """Whether the page is a notebook that shows some code: one whose every cell is hidden (its
    outputs come from the build's own measurements) would download as a notebook of prose."""
    if not _is_notebook(source):
        return False
    for options in _CELL_OPTIONS.findall(source.read_text(encoding="utf-8")):
        tags = _TAGS.search(options)
        if not tags or not any(tag in tags["tags"] for tag in HIDDEN):
            return True
    return False


def add_links(app: Sphinx, pagename: str, templatename: str, context: dict, doctree) -> None:
    if doctree is None:
        return
    source = Path(app.env.doc2path(pagename))
    if source.suffix != ".md":
        return
    root = context["pathto"]("_sources/", 1)
    links = [("Markdown source (.md)", f"{root}{pagename}.md")]
    if _offers_notebook(source):
        links.append(("Notebook with outputs (.ipynb)", f"{root}{pagename}.ipynb"))
    context["source_downloads"] = links
    context["page_has_outputs"] = _is_notebook(source)


def _names(tree: ast.AST) -> tuple[set[str], set[str]]:
    """The names a cell binds and the names it reads."""
    bound: set[str] = set()
    read: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name):
            (read if isinstance(node.ctx, ast.Load) else bound).add(node.id)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            bound.add(node.name)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            bound.update((a.asname or a.name).split(".")[0] for a in node.names)
        elif isinstance(node, ast.arg):
            bound.add(node.arg)
        elif isinstance(node, ast.ExceptHandler) and node.name:
            bound.add(node.name)
    return bound, read


def _parse(source: str) -> ast.AST | None:
    try:
        return ast.parse(source)
    except SyntaxError:  # IPython syntax such as a %magic line: nothing to check
        return None


def without_hidden_cells(notebook: nbformat.NotebookNode, docname: str) -> None:
    """Drop hidden cells, and refuse if a visible cell reads a name only they define."""
    defined = set(dir(builtins))
    hidden_only: set[str] = set()
    kept = []
    for cell in notebook.cells:
        if cell.cell_type != "code":
            kept.append(cell)
            continue
        tree = _parse(cell.source)
        bound, read = _names(tree) if tree is not None else (set(), set())
        if any(tag in HIDDEN for tag in cell.get("metadata", {}).get("tags", [])):
            hidden_only |= bound - defined
            continue
        missing = sorted(name for name in read - bound - defined if name in hidden_only)
        if missing:
            first_line = cell.source.strip().splitlines()[0]
            raise ExtensionError(
                f"{docname}: the cell that starts {first_line!r} reads {', '.join(missing)}, "
                f"which only a cell whose code the page hides ({' or '.join(HIDDEN)}) defines; "
                "the downloaded notebook, which leaves those out, would fail there. Define it "
                "in a visible cell instead."
            )
        defined |= bound
        hidden_only -= bound
        # Outputs a page never shows are not part of the download either.
        cell.outputs = [
            out
            for out in cell.get("outputs", [])
            if not (out.output_type == "stream" and out.name == "stderr")
        ]
        kept.append(cell)
    notebook.cells = kept
    # Number the cells that ran 1, 2, 3... again, with no gaps where hidden cells were.
    number = 0
    for cell in kept:
        if cell.cell_type == "code" and cell.get("execution_count") is not None:
            number += 1
            cell.execution_count = number
            for out in cell.outputs:
                if "execution_count" in out:
                    out.execution_count = number


def executed_notebook(app: Sphinx, docname: str) -> nbformat.NotebookNode:
    """The notebook as this build executed it, outputs included."""
    if app.config.nb_execution_mode == "cache":
        # myst-nb keeps a cached page's outputs in the execution cache, not in the copy it
        # writes to jupyter_execute/; match the page's code against the cache, as it does.
        import jupytext
        from jupyter_cache import get_cache

        # A pathlib.Path: Sphinx's own path type warns when jupytext compares it with "-".
        notebook = jupytext.read(Path(app.env.doc2path(docname)))
        try:
            _, notebook = get_cache(app.config.nb_execution_cache_path).merge_match_into_notebook(
                notebook
            )
        except KeyError:
            raise ExtensionError(
                f"{docname}: its code has no entry in the execution cache; rebuild with "
                "`nox -s docs -- --fresh`"
            ) from None
        return notebook
    run = Path(app.outdir).parent / "jupyter_execute" / f"{docname}.ipynb"
    if not run.is_file():
        raise ExtensionError(f"{docname}: no executed notebook at {run}")
    return nbformat.read(run, as_version=4)


def write_notebooks(app: Sphinx, exception: Exception | None) -> None:
    if exception is not None or app.builder.format != "html":
        return
    out = Path(app.outdir) / "_sources"
    for docname in sorted(app.env.found_docs):
        source = Path(app.env.doc2path(docname))
        target = out / f"{docname}.ipynb"
        if source.suffix != ".md" or not _offers_notebook(source):
            target.unlink(missing_ok=True)  # left by a build from when the page showed code
            continue
        notebook = executed_notebook(app, docname)
        without_hidden_cells(notebook, docname)
        target.parent.mkdir(parents=True, exist_ok=True)
        nbformat.write(notebook, target)


def setup(app: Sphinx) -> dict:
    app.connect("html-page-context", add_links)
    app.connect("build-finished", write_notebooks)
    return {"parallel_read_safe": True, "parallel_write_safe": True}

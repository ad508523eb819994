"""Old addresses of sections that moved to another page keep working.

``docs/moved-sections.toml`` maps a page to the anchors that used to be on it, each to the
``page#anchor`` where that section lives now. Each such page gets a small script that, when the
page is opened at one of those anchors, replaces the address with the new one, so a bookmark or a
link from elsewhere to a section of a page that was split lands on the section itself.
"""

from __future__ import annotations

import json
import tomllib
from pathlib import Path
from typing import Any

from sphinx.application import Sphinx
from sphinx.environment import BuildEnvironment
from sphinx.errors import ExtensionError

TABLE = Path(__file__).resolve().parents[1] / "moved-sections.toml"


def load_moved(table: Path = TABLE) -> dict[str, dict[str, tuple[str, str]]]:
    """{old page: {old anchor: (new page, new anchor)}}, checked for form."""
    moved: dict[str, dict[str, tuple[str, str]]] = {}
    for page, anchors in tomllib.loads(table.read_text(encoding="utf-8")).items():
        moved[page] = {}
        for old, new in anchors.items():
            doc, hash_sign, anchor = new.partition("#")
            if not hash_sign or not doc or not anchor:
                raise ExtensionError(
                    f"{table}: {page}#{old} must move to 'page#anchor', got {new!r}"
                )
            moved[page][old] = (doc, anchor)
    return moved


def _check(app: Sphinx, env: BuildEnvironment) -> None:
    for page, anchors in load_moved().items():
        for doc in (page, *(doc for doc, _ in anchors.values())):
            if doc not in env.found_docs:
                raise ExtensionError(f"{TABLE}: there is no page {doc!r}; fix the name")


def _add_redirects(
    app: Sphinx, pagename: str, templatename: str, context: dict[str, Any], doctree: Any
) -> None:
    anchors = load_moved().get(pagename)
    if not anchors:
        return
    targets = {
        old: f"{app.builder.get_relative_uri(pagename, doc)}#{anchor}"
        for old, (doc, anchor) in anchors.items()
    }
    script = (
        f"(function () {{ const moved = {json.dumps(targets, sort_keys=True)};"
        " const target = moved[decodeURIComponent(location.hash.slice(1))];"
        " if (target) location.replace(target); })();"
    )
    app.add_js_file(None, body=script)


def _watch(app: Sphinx, config: Any) -> None:
    # The table's text as a setting, so that editing it writes every page again.
    config.moved_sections_table = TABLE.read_text(encoding="utf-8")


def setup(app: Sphinx) -> dict[str, Any]:
    app.add_config_value("moved_sections_table", "", "html", types=(str,))
    app.connect("config-inited", _watch)
    app.connect("env-check-consistency", _check)
    app.connect("html-page-context", _add_redirects)
    return {"parallel_read_safe": True, "parallel_write_safe": True}

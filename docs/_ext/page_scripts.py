"""Scripts that only some pages load: ``page_scripts`` in conf.py maps a page's name to the
files under ``_static/`` it needs, added to that page alone, deferred, in the order given."""

from __future__ import annotations

from typing import Any

from sphinx.application import Sphinx


def _add_scripts(
    app: Sphinx, pagename: str, templatename: str, context: dict[str, Any], doctree: Any
) -> None:
    for script in app.config.page_scripts.get(pagename, ()):
        app.add_js_file(script, loading_method="defer")


def setup(app: Sphinx) -> dict[str, Any]:
    app.add_config_value("page_scripts", {}, "html", types=(dict,))
    app.connect("html-page-context", _add_scripts)
    return {"parallel_read_safe": True, "parallel_write_safe": True}

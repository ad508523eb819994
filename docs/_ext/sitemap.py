"""Write sitemap.xml for the HTML build.

The list is made once, after the build, from every document Sphinx knows
(``env.found_docs``), not gathered page by page while pages are written: pages written in
parallel worker processes, or not rewritten at all by an incremental build, would otherwise be
missing from it. Addresses start at ``html_baseurl``.
"""

from __future__ import annotations

from pathlib import Path
from xml.sax.saxutils import escape

from sphinx.application import Sphinx
from sphinx.errors import ConfigError


def page_urls(app: Sphinx) -> list[str]:
    """The address of every page of the site, index first."""
    base = app.config.html_baseurl
    if not base.endswith("/"):
        raise ConfigError(f"html_baseurl must end with '/', got {base!r}")
    docnames = sorted(app.env.found_docs, key=lambda name: (name != app.config.root_doc, name))
    return [base + app.builder.get_target_uri(name) for name in docnames]


def write_sitemap(app: Sphinx, exception: Exception | None) -> None:
    if exception is not None or app.builder.format != "html" or not app.config.html_baseurl:
        return
    out = Path(app.outdir)
    entries = "".join(f"  <url><loc>{escape(url)}</loc></url>\n" for url in page_urls(app))
    (out / "sitemap.xml").write_text(
        '<?xml version="1.0" encoding="UTF-8"?>\n'
        '<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">\n'
        f"{entries}</urlset>\n",
        encoding="utf-8",
    )


def setup(app: Sphinx) -> dict:
    app.connect("build-finished", write_sitemap)
    return {"parallel_read_safe": True, "parallel_write_safe": True}

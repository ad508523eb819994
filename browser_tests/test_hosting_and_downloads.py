"""What a host, a search engine and a reader who downloads a page get from the built site."""

from __future__ import annotations

import json
import re
import xml.etree.ElementTree as ElementTree
from urllib.parse import urljoin

from conftest import SITE, content_pages, project_urls

URLS = project_urls()
BASE = URLS["Documentation"]
DOCS = sorted(
    str(path.relative_to(SITE / "_sources"))[: -len(".md")]
    for path in (SITE / "_sources").rglob("*.md")
)
NOTEBOOKS = [doc for doc in DOCS if (SITE / "_sources" / f"{doc}.ipynb").exists()]


def test_the_sitemap_lists_every_page_at_the_configured_address():
    tree = ElementTree.parse(SITE / "sitemap.xml")
    locations = [loc.text for loc in tree.iter("{http://www.sitemaps.org/schemas/sitemap/0.9}loc")]
    assert len(DOCS) >= 17
    assert sorted(locations) == sorted(f"{BASE}{doc}.html" for doc in DOCS)


def test_every_page_names_its_hosted_address_and_never_a_local_one():
    for page in content_pages():
        head = (SITE / page).read_text(encoding="utf-8").split("</head>")[0]
        assert not re.search(r"127\.0\.0\.1|localhost", head), page
        if page in {"404.html", "search.html", "genindex.html", "py-modindex.html"}:
            continue
        canonical = re.search(r'<link rel="canonical" href="([^"]+)"', head)
        assert canonical and canonical.group(1) == BASE + page, (page, canonical)
        og_url = re.search(r'<meta property="og:url" content="([^"]+)"', head)
        assert og_url and og_url.group(1) == BASE + page, (page, og_url)


def test_each_page_links_to_its_source_to_edit_and_to_the_repository(context, site_url):
    tab = context.new_page()
    for doc in ("index", "tutorial/sharded-computation", "problems/fsdp-step"):
        tab.goto(f"{site_url}{doc}.html")
        edit = tab.get_attribute(".edit-this-page a", "href")
        assert edit == f"{URLS['Repository']}/edit/main/docs/{doc}.md"
        assert tab.get_attribute("a.repository-link", "href") == URLS["Repository"]


def test_the_site_has_a_favicon_and_a_logo_that_load(context, site_url):
    tab = context.new_page()
    tab.goto(site_url + "index.html")
    icon = tab.get_attribute("link[rel~=icon]", "href")
    assert icon and tab.request.get(urljoin(site_url, icon)).ok
    logo = tab.locator("img.sidebar-logo").first
    assert logo.evaluate("img => img.complete && img.naturalWidth > 0")


def test_downloads_sit_in_the_header_actions_not_the_text(context, site_url):
    tab = context.new_page()
    tab.goto(site_url + "patterns/fsdp.html")
    assert tab.locator("article .source-downloads").count() == 0
    tab.click("details.source-downloads > summary")
    links = tab.eval_on_selector_all(
        "details.source-downloads a", "links => links.map(a => a.getAttribute('href'))"
    )
    assert [link.rsplit(".", 1)[1] for link in links] == ["md", "ipynb"]
    for link in links:
        assert tab.locator(f'details.source-downloads a[href="{link}"]').is_visible()
        assert tab.request.get(urljoin(site_url + "patterns/fsdp.html", link)).ok


def test_the_markdown_download_is_the_page_as_written():
    for doc in DOCS:
        written = (SITE.parents[1] / f"{doc}.md").read_text(encoding="utf-8")
        assert (SITE / "_sources" / f"{doc}.md").read_text(encoding="utf-8") == written


def test_each_notebook_download_has_this_builds_outputs_and_only_the_visible_cells():
    assert len(NOTEBOOKS) >= 16
    for doc in NOTEBOOKS:
        notebook = json.loads((SITE / "_sources" / f"{doc}.ipynb").read_text(encoding="utf-8"))
        code = [cell for cell in notebook["cells"] if cell["cell_type"] == "code"]
        assert not any(
            tag in ("remove-cell", "remove-input")
            for c in code
            for tag in c["metadata"].get("tags", [])
        ), doc
        assert any(cell["outputs"] for cell in code), f"{doc}.ipynb has no outputs"
        page = (SITE / f"{doc}.html").read_text(encoding="utf-8")
        # Cells whose code the page shows; output-only (remove-input) cells stay on the site.
        shown = len(re.findall(r'<div class="cell(?! [^"]*tag_remove-input)(?: [^"]*)?"', page))
        assert len(code) == shown, (doc, len(code), shown)
        for cell in code:
            for output in cell["outputs"]:
                assert output.get("name") != "stderr", doc
        counts = [cell["execution_count"] for cell in code if cell["execution_count"]]
        assert counts == list(range(1, len(counts) + 1)), (doc, counts)

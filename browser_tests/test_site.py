"""The built site as a reader meets it, in a real browser."""

from __future__ import annotations

import html.parser
import re
from pathlib import Path
from urllib.parse import unquote, urldefrag, urljoin, urlparse

import pytest
from conftest import SITE, content_pages
from survey import DESKTOP, at_width, survey
from survey import PAGES as SURVEYED

PAGES = content_pages()


def test_the_site_has_the_pages_it_should():
    for page in [
        "index.html",
        "getting-started/devices.html",
        "tutorial/sharded-computation.html",
        "guide/spmd-sharding.html",
        "patterns/collectives.html",
        "problems/shard-map-psum.html",
        "api.html",
        "404.html",
    ]:
        assert page in PAGES


@at_width(DESKTOP)
@pytest.mark.parametrize("page", SURVEYED)
def test_every_page_loads_without_errors_or_missing_files(browser, site_url, page):
    read = survey(browser, site_url, DESKTOP)[page]
    assert read.status_ok
    assert read.errors == [], read.errors
    assert read.missing == [], read.missing
    assert read.outside == [], read.outside


def test_the_copy_button_copies_code_without_prompts_or_outputs(context, site_url):
    tab = context.new_page()
    tab.goto(site_url + "tutorial/sharded-computation.html")
    first_input = tab.locator("div.cell_input div.highlight").first
    expected = first_input.locator("pre").inner_text()
    first_input.hover()
    first_input.locator("button.copybtn").click()
    copied = tab.evaluate("navigator.clipboard.readText()")
    assert copied.strip() == expected.strip()
    assert copied.startswith("import jax")
    assert ">>>" not in copied
    # Outputs get no copy button at all.
    assert tab.locator("div.cell_output button.copybtn").count() == 0


class _Links(html.parser.HTMLParser):
    def __init__(self):
        super().__init__()
        self.hrefs: list[str] = []
        self.ids: set[str] = set()

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if attrs.get("id"):
            self.ids.add(attrs["id"])
        if tag == "a" and attrs.get("href"):
            self.hrefs.append(attrs["href"])


def _parse(path: Path) -> _Links:
    parser = _Links()
    parser.feed(path.read_text(encoding="utf-8"))
    return parser


def test_every_internal_link_and_anchor_resolves():
    parsed = {page: _parse(SITE / page) for page in PAGES}
    broken = []
    for page, links in parsed.items():
        if page == "404.html":  # its links are absolute to where the site is hosted
            continue
        for href in links.hrefs:
            if urlparse(href).scheme or href.startswith(("mailto:", "//")):
                continue
            target, anchor = urldefrag(urljoin(page, href))
            target = unquote(target) or page
            path = SITE / target
            if path.is_dir():
                path = path / "index.html"
            if not path.exists():
                broken.append(f"{page}: {href} (no file)")
                continue
            # "#tensor=8&remat=saved" is the planner's state in its address, not an anchor.
            if anchor and "=" not in anchor and path.suffix == ".html":
                relative = str(path.relative_to(SITE))
                ids = parsed[relative].ids if relative in parsed else _parse(path).ids
                if anchor not in ids:
                    broken.append(f"{page}: {href} (no anchor)")
    assert broken == [], broken[:20]


def test_no_page_is_over_a_megabyte():
    sizes = {page: (SITE / page).stat().st_size for page in PAGES}
    largest = max(sizes, key=sizes.get)
    assert sizes[largest] < 1_000_000, (largest, sizes[largest])


def test_every_page_names_the_locked_versions_that_executed_it():
    lock = (SITE.parents[2] / "requirements" / "lock.txt").read_text()
    locked = dict(re.findall(r"^(jax|jaxlib|flax)==(\S+)$", lock, flags=re.M))
    expected = (
        f"JAX {locked['jax']}, jaxlib {locked['jaxlib']} and Flax {locked['flax']} on 8 CPU devices"
    )
    for page in PAGES:
        footer = re.search(r'<p class="build-versions">(.*?)</p>', (SITE / page).read_text(), re.S)
        assert footer is not None, f"{page} has no versions footer"
        assert expected in " ".join(footer.group(1).split()), (page, footer.group(1))

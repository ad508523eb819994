"""The built site as a reader meets it, in a real browser."""

from __future__ import annotations

import html.parser
import re
from pathlib import Path
from urllib.parse import unquote, urldefrag, urljoin, urlparse

import pytest
from conftest import SITE, content_pages

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


@pytest.mark.parametrize("page", [p for p in PAGES if p != "404.html"])
def test_every_page_loads_without_errors_or_missing_files(context, site_url, page):
    tab = context.new_page()
    errors: list[str] = []
    missing: list[str] = []
    tab.on("console", lambda msg: errors.append(msg.text) if msg.type == "error" else None)
    tab.on("pageerror", lambda error: errors.append(str(error)))
    tab.on(
        "response",
        lambda response: (
            missing.append(f"{response.status} {response.url}")
            if response.status >= 400 and response.url.startswith(site_url)
            else None
        ),
    )
    response = tab.goto(site_url + page, wait_until="load")
    assert response is not None and response.ok
    tab.wait_for_timeout(150)
    assert errors == [], errors
    assert missing == [], missing
    assert context.outside_requests == [], context.outside_requests
    tab.close()


@pytest.mark.parametrize(
    ("term", "expected"),
    [
        ("psum", ["problems/shard-map-psum.html", "patterns/collectives.html"]),
        ("shard_map", ["tutorial/sharded-computation.html", "problems/shard-map-vs-vmap.html"]),
        ("FSDP", ["patterns/fsdp.html", "guide/spmd-sharding.html"]),
    ],
)
def test_search_lists_the_pages_about_a_term(context, site_url, term, expected):
    tab = context.new_page()
    tab.goto(f"{site_url}search.html?q={term}")
    tab.wait_for_selector("#search-results ul.search li", timeout=15_000)
    tab.wait_for_function(
        "document.querySelector('#search-results .search-summary')?.textContent.length > 0",
        timeout=15_000,
    )
    hrefs = tab.eval_on_selector_all(
        "#search-results ul.search li a", "links => links.map(a => a.getAttribute('href'))"
    )
    found = {urldefrag(h)[0] for h in hrefs}
    for page in expected:
        assert page in found, (term, sorted(found))


def _luminance(rgb: tuple[float, ...]) -> float:
    def channel(c: float) -> float:
        c /= 255
        return c / 12.92 if c <= 0.03928 else ((c + 0.055) / 1.055) ** 2.4

    r, g, b = (channel(c) for c in rgb[:3])
    return 0.2126 * r + 0.7152 * g + 0.0722 * b


def _contrast(a: tuple[float, ...], b: tuple[float, ...]) -> float:
    la, lb = sorted((_luminance(a), _luminance(b)), reverse=True)
    return (la + 0.05) / (lb + 0.05)


def _rgb(css: str) -> tuple[float, ...]:
    return tuple(float(v) for v in re.findall(r"[\d.]+", css)[:3])


PICTURE_COLOURS = """
() => {
  const out = [];
  for (const pre of document.querySelectorAll('.cell_output .output.text_html pre')) {
    const preStyle = getComputedStyle(pre);
    const items = [pre, ...pre.querySelectorAll('span')];
    for (const el of items) {
      const s = getComputedStyle(el);
      const clear = s.backgroundColor === 'rgba(0, 0, 0, 0)';
      const bg = clear ? preStyle.backgroundColor : s.backgroundColor;
      out.push([s.color, bg]);
    }
  }
  return out;
}
"""


def test_the_theme_toggle_switches_and_pictures_stay_readable(context, site_url):
    tab = context.new_page()
    tab.goto(site_url + "tutorial/sharded-computation.html")
    seen = {}
    for _ in range(3):
        tab.click("button.theme-toggle >> visible=true")
        theme = tab.evaluate("document.body.dataset.theme")
        background = tab.evaluate("getComputedStyle(document.body).backgroundColor")
        seen[theme] = background
        colours = tab.evaluate(PICTURE_COLOURS)
        assert colours, "the page should show sharding pictures"
        for text, back in colours:
            assert _contrast(_rgb(text), _rgb(back)) >= 4.5, (theme, text, back)
    assert {"light", "dark"} <= set(seen), seen
    assert seen["light"] != seen["dark"]
    assert _luminance(_rgb(seen["dark"])) < _luminance(_rgb(seen["light"]))


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
            if anchor and path.suffix == ".html":
                relative = str(path.relative_to(SITE))
                ids = parsed[relative].ids if relative in parsed else _parse(path).ids
                if anchor not in ids:
                    broken.append(f"{page}: {href} (no anchor)")
    assert broken == [], broken[:20]


def test_each_page_offers_its_source_as_markdown_and_notebook(context, site_url):
    tab = context.new_page()
    tab.goto(site_url + "patterns/fsdp.html")
    links = tab.eval_on_selector_all(
        ".source-downloads a", "links => links.map(a => a.getAttribute('href'))"
    )
    assert [Path(link).suffix for link in links] == [".md", ".ipynb"]
    for link in links:
        response = tab.request.get(urljoin(site_url + "patterns/fsdp.html", link))
        assert response.ok
    assert (SITE / "_sources" / "patterns" / "fsdp.ipynb").stat().st_size > 1000


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

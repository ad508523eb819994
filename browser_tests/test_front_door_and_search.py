"""The home page, search, and the small things every page shows."""

from __future__ import annotations

import re
from urllib.parse import urldefrag

import pytest
from conftest import SITE, content_pages

PAGES = content_pages()


def test_the_home_page_says_what_the_site_is_and_offers_five_routes(context, site_url):
    tab = context.new_page()
    tab.goto(site_url + "index.html")
    assert "spmd-guide" not in tab.title()
    assert "SPMD in JAX" in tab.title()
    # The page opens on its heading: nothing above it in the text.
    first = tab.evaluate("document.querySelector('article[role=main]').innerText.trim()")
    assert first.startswith("SPMD in JAX"), first[:80]
    cards = tab.eval_on_selector_all(
        "a.sd-stretched-link", "links => links.map(a => a.getAttribute('href'))"
    )
    assert [urldefrag(card)[0] for card in cards] == [
        "getting-started/devices.html",
        "guide/spmd-sharding.html",
        "patterns/collectives.html",
        "transformer-patterns/experts.html",
        "problems/index.html",
    ]
    text = tab.inner_text("article[role=main]")
    assert re.search(r"JAX \d+\.\d+\S*, jaxlib \d+\.\d+\S* and\s+Flax \d+\.\d+", text), text
    assert "Map of the site" not in text
    # The sidebar is the map; the page does not repeat it as a list of links.
    assert tab.locator("article .toctree-wrapper a").count() == 0


def _search(context, site_url, term):
    tab = context.new_page()
    tab.goto(f"{site_url}search.html?q={term}")
    tab.wait_for_selector("#search-results ul.search li", timeout=15_000)
    tab.wait_for_function(
        "document.querySelector('#search-results .search-summary')?.textContent.length > 0",
        timeout=15_000,
    )
    tab.wait_for_timeout(300)  # summaries are fetched page by page
    results = tab.eval_on_selector_all(
        "#search-results ul.search li",
        """items => items.map(li => [
            li.querySelector('a').getAttribute('href'),
            li.querySelector('p.context')?.textContent ?? ''])""",
    )
    tab.close()
    return [(urldefrag(href)[0], snippet) for href, snippet in results]


TOP_RESULTS = {
    "psum": "patterns/collectives.html",
    "FSDP": "patterns/fsdp.html",
    "with_sharding_constraint": "tutorial/sharded-computation.html",
    # Error messages a reader may paste, and the page that raises and explains each.
    "ambiguous how the output should be sharded": "tutorial/sharded-computation.html",
    "out_specs which require replication": "patterns/collectives.html",
}


# Error messages as a reader pastes them; the troubleshooting page raises each one live.
PASTED_ERRORS = [
    "Received incompatible devices for jitted computation",
    "Contracting dimensions are sharded and it is ambiguous how the output should be sharded",
    "does not evenly divide the dimension size",
    "Found an unbound axis name",
    "jax_num_cpu_devices config should be updated before backends are initialized",
    "Some donated buffers were not usable",
    "Fetching value for jax.Array that spans non-addressable devices is not possible",
    "jax.distributed.initialize() must be called before any JAX calls",
    "An auto mesh context or metadata is required if creating a variable with annotation",
]


@pytest.mark.parametrize("message", PASTED_ERRORS)
def test_search_finds_the_troubleshooting_page_by_a_pasted_error(context, site_url, message):
    hrefs = [href for href, _ in _search(context, site_url, message)]
    assert "troubleshooting.html" in hrefs[:3], hrefs[:6]


@pytest.mark.parametrize(("term", "page"), TOP_RESULTS.items())
def test_search_puts_the_teaching_page_first(context, site_url, term, page):
    results = _search(context, site_url, term)
    assert results[0][0] == page, [href for href, _ in results[:6]]
    reference = {"api.html", "execution-statistics.html", "genindex.html"}
    hrefs = [href for href, _ in results]
    teaching = [i for i, href in enumerate(hrefs) if href not in reference]
    assert all(i < j for i in teaching for j, h in enumerate(hrefs) if h in reference)


def test_search_snippets_start_in_the_pages_text(context, site_url):
    for _, snippet in _search(context, site_url, "mesh")[:10]:
        assert "Download" not in snippet[:40], snippet


def test_no_page_shows_the_build_machines_paths():
    for page in PAGES:
        text = (SITE / page).read_text(encoding="utf-8")
        assert not re.search(r"ipykernel_\d+|/tmp/|/root/|/work/", text), page


def test_pages_do_not_open_on_a_list_of_devices(context, site_url):
    tab = context.new_page()
    for page in PAGES:
        if page == "getting-started/devices.html":  # listing the devices is its lesson
            continue
        tab.goto(site_url + page, wait_until="load")
        first = tab.evaluate("document.querySelector('div.cell .cell_output')?.innerText ?? ''")
        assert first.count("CpuDevice(") < 3, (page, first[:200])


def test_the_execution_statistics_say_passed_in_words():
    page = (SITE / "execution-statistics.html").read_text(encoding="utf-8")
    rows = re.findall(r"<tr[^>]*>(.*?)</tr>", page, re.S)[1:]
    assert len(rows) >= 16
    for row in rows:
        assert re.search(r"<p>passed</p>", row), row
    assert not re.search("[\u2705\u274c]", page)


def test_api_signatures_show_values_not_factories():
    page = (SITE / "api.html").read_text(encoding="utf-8")
    assert "&lt;factory&gt;" not in page
    text = re.sub(r"<[^>]+>", "", page)
    assert "kwargs={}" in text

"""The home page, search, and the small things every page shows."""

from __future__ import annotations

import html
import re
import tomllib
from urllib.parse import urldefrag, urljoin

import pytest
from conftest import SITE, content_pages

PAGES = content_pages()


def _course_table() -> dict:
    return tomllib.loads((SITE.parents[1] / "course.toml").read_text(encoding="utf-8"))


def test_the_home_page_opens_on_the_path_within_a_phones_first_screen(browser, site_url):
    tab = browser.new_page(viewport={"width": 390, "height": 844}, device_scale_factor=2)
    tab.goto(site_url + "index.html")
    assert "spmd-guide" not in tab.title()
    assert "SPMD in JAX" in tab.title()
    # The page opens on its heading, then who it is for: nothing above it in the text.
    first = tab.evaluate("document.querySelector('article[role=main]').innerText.trim()")
    assert first.startswith("SPMD in JAX"), first[:80]
    assert "moving from one accelerator to many" in first[:200], first[:200]
    steps = tab.locator("ol.course-path > li")
    table = _course_table()["step"]
    assert steps.count() == len(table)
    # The path starts on the first screen, below the header, and every step says its time.
    top = tab.evaluate("document.querySelector('ol.course-path').getBoundingClientRect().top")
    assert top < 844 - 60, top
    for i, step in enumerate(table):
        text = steps.nth(i).inner_text()
        assert text.startswith(step["title"]) and re.search(r"\(.*\d+ min\): ", text), text
        href = steps.nth(i).locator("a").get_attribute("href")
        assert urldefrag(href)[0] == step["page"][0]["doc"] + ".html", href
    # How the pages are checked is a page of its own, linked from the home page's foot.
    assert tab.locator("article a[href='how-pages-are-checked.html']").count() == 1
    assert "hidden check" not in first[: first.index("Holding an error message")]
    tab.close()


def test_how_the_pages_are_checked_names_the_versions_this_build_ran():
    text = (SITE / "how-pages-are-checked.html").read_text(encoding="utf-8")
    assert re.search(r"JAX \d+\.\d+\S*, jaxlib \d+\.\d+\S* and\s+Flax \d+\.\d+", text)


def test_every_page_on_the_path_says_what_you_will_do_what_to_read_first_and_what_is_next():
    table = _course_table()
    path = [page for step in table["step"] for page in step["page"]]
    for i, page in enumerate(path):
        page_html = (SITE / f"{page['doc']}.html").read_text(encoding="utf-8")
        opening = page_html.split('class="course-opening', 1)[1].split("</div>", 1)[0]
        closing = page_html.split('class="course-closing', 1)[1].split("</div>", 1)[0]
        assert "You will be able to" in opening and "Read first:" in opening, page["doc"]
        assert re.search(r"about \d+ min of reading", opening), page["doc"]
        # The opening comes right after the title, the closing after the page's last words.
        title_end = page_html.index("</h1>")
        assert page_html.index('class="course-opening') - title_end < 200, page["doc"]
        assert "Next:" in closing, page["doc"]
        if i + 1 < len(path):
            base = f"https://site/{page['doc']}.html"
            targets = {
                urldefrag(urljoin(base, h))[0] for h in re.findall(r'href="([^"]+)"', closing)
            }
            assert f"https://site/{path[i + 1]['doc']}.html" in targets, (page["doc"], targets)


def _reading_minutes(page_html: str) -> tuple[float, int, int]:
    """A page's reading time as the build defines it, measured here on the built HTML: prose
    words / 200 + lines of code shown / 20, leaving out cell outputs and folded blocks."""
    article = page_html.split('id="furo-main-content"', 1)[1].split("</article>", 1)[0]
    article = re.sub(r"<details\b.*?</details>", " ", article, flags=re.S)
    article = re.sub(
        r'<div class="cell_output[^"]*">.*?</div>\s*</div>\s*</div>', " ", article, flags=re.S
    )
    code = 0
    for block in re.findall(r"<pre\b[^>]*>(.*?)</pre>", article, flags=re.S):
        text = html.unescape(re.sub(r"<[^>]+>", "", block))
        code += sum(1 for line in text.splitlines() if line.strip())
    prose = re.sub(r"<pre\b.*?</pre>", " ", article, flags=re.S)
    prose = re.sub(r"<(script|style|svg)\b.*?</\1>", " ", prose, flags=re.S)
    text = html.unescape(re.sub(r"<[^>]+>", " ", prose))
    words = len(re.findall("[A-Za-z0-9][\\w'\u2019.-]*", text))
    return words / 200 + code / 20, words, code


def test_every_page_on_the_path_fits_a_sitting_as_built():
    table = _course_table()
    default = table.get("max_minutes", 15)
    waiting = set(table.get("over_limit", ()))
    for step in table["step"]:
        for page in step["page"]:
            limit = page.get("max_minutes", default)
            minutes, words, code = _reading_minutes(
                (SITE / f"{page['doc']}.html").read_text(encoding="utf-8")
            )
            if page["doc"] in waiting:
                assert minutes > limit, f"{page['doc']} fits now: take it off over_limit"
            else:
                assert minutes <= limit, (page["doc"], round(minutes, 1), words, code, limit)


MOVED = tomllib.loads((SITE.parents[1] / "moved-sections.toml").read_text(encoding="utf-8"))


@pytest.mark.parametrize(
    ("old", "new"),
    [(f"{page}#{anchor}", new) for page, moved in MOVED.items() for anchor, new in moved.items()],
)
def test_a_section_that_moved_is_found_at_its_old_address(context, site_url, old, new):
    tab = context.new_page()
    page, anchor = old.split("#")
    tab.goto(f"{site_url}{page}.html#{anchor}")
    new_page, new_anchor = new.split("#")
    tab.wait_for_url(f"{site_url}{new_page}.html#{new_anchor}", timeout=10_000)
    assert tab.locator(f"[id='{new_anchor}']").count() == 1
    tab.close()


@pytest.mark.parametrize("page", _course_table()["reference"])
def test_a_long_reference_page_opens_with_a_contents_list(page):
    page_html = (SITE / f"{page}.html").read_text(encoding="utf-8")
    article = page_html.split('id="furo-main-content"', 1)[1]
    if _reading_minutes(page_html)[0] <= 5:  # short enough to read whole
        return
    contents = article.find('class="contents')
    first_section = article.find("<section", article.find("<section") + 1)
    assert 0 <= contents < first_section, page


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
    "This thread has been waiting for all reduce",
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

"""The home page, search, and the small things every page shows."""

from __future__ import annotations

import html
import json
import re
import tomllib
from pathlib import Path
from urllib.parse import quote, urldefrag, urljoin

import pytest
from conftest import SITE, content_pages
from survey import DESKTOP, at_width, survey

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
    words / 140 + lines of code shown / 12, leaving out cell outputs and the folds whose summary
    says "Under the hood" or offers a script "to copy"."""
    article = page_html.split('id="furo-main-content"', 1)[1].split("</article>", 1)[0]
    article = re.sub(
        r"<details\b(?:(?!</details>).)*?<summary\b[^>]*>(?:(?!</summary>).)*?"
        r"(?:[Uu]nder the hood|to copy|[Ww]hole script).*?</details>",
        " ",
        article,
        flags=re.S,
    )
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
    return words / 140 + code / 12, words, code


def test_every_page_on_the_path_fits_a_sitting_as_built():
    table = _course_table()
    default = table.get("max_minutes", 15)
    waiting = set(table.get("over_limit", ()))
    for step in table["step"]:
        for page in step["page"]:
            limit = page.get("max_minutes", default)
            page_html = (SITE / f"{page['doc']}.html").read_text(encoding="utf-8")
            minutes, words, code = _reading_minutes(page_html)
            # The time the page states, whole minutes rounded up, is the build's own count,
            # which agrees with this one within half a minute.
            stated = int(re.search(r"about (\d+) min of reading", page_html)[1])
            assert stated - 1.5 < minutes <= stated + 0.5, (page["doc"], stated, minutes)
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
    if first_section < 0:  # one section, under the title: no list to give
        return
    assert 0 <= contents < first_section, page


def _search(context, site_url, term, *, anchors=False):
    tab = context.new_page()
    tab.goto(f"{site_url}search.html?q={quote(term)}")
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
    return [(href if anchors else urldefrag(href)[0], snippet) for href, snippet in results]


TOP_RESULTS = {
    "psum": "patterns/collectives.html",
    "FSDP": "patterns/fsdp.html",
    "with_sharding_constraint": "tutorial/auto-sharding.html",
}


def _raised_errors() -> list[dict[str, str]]:
    """The errors the pages raise on purpose, as the search page reads them."""
    script = (SITE / "_static" / "error-messages.js").read_text(encoding="utf-8")
    return json.loads(script.removeprefix("var ERROR_MESSAGES = ").rstrip().removesuffix(";"))


def _raising_cells(page: str) -> int:
    return (SITE / f"{page}.html").read_text(encoding="utf-8").count("cell tag_raises-exception")


ERROR_PAGES = ("troubleshooting", "troubleshooting-processes", "guide/explicit-ops")


def test_the_search_knows_every_error_the_error_pages_raise():
    records = _raised_errors()
    for page in ERROR_PAGES:
        assert sum(r["page"] == page for r in records) >= _raising_cells(page) > 0, page


# The result the search page lists first for a query, ranked in the page by the code its results
# list runs (Search.query), without drawing the list: that list shows the last result first.
FIRST_RESULT = """
query => {
  const [parsed, terms, excluded, highlighted, objects] = Search._parseQuery(query);
  const results = Search._performSearch(parsed, terms, excluded, highlighted, objects);
  const first = results.at(-1);
  return first ? first[0] + DOCUMENTATION_OPTIONS.LINK_SUFFIX + first[2] : null;
}
"""


FIXED_WORDS = "messages => messages.map(m => [...ErrorSearch.words(m)].sort().join(' '))"


def test_search_lists_first_the_section_that_raises_a_pasted_error_line(context, site_url):
    """Each error line as the page prints it (a reader's own differs in names and shapes)."""
    every = _raised_errors()
    records = [r for r in every if r["page"] in ERROR_PAGES]
    tab = context.new_page()
    tab.goto(f"{site_url}search.html", wait_until="load")
    tab.wait_for_function("Search.hasIndex()", timeout=15_000)
    firsts = [tab.evaluate(FIRST_RESULT, record["message"]) for record in records]
    # What the error search compares: each message's fixed words (its shapes and names left out).
    fixed = tab.evaluate(FIXED_WORDS, [record["message"] for record in every])
    # The ranking read in the page is the list a reader sees.
    assert firsts[0] == _search(context, site_url, records[0]["message"], anchors=True)[0][0]
    missed = []
    for record, first in zip(records, firsts, strict=True):
        words = fixed[every.index(record)]
        if not words:  # a bare exception name: nothing to search by
            continue
        # Where several sections raise one message, alike but for their names and shapes, the
        # one the search lists first.
        canonical = next(r for r, w in zip(every, fixed, strict=True) if w == words)
        if first != f"{canonical['page']}.html#{canonical['anchor']}":
            missed.append((record["message"][:80], first))
    assert len(records) > 20 and not missed, missed


# Errors as a reader pastes them: another's names and shapes, or only the distinctive words.
PASTED_ERRORS = {
    "ValueError: Received incompatible devices for jitted computation. Got argument params['w'] "
    "of train_step with shape float32[1024,512] and with device ids [0] on platform GPU and "
    "argument batch of train_step with shape float32[64,1024] and with device ids [0, 1, 2, 3] "
    "on platform GPU": "troubleshooting#troubleshooting-incompatible-devices",
    "Contracting dimensions are sharded and it is ambiguous how the output should be sharded": (
        "troubleshooting#troubleshooting-explicit-matmul"
    ),
    "does not evenly divide the dimension size": "troubleshooting#troubleshooting-not-divisible",
    "Found an unbound axis name": "troubleshooting#troubleshooting-axis-name",
    "jax_num_cpu_devices config should be updated before backends are initialized": (
        "troubleshooting#troubleshooting-device-count"
    ),
    "Some donated buffers were not usable": "troubleshooting#troubleshooting-donation",
    "An auto mesh context or metadata is required if creating a variable with annotation": (
        "troubleshooting#troubleshooting-no-mesh"
    ),
    "out_specs which require replication": "troubleshooting#troubleshooting-check-vma",
    "W1127 12:00:00.000000 1234 spmd_partitioner.cc:666] [SPMD] Involuntary full "
    "rematerialization. The compiler cannot go from sharding {devices=[4,1]<=[4]} to "
    "{devices=[1,4]<=[4]} efficiently": "troubleshooting#troubleshooting-full-remat",
    "Fetching value for jax.Array that spans non-addressable devices is not possible": (
        "troubleshooting-processes#troubleshooting-non-addressable"
    ),
    "jax.distributed.initialize() must be called before any JAX calls": (
        "troubleshooting-processes#troubleshooting-multi-process"
    ),
    "This thread has been waiting for all reduce": (
        "troubleshooting-processes#troubleshooting-collective-hang"
    ),
    "to provide output PartitionSpec for the scatter update": (
        "guide/explicit-ops#explicit-ops-indexing"
    ),
}


# Error lines as users pasted them in public threads, each with its address and the section
# that answers it (null where the site has none), collected before the search was tuned.
PASTED_LINES = json.loads((Path(__file__).with_name("pasted_errors.json")).read_text())["lines"]

CLOSEST = """
lines => lines.map(line => {
  const found = ErrorSearch.closest(line);
  return found ? `${found.page}#${found.anchor}` : null;
})
"""


def test_real_pasted_errors_land_on_their_entry_or_fall_back_to_sphinx(context, site_url):
    tab = context.new_page()
    tab.goto(f"{site_url}search.html", wait_until="load")
    tab.wait_for_function("Search.hasIndex()", timeout=15_000)
    found = tab.evaluate(CLOSEST, [item["line"] for item in PASTED_LINES])
    tab.close()
    answered = [(item, got) for item, got in zip(PASTED_LINES, found, strict=True) if item["entry"]]
    missed = [
        (item["line"][:90], item["entry"], got) for item, got in answered if got != item["entry"]
    ]
    assert len(answered) >= 30 and len(missed) <= 0.05 * len(answered), missed
    # A line the site has no entry for gets Sphinx's own results, not a wrong entry.
    unanswered = [
        (item, got) for item, got in zip(PASTED_LINES, found, strict=True) if not item["entry"]
    ]
    wrong = [(item["line"][:90], got) for item, got in unanswered if got is not None]
    assert len(unanswered) >= 10 and not wrong, wrong


def test_a_pasted_multi_line_traceback_leads_to_its_section(context, site_url):
    # A whole traceback, pasted into the search box (which keeps it on one line).
    traceback = (
        "Traceback (most recent call last):\n"
        '  File "train.py", line 41, in <module>\n'
        "    state = step(state, batch)\n"
        '  File "train.py", line 30, in step\n'
        "    return jax.shard_map(body, mesh=mesh, in_specs=P('data'), out_specs=P('data'))(x)\n"
        "NotImplementedError: Closing over inputs to shard_map where the input is sharded on "
        "`Explicit` axes is not implemented. As a workaround, please pass those inputs as an "
        "argument to shard_map. Got input with shape f32[1024,512@data]({Explicit: ('data',)})"
    )
    tab = context.new_page()
    tab.goto(f"{site_url}search.html", wait_until="load")
    box = tab.locator("input[name='q']").first
    box.fill(traceback)
    box.press("Enter")
    tab.wait_for_selector("#search-results ul.search li", timeout=15_000)
    first = tab.locator("#search-results ul.search li a").first.get_attribute("href")
    tab.close()
    assert first.endswith("troubleshooting.html#troubleshooting-explicit-closure"), first


@pytest.mark.parametrize(("message", "section"), PASTED_ERRORS.items())
def test_search_finds_the_section_by_a_pasted_error(context, site_url, message, section):
    hrefs = [href for href, _ in _search(context, site_url, message, anchors=True)]
    page, anchor = section.split("#")
    assert hrefs[0] == f"{page}.html#{anchor}", hrefs[:6]


def test_search_snippets_start_in_the_pages_text(context, site_url):
    for _, snippet in _search(context, site_url, "mesh")[:10]:
        assert "Download" not in snippet[:40], snippet


def test_no_page_shows_the_build_machines_paths():
    for page in PAGES:
        text = (SITE / page).read_text(encoding="utf-8")
        assert not re.search(r"ipykernel_\d+|/tmp/|/root/|/work/", text), page


def test_no_page_shows_a_gpu_figure_role_unrendered():
    # A role split by a table's column bar, for one, would show as its source.
    for page in PAGES:
        text = (SITE / page).read_text(encoding="utf-8")
        assert not re.search(r"\{gpu(-label)?\}", text), page


@at_width(DESKTOP)
def test_pages_do_not_open_on_a_list_of_devices(browser, site_url):
    for page, read in survey(browser, site_url, DESKTOP).items():
        if page == "getting-started/devices.html":  # listing the devices is its lesson
            continue
        assert read.first_output.count("CpuDevice(") < 3, (page, read.first_output[:200])


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

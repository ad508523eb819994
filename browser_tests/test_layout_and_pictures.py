"""The sharding pictures and the page layout, at the widths readers use, in both themes."""

from __future__ import annotations

import re

import pytest
from conftest import content_pages

PAGES = [page for page in content_pages() if page != "404.html"]
PICTURE_PAGES = [
    "getting-started/devices.html",
    "tutorial/sharded-computation.html",
]
WIDTHS = (390, 1024, 1280)
# A picture's title: "name ...: " then a spec, a sharded type such as float32[4,8@y], or the
# single device the array lives on.
TITLE = re.compile(r"^\S[^:]*: .*(\bP\(|PartitionSpec\(|\w+\[[^\]]*@|SingleDeviceSharding)")

# Each picture as the browser lays it out: its tiles' colours, its text, the line printed just
# before it in the same cell (its title), and whether it stays inside the page's column.
PICTURES = """
() => {
  const column = document.querySelector('article[role=main]').getBoundingClientRect();
  return [...document.querySelectorAll('pre.sharding-picture')].map(pre => {
    const box = pre.getBoundingClientRect();
    const tiles = [...pre.querySelectorAll('span')]
      .map(s => getComputedStyle(s))
      .filter(s => s.backgroundColor !== 'rgba(0, 0, 0, 0)')
      .map(s => [s.color, s.backgroundColor]);
    const output = pre.closest('.output');
    const before = output.previousElementSibling;
    const title = before && before.classList.contains('stream') ? before.innerText.trim() : '';
    const style = getComputedStyle(pre);
    return {
      text: pre.innerText,
      tiles,
      title: title.split('\\n').pop(),
      inside: box.left >= column.left - 1 && box.right <= column.right + 1,
      scrolls: pre.scrollWidth > pre.clientWidth + 1,
      background: style.backgroundColor,
      color: style.color,
    };
  });
}
"""


def _luminance(rgb: tuple[float, ...]) -> float:
    def channel(c: float) -> float:
        c /= 255
        return c / 12.92 if c <= 0.04045 else ((c + 0.055) / 1.055) ** 2.4

    r, g, b = (channel(c) for c in rgb[:3])
    return 0.2126 * r + 0.7152 * g + 0.0722 * b


def _contrast(a: str, b: str) -> float:
    la, lb = sorted((_luminance(_rgb(a)), _luminance(_rgb(b))), reverse=True)
    return (la + 0.05) / (lb + 0.05)


def _rgb(css: str) -> tuple[float, ...]:
    return tuple(float(v) for v in re.findall(r"[\d.]+", css)[:3])


@pytest.mark.parametrize("width", WIDTHS)
def test_no_page_scrolls_sideways(context, site_url, width):
    tab = context.new_page()
    tab.set_viewport_size({"width": width, "height": 900})
    too_wide = {}
    for page in PAGES:
        tab.goto(site_url + page, wait_until="load")
        overflow = tab.evaluate(
            "document.documentElement.scrollWidth - document.documentElement.clientWidth"
        )
        if overflow > 0:
            too_wide[page] = overflow
    assert too_wide == {}, f"pages wider than a {width} px window, by px: {too_wide}"


@pytest.mark.parametrize("width", (390, 1280))
@pytest.mark.parametrize("page", PICTURE_PAGES)
def test_pictures_are_coloured_labelled_titled_and_inside_the_column(
    context, site_url, page, width
):
    tab = context.new_page()
    tab.set_viewport_size({"width": width, "height": 900})
    tab.goto(site_url + page, wait_until="load")
    pictures = tab.evaluate(PICTURES)
    assert pictures, f"{page} should show sharding pictures"
    colours = set()
    for picture in pictures:
        assert re.search(r"\b(CPU|GPU|TPU) \d", picture["text"]), picture["text"]
        assert picture["tiles"], f"a picture on {page} has no coloured tile"
        colours |= {background for _, background in picture["tiles"]}
        assert TITLE.search(picture["title"]), (
            f"a picture on {page} has no title naming its array and spec: {picture['title']!r}"
        )
        assert picture["inside"], f"a picture on {page} reaches past the column at {width} px"
        # These pages' pictures are at most 80 characters wide: they fit without scrolling.
        assert not picture["scrolls"], f"a picture on {page} must scroll at {width} px"
    assert len(colours) >= 2, colours


def test_the_site_has_no_empty_sharding_picture(context, site_url):
    tab = context.new_page()
    unlabelled = []
    for page in PAGES:
        tab.goto(site_url + page, wait_until="load")
        for picture in tab.evaluate(PICTURES):
            if not re.search(r"\b(CPU|GPU|TPU) \d", picture["text"]):
                unlabelled.append(page)
    assert unlabelled == []


def test_the_theme_toggle_switches_and_pictures_stay_readable_without_a_light_card(
    context, site_url
):
    tab = context.new_page()
    tab.goto(site_url + "tutorial/sharded-computation.html")
    seen = {}
    for _ in range(3):
        tab.click("button.theme-toggle >> visible=true")
        theme = tab.evaluate("document.body.dataset.theme")
        page_background = tab.evaluate("getComputedStyle(document.body).backgroundColor")
        seen[theme] = page_background
        for picture in tab.evaluate(PICTURES):
            assert _contrast(picture["color"], picture["background"]) >= 4.5, (theme, picture)
            for text, background in picture["tiles"]:
                assert _contrast(text, background) >= 4.5, (theme, text, background)
            # The picture sits on the page's own background: no bright card in dark mode.
            assert _rgb(picture["background"]) == _rgb(page_background), (theme, picture)
    assert {"light", "dark"} <= set(seen), seen
    assert _luminance(_rgb(seen["dark"])) < _luminance(_rgb(seen["light"]))


def test_input_cells_have_no_light_border_in_dark_mode(context, site_url):
    tab = context.new_page()
    tab.goto(site_url + "tutorial/sharded-computation.html")
    tab.evaluate("document.body.dataset.theme = 'dark'")
    border = tab.evaluate(
        "getComputedStyle(document.querySelector('div.cell_input')).borderTopColor"
    )
    background = tab.evaluate("getComputedStyle(document.body).backgroundColor")
    assert _luminance(_rgb(border)) < 0.1, border
    assert _contrast(border, background) < 2, (border, background)


def test_on_this_page_shows_beside_a_long_page_at_1280_px(context, site_url):
    tab = context.new_page()
    tab.set_viewport_size({"width": 1280, "height": 900})
    tab.goto(site_url + "guide/spmd-sharding.html")
    assert tab.evaluate("document.documentElement.scrollHeight") > 5000
    toc = tab.locator(".toc-drawer .toc-tree")
    assert toc.is_visible()
    box = toc.bounding_box()
    assert box is not None and box["x"] >= 0 and box["x"] + box["width"] <= 1280
    article = tab.locator("article[role=main]").bounding_box()
    assert box["x"] >= article["x"] + article["width"], "the contents overlap the text"

"""The sharding pictures and the page layout, at the widths readers use, in both themes."""

from __future__ import annotations

import re

import pytest
from survey import (
    CLIPPED,
    DESKTOP,
    PICTURES,
    WIDTHS,
    at_width,
    contrast,
    luminance,
    rgb,
    survey,
)

PICTURE_PAGES = [
    "getting-started/devices.html",
    "tutorial/sharded-computation.html",
]
# A picture's title: "name ...: " then a spec, a sharded type such as float32[4,8@y], or the
# single device the array lives on.
TITLE = re.compile(r"^\S[^:]*: .*(\bP\(|PartitionSpec\(|\w+\[[^\]]*@|SingleDeviceSharding)")


@pytest.mark.parametrize("width", [pytest.param(w, marks=at_width(w)) for w in WIDTHS])
def test_no_page_scrolls_sideways(browser, site_url, width):
    too_wide = {
        page: read.overflow
        for page, read in survey(browser, site_url, width).items()
        if read.overflow > 0
    }
    assert too_wide == {}, f"pages wider than a {width} px window, by px: {too_wide}"


@pytest.mark.parametrize("width", [pytest.param(w, marks=at_width(w)) for w in (390, DESKTOP)])
def test_nothing_is_cut_off_with_every_fold_open(browser, site_url, width):
    read = survey(browser, site_url, width)
    clipped = {page: found.clipped for page, found in read.items() if found.clipped}
    assert clipped == {}, f"at {width} px, give these a scrolling frame or reshape them: {clipped}"


def test_the_clipping_reading_finds_a_cut_box_and_a_table_past_the_window(context, site_url):
    tab = context.new_page()
    tab.set_viewport_size({"width": 390, "height": 900})
    tab.goto(site_url + "tutorial/sharded-computation.html")
    assert tab.evaluate(CLIPPED) == []
    tab.evaluate(
        """() => document.querySelector('article[role=main]').insertAdjacentHTML('beforeend',
          '<div style="overflow: hidden; width: 100px"><div style="width: 500px">cut</div></div>'
          + '<table><tr><td style="white-space: nowrap">' + 'wide '.repeat(200)
          + '</td></tr></table>'
          + '<div class="unmarked" style="overflow-x: auto; width: 100px">'
          + '<div style="width: 500px">scrolls</div></div>'
          + '<div class="highlight"><pre>' + 'code '.repeat(200) + '</pre></div>')"""
    )
    found = tab.evaluate(CLIPPED)
    assert any(line.startswith("cut: div") for line in found), found
    assert any(line.startswith("off the window: table") for line in found), found
    assert any(line.startswith("no cue: div.unmarked") for line in found), found
    # A code block that scrolls carries its shadows.
    assert not any(line.startswith("no cue: pre") for line in found), found


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


@at_width(390)
def test_every_sharding_pictures_text_is_at_least_9_px_on_a_phone(browser, site_url):
    small = [
        (page, picture["title"], picture["fontSize"])
        for page, read in survey(browser, site_url, 390).items()
        for picture in read.pictures
        if picture["fontSize"] < 9
    ]
    assert small == []


@at_width(DESKTOP)
def test_the_site_has_no_empty_sharding_picture(browser, site_url):
    unlabelled = [
        page
        for page, read in survey(browser, site_url, DESKTOP).items()
        for picture in read.pictures
        if not re.search(r"\b(CPU|GPU|TPU) \d", picture["text"])
    ]
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
            assert contrast(picture["color"], picture["background"]) >= 4.5, (theme, picture)
            for text, background in picture["tiles"]:
                assert contrast(text, background) >= 4.5, (theme, text, background)
            # The picture sits on the page's own background: no bright card in dark mode.
            assert rgb(picture["background"]) == rgb(page_background), (theme, picture)
    assert {"light", "dark"} <= set(seen), seen
    assert luminance(seen["dark"]) < luminance(seen["light"])


def test_input_cells_have_no_light_border_in_dark_mode(context, site_url):
    tab = context.new_page()
    tab.goto(site_url + "tutorial/sharded-computation.html")
    tab.evaluate("document.body.dataset.theme = 'dark'")
    border = tab.evaluate(
        "getComputedStyle(document.querySelector('div.cell_input')).borderTopColor"
    )
    background = tab.evaluate("getComputedStyle(document.body).backgroundColor")
    assert luminance(border) < 0.1, border
    assert contrast(border, background) < 2, (border, background)


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

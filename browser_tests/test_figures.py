"""The figures drawn from the pages' data (spmd_guide.figures): present, labelled, inside the
column at a phone's width, and legible in both themes."""

from __future__ import annotations

import pytest
from survey import DESKTOP, DRAWN, FIGURES, PAGES, at_width, contrast, luminance, survey

# The collectives drawn on the collectives page, by figure id.
COLLECTIVE_FIGURES = {
    "figure-psum",
    "figure-all-gather",
    "figure-psum-scatter",
    "figure-ppermute",
    "figure-all-to-all",
}


def test_the_collectives_page_draws_each_collective(context, site_url):
    tab = context.new_page()
    tab.goto(site_url + "patterns/collectives.html", wait_until="load")
    drawn = {figure["id"] for figure in tab.evaluate(FIGURES)["figures"]}
    assert drawn >= COLLECTIVE_FIGURES, sorted(COLLECTIVE_FIGURES - drawn)


@pytest.mark.parametrize("width", [pytest.param(w, marks=at_width(w)) for w in (390, DESKTOP)])
def test_every_figure_is_labelled_and_inside_the_column(browser, site_url, width):
    problems = []
    for page, read in survey(browser, site_url, width).items():
        found = read.figures
        if found["figures"] and found["repeated"]:
            problems.append((page, "repeated ids", found["repeated"][:5]))
        for figure in found["figures"]:
            if figure["role"] != "img" or len(figure["label"]) < 20:
                problems.append((page, figure["id"], "no role=img with alt text"))
            if not (figure["width"] > 50 and figure["height"] > 50):
                problems.append((page, figure["id"], "not drawn", figure["width"]))
            if not figure["inside"]:
                problems.append((page, figure["id"], f"reaches past the column at {width} px"))
    assert problems == []


@at_width(390)
def test_every_figures_text_is_legible_at_a_phones_width(browser, site_url):
    """At 390 px, the narrowest column the site is read in, no figure's text is under 9 px."""
    small = [
        (page, figure["id"], round(figure["smallestText"], 1))
        for page, read in survey(browser, site_url, 390).items()
        for figure in read.figures["figures"]
        if figure["smallestText"] < 9
    ]
    assert small == []


@at_width(DESKTOP)
def test_colour_is_never_all_that_tells_a_figures_marks_apart(browser, site_url):
    """Every coloured box carries a label, or a legend entry in its colour says what it is."""
    problems = []
    for page, read in survey(browser, site_url, DESKTOP).items():
        for figure in read.figures["figures"]:
            if figure["unexplained"]:
                problems.append(
                    (page, figure["id"], "unlabelled, no legend", figure["unexplained"][:3])
                )
            if figure["stray"]:
                problems.append(
                    (page, figure["id"], f"{figure['stray']} coloured shapes outside a box")
                )
    assert problems == []


@at_width(DESKTOP)
def test_boxes_that_differ_in_colour_alone_differ_in_pattern_too(browser, site_url):
    """Read from each figure's own boxes: two unlabelled boxes (or legend entries) of different
    colours never share a pattern, so matching a box to its legend never needs colour vision."""
    problems = []
    for page, read in survey(browser, site_url, DESKTOP).items():
        for figure in read.figures["figures"]:
            colours_of: dict[str, set[str]] = {}  # pattern: the colours drawn with it
            for colour, pattern in figure["patterned"]:
                colours_of.setdefault(pattern, set()).add(colour)
            # "pn", no pattern: a legend entry that carries its words inside it, or a box in
            # the muted ink that belongs to no device; text, not colour, tells those apart.
            shared = {p: sorted(c) for p, c in colours_of.items() if len(c) > 1 and p != "pn"}
            if shared:
                problems.append((page, figure["id"], shared))
    assert problems == []


@at_width(DESKTOP)
def test_every_page_of_the_guides_and_patterns_draws_a_figure(browser, site_url):
    assert len(DRAWN) >= 16 and set(DRAWN) <= set(PAGES)
    read = survey(browser, site_url, DESKTOP)
    assert [page for page in DRAWN if not read[page].figures["figures"]] == []


def _illegible(found, theme):
    problems = []
    for figure in found["figures"]:
        # No card of its own: the figure sits on the page's background.
        if figure["background"] not in ("rgba(0, 0, 0, 0)", found["page"]):
            problems.append((theme, figure["id"], "background", figure["background"]))
        if not (figure["text"] and figure["shapes"]):
            problems.append((theme, figure["id"], "no themed text or no coloured shapes"))
        # WCAG's minimums: 4.5:1 for text, 3:1 for the devices' colours.
        problems += [
            (theme, figure["id"], "text", ink)
            for ink in figure["text"]
            if contrast(ink, found["page"]) < 4.5
        ]
        problems += [
            (theme, figure["id"], "shape", ink)
            for ink in figure["shapes"]
            if contrast(ink, found["page"]) < 3
        ]
        # A label on a box reads against the box, not the page.
        problems += [
            (theme, figure["id"], "label", ink, behind)
            for ink, behind in figure["labels"]
            if contrast(ink, _hex_rgb(behind)) < 4.5
        ]
    return problems


def _hex_rgb(colour):
    return "rgb({}, {}, {})".format(*(int(colour[k : k + 2], 16) for k in (1, 3, 5)))


@at_width(DESKTOP)
@pytest.mark.parametrize("theme", ("light", "dark"))
def test_figures_are_legible_on_the_page_in_both_themes(browser, site_url, theme):
    read = survey(browser, site_url, DESKTOP)
    problems = [
        (page, *problem)
        for page in DRAWN
        for problem in _illegible(read[page].themed[theme], theme)
    ]
    assert problems == []


def test_figures_follow_a_system_dark_scheme(context, site_url):
    """A reader who never chose a theme gets furo's automatic one, which follows the system."""
    tab = context.new_page()
    tab.emulate_media(color_scheme="dark")
    tab.goto(site_url + "patterns/pipeline.html", wait_until="load")
    assert tab.evaluate("document.body.dataset.theme") == "auto"
    found = tab.evaluate(FIGURES)
    # The page is dark, and the figures' ink has the contrast on it that only light ink has.
    assert luminance(found["page"]) < 0.1, found["page"]
    assert found["figures"] and _illegible(found, "system dark") == []


def _palette() -> set[str]:
    """The site's palette as the browser writes colours, from the stylesheet the build made of
    spmd_guide.figures.DEVICE_COLOURS."""
    import re

    from conftest import SITE

    css = (SITE / "_static" / "palette.css").read_text()
    colours = re.findall(r"--spmd-device-\d+: #([0-9a-f]{6});", css)
    assert len(colours) == 8, css
    return {f"rgb({int(c[0:2], 16)}, {int(c[2:4], 16)}, {int(c[4:6], 16)})" for c in colours}


@at_width(DESKTOP)
def test_one_palette_paints_the_figures_the_sharding_pictures_the_planner_and_the_explorer(
    browser, site_url
):
    palette = _palette()
    outside = set()
    for page, read in survey(browser, site_url, DESKTOP).items():
        for figure in read.figures["figures"]:
            outside |= {(page, figure["id"], c) for c in figure["shapes"] if c not in palette}
        for picture in read.pictures:
            outside |= {(page, "picture", bg) for _, bg in picture["tiles"] if bg not in palette}
    assert outside == set()
    tab = browser.new_page()
    tab.goto(f"{site_url}guide/planner.html", wait_until="load")
    tab.wait_for_selector(".planner-bar")
    bars = tab.eval_on_selector_all(
        ".planner-bar", "bars => bars.map(b => getComputedStyle(b).backgroundColor)"
    )
    assert bars and set(bars) <= palette, bars
    tab.goto(f"{site_url}explorer.html", wait_until="load")
    tab.wait_for_selector(".explorer-block")
    blocks = tab.eval_on_selector_all(
        ".explorer-block", "blocks => blocks.map(b => getComputedStyle(b).fill)"
    )
    assert blocks and set(blocks) <= palette, blocks
    tab.close()

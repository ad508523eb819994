"""The figures drawn from the pages' data (spmd_guide.figures): present, labelled, inside the
column at a phone's width, and legible in both themes."""

from __future__ import annotations

import pytest
from conftest import content_pages
from test_layout_and_pictures import _contrast, _luminance, _rgb

PAGES = [page for page in content_pages() if page != "404.html"]
# Each page of these sections draws at least one figure from its own executed data.
DRAWN = [
    page for page in PAGES if page.startswith(("patterns/", "transformer-patterns/", "guide/"))
]
# The collectives drawn on the collectives page, by figure id.
COLLECTIVE_FIGURES = {
    "figure-psum",
    "figure-all-gather",
    "figure-psum-scatter",
    "figure-ppermute",
    "figure-all-to-all",
}

FIGURES = """
() => {
  const column = document.querySelector('article[role=main]').getBoundingClientRect();
  const ids = [...document.querySelectorAll('[id]')].map(e => e.id);
  const page = getComputedStyle(document.body).backgroundColor;
  return {
    page,
    repeated: ids.filter((id, i) => ids.indexOf(id) !== i),
    figures: [...document.querySelectorAll('figure.spmd-figure')].map(figure => {
      const svg = figure.querySelector('svg');
      const box = svg.getBoundingClientRect();
      const painted = [...svg.querySelectorAll('[style]')];
      const fills = (themed) => painted
        .filter(e => e.getAttribute('style').includes('var(--color-foreground') === themed)
        .map(e => getComputedStyle(e).fill)
        .filter(fill => fill && fill.startsWith('rgb'));
      return {
        id: figure.id,
        label: svg.getAttribute('aria-label') || '',
        role: svg.getAttribute('role'),
        width: box.width,
        height: box.height,
        inside: box.left >= column.left - 1 && box.right <= column.right + 1,
        text: fills(true),
        shapes: fills(false),
        background: getComputedStyle(figure).backgroundColor,
      };
    }),
  };
}
"""


def test_the_collectives_page_draws_each_collective(context, site_url):
    tab = context.new_page()
    tab.goto(site_url + "patterns/collectives.html", wait_until="load")
    drawn = {figure["id"] for figure in tab.evaluate(FIGURES)["figures"]}
    assert drawn >= COLLECTIVE_FIGURES, sorted(COLLECTIVE_FIGURES - drawn)


@pytest.mark.parametrize("width", (390, 1280))
def test_every_figure_is_labelled_and_inside_the_column(context, site_url, width):
    tab = context.new_page()
    tab.set_viewport_size({"width": width, "height": 900})
    problems = []
    for page in PAGES:
        tab.goto(site_url + page, wait_until="load")
        found = tab.evaluate(FIGURES)
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


def test_every_page_of_the_guides_and_patterns_draws_a_figure(context, site_url):
    assert len(DRAWN) >= 16
    tab = context.new_page()
    bare = []
    for page in DRAWN:
        tab.goto(site_url + page, wait_until="load")
        if not tab.evaluate(FIGURES)["figures"]:
            bare.append(page)
    assert bare == []


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
            if _contrast(ink, found["page"]) < 4.5
        ]
        problems += [
            (theme, figure["id"], "shape", ink)
            for ink in figure["shapes"]
            if _contrast(ink, found["page"]) < 3
        ]
    return problems


@pytest.mark.parametrize("theme", ("light", "dark"))
def test_figures_are_legible_on_the_page_in_both_themes(context, site_url, theme):
    tab = context.new_page()
    problems = []
    for page in DRAWN:
        tab.goto(site_url + page, wait_until="load")
        tab.evaluate(f"document.body.dataset.theme = '{theme}'")
        problems += [(page, *problem) for problem in _illegible(tab.evaluate(FIGURES), theme)]
    assert problems == []


def test_figures_follow_a_system_dark_scheme(context, site_url):
    """A reader who never chose a theme gets furo's automatic one, which follows the system."""
    tab = context.new_page()
    tab.emulate_media(color_scheme="dark")
    tab.goto(site_url + "patterns/pipeline.html", wait_until="load")
    assert tab.evaluate("document.body.dataset.theme") == "auto"
    found = tab.evaluate(FIGURES)
    # The page is dark, and the figures' ink has the contrast on it that only light ink has.
    assert _luminance(_rgb(found["page"])) < 0.1, found["page"]
    assert found["figures"] and _illegible(found, "system dark") == []

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
  const themed = e => e.getAttribute('style').includes('var(--color-');
  // A box's colour: its fill, or its stroke where it is hatched (filled with a pattern).
  const colour = path => {
    const style = getComputedStyle(path);
    return style.fill.startsWith('rgb') ? style.fill : style.stroke;
  };
  return {
    page,
    repeated: ids.filter((id, i) => ids.indexOf(id) !== i),
    figures: [...document.querySelectorAll('figure.spmd-figure')].map(figure => {
      const svg = figure.querySelector('svg');
      const box = svg.getBoundingClientRect();
      const painted = [...svg.querySelectorAll('[style]')].filter(e => !e.closest('pattern'));
      const inLabel = e => e.closest('g[id*="-label-"]');
      // Themed ink by its fill; a device's colour by its fill, or its stroke where hatched.
      const fills = (wanted) => painted
        .filter(e => !inLabel(e) && themed(e) === wanted)
        .map(e => wanted ? getComputedStyle(e).fill : colour(e))
        .filter(fill => fill && fill.startsWith('rgb'));
      const keys = new Set([...svg.querySelectorAll('g[id*="-key-"] > path')].map(colour));
      // Text: every glyph run is scaled from glyphs 100 units to the em.
      const sizes = [...svg.querySelectorAll('g[transform*="scale("]')].map(g => {
        const m = g.getScreenCTM();
        return 100 * Math.hypot(m.a, m.b);
      });
      return {
        id: figure.id,
        label: svg.getAttribute('aria-label') || '',
        role: svg.getAttribute('role'),
        width: box.width,
        height: box.height,
        inside: box.left >= column.left - 1 && box.right <= column.right + 1,
        text: fills(true),
        shapes: fills(false),
        smallestText: Math.min(...sizes),
        // Labels drawn on a box: their ink and the box's colour.
        labels: [...svg.querySelectorAll('g[id*="-label-"][id*="-on-"]')]
          .filter(g => !/-on-(page|themed)$/.test(g.id))
          .map(g => [
            getComputedStyle(g.querySelector('g[transform]')).fill, '#' + g.id.split('-on-')[1],
          ]),
        // Coloured boxes that carry no label and whose colour no legend entry shows.
        unexplained: [...svg.querySelectorAll('g[id*="-mark-"][id$="-plain"] > path')]
          .map(colour).filter(c => !keys.has(c)),
        // Coloured shapes outside any box, legend entry or label: a colour nothing explains.
        stray: painted.filter(e => !themed(e) && !inLabel(e)
          && !e.closest('g[id*="-mark-"], g[id*="-key-"]')
          && getComputedStyle(e).fill.startsWith('rgb')).length,
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


def test_every_figures_text_is_legible_at_a_phones_width(context, site_url):
    """At 390 px, the narrowest column the site is read in, no figure's text is under 9 px."""
    tab = context.new_page()
    tab.set_viewport_size({"width": 390, "height": 900})
    small = []
    for page in PAGES:
        tab.goto(site_url + page, wait_until="load")
        small += [
            (page, figure["id"], round(figure["smallestText"], 1))
            for figure in tab.evaluate(FIGURES)["figures"]
            if figure["smallestText"] < 9
        ]
    assert small == []


def test_colour_is_never_all_that_tells_a_figures_marks_apart(context, site_url):
    """Every coloured box carries a label, or a legend entry in its colour says what it is."""
    tab = context.new_page()
    problems = []
    for page in PAGES:
        tab.goto(site_url + page, wait_until="load")
        for figure in tab.evaluate(FIGURES)["figures"]:
            if figure["unexplained"]:
                problems.append(
                    (page, figure["id"], "unlabelled, no legend", figure["unexplained"][:3])
                )
            if figure["stray"]:
                problems.append(
                    (page, figure["id"], f"{figure['stray']} coloured shapes outside a box")
                )
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
        # A label on a box reads against the box, not the page.
        problems += [
            (theme, figure["id"], "label", ink, behind)
            for ink, behind in figure["labels"]
            if _contrast(ink, _hex_rgb(behind)) < 4.5
        ]
    return problems


def _hex_rgb(colour):
    return "rgb({}, {}, {})".format(*(int(colour[k : k + 2], 16) for k in (1, 3, 5)))


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

"""Every page of the built site read once per window width, for the tests that check all pages.

Loading a page is most of what a browser test costs. The tests that hold for every page (no
sideways scrolling, figures labelled, legible and inside the column, sharding pictures filled in,
no error while loading) read what one pass over the site at their width recorded
(:func:`survey`), instead of each loading every page again. Tests that use one width's survey are
grouped (:func:`at_width`) so that pytest-xdist runs them on one worker, which then reads the
site at that width once.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass, field

import pytest
from conftest import content_pages, new_context

PAGES = [page for page in content_pages() if page != "404.html"]
# Each page of these sections draws at least one figure from its own executed data.
DRAWN = [
    page for page in PAGES if page.startswith(("patterns/", "transformer-patterns/", "guide/"))
]
WIDTHS = (390, 1024, 1280)
"""A phone, a small laptop and a desktop window."""
DESKTOP = 1280
"""The width at which pages are also checked for errors while loading, and read in the light and
the dark theme."""

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
      fontSize: parseFloat(style.fontSize),
    };
  });
}
"""

FIGURES = r"""
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
        // Each unlabelled box's and legend entry's colour and pattern (figures.PATTERNS).
        patterned: [...svg.querySelectorAll('g[id*="-mark-"][id$="-plain"], g[id*="-key-"]')]
          .map(g => [
            colour(g.querySelector('path')),
            g.id.match(/-(?:mark|key)-\d+-(\w+?)(?:-plain)?$/)[1],
          ]),
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

FIRST_OUTPUT = "document.querySelector('div.cell .cell_output')?.innerText ?? ''"
# With every fold of the article open: each box whose overflow is hidden and whose content is wider
# than it (cut), each box that reaches past the window's right edge with no scrolling frame
# between it and the article (off the window), and each frame that scrolls sideways with no
# shadow at its edges to say so (no cue; phones hide scrollbars). A wide table or output that
# scrolls in its own frame, with its shadows, is none of these.
CLIPPED = """
() => {
  const article = document.querySelector('article[role=main]');
  article.querySelectorAll('details').forEach(d => { d.open = true; });
  const scrollsInside = e => {
    for (let a = e.parentElement; a && a !== article; a = a.parentElement) {
      const s = getComputedStyle(a).overflowX;
      if (s === 'auto' || s === 'scroll') return true;
    }
    return false;
  };
  const found = [];
  for (const e of article.querySelectorAll('*')) {
    const style = getComputedStyle(e);
    const name = e.tagName.toLowerCase() + [...e.classList].map(c => '.' + c).join('');
    if ((style.overflowX === 'hidden' || style.overflowX === 'clip')
        && e.scrollWidth > e.clientWidth + 1) {
      found.push(`cut: ${name}, ${e.scrollWidth} px of content in ${e.clientWidth}`);
      continue;
    }
    if ((style.overflowX === 'auto' || style.overflowX === 'scroll')
        && e.scrollWidth > e.clientWidth + 1 && !style.backgroundImage.includes('gradient')) {
      found.push(`no cue: ${name} scrolls ${e.scrollWidth} px in ${e.clientWidth} unmarked`);
    }
    const box = e.getBoundingClientRect();
    if (box.width > 0 && box.right > window.innerWidth + 1 && !scrollsInside(e)) {
      found.push(`off the window: ${name}, right edge at ${Math.round(box.right)} px`);
    }
  }
  return found;
}
"""
OVERFLOW = "document.documentElement.scrollWidth - document.documentElement.clientWidth"


@dataclass
class PageAsRead:
    """What one page showed at one width."""

    overflow: int
    """How many px the page is wider than the window (0 or less: no sideways scrolling)."""
    figures: dict
    """:data:`FIGURES` in the theme a reader who never chose one gets."""
    pictures: list
    """:data:`PICTURES`."""
    first_output: str
    """The text of the page's first cell output."""
    errors: list[str] = field(default_factory=list)
    """Console errors and uncaught exceptions while the page loaded."""
    missing: list[str] = field(default_factory=list)
    """Requests to the site that failed, with their status."""
    outside: list[str] = field(default_factory=list)
    """Requests off this machine (refused): the site must not need the network."""
    status_ok: bool = True
    """Whether the page itself was served."""
    clipped: list[str] = field(default_factory=list)
    """:data:`CLIPPED`, read last, since it opens the page's folds."""
    themed: dict[str, dict] = field(default_factory=dict)
    """:data:`FIGURES` with the theme set to light and to dark (pages of :data:`DRAWN`, at
    :data:`DESKTOP` only)."""


def at_width(width: int) -> pytest.MarkDecorator:
    """Mark a test that reads :func:`survey` at ``width``: pytest-xdist (``--dist loadgroup``)
    runs all such tests of one width on one worker, which reads the site at that width once."""
    return pytest.mark.xdist_group(f"survey-{width}")


@functools.cache
def survey(browser, site_url: str, width: int) -> dict[str, PageAsRead]:
    """Every page of :data:`PAGES` loaded once in a ``width`` px window, and what it showed."""
    context = new_context(browser, site_url, width)
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
    read = {}
    for page in PAGES:
        errors.clear()
        missing.clear()
        context.outside_requests.clear()
        response = tab.goto(site_url + page, wait_until="load")
        if width == DESKTOP:
            tab.wait_for_timeout(150)  # an error a script raises just after the load event
        found = PageAsRead(
            overflow=tab.evaluate(OVERFLOW),
            figures=tab.evaluate(FIGURES),
            pictures=tab.evaluate(PICTURES),
            first_output=tab.evaluate(FIRST_OUTPUT),
            errors=list(errors),
            missing=list(missing),
            outside=list(context.outside_requests),
            status_ok=response is not None and response.ok,
        )
        if width == DESKTOP and page in DRAWN:
            for theme in ("light", "dark"):
                tab.evaluate(f"document.body.dataset.theme = '{theme}'")
                found.themed[theme] = tab.evaluate(FIGURES)
        found.clipped = tab.evaluate(CLIPPED)
        read[page] = found
    context.close()
    return read


def _luminance(rgb: tuple[float, ...]) -> float:
    def channel(c: float) -> float:
        c /= 255
        return c / 12.92 if c <= 0.04045 else ((c + 0.055) / 1.055) ** 2.4

    r, g, b = (channel(c) for c in rgb[:3])
    return 0.2126 * r + 0.7152 * g + 0.0722 * b


def contrast(a: str, b: str) -> float:
    """WCAG's contrast ratio of two CSS colours."""
    la, lb = sorted((_luminance(rgb(a)), _luminance(rgb(b))), reverse=True)
    return (la + 0.05) / (lb + 0.05)


def luminance(css: str) -> float:
    """WCAG's relative luminance of a CSS colour."""
    return _luminance(rgb(css))


def rgb(css: str) -> tuple[float, ...]:
    """A CSS rgb()/rgba() colour's red, green and blue."""
    return tuple(float(v) for v in re.findall(r"[\d.]+", css)[:3])

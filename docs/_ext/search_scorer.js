// Sphinx's search scorer for this site (conf.py: html_search_scorer), inlined into
// language_data.js. The weights are Sphinx's own. Sphinx scores every page that merely
// mentions a word alike, so `score` breaks such ties the way a reader would:
// - the reference pages (API, execution statistics, indices) come after every other page;
// - a practice problem comes after a page that teaches the same word;
// - otherwise the page that comes first in the site's reading order (the sidebar's order)
//   comes first, since that is where the word is introduced.
// Each adjustment stays below the gap between Sphinx's own match kinds (title 15, text 5),
// except the reference pages', so a title match still beats a mention.
var Scorer = {
  score: (result) => {
    const [docname, , , , score] = result;
    if (["api", "execution-statistics", "genindex", "py-modindex"].includes(docname)) {
      return score - 100;
    }
    if (Scorer.readingOrder === undefined) {
      Scorer.readingOrder = new Map();
      document.querySelectorAll(".sidebar-tree a.reference.internal").forEach((link, i) => {
        const href = link.getAttribute("href").split("#")[0];
        Scorer.readingOrder.set(href.replace(/\.html$/, ""), i);
      });
    }
    const order = Scorer.readingOrder.get(docname) ?? 99;
    const practice = docname.startsWith("problems/") ? 2 : 0;
    return score - practice - order / 100;
  },
  objNameMatch: 11,
  objPartialMatch: 6,
  objPrio: { 0: 15, 1: 5, 2: -5 },
  objPrioDefault: 0,
  title: 15,
  partialTitle: 7,
  term: 5,
  partialTerm: 2,
};

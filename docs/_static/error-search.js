// The search page's first result for a pasted error message: the section that raises it.
// ERROR_MESSAGES (error-messages.js, written by docs/_ext/error_search.py) lists each error a
// page raises on purpose, with its section. A query is compared with each message word by word:
// the Jaccard similarity of their sets of words, leaving out numbers (a reader's shapes and
// device ids differ from the page's) and the stopwords of Sphinx's language_data.js. The closest
// message's section is listed first when they share at least 40% of their words, or when the
// query, of 3 or more such words, is part of the message. Ties keep ERROR_MESSAGES' order.
"use strict";

const ErrorSearch = {
  words: (text) =>
    new Set(
      text
        .toLowerCase()
        .replace(/[’‘]/g, "'")
        .split(/[^a-z0-9_']+/)
        .map((word) => word.replace(/^'+|'+$/g, ""))
        .filter((word) => word.length > 1 && !/^\d+$/.test(word) && !stopwords.has(word)),
    ),

  // Lower case, one kind of apostrophe, no backticks, single spaces.
  plain: (text) =>
    text.toLowerCase().replace(/[’‘]/g, "'").replace(/`/g, "").replace(/\s+/g, " ").trim(),

  closest: (query) => {
    const asked = ErrorSearch.words(query);
    if (asked.size === 0) return null;
    const phrase = ErrorSearch.plain(query);
    let best = null;
    for (const record of ERROR_MESSAGES) {
      const known = ErrorSearch.words(record.message);
      const shared = [...asked].filter((word) => known.has(word)).length;
      const similarity = shared / (asked.size + known.size - shared);
      const quoted = asked.size >= 3 && ErrorSearch.plain(record.message).includes(phrase);
      if ((similarity >= 0.4 || quoted) && (best === null || similarity > best.similarity)) {
        best = { record, similarity };
      }
    }
    return best && best.record;
  },
};

if (typeof Search !== "undefined" && typeof ERROR_MESSAGES !== "undefined") {
  const sphinxSearch = Search._performSearch;
  Search._performSearch = (query, ...rest) => {
    const results = sphinxSearch(query, ...rest);
    const found = ErrorSearch.closest(query);
    const index = found && Search._index.docnames.indexOf(found.page);
    if (found === null || index < 0) return results;
    const anchor = `#${found.anchor}`;
    const others = results.filter((r) => !(r[0] === found.page && r[2] === anchor));
    const pageTitle = Search._index.titles[index];
    const title = pageTitle === found.title ? pageTitle : `${pageTitle} > ${found.title}`;
    // Sphinx shows the last result first.
    return [
      ...others,
      [found.page, title, anchor, null, Infinity, Search._index.filenames[index], "title"],
    ];
  };
}

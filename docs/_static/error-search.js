// The search page's first result for a pasted error: the section that answers it.
// ERROR_MESSAGES (error-messages.js, written by docs/_ext/error_search.py) lists each error the
// pages raise or quote, with its section.
//
// A pasted error carries the reader's own names, shapes, numbers, paths and log prefixes, and
// often a whole traceback. So both the query and each message are reduced to their fixed words:
// from the last "SomethingError:" on (the line a traceback ends with), without quoted names,
// shapes, paths, numbers and stopwords. A message matches by how much of its fixed words, each
// weighted by how rare it is among the messages, the query holds; words the query adds (its own
// frames and names) cost nothing. The best section is listed first when the query holds at
// least 60% of a message's weight, in at least 3 of its words (all, if it has fewer), or when
// the message holds nearly all of a query of 6 or more fixed words (an older or cut version of
// it); otherwise Sphinx's results stand.
"use strict";

const ErrorSearch = {
  // Words too common to tell messages apart; the same list wherever this runs (the search page,
  // and V8 in the tests), so that a match does not depend on the Sphinx version's own list.
  stopwords: new Set(
    ["a", "and", "are", "as", "at", "be", "but", "by", "for", "if", "in", "into", "is", "it",
      "near", "no", "not", "of", "on", "or", "such", "that", "the", "their", "then", "there",
      "these", "they", "this", "to", "was", "will", "with"]),
  // Words an error message uses whatever it is about.
  filler: new Set(["which", "its", "got", "please", "been", "occurs", "source"]),

  // The part of a paste that names the error: from the last "SomethingError:" (or
  // "SomethingException:", "SomethingWarning:") on, where there is one.
  tail: (text) => {
    const marks = [...text.matchAll(/\b[A-Za-z_][\w.]*(Error|Exception|Warning)\b:/g)];
    return marks.length ? text.slice(marks.at(-1).index) : text;
  },

  // The fixed words of an error: no quoted names, shapes, sharding dumps, paths, numbers,
  // stopwords or exception class names (ValueError tells little).
  words: (text) => ErrorSearch.split(ErrorSearch.fixed(text)),

  // The quoted names of an error ('pvary' in "has no attribute 'pvary'"): where a message has
  // few fixed words, they are what tells it apart.
  names: (text) => ErrorSearch.split(
    [...ErrorSearch.tail(text).replace(/[’‘]/g, "'").matchAll(ErrorSearch.QUOTED)].map((m) => m[2]).join(" ")),

  // Lower case, one kind of apostrophe, no backticks, single spaces.
  plain: (text) =>
    text.toLowerCase().replace(/[’‘]/g, "'").replace(/`/g, "").replace(/\s+/g, " ").trim(),

  // A quote opens after no letter (so "can't" opens none).
  QUOTED: /(^|[^\w])'([^'\n]{0,200})'(?!\w)|(^|[^\w])"([^"\n]{0,200})"(?!\w)/g,

  LAYOUT: /\b(NamedSharding|AbstractMesh|Mesh|PartitionSpec|P|ShapedArray|SingleDeviceSharding)\((?:[^()]|\([^()]*\))*\)/g,

  fixed: (text) =>
    ErrorSearch.tail(text)
      .replace(/[’‘]/g, "'")
      .replace(/`/g, " ")
      .replace(ErrorSearch.QUOTED, "$1$3 ")
      .replace(/\b\w+\[[^\]]*\](\{[^}]*\})?/g, " ")  // shapes: float32[8@x]{V:x}
      // Layouts written out: NamedSharding(mesh=Mesh(...), spec=P(...)), innermost first.
      .replace(ErrorSearch.LAYOUT, " ").replace(ErrorSearch.LAYOUT, " ").replace(ErrorSearch.LAYOUT, " ")
      .replace(/\{[^{}]*\}/g, " ")  // sharding dumps: {devices=[4,1]<=[4]}
      .replace(/(\S*\/\S*|\S+\.(py|cc|h|so)\b\S*)/g, " "),  // paths and source files

  split: (text) => new Set(
    text
      .toLowerCase()
      .split(/[^a-z0-9_]+/)
      .filter((word) => word.length > 1 && !/\d/.test(word) && !ErrorSearch.stopwords.has(word) &&
        !ErrorSearch.filler.has(word) &&
        !/^\w*(error|exception|warning)$/.test(word)),
  ),

  // Each message's words: its fixed words, and its quoted names too where it has fewer than 4
  // fixed words (a query must then hold every name, as it must every API name the message
  // writes); and each word's weight, the log of how rare it is among the messages.
  index: (records) => {
    const entries = records.map((record) => {
      const words = ErrorSearch.words(record.message);
      const names = words.size < 4 ? ErrorSearch.names(record.message) : new Set();
      for (const name of names) words.add(name);
      // An API's name written in a message (PositionalSharding, StreamExecutor, shard_map()) is
      // what the message is about: a query that holds less than most of the message must hold it.
      const apis = new Set();
      const written = ErrorSearch.fixed(record.message);
      for (const name of written.match(/\b[A-Za-z]+[a-z][A-Z]\w*/g) || []) {
        if (!/(Error|Exception|Warning)$/.test(name)) apis.add(name.toLowerCase());
      }
      // A function named by its call, as Python's "f() got an unexpected keyword argument".
      for (const [, name] of written.matchAll(/\b([A-Za-z_]\w*)\(\)/g)) apis.add(name.toLowerCase());
      return { record, words, names, apis };
    });
    const counts = new Map();
    for (const { words } of entries) for (const word of words) counts.set(word, (counts.get(word) || 0) + 1);
    const weight = (word) => Math.log(1 + entries.length / counts.get(word));
    return { entries, weight };
  },

  closest: (query, records = ERROR_MESSAGES) => {
    const fixed = ErrorSearch.words(query);
    const phrase = ErrorSearch.plain(query);
    const asked = new Set([...fixed, ...ErrorSearch.names(query)]);
    if (asked.size === 0) return null;
    if (ErrorSearch._indexed !== records) {
      ErrorSearch._index = ErrorSearch.index(records);
      ErrorSearch._indexed = records;
    }
    const { entries, weight } = ErrorSearch._index;
    const found = [];
    for (const { record, words, names, apis } of entries) {
      if (words.size === 0 || [...names].some((name) => !asked.has(name))) continue;
      let held = 0, total = 0, shared = 0;
      for (const word of words) {
        total += weight(word);
        if (asked.has(word)) { held += weight(word); shared += 1; }
      }
      // Most of the message is in the query; or the query, of 6 or more fixed words, is almost
      // all in the message (an older or cut version of it); or the query, of 3 or more, is a
      // phrase of the message as written (its distinctive words, typed).
      const inQuery = held / total;
      const inMessage = [...fixed].filter((word) => words.has(word)).length / fixed.size;
      const quoted = fixed.size >= 3 && ErrorSearch.plain(record.message).includes(phrase);
      if (!quoted && inQuery < 0.85 && [...apis].some((name) => !asked.has(name))) continue;
      const matches = (inQuery >= 0.6 && shared >= Math.min(3, words.size)) ||
        (inMessage >= 0.9 && fixed.size >= 6) || quoted;
      if (matches) found.push({ record, coverage: quoted ? 1 : Math.max(inQuery, inMessage), held });
    }
    if (found.length === 0) return null;
    // Of the messages whose share is within 0.2 of the best: those on the pages written for
    // errors first (troubleshooting), then the one with the most weight held (the longer
    // match); of those, the first in ERROR_MESSAGES' order.
    const top = Math.max(...found.map((f) => f.coverage));
    const near = found.filter((f) => f.coverage >= top - 0.2);
    const better = (f, best) =>
      Boolean(f.record.first) !== Boolean(best.record.first) ? Boolean(f.record.first) : f.held > best.held + 1e-9;
    return near.reduce((best, f) => (better(f, best) ? f : best)).record;
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

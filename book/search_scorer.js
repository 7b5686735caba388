// The site's search ranking and summaries (issue 36), on top of Sphinx's searchtools.js:
// Sphinx includes this file in language_data.js (html_search_scorer in _config.yml), which
// runs after searchtools.js, so `Scorer` and `Search` exist here.
//
// Ranking: Sphinx gives every page with a query word in any of its titles the same score
// and breaks ties alphabetically, so a search for "KV cache" listed eight pages with a
// "KV cache" section before the chapter called "The KV cache". A page whose own title holds
// the whole query now comes first (the closer its title is to the query, the higher), then
// a page with a section so titled, then the rest as Sphinx ranks them.
//
// Summaries: Sphinx quotes the page's main element from the first place a query word
// appears, which on this theme is the page's title and its "Contents" list ("The KV cache
// Contents …"), or a code cell. A summary now quotes the article's prose: its headings,
// in-page contents, print-only copies and code cells are left out.
"use strict";
(() => {
  const normal = (text) => text.toLowerCase().replace(/\s+/g, " ").trim();
  let query = "";
  const ask = Search.query;
  Search.query = (text) => {
    query = normal(text);
    return ask(text);
  };

  const score = Scorer.score;
  Scorer.score = (result) => {
    const [docname, title, anchor] = result;
    let points = score ? score(result) : result[4];
    if (!query) return points;
    const index = Search._index;
    const page = normal(index.titles[index.docnames.indexOf(docname)] || "");
    if (page.includes(query) && !anchor) {
      points += 30 + Math.round((10 * query.length) / page.length);
    } else if (normal(title).includes(query)) {
      points += 5;
    }
    return points;
  };

  const LEFT_OUT = [
    ".headerlink", "script", "style", "h1", ".onlyprint", ".bd-toc", "#jb-print-docs-body",
    ".cell_input", "div.highlight", ".prev-next-area", ".bd-header-article", "footer",
  ];
  Search.htmlToText = (html, anchor) => {
    const page = new DOMParser().parseFromString(html, "text/html");
    const main = page.querySelector('[role="main"]');
    if (!main) return "";
    const part = (anchor && main.querySelector(anchor)) || main.querySelector("article") || main;
    for (const selector of LEFT_OUT) part.querySelectorAll(selector).forEach((el) => el.remove());
    // runs of blank lines (removed elements, indentation) become one space
    return part.textContent.replace(/\s+/g, " ").trim();
  };
})();

// Run by tests/test_browser.py in each page once it has loaded (execute_async_script).
const done = arguments[arguments.length - 1];
const waitS = arguments[0];
const sleep = ms => new Promise(resolve => setTimeout(resolve, ms));
const views = [...document.querySelectorAll('script[type="application/vnd.jupyter.widget-view+json"]')];
const hasState = !!document.querySelector('script[type="application/vnd.jupyter.widget-state+json"]');
const drawn = view => {   // the manager puts a .widget-subarea with the view before the script
  const area = view.previousElementSibling;
  const widget = area && area.classList.contains("widget-subarea") && area.querySelector(".jupyter-widgets, .llmmath-explorer");
  const hidden = !view.parentElement.checkVisibility();   // e.g. in a closed dropdown: no size
  return !!widget && (hidden || (widget.offsetWidth > 0 && widget.offsetHeight > 0));
};
(async () => {
  const start = Date.now();
  const timedOut = () => Date.now() - start > waitS * 1000;
  // MathJax is a deferred script: by the load event it has run (or failed to load).
  if (window.MathJax && MathJax.startup && MathJax.startup.promise) await MathJax.startup.promise;
  while (hasState && views.some(view => !drawn(view)) && !timedOut()) await sleep(100);
  if (window.MathJax && MathJax.startup && MathJax.startup.promise) await MathJax.startup.promise;
  await document.fonts.ready;
  document.querySelectorAll('img[loading="lazy"]').forEach(img => { img.loading = "eager"; });
  await Promise.all([...document.images].map(img => img.complete ? null :
    new Promise(resolve => { img.addEventListener("load", resolve); img.addEventListener("error", resolve); })));
  await sleep(200);   // let late requests (fonts of typeset math) reach the log
  const article = document.querySelector("article") || document.body;
  const prose = article.cloneNode(true);
  prose.querySelectorAll("pre, code, script, style, textarea, .highlight, mjx-container").forEach(e => e.remove());
  const maths = [...document.querySelectorAll(".math")];
  return {
    timedOut: timedOut(),
    mathElements: maths.length,
    mjxContainers: document.querySelectorAll("mjx-container").length,
    untypeset: maths.filter(m => !m.querySelector("mjx-container")).map(m => m.textContent.trim().slice(0, 80)),
    mathErrors: [...document.querySelectorAll("mjx-merror, [data-mjx-error]")].map(e => (e.getAttribute("data-mjx-error") || e.textContent).slice(0, 120)),
    rawDelimiters: ["$$", "\\(", "\\)", "\\[", "\\]", "\\begin{"].filter(d => prose.textContent.includes(d)),
    errorOutputs: [...document.querySelectorAll(".output.traceback, .output.stderr, .output.error")].map(e => e.textContent.trim().slice(0, 200)),
    brokenImages: [...document.images].filter(img => !(img.complete && img.naturalWidth > 0)).map(img => img.currentSrc || img.src),
    widgetState: hasState,
    widgetViews: views.length,
    undrawnWidgets: views.filter(view => !drawn(view)).map(view => view.textContent.slice(0, 80)),
    widgetErrors: document.querySelectorAll(".jupyter-widgets-error-widget, img.jupyter-widget").length,
    widgetControls: document.querySelectorAll(".widget-subarea .widget-inline-hbox, .widget-subarea .widget-html, .widget-subarea .widget-box, .widget-subarea .llmmath-control").length,
  };
})().then(done, error => done({scriptError: String(error)}));

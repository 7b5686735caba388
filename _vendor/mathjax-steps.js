// The book's own (issue 36): MathJax typesets a page's math a few formulas at a time,
// yielding to the browser between steps, so that no step blocks the page for long (one
// typesetting of a whole chapter took 200-480 ms). Loaded after the page's MathJax
// configuration and before MathJax itself (a deferred script); pages without math have no
// configuration and nothing is done. tests/inspect_page.js waits for MathJax.startup.promise,
// which this pageReady resolves once every step is done.
(function () {
  "use strict";
  if (!window.MathJax) return;
  const STEP_MS = 30; // aim for each step to take about this long
  const startup = (window.MathJax.startup = window.MathJax.startup || {});
  startup.typeset = false;
  startup.pageReady = function () {
    return MathJax.startup.defaultPageReady().then(async function () {
      const MATH = ".math, .tex2jax_process, .mathjax_process, .output_area";
      const roots = [...document.querySelectorAll(MATH)].filter(
        (el) => !(el.parentElement && el.parentElement.closest(MATH))
      );
      let size = 4;
      for (let i = 0; i < roots.length; ) {
        const started = performance.now();
        await MathJax.typesetPromise(roots.slice(i, i + size));
        i += size;
        const took = performance.now() - started;
        performance.measure("llmmath-mathjax-step", { start: started }); // for the tests
        if (took < STEP_MS / 2) size *= 2;
        else if (took > STEP_MS && size > 1) size = Math.max(1, Math.floor(size / 2));
        await new Promise((resolve) => setTimeout(resolve, 0));
      }
    });
  };
})();

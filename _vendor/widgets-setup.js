// Not vendored: the book's own glue, loaded between requirejs/require.js and html-manager/embed-amd.js
// on pages with widget state (nb_ipywidgets_js in _config.yml).
(function () {
  // embed-amd.js finds the icon fonts it bundles (html-manager/*.woff2) from its require.js module
  // path, which is page-relative by default: map that path to the html-manager/ folder beside this file.
  // anywidget's front end (the explorers' model and view) is an AMD module vendored in
  // anywidget/: the widget manager asks require.js for "anywidget" before it would try a CDN.
  var here = document.currentScript.src.replace(/[^\/]*$/, "");
  // The manager's two bundles (embed-amd.js and the AMD module inside it) each compile the
  // widget-state schema of @jupyter-widgets/schema (v2) with Ajv 8 in its default strict
  // mode, as soon as they load and before any page's state is read. That schema's own
  // `"type": ["integer", "string"]` (a buffer's path) makes Ajv log the warning below,
  // twice, on every page with widgets, whatever its state; the bundles pass Ajv no options
  // that a page could set. Drop exactly that one message, and nothing else.
  var AJV_UNION_WARNING = "strict mode: use allowUnionTypes to allow union type keyword at " +
    '"#/properties/state/additionalProperties/properties/buffers/items/properties/path/items"' +
    " (strictTypes)";
  var warn = console.warn;
  console.warn = function (message) {
    if (arguments.length === 1 && message === AJV_UNION_WARNING) return;
    return warn.apply(console, arguments);
  };
  // The manager's bundles name their icon fonts relative to a public path: the outer one
  // reads this global, the inner AMD module takes the folder of its require.js URL
  // (module.uri), which the "@jupyter-widgets/html-manager" path below sets; unmapped, it
  // resolved against the page (book/@jupyter-widgets/*.woff2, a 404).
  window.__jupyter_widgets_assets_path__ = here + "html-manager/";
  require.config({
    paths: {
      "@jupyter-widgets/html-manager/dist": here + "html-manager",
      "@jupyter-widgets/html-manager": here + "html-manager/embed-amd",
      "anywidget": here + "anywidget/index"
    }
  });
  // The widgets typeset their labels through MathJax 2's MathJax.Hub.Queue whenever window.MathJax
  // exists (jupyter-widgets/ipywidgets#3829); the book loads MathJax 3, so forward to its API.
  // MathJax is a deferred script: it has run by DOMContentLoaded, before the widgets render (load).
  document.addEventListener("DOMContentLoaded", function () {
    var mathjax = window.MathJax;
    if (mathjax && mathjax.startup && !mathjax.Hub) {
      mathjax.Hub = {
        Queue: function (command) {
          mathjax.startup.promise.then(function () { return mathjax.typesetPromise([command[2]]); });
        }
      };
    }
  });
  // The manager's three bundles in embed-amd.js (@jupyter-widgets/base, controls and
  // html-manager) start when it asks require.js for html-manager on the page's load event, and
  // require.js then runs all three in one task: the longest of a chapter's load (issue 36:
  // about 100 ms in a reader's browser on a quiet machine, 250-400 ms with DevTools open).
  // Asked for one at a time as soon as embed-amd.js has run, require.js starts each in a task
  // of its own (each request is answered in a setTimeout), and the manager finds them started.
  // Only after the load event of its script element: a file whose digest did not match fires
  // an error event and never runs, and then require.js would fetch these modules itself,
  // unchecked.
  document.addEventListener("load", function started(event) {
    if (!/\/html-manager\/embed-amd\.js(\?|$)/.test(event.target.src || "")) return;
    document.removeEventListener("load", started, true);
    ["@jupyter-widgets/base", "@jupyter-widgets/controls", "@jupyter-widgets/html-manager"]
      .forEach(function (name) { require([name]); });
  }, true);
})();

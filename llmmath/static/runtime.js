// llmmath in the reader's browser: the runtime of the published site's explorers.
//
// llmmath.runtime writes this file into _static/runtime/ at build time, with the manifest of
// what it loads (names, sizes, SHA-384 digests) in place of __MANIFEST__. It defines
// globalThis.llmmathRuntime, which the explorers' front end (llmmath/static/explorer.js) uses
// on the site. Nothing is downloaded until a reader changes a control: then Pyodide and the
// llmmath wheel are fetched from this site, checked against their digests, started, and
// `llmmath.explorers.explore_json` answers every later change in the page.
(function () {
  "use strict";
  const MANIFEST = __MANIFEST__;
  const runtimeDir = new URL(".", document.currentScript.src);
  const staticDir = new URL("..", runtimeDir);
  const megabytes = (n) => `${Math.round(n / 1e6)} MB`;
  const listeners = new Set();
  let loading = null;

  function tell(text) {
    for (const listener of listeners) listener(text);
  }

  async function digest(bytes) {
    const hash = new Uint8Array(await crypto.subtle.digest("SHA-384", bytes));
    let text = "";
    for (const b of hash) text += String.fromCharCode(b);
    return "sha384-" + btoa(text);
  }

  async function fetchChecked(file, onBytes) {
    const url = new URL(file.path, staticDir);
    const response = await fetch(url);
    if (!response.ok) throw new Error(`${url.pathname}: HTTP ${response.status}`);
    const reader = response.body.getReader();
    const chunks = [];
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      chunks.push(value);
      onBytes(value.length);
    }
    const bytes = new Uint8Array(await new Blob(chunks).arrayBuffer());
    if ((await digest(bytes)) !== file.sha384) {
      throw new Error(`${url.pathname} does not match its SHA-384 digest`);
    }
    return bytes;
  }

  async function start() {
    const started = performance.now();
    let received = 0;
    const bytes = {};
    await Promise.all(
      Object.entries(MANIFEST.files).map(async ([name, file]) => {
        bytes[name] = await fetchChecked(file, (n) => {
          received += n;
          const percent = Math.floor((85 * received) / MANIFEST.bytes);
          tell(`loading Python in your browser… ${percent} %`);
        });
      }),
    );
    tell("starting Python in your browser… 90 %");
    const blobUrl = (name, type) => URL.createObjectURL(new Blob([bytes[name]], { type }));
    const { loadPyodide } = await import(blobUrl("pyodide.mjs", "text/javascript"));
    const asm = await import(blobUrl("pyodide.asm.mjs", "text/javascript"));
    const indexURL = new URL("pyodide/", staticDir).href;
    const wasmUrl = indexURL + "pyodide.asm.wasm";
    const siteFetch = globalThis.fetch;
    // Pyodide fetches its WebAssembly itself: hand it the bytes already checked.
    globalThis.fetch = (input, init) =>
      String(input instanceof Request ? input.url : input) === wasmUrl
        ? Promise.resolve(new Response(bytes["pyodide.asm.wasm"], {
          headers: { "Content-Type": "application/wasm" },
        }))
        : siteFetch(input, init);
    let pyodide;
    try {
      pyodide = await loadPyodide({
        indexURL,
        createPyodideModule: asm.default,
        lockFileContents: JSON.parse(new TextDecoder().decode(bytes["pyodide-lock.json"])),
        stdLibURL: blobUrl("python_stdlib.zip", "application/zip"),
        stdout: () => {},
        stderr: (line) => console.warn(line),
      });
    } finally {
      globalThis.fetch = siteFetch;
    }
    tell("importing llmmath… 95 %");
    pyodide.unpackArchive(bytes.wheel, "wheel");
    const explorers = pyodide.pyimport("llmmath.explorers");
    runtime.coldStartMs = performance.now() - started;
    return (kind, stateJson) => explorers.explore_json(kind, stateJson);
  }

  // The calculator keeps its inputs in the page's URL, so that an answer can be shared.
  const SHARED = "calculator";

  const runtime = {
    manifest: MANIFEST,
    coldStartMs: null,
    idleText:
      "Live in your browser: changing a control runs llmmath here, on Python compiled " +
      `to WebAssembly (Pyodide, loaded once on first use: ${megabytes(MANIFEST.bytes)}).`,
    liveText: "Live: computed in your browser by llmmath on Pyodide.",
    load(onText) {
      if (onText) listeners.add(onText);
      if (!loading) {
        loading = start().catch((error) => {
          loading = null;
          throw error;
        });
      }
      return loading;
    },
    remember(kind, state) {
      if (kind !== SHARED) return;
      const url = new URL(location.href);
      url.hash = "state=" + encodeURIComponent(JSON.stringify(state));
      history.replaceState(null, "", url);
    },
    shared(kind) {
      if (kind !== SHARED || !location.hash.startsWith("#state=")) return null;
      try {
        const state = JSON.parse(decodeURIComponent(location.hash.slice(7)));
        return state && typeof state === "object" && !Array.isArray(state) ? state : null;
      } catch {
        return null;
      }
    },
  };
  globalThis.llmmathRuntime = runtime;
})();

// llmmath's browser runtime, the worker half: Pyodide and llmmath run here, off the page's
// main thread, so that neither the download, nor starting Python, nor a computation ever
// blocks the reader's input (issue 23: one 2 s task froze the page while Python started).
//
// llmmath_book.runtime copies this file into _static/runtime/ next to llmmath-runtime.js, which
// starts it as a module worker (Pyodide refuses classic workers) on the first change of a
// control, never on page load. Messages (all plain objects):
//   page → worker  {type: "start", manifest, staticDir, lang}  once, first; lang: the
//                                                           page's <html lang>
//                  {type: "call", id, kind, state}          state: the explorer's JSON text
//   worker → page  {type: "bytes", received, total}        download progress, by bytes
//                  {type: "phase", phase}                   "starting" (Python), "importing"
//                  {type: "ready", coldStartMs}
//                  {type: "failed", message}                final: nothing follows it
//                  {type: "result", id, view} | {type: "result", id, error}
"use strict";

let explorers = null; // a promise of the llmmath.explorers module (a Pyodide proxy)
let failed = false;

function post(message) {
  if (!failed) self.postMessage(message);
}

function fail(error) {
  if (failed) return;
  self.postMessage({ type: "failed", message: String(error && error.message ? error.message : error) });
  failed = true; // after this, the page hears nothing more from this worker
}

async function digest(bytes) {
  const hash = new Uint8Array(await crypto.subtle.digest("SHA-384", bytes));
  let text = "";
  for (const b of hash) text += String.fromCharCode(b);
  return "sha384-" + btoa(text);
}

// Fetch one file of the manifest, reporting its bytes as they arrive, and refuse it unless
// it matches its SHA-384 digest. `signal` aborts it when another file has failed.
async function fetchChecked(file, staticDir, signal, onBytes) {
  const url = new URL(file.path, staticDir);
  const response = await fetch(url, { signal });
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

async function start(manifest, staticDir, lang) {
  const started = performance.now();
  // 1. Download every file at once; the first failure aborts the others.
  const abort = new AbortController();
  let received = 0;
  let told = -1;
  const bytes = {};
  try {
    await Promise.all(
      Object.entries(manifest.files).map(async ([name, file]) => {
        bytes[name] = await fetchChecked(file, staticDir, abort.signal, (n) => {
          received += n;
          // about 200 reports in all: enough for a smooth bar, few enough to be free
          const step = Math.floor((200 * received) / manifest.bytes);
          if (step !== told) {
            told = step;
            post({ type: "bytes", received, total: manifest.bytes });
          }
        });
      }),
    );
  } catch (error) {
    abort.abort();
    throw error;
  }
  post({ type: "bytes", received: manifest.bytes, total: manifest.bytes });

  // 2. Start Python from the checked bytes: the modules from blob: URLs, the WebAssembly
  //    and the standard library handed over without a second download.
  post({ type: "phase", phase: "starting" });
  const blobUrl = (name, type) => URL.createObjectURL(new Blob([bytes[name]], { type }));
  const { loadPyodide } = await import(blobUrl("pyodide.mjs", "text/javascript"));
  const asm = await import(blobUrl("pyodide.asm.mjs", "text/javascript"));
  const indexURL = new URL("pyodide/", staticDir).href;
  const wasmUrl = indexURL + "pyodide.asm.wasm";
  const siteFetch = self.fetch;
  // Pyodide fetches its WebAssembly itself: hand it the bytes already checked.
  self.fetch = (input, init) =>
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
    self.fetch = siteFetch;
  }

  // 3. Unpack the wheel and import llmmath.explorers.
  post({ type: "phase", phase: "importing" });
  pyodide.unpackArchive(bytes.wheel, "wheel");
  // The explorers speak the page's language (llmmath.messages; English when unknown).
  const messages = pyodide.pyimport("llmmath.messages");
  try {
    messages.use(lang || "en");
  } catch {
    messages.use("en");
  }
  const module = pyodide.pyimport("llmmath.explorers");
  post({ type: "ready", coldStartMs: performance.now() - started });
  return module;
}

self.onmessage = async (event) => {
  const message = event.data;
  if (message.type === "start" && !explorers) {
    explorers = start(message.manifest, message.staticDir, message.lang);
    explorers.catch(fail);
  } else if (message.type === "call") {
    let module;
    try {
      module = await explorers;
    } catch {
      return; // the page already has the failure
    }
    try {
      post({ type: "result", id: message.id, view: module.explore_json(message.kind, message.state) });
    } catch (error) {
      post({ type: "result", id: message.id, error: String(error && error.message ? error.message : error) });
    }
  }
};

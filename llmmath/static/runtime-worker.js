// llmmath's browser runtime, the worker half: Pyodide and llmmath run here, off the page's
// main thread, so that neither the download, nor starting Python, nor a computation ever
// blocks the reader's input (issue 23: one 2 s task froze the page while Python started).
//
// llmmath_book.runtime copies this file into _static/runtime/ next to llmmath-runtime.js, which
// starts it as a module worker (Pyodide refuses classic workers) on the first change of a
// control, never on page load. It restores Python from the reader's own snapshot of an
// earlier page (keepLocal), else from the site's when that comes quickly enough
// (fetchSnapshot), and starts it from scratch otherwise. Messages (all plain objects):
//   page → worker  {type: "start", manifest, staticDir, lang, localKey}  once, first;
//                                     lang: the page's <html lang>; localKey: the name of
//                                     this build's own snapshot in Cache Storage (or null)
//                  {type: "call", id, kind, state}          state: the explorer's JSON text
//   worker → page  {type: "bytes", received, total}        download progress, by bytes
//                  {type: "phase", phase}                   "starting" (Python), "importing"
//                  {type: "ready", coldStartMs, timings}  timings: ms since the start
//                                     when the files were checked (fetched), the snapshot
//                                     was (snapshot, null if not used), Python was started
//                                     or restored (started) and llmmath imported
//                                     (imported); path: "snapshot" (the site's), "local"
//                                     (the reader's own) or "start" (from scratch)
//                  {type: "failed", message}                final: nothing follows it
//                  {type: "result", id, view} | {type: "result", id, error}
"use strict";

let explorers = null; // a promise of the llmmath.explorers module (a Pyodide proxy)
let failed = false;
let afterFirstAnswer = null; // run once the first answer is posted

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

// The snapshot (manifest.snapshot; book/_ext/llmmath_book/snapshot.py) is Pyodide already
// started, restored in about 0.1 s where starting Python takes 2-3 s. It downloads with
// the other files, and is worth it only when that is quicker: once SNAPSHOT_PATIENCE_MS
// have passed, it is given up as soon as its pace says it would end more than
// SNAPSHOT_BUDGET_MS after it began (about when the other files and a start from scratch
// would end on a link as fast as the one measured). From the browser's cache (the next
// page of a visit) it takes a few milliseconds.
const SNAPSHOT_BUDGET_MS = 3000;
const SNAPSHOT_PATIENCE_MS = 250;
const TOO_SLOW = new Error("the snapshot would take longer than starting Python");

async function fetchSnapshot(file, staticDir, signal, onBytes) {
  const abort = new AbortController();
  signal.addEventListener("abort", () => abort.abort(signal.reason));
  const began = performance.now();
  let received = 0;
  const pace = () => {
    const elapsed = performance.now() - began;
    const expected = received ? (elapsed * file.bytes) / received : Infinity;
    if (elapsed >= SNAPSHOT_PATIENCE_MS && expected > SNAPSHOT_BUDGET_MS) abort.abort(TOO_SLOW);
  };
  const timer = setInterval(pace, 50);
  let packed;
  try {
    packed = await fetchChecked(file, staticDir, abort.signal, (n) => {
      received += n;
      onBytes(n);
      pace();
    });
  } catch (error) {
    if (/does not match its SHA-384 digest/.test(error.message)) throw error;
    if (abort.signal.reason !== TOO_SLOW) console.warn(`${file.path}: ${error.message}`);
    return null;
  } finally {
    clearInterval(timer);
  }
  const stream = new Blob([packed]).stream().pipeThrough(new DecompressionStream("gzip"));
  return unpackSnapshot(await new Response(stream).arrayBuffer());
}

// The snapshot from its packed form (llmmath_book.snapshot.pack): its length, the count
// of runs of non-zero pages, their (offset, bytes), then their bytes; the rest is zeros.
function unpackSnapshot(buffer) {
  const view = new DataView(buffer);
  const [length, count] = [view.getUint32(0, true), view.getUint32(4, true)];
  const snapshot = new Uint8Array(length);
  let at = 8 + 8 * count;
  for (let i = 0; i < count; i++) {
    const offset = view.getUint32(8 + 8 * i, true);
    const size = view.getUint32(12 + 8 * i, true);
    snapshot.set(new Uint8Array(buffer, at, size), offset);
    at += size;
  }
  return snapshot;
}

// The reader's own snapshot: once llmmath is imported (into Python restored from the
// site's snapshot, or started from scratch when that was too slow to download or
// missing), the worker snapshots the interpreter and keeps it in the browser's Cache
// Storage under `localKey` (runtime.js: a name made of this build's manifest), so that
// the next page restores it, llmmath included, without importing llmmath again or
// downloading any snapshot. It is the worker's own making, never a file of the network;
// one build's is kept, and none where Cache Storage is missing.
const LOCAL_CACHE = "llmmath-python";

async function readLocal(localKey) {
  try {
    const response = await (await caches.open(LOCAL_CACHE)).match(localKey);
    return response ? new Uint8Array(await response.arrayBuffer()) : null;
  } catch {
    return null; // no Cache Storage here
  }
}

async function keepLocal(localKey, snapshot) {
  try {
    const cache = await caches.open(LOCAL_CACHE);
    for (const request of await cache.keys()) {
      if (request.url !== localKey) await cache.delete(request); // another build's
    }
    await cache.put(localKey, new Response(snapshot));
  } catch {
    // no Cache Storage, or no room: the next page starts Python again
  }
}

async function start(manifest, staticDir, lang, localKey) {
  const started = performance.now();
  const since = () => Math.round(performance.now() - started);
  const reading = localKey ? readLocal(localKey) : Promise.resolve(null);
  let local = null;
  let snapshotFile = manifest.snapshot || null;
  let total = manifest.bytes + (snapshotFile ? snapshotFile.bytes : 0);
  let received = 0;
  let told = -1;
  const onBytes = (n) => {
    received += n;
    // about 200 reports in all: enough for a smooth bar, few enough to be free
    const step = Math.floor((200 * received) / total);
    if (step !== told) {
      told = step;
      post({ type: "bytes", received, total });
    }
  };
  // 1. Download every file at once, the snapshot too if it comes quickly enough (see
  //    SNAPSHOT_BUDGET_MS); the first failure aborts the others.
  const timings = {};
  const abort = new AbortController();
  const bytes = {};
  let snapshot = null;
  try {
    await Promise.all([
      ...Object.entries(manifest.files).map(async ([name, file]) => {
        bytes[name] = await fetchChecked(file, staticDir, abort.signal, onBytes);
      }),
      (async () => {
        local = await reading; // the reader's own snapshot, if kept: none to download
        if (local && snapshotFile) {
          total -= snapshotFile.bytes;
          snapshotFile = null;
        }
        snapshot = snapshotFile && await fetchSnapshot(snapshotFile, staticDir, abort.signal, onBytes);
        timings.snapshot = local || snapshot ? since() : null;
      })(),
    ]);
  } catch (error) {
    abort.abort();
    throw error;
  }
  timings.fetched = since();
  post({ type: "bytes", received: total, total });

  // 3. Start Python from the checked bytes (or restore it from the snapshot): the modules
  //    from blob: URLs, the WebAssembly and the standard library handed over without a
  //    second download.
  post({ type: "phase", phase: "starting" });
  const blobs = [];
  const blobUrl = (name, type) => {
    blobs.push(URL.createObjectURL(new Blob([bytes[name]], { type })));
    return blobs[blobs.length - 1];
  };
  const { loadPyodide } = await import(blobUrl("pyodide.mjs", "text/javascript"));
  const asm = await import(blobUrl("pyodide.asm.mjs", "text/javascript"));
  const indexURL = new URL("pyodide/", staticDir).href;
  const wasmUrl = indexURL + "pyodide.asm.wasm";
  const options = {
    indexURL,
    createPyodideModule: asm.default,
    lockFileContents: JSON.parse(new TextDecoder().decode(bytes["pyodide-lock.json"])),
    stdLibURL: blobUrl("python_stdlib.zip", "application/zip"),
    stdout: () => {},
    stderr: (line) => console.warn(line),
  };
  const siteFetch = self.fetch;
  // Pyodide fetches its WebAssembly itself: hand it the bytes already checked.
  self.fetch = (input, init) =>
    String(input instanceof Request ? input.url : input) === wasmUrl
      ? Promise.resolve(new Response(bytes["pyodide.asm.wasm"], {
        headers: { "Content-Type": "application/wasm" },
      }))
      : siteFetch(input, init);
  let pyodide = null;
  // Unless restored from the reader's own snapshot, Python is snapshotted once llmmath is
  // imported, for the next page (keepLocal).
  const keep = Boolean(localKey) && typeof caches !== "undefined";
  try {
    for (const [path, restored, where] of [
      ["local", local, localKey],
      ["snapshot", snapshot, snapshotFile && snapshotFile.path],
    ]) {
      if (pyodide || !restored) continue;
      try {
        pyodide = await loadPyodide({
          ...options, _loadSnapshot: restored, _makeSnapshot: keep && path === "snapshot",
        });
        timings.path = path;
      } catch (error) { // a snapshot of another Pyodide: start Python instead
        console.warn(`${where}: ${error.message}`);
      }
    }
    if (!pyodide) {
      pyodide = await loadPyodide({ ...options, _makeSnapshot: keep });
      timings.path = "start";
    }
  } finally {
    self.fetch = siteFetch;
    for (const url of blobs) URL.revokeObjectURL(url); // read: their bytes can go
  }
  timings.started = since();

  // 4. Unpack the wheel and import llmmath.explorers.
  post({ type: "phase", phase: "importing" });
  pyodide.unpackArchive(bytes.wheel, "wheel");
  pyodide.runPython("import importlib; importlib.invalidate_caches()"); // new files
  // The explorers speak the page's language (llmmath.messages; English when unknown).
  const messages = pyodide.pyimport("llmmath.messages");
  try {
    messages.use(lang || "en");
  } catch {
    messages.use("en");
  }
  const module = pyodide.pyimport("llmmath.explorers");
  timings.imported = since();
  if (timings.path !== "local" && keep) {
    afterFirstAnswer = () => { // not to delay it: copying 30 MB takes a while
      try {
        keepLocal(localKey, pyodide.makeMemorySnapshot());
      } catch (error) {
        console.warn(`no snapshot for the next page: ${error.message}`);
      }
    };
  }
  post({ type: "ready", coldStartMs: timings.imported, timings });
  return module;
}

self.onmessage = async (event) => {
  const message = event.data;
  if (message.type === "start" && !explorers) {
    explorers = start(message.manifest, message.staticDir, message.lang, message.localKey);
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
    if (afterFirstAnswer) {
      setTimeout(afterFirstAnswer, 0); // after the answer has gone
      afterFirstAnswer = null;
    }
  }
};

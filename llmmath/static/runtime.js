// llmmath in the reader's browser: the runtime of the published site's explorers.
//
// llmmath_book.runtime writes this file into _static/runtime/ at build time, with the manifest of
// what it loads (names, sizes, SHA-384 digests) in place of __MANIFEST__ and llmmath.config's
// size limit in place of __MAX_CONFIG_BYTES__, and its own words in the build's language in
// place of __MESSAGES__ ({English: translation}, from llmmath's gettext catalogue, empty in
// English: llmmath.explorers.RUNTIME_MESSAGES). It defines globalThis.llmmathRuntime, which the
// explorers' front end (llmmath/static/explorer.js) uses on the site.
//
// Nothing is downloaded until a reader changes a control (or opens a link with an answer in
// it). Then a module worker (llmmath-runtime-worker.js, beside this file) fetches Pyodide and
// the llmmath wheel from this site, checks them against their digests, starts Python and
// imports llmmath; `llmmath.explorers.explore_json` answers every later change there. The
// page's main thread only relays messages, so it never waits on Python.
//
// The calculator keeps its answer in the page's link: `#state=` and the state minus the
// page's own (a preset is linked by its name), and for a pasted config.json `&config=` and
// the text deflated and base64url-encoded, up to LINK_LIMIT characters of link.
(function () {
  "use strict";
  const MANIFEST = __MANIFEST__;
  const MAX_CONFIG_BYTES = __MAX_CONFIG_BYTES__; // llmmath.config reads no larger config
  const MESSAGES = __MESSAGES__; // {English: the build's language}
  const LINK_LIMIT = 8192; // characters after the '#'; browsers and chat apps keep this
  const runtimeDir = new URL(".", document.currentScript.src);
  const staticDir = new URL("..", runtimeDir);
  const megabytes = (n) => `${(n / 1e6).toFixed(1)} MB`;
  const listeners = new Set();
  let loading = null; // the promise of `call`, once started
  let failure = null; // the error that stopped the runtime: final, never retried
  // A page opened from disk (file://) may not fetch the runtime's files: browsers refuse
  // it. Its stored numbers show, and the first change says what the reader can do.
  const fromDisk = location.protocol === "file:";
  const DISK = new Error(t(
    "Opened from disk: the numbers shown are those stored in this page. To change " +
      "them, Python must run in your browser, which it does only for a served site: " +
      "run make serve and open this page at http://localhost:8000.",
  ));

  // `message` (English, a msgid of llmmath's catalogue) in the build's language, with its
  // {fields} filled in from `fields`; English when the catalogue does not have it.
  function t(message, fields) {
    const text = Object.prototype.hasOwnProperty.call(MESSAGES, message)
      ? MESSAGES[message]
      : message;
    return text.replace(/\{(\w+)\}/g, (all, name) =>
      fields && Object.prototype.hasOwnProperty.call(fields, name) ? String(fields[name]) : all);
  }

  // `progress`: a step of the download (many a second), not a new phase.
  function tell(text, progress = false) {
    for (const listener of listeners) listener(text, progress);
  }

  // A file that failed its digest is the site's fault (changed, or damaged on the way),
  // not the browser's, and a reload fetches the same bytes: say so.
  function failureText(error) {
    if (error === DISK) return DISK.message;
    if (/does not match its SHA-384 digest/.test(error.message)) {
      return t("Nothing was run: {error}. This site's files were changed or damaged on " +
        "the way to this page; reloading will not help until the site is fixed.",
      { error: error.message });
    }
    return t("Could not run Python in this browser: {error}. Reload the page to try again.",
      { error: error.message });
  }

  // Start the worker; resolves to `call(kind, stateJson) → Promise<view JSON>` once llmmath
  // is imported, or rejects (for good) with the first failure.
  // The SHA-384 digest of `bytes`, as Subresource Integrity writes it.
  async function digest(bytes) {
    const hash = new Uint8Array(await crypto.subtle.digest("SHA-384", bytes));
    return "sha384-" + btoa(String.fromCharCode(...hash));
  }

  // The worker's script, fetched and checked against its digest in the manifest (this
  // script's own digest is checked by the browser: its tag's `integrity`), started from a
  // blob: URL of the checked bytes, so that nothing unchecked ever runs.
  function workerUrl() {
    const url = new URL(MANIFEST.worker.path, staticDir);
    const sha = MANIFEST.worker.sha384;
    url.searchParams.set("v", sha.slice(7, 23).replace(/[+/]/g, "_")); // a new build, a new URL
    return url;
  }

  async function checkedWorker() {
    const sha = MANIFEST.worker.sha384;
    const url = workerUrl();
    let response;
    try {
      response = await fetch(url);
    } catch (error) {
      throw new Error(`${url.pathname}: ${error.message}`);
    }
    if (!response.ok) throw new Error(`${url.pathname}: HTTP ${response.status}`);
    const bytes = await response.arrayBuffer();
    if ((await digest(bytes)) !== sha) {
      throw new Error(`${url.pathname} does not match its SHA-384 digest`);
    }
    return {
      worker: new Worker(URL.createObjectURL(new Blob([bytes], { type: "text/javascript" })),
        { type: "module" }),
      url,
    };
  }

  async function start() {
    let worker, url;
    try {
      ({ worker, url } = await checkedWorker());
    } catch (error) {
      failure = error;
      tell(failureText(error));
      listeners.clear();
      throw error;
    }
    const calls = new Map();
    let nextId = 0;

    function call(kind, stateJson) {
      if (failure) return Promise.reject(failure);
      const id = nextId++;
      return new Promise((resolve, reject) => {
        calls.set(id, { resolve, reject });
        worker.postMessage({ type: "call", id, kind, state: stateJson });
      });
    }

    return new Promise((resolve, reject) => {
      function fail(error) {
        if (failure) return;
        failure = error;
        worker.terminate(); // stops the downloads still under way with it
        tell(failureText(error)); // the last word: no progress message follows
        listeners.clear();
        reject(error);
        for (const { reject: rejectCall } of calls.values()) rejectCall(error);
        calls.clear();
      }
      worker.onmessage = ({ data }) => {
        if (failure) return;
        if (data.type === "bytes") {
          const percent = Math.floor((100 * data.received) / data.total);
          tell(t("downloading Python for this page: {received} of {total} ({percent} %)…", {
            received: megabytes(data.received),
            total: megabytes(data.total),
            percent,
          }), true);
        } else if (data.type === "phase") {
          tell(data.phase === "starting" ? t("starting Python…") : t("loading llmmath…"));
        } else if (data.type === "ready") {
          try {
            localStorage.setItem(USED, "1"); // later pages may start Python early: warm()
          } catch {
            // storage refused: every page waits for its first change
          }
          runtime.coldStartMs = data.coldStartMs;
          runtime.timings = data.timings;
          resolve(call);
        } else if (data.type === "failed") {
          fail(new Error(data.message));
        } else if (data.type === "result") {
          const pending = calls.get(data.id);
          calls.delete(data.id);
          if (!pending) return;
          if ("error" in data) pending.reject(new Error(data.error));
          else pending.resolve(data.view);
        }
      };
      // The worker's script did not load or threw outside a message (a broken build).
      worker.onerror = (event) => {
        event.preventDefault();
        fail(new Error(event.message || t("{path} did not start", { path: url.pathname })));
      };
      // The worker speaks the page's language (zh-CN on the Chinese edition's pages).
      const lang = document.documentElement.lang || "en";
      localKey().then((key) => {
        worker.postMessage({
          type: "start", manifest: MANIFEST, staticDir: staticDir.href, lang, localKey: key,
        });
      });
    });
  }

  // --- Python ready before the first change, from the browser's cache -------------------

  // The name of this build's own snapshot in Cache Storage, which the worker keeps when
  // it had to start Python from scratch (llmmath-runtime-worker.js, keepLocal): a URL
  // under the site's static folder, named by the SHA-256 of the manifest. Null where
  // Cache Storage is missing.
  async function localKey() {
    if (typeof caches === "undefined") return null;
    const text = new TextEncoder().encode(JSON.stringify(MANIFEST));
    const hash = new Uint8Array(await crypto.subtle.digest("SHA-256", text));
    const hex = Array.from(hash, (b) => b.toString(16).padStart(2, "0")).join("");
    return new URL(`pyodide-snapshot/started-${hex}.bin`, staticDir).href;
  }

  async function hasLocal() {
    try {
      const key = await localKey();
      return Boolean(key && (await (await caches.open("llmmath-python")).match(key)));
    } catch {
      return false;
    }
  }

  // Whether every file the worker loads is in the browser's HTTP cache, and a snapshot
  // (the site's, or the reader's own): a reader who used an explorer earlier in the visit
  // (or on an earlier visit). Asks the caches only: the network is never reached
  // (`only-if-cached`).
  async function allCached() {
    const paths = Object.values(MANIFEST.files).map((file) => file.path);
    const local = await hasLocal();
    if (MANIFEST.snapshot && !local) paths.push(MANIFEST.snapshot.path);
    const urls = [workerUrl(), ...paths.map((path) => new URL(path, staticDir))];
    const found = await Promise.all(urls.map(async (url) => {
      try {
        const response = await fetch(url, { cache: "only-if-cached", mode: "same-origin" });
        if (response.body) response.body.cancel().catch(() => {});
        return response.ok;
      } catch {
        return false; // not in the cache
      }
    }));
    return found.every(Boolean);
  }

  let warming = false;
  // In localStorage once Python ran from this site's files (an edition has its own).
  const USED = `llmmath-runtime-used:${staticDir.pathname}`;

  function used() {
    try {
      return localStorage.getItem(USED) !== null;
    } catch {
      return false;
    }
  }

  // Start Python when `element` (an explorer) comes near the viewport, if Python ran from
  // this edition's files before and they are in the cache: restoring it there takes about a
  // second of the worker's time, which the reader then does not wait for at the first
  // change. Pages whose explorers are not reached, hidden tabs and readers who never
  // changed a control start nothing, download nothing and ask the cache nothing.
  function warm(element) {
    if (fromDisk || loading || failure || !used()) return;
    if (!("IntersectionObserver" in globalThis)) return;
    const observer = new IntersectionObserver(async (entries) => {
      if (!entries.some((entry) => entry.isIntersecting)) return;
      observer.disconnect();
      if (warming || loading || document.visibilityState !== "visible") return;
      warming = true;
      if ((await allCached()) && !loading && !failure) {
        loading = start();
        loading.catch(() => {}); // said at the first change, which asks load() again
      }
    }, { rootMargin: "50% 0px" });
    observer.observe(element);
  }

  // --- links ----------------------------------------------------------------------------

  // The calculator keeps its inputs in the page's link, so that an answer can be shared.
  const SHARED = "calculator";
  const PASTED = "(pasted config.json)"; // llmmath.explorers.PASTED
  const KEYS = ["state", "config", "config-too-long"];

  // {key: raw value} of the link's `#state=…&config=…`; null when it has none of them.
  function linkParts(hash) {
    if (!hash.startsWith("#")) return null;
    const parts = {};
    let last = null;
    for (const piece of hash.slice(1).split("&")) {
      const eq = piece.indexOf("=");
      const key = eq > 0 ? piece.slice(0, eq) : null;
      if (KEYS.includes(key) && !(key in parts)) {
        parts[key] = piece.slice(eq + 1);
        last = key;
      } else if (last) {
        parts[last] += "&" + piece; // a hand-written '&' inside the state's JSON
      } else {
        return null;
      }
    }
    return Object.keys(parts).length ? parts : null;
  }

  function toBase64Url(bytes) {
    let text = "";
    for (let i = 0; i < bytes.length; i += 0x8000) {
      text += String.fromCharCode(...bytes.subarray(i, i + 0x8000));
    }
    return btoa(text).replace(/\+/g, "-").replace(/\//g, "_").replace(/=+$/, "");
  }

  async function readAll(stream, limit) {
    const reader = stream.getReader();
    const chunks = [];
    let size = 0;
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      size += value.length;
      if (size > limit) {
        reader.cancel().catch(() => {});
        return null;
      }
      chunks.push(value);
    }
    return new Uint8Array(await new Blob(chunks).arrayBuffer());
  }

  async function deflate(text) {
    const stream = new Blob([text]).stream().pipeThrough(new CompressionStream("deflate-raw"));
    return toBase64Url(await readAll(stream, Infinity));
  }

  // The config text of a link's `config=`: base64url of raw deflate, at most MAX_CONFIG_BYTES
  // once inflated. Throws an Error saying what is wrong with it.
  async function inflate(encoded) {
    if (!/^[A-Za-z0-9_-]*$/.test(encoded) || encoded.length % 4 === 1) {
      throw new Error(t("its config is not base64url text"));
    }
    const binary = atob(encoded.replace(/-/g, "+").replace(/_/g, "/"));
    const packed = Uint8Array.from(binary, (c) => c.charCodeAt(0)); // one byte a char
    let bytes;
    try {
      const stream = new Blob([packed]).stream()
        .pipeThrough(new DecompressionStream("deflate-raw"));
      bytes = await readAll(stream, MAX_CONFIG_BYTES);
    } catch {
      throw new Error(t("its config is not deflate data"));
    }
    if (bytes === null) {
      throw new Error(t("its config is larger than {limit} bytes, the most llmmath reads", {
        limit: MAX_CONFIG_BYTES.toLocaleString("en-US"),
      }));
    }
    try {
      return new TextDecoder("utf-8", { fatal: true }).decode(bytes);
    } catch {
      throw new Error(t("its config is not UTF-8 text"));
    }
  }

  let writes = 0; // only the newest answer is written into the link

  const runtime = {
    manifest: MANIFEST,
    linkLimit: LINK_LIMIT,
    coldStartMs: null,
    timings: null, // the worker's (llmmath-runtime-worker.js), once Python is ready
    idleText: fromDisk ? DISK.message : t(
      "Live in your browser: changing a control runs llmmath here, on Python compiled to " +
        "WebAssembly (Pyodide, loaded once on first use: {size}).",
      { size: megabytes(MANIFEST.bytes + (MANIFEST.snapshot ? MANIFEST.snapshot.bytes : 0)) },
    ),
    liveText: t("Live: computed in your browser by llmmath on Pyodide."),
    linkText: t("Loading the answer in this page's link:"),
    failureText,
    t,
    // Resolves to `call(kind, stateJson) → Promise<view JSON text>`; `onText` hears the
    // progress, then the failure, if any (after which it hears nothing more).
    load(onText) {
      if (fromDisk) failure = DISK; // nothing fetched, nothing said to be loading
      if (failure) return Promise.reject(failure);
      if (onText) listeners.add(onText);
      if (!loading) loading = start();
      return loading;
    },
    warm,
    // Whether the page's link holds an answer for explorer `kind` (known at once).
    hasLink(kind) {
      return kind === SHARED && linkParts(location.hash) !== null;
    },
    // The answer in the page's link: {state} to lay over the page's own state, or {error}
    // (one line, what is wrong with the link), or null when there is none.
    async shared(kind) {
      const parts = kind === SHARED ? linkParts(location.hash) : null;
      if (!parts) return null;
      let state = {};
      try {
        if ("state" in parts) {
          try {
            state = JSON.parse(decodeURIComponent(parts.state));
          } catch {
            throw new Error(t("its state is not JSON"));
          }
          if (!state || typeof state !== "object" || Array.isArray(state)) {
            throw new Error(t("its state is not a JSON object"));
          }
        }
        if ("config" in parts) {
          state = { ...state, preset: PASTED, config: await inflate(parts.config) };
        }
      } catch (error) {
        return { error: t("This page's link cannot be read: {error}.", { error: error.message }) };
      }
      if ("config-too-long" in parts) {
        const raw = parts["config-too-long"];
        if (!/^[1-9][0-9]{0,15}$/.test(raw)) { // the page writes a size in bytes, nothing else
          return { error: t("This page's link cannot be read: {error}.", {
            error: t("its config-too-long is not a size in bytes"),
          }) };
        }
        const size = Number(raw);
        return {
          error: t(
            "This page's link has no config.json: the one pasted ({size} bytes) was too long " +
              "to keep in a link (limit {limit} KB). Paste it again.",
            { size: size.toLocaleString("en-US"), limit: LINK_LIMIT / 1024 },
          ),
        };
      }
      return { state };
    },
    // Write the answer `state` into the page's link, as the state minus `base` (the page's
    // own state). Resolves to a line for the reader when the link cannot hold the answer.
    async remember(kind, state, base) {
      if (kind !== SHARED) return null;
      const write = ++writes;
      const linked = {};
      for (const [key, value] of Object.entries(state)) {
        if (key === "loaded" || key === "config") continue; // a preset's config: its name
        if (JSON.stringify(value) !== JSON.stringify(base[key])) linked[key] = value;
      }
      // JSON's {}[]:, may stay as they are in a link's fragment: a third shorter
      const json = encodeURIComponent(JSON.stringify(linked))
        .replace(/%(7B|7D|5B|5D|3A|2C)/g, (escaped) => decodeURIComponent(escaped));
      let hash = "state=" + json;
      let note = null;
      if (state.preset === PASTED) {
        const packed = await deflate(String(state.config));
        if (hash.length + "&config=".length + packed.length <= LINK_LIMIT) {
          hash += "&config=" + packed;
        } else {
          const size = new TextEncoder().encode(String(state.config)).length;
          hash += "&config-too-long=" + size;
          note = t(
            "This answer is not kept in the page's link: the pasted config.json would make " +
              "it {size} KB long, over the {limit} KB limit.",
            { size: Math.ceil((hash.length + packed.length) / 1024), limit: LINK_LIMIT / 1024 },
          );
        }
      }
      if (write !== writes) return null; // a newer answer was written meanwhile
      const url = new URL(location.href);
      url.hash = hash;
      history.replaceState(null, "", url); // fires no hashchange
      return note;
    },
  };
  globalThis.llmmathRuntime = runtime;
})();

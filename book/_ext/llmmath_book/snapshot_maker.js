// The maker of the site's Python snapshot (llmmath_book.snapshot): a module worker in
// headless Chromium, served beside the vendored Pyodide files and llmmath's wheel.
//
// 1. Start Pyodide, unpack the wheel, import llmmath.explorers and draw every explorer
//    in every language: the standard-library modules this imported are those the site
//    needs (llmmath itself is left out: it changes with every build, Pyodide does not).
// 2. Start Pyodide again with `_makeSnapshot`, import those modules, collect garbage
//    and take the memory snapshot (`pyodide.makeMemorySnapshot`): the interpreter as
//    it stands, which `loadPyodide({_loadSnapshot})` restores in about 0.1 s instead of
//    starting Python again (2-3 s).
// 3. POST the snapshot to the maker's server; tell the page what was imported.
import { loadPyodide } from "./pyodide.mjs";

const DISCOVER = `
import json, sys
before = set(sys.modules)
import llmmath.explorers as explorers, llmmath.messages as messages
for language in ("zh_CN", "en"):
    messages.use(language)
    for kind in explorers.EXPLORERS:
        try:
            explorers.explore_json(kind, "{}")
        except Exception:
            pass
json.dumps(sorted(n for n in set(sys.modules) - before if n.split(".")[0] != "llmmath"))
`;

const IMPORT = (modules) => `
import gc, importlib
for name in ${JSON.stringify(modules)}:
    importlib.import_module(name)
del name
gc.collect()
`;

self.onmessage = async ({ data }) => {
  try {
    const wheel = new Uint8Array(await (await fetch(data.wheel)).arrayBuffer());
    const options = { stdout: () => {}, stderr: (line) => console.warn(line) };
    const probe = await loadPyodide(options);
    probe.unpackArchive(wheel, "wheel");
    const modules = JSON.parse(probe.runPython(DISCOVER));
    const pyodide = await loadPyodide({ ...options, _makeSnapshot: true });
    pyodide.runPython(IMPORT(modules));
    const snapshot = pyodide.makeMemorySnapshot();
    const response = await fetch("snapshot", { method: "POST", body: snapshot });
    if (!response.ok) throw new Error(`POST snapshot: HTTP ${response.status}`);
    self.postMessage({ modules, bytes: snapshot.length, version: pyodide.version });
  } catch (error) {
    self.postMessage({ error: String((error && error.stack) || error) });
  }
};

"""The site's browser runtime and links, in headless Chromium (issue 23): Python runs in
a worker and never blocks the page, a failure to load it is final and says why, a link
with an answer in it shows that answer and nothing else, links are short, and pages
load a favicon and log no warnings.

Uses the server, browser and helpers of tests/test_browser.py (and skips with it when
Chromium is missing). Damaged sites are copies in a temporary folder: the shared build
is never modified.
"""

import base64
import functools
import http.server
import json
import secrets
import shutil
import threading
import time
import zlib

import pytest

from llmmath import presets
from tests import test_browser
from tests.test_browser import (
    CALCULATOR,
    SET,
    WAIT_S,
    _Handler,
    as_a_reader,
    assert_shows_python,
    change,
    chromium,
    dom_value,
    evaluate,
    explorers_on,
    network_problems,
    open_page,
    read,
    serve,
)

# the Chromium and the server of tests/test_browser.py, as this module's fixtures
browser, server = test_browser.browser, test_browser.server

PASTED = "(pasted config.json)"
LINK_LIMIT = 8192  # characters after the '#' (llmmath/static/runtime.js)
MEMORY = "chapters/09_memory.html"


def wait_for(browser, index: int, done, what: str, wait_s: float = WAIT_S) -> dict:
    """Poll explorer ``index`` until ``done(shown)``; its last reading otherwise."""
    deadline = time.monotonic() + wait_s
    shown = None
    while True:
        root = "document.querySelectorAll('.llmmath-explorer')[arguments[0]]"
        if browser.execute_script(f"return !!{root}", index):  # drawn yet?
            shown = read(browser, index)
            shown["link"] = browser.execute_script(
                f"return {root}.dataset.link || null", index
            )
            if done(shown):
                return shown
        if time.monotonic() > deadline:
            raise AssertionError(f"{what}: not within {wait_s} s: {shown}")
        time.sleep(0.02)


def stale(browser, index: int = 0) -> bool:
    return browser.execute_script(
        "return document.querySelectorAll('.llmmath-output')[arguments[0]]"
        ".classList.contains('llmmath-stale')",
        index,
    )


def calculator_preset(name: str) -> str:
    from llmmath.explorers import explore

    (control,) = [
        c for c in explore("calculator", {})["controls"] if c["name"] == "preset"
    ]
    return dom_value(control, name)


def link_to(server, state: dict | None = None, **parts: str) -> str:
    pieces = []
    if state is not None:
        pieces.append("state=" + json.dumps(state, separators=(",", ":")))
    pieces += [f"{key.replace('_', '-')}={value}" for key, value in parts.items()]
    return f"{server.base}/{CALCULATOR}#" + "&".join(pieces)


# --- a failure is final -------------------------------------------------------------


#: Every file the runtime runs, under _static/ (the wheel's name is found): a script
#: that a page's tag loads, the worker, Pyodide's files and llmmath's wheel.
CHAIN = [
    "runtime/llmmath-runtime.js",
    "runtime/llmmath-runtime-worker.js",
    "pyodide/pyodide.mjs",
    "pyodide/pyodide.asm.mjs",
    "pyodide/pyodide.asm.wasm",
    "pyodide/python_stdlib.zip",
    "pyodide/pyodide-lock.json",
    "runtime/llmmath-*.whl",
    "pyodide-snapshot/pyodide-snapshot.bin",
]


@pytest.fixture(scope="module")
def site_copy(site, tmp_path_factory):
    """One copy of the site to damage, a file at a time (the shared build stays)."""
    copy = tmp_path_factory.mktemp("damaged") / "html"
    shutil.copytree(site, copy, ignore=shutil.ignore_patterns("zh"))
    return copy


@pytest.fixture
def damaged(site_copy, request):
    """The copy with one file of the runtime changed (still valid: a comment added to
    a script, a byte flipped in the others) or deleted, served on its own port (a new
    origin: nothing cached); the file is put back afterwards."""
    name, how = request.param
    (path,) = (site_copy / "_static").glob(name)
    original = path.read_bytes()
    if how == "missing":
        path.unlink()
    elif path.suffix in (".js", ".mjs"):
        path.write_bytes(original + b"\n/* changed */\n")
    else:
        data = bytearray(original)
        data[len(data) // 2] ^= 0x01
        path.write_bytes(bytes(data))
    httpd = serve(site_copy)
    httpd.handle_error = lambda *args: None  # the downloads the failure cut short
    yield httpd, "/" + path.relative_to(site_copy).as_posix()
    httpd.shutdown()
    httpd.server_close()
    path.write_bytes(original)


@pytest.mark.parametrize(
    "damaged, message",
    [
        *[((name, "tampered"), "does not match its SHA-384 digest") for name in CHAIN],
        (("runtime/llmmath-*.whl", "missing"), "HTTP 404"),
    ],
    ids=[*(f"tampered-{n.split('/')[-1]}" for n in CHAIN), "missing-wheel"],
    indirect=["damaged"],
)
def test_a_failed_runtime_says_so_for_good(damaged, message, browser):
    """No file of the runtime runs unless its digest matched: a changed one stops
    everything with a line that blames the site's files, not the browser (issue 36),
    and a missing one says so. The failure's message stays (no progress message
    overwrites it, later changes do not retry), and the numbers of the old state are
    greyed out."""
    httpd, path = damaged
    browser.get(f"{httpd.base}/{CALCULATOR}")
    wait_for(browser, 0, lambda s: s["draws"] >= 1, "the calculator drawn")
    browser.execute_script(SET, 0, "batch", 8)
    failure = "Nothing was run" if "SHA-384" in message else "Could not run Python"
    shown = wait_for(browser, 0, lambda s: failure in s["status"], "the failure")
    assert path in shown["status"] and message in shown["status"], shown["status"]
    if "SHA-384" in message:
        assert "reloading will not help" in shown["status"]
        assert "this browser" not in shown["status"]
    failed = shown["status"]
    assert stale(browser) and not shown["live"]
    time.sleep(2)  # the other downloads were under way: none of them may speak now
    assert read(browser, 0)["status"] == failed
    browser.execute_script(SET, 0, "seq_len", 1024)  # a later change does not retry
    time.sleep(1)
    again = read(browser, 0)
    assert again["status"] == failed and stale(browser) and not again["live"]
    assert again["state"]["batch"] != 8  # nothing computed it
    assert not browser.execute_script(
        "return document.querySelector('.llmmath-status').textContent"
        ".includes('downloading')"
    )


def test_every_script_of_every_page_is_pinned(site):
    """Every script tag of every page (both editions) that loads a file of the site,
    and every preload of one, carries that file's SHA-384 as its integrity."""
    import html.parser
    import urllib.parse

    from llmmath_book.runtime import sri

    class Tags(html.parser.HTMLParser):
        def __init__(self):
            super().__init__()
            self.found = []

        def handle_starttag(self, tag, attrs):
            a = dict(attrs)
            url = a.get("src") if tag == "script" else None
            if tag == "link" and a.get("as") == "script":
                url = a.get("href")
            if url:
                self.found.append((url, a.get("integrity")))

    unpinned, checked = [], 0
    for page in site.rglob("*.html"):
        if "_static" in page.relative_to(site).parts:
            continue
        tags = Tags()
        tags.feed(page.read_text("utf-8"))
        for url, integrity in tags.found:
            target = page.parent / urllib.parse.unquote(urllib.parse.urlsplit(url).path)
            checked += 1
            if integrity != sri(target.read_bytes()):
                unpinned.append(f"{page.relative_to(site)}: {url} {integrity}")
    assert checked > 500 and not unpinned, unpinned[:10]


# --- links --------------------------------------------------------------------------


def test_a_link_shows_no_default_numbers_before_python_is_ready(server, browser):
    from llmmath.explorers import explore

    browser.get("about:blank")
    browser.get(link_to(server, {"preset": "gpt2"}))
    first = wait_for(browser, 0, lambda s: s["draws"] >= 1, "the calculator drawn")
    default = explore("calculator", {})
    total = next(r for r in default["blocks"][1]["rows"] if r[0] == "total")[1]
    assert not first["live"] and first["link"] == "loading", first
    assert first["status"].startswith("Loading the answer in this page's link"), first
    explorer_text = browser.execute_script(
        "return document.querySelector('.llmmath-explorer .llmmath-output').innerText"
    )
    assert total not in explorer_text and "Llama-3-8B" not in explorer_text
    shown = wait_for(browser, 0, lambda s: s["live"], "the linked answer")
    assert shown["link"] == "applied" and shown["state"]["preset"] == "gpt2"
    assert not stale(browser)
    assert_shows_python(shown)


def test_a_new_link_in_the_same_tab_is_applied(server, browser):
    open_page(browser, server, CALCULATOR, 1)
    change(browser, 0, "preset", calculator_preset("qwen3-0.6b"))
    browser.execute_script("location.hash = arguments[0]", '#state={"preset":"gpt2"}')
    shown = wait_for(
        browser,
        0,
        lambda s: (
            s["live"] and s["link"] == "applied" and s["state"]["preset"] == "gpt2"
        ),
        "the new link",
    )
    assert_shows_python(shown)
    assert "qwen" not in browser.current_url.lower()


def test_a_pasted_config_makes_a_short_link_with_the_same_numbers(server, browser):
    open_page(browser, server, CALCULATOR, 1)
    text = json.dumps(presets.get("llama-3-8b").hf_config, indent=2)
    text = text.replace('"rope_theta"', '"comment": "pasted",\n  "rope_theta"')
    shown = change(browser, 0, "config", text)
    assert shown["state"]["preset"] == PASTED
    link = browser.current_url
    fragment = link.split("#", 1)[1]
    print(f"\nshared link of a pasted Llama-3-8B config: {len(fragment):,} characters")
    assert "&config=" in fragment and len(fragment) < LINK_LIMIT // 4, fragment
    browser.get("about:blank")
    browser.get(link)
    again = wait_for(browser, 0, lambda s: s["live"], "the linked answer")
    assert again["state"]["preset"] == PASTED and again["tables"] == shown["tables"]
    assert json.loads(again["state"]["config"]) == json.loads(text)


def test_a_preset_is_linked_by_its_name(server, browser):
    open_page(browser, server, CALCULATOR, 1)
    change(browser, 0, "preset", calculator_preset("qwen3-0.6b"))
    change(browser, 0, "batch", 8)
    fragment = browser.current_url.split("#", 1)[1]
    assert len(fragment) < 200 and "config" not in fragment, fragment
    assert "qwen3-0.6b" in fragment


def test_a_paste_too_long_for_a_link_says_so_and_after_a_reload(server, browser):
    """A 3 MiB config.json that does not compress is not put into the link; the page
    says so, and after a reload says why it shows no pasted config."""
    open_page(browser, server, CALCULATOR, 1)
    raw = dict(presets.get("llama-3-8b").hf_config)
    raw["comment"] = base64.b64encode(secrets.token_bytes(3 * 2**20 * 3 // 4)).decode()
    shown = change(browser, 0, "config", json.dumps(raw), wait_s=60)
    assert shown["state"]["preset"] == PASTED
    shown = wait_for(
        browser, 0, lambda s: "not kept in the page's link" in s["status"], "the note"
    )
    assert len(browser.current_url) < LINK_LIMIT
    browser.refresh()
    again = wait_for(browser, 0, lambda s: s["link"] == "failed", "the reload")
    assert "too long to keep in a link" in again["status"], again["status"]
    assert f"{len(json.dumps(raw)):,} bytes" in again["status"]


def _bomb() -> str:
    packer = zlib.compressobj(9, zlib.DEFLATED, -15)
    data = packer.compress(b" " * 20_000_000) + packer.flush()
    return base64.urlsafe_b64encode(data).decode().rstrip("=")


@pytest.mark.parametrize(
    "parts, message",
    [
        ({"config": "not*base64"}, "not base64url"),
        ({"config": "AAAAAAAA"}, "not deflate data"),
        ({"config": _bomb()}, "larger than 10,000,000 bytes"),
        ({"state": "%7Bnot json"}, "its state is not JSON"),
        ({"state": "[1,2]"}, "its state is not a JSON object"),
        ({"config-too-long": "junk"}, "its config-too-long is not a size in bytes"),
    ],
    ids=["base64", "deflate", "bomb", "json", "array", "too-long-junk"],
)
def test_a_link_that_cannot_be_read_says_why(parts, message, server, browser):
    browser.get("about:blank")
    browser.get(f"{server.base}/{CALCULATOR}#" + "&".join(
        f"{k}={v}" for k, v in parts.items()
    ))  # fmt: skip
    shown = wait_for(browser, 0, lambda s: s["link"] == "failed", "the answer")
    assert shown["status"].startswith("This page's link cannot be read: ")
    assert message in shown["status"] and "\n" not in shown["status"]
    assert not stale(browser) and shown["tables"]  # the page's own state, usable


# --- Python off the main thread -----------------------------------------------------

LONG_TASKS = """
window.__longTasks = [];
new PerformanceObserver((list) => {
  for (const e of list.getEntries()) window.__longTasks.push([e.startTime, e.duration]);
}).observe({ type: "longtask", buffered: true });
"""


def test_a_cold_start_never_blocks_the_main_thread(site, tmp_path):
    """From the first change of a control to its first result (Pyodide downloaded,
    checked, started and llmmath imported, on a fresh origin), no main-thread task
    lasts 200 ms or more."""
    httpd = serve(site)
    driver = chromium(tmp_path / "profile")
    try:
        driver.execute_cdp_cmd(
            "Page.addScriptToEvaluateOnNewDocument", {"source": LONG_TASKS}
        )
        driver.get(f"{httpd.base}/{MEMORY}")
        wait_for(driver, 0, lambda s: s["draws"] >= 1, "the explorer drawn")
        started = driver.execute_script("return performance.now()")
        driver.execute_script(SET, 0, "batch", 2)
        shown = wait_for(driver, 0, lambda s: s["live"], "the first result")
        ended = driver.execute_script("return performance.now()")
        tasks = driver.execute_script("return window.__longTasks")
    finally:
        driver.quit()
        httpd.shutdown()
        httpd.server_close()
    during = [d for start, d in tasks if started <= start <= ended]
    longest = max(during, default=0)
    print(
        f"\ncold start {(ended - started) / 1000:.2f} s; longest main-thread task "
        f"{longest:.0f} ms ({len(during)} over 50 ms); on page load: "
        f"{max((d for s, d in tasks if s < started), default=0):.0f} ms"
    )
    assert_shows_python(shown)
    assert longest < 200, tasks


# --- a chapter's load ---------------------------------------------------------------

#: Run before a page's own scripts: for each named AMD module whose factory runs (the
#: widget manager's bundles), [the setTimeout callback it ran in, numbered (require.js
#: answers each request in one), its start (performance.now()), ms it took].
BUNDLE_TASKS = """
window.__bundles = {};
(function () {
  let callbacks = 0, define_;
  const setTimeout_ = window.setTimeout;
  window.setTimeout = function (fn, ...rest) {
    if (typeof fn !== "function") return setTimeout_(fn, ...rest);
    return setTimeout_(function () {
      callbacks++;
      return fn.apply(this, arguments);
    }, ...rest);
  };
  Object.defineProperty(window, "define", {
    configurable: true,
    get() { return define_; },
    set(fn) {
      define_ = function (name, deps, factory) {
        if (typeof name !== "string" || typeof factory !== "function") {
          return fn.apply(this, arguments);
        }
        return fn.call(this, name, deps, function () {
          const start = performance.now(), task = callbacks;
          try { return factory.apply(this, arguments); }
          finally { window.__bundles[name] = [task, start, performance.now() - start]; }
        });
      };
      define_.amd = fn.amd;
    },
  });
})();
"""
WIDGET_BUNDLES = [
    "@jupyter-widgets/base",
    "@jupyter-widgets/controls",
    "@jupyter-widgets/html-manager",
]


def settled_load(driver, url: str, explorers: int) -> tuple[list, dict]:
    """Open ``url`` `as_a_reader` and wait until its ``explorers`` are drawn and no
    new long task came for a second: (its long tasks, `BUNDLE_TASKS`' record)."""
    with as_a_reader(driver):
        driver.get(url)
        deadline = time.monotonic() + WAIT_S
        seen, quiet_since = None, time.monotonic()
        while time.monotonic() - quiet_since < 1:
            now = evaluate(
                driver,
                "[document.readyState, window.__longTasks.length,"
                " document.querySelectorAll('.llmmath-explorer').length]",
            )
            if now != seen or now[0] != "complete" or now[2] < explorers:
                seen, quiet_since = now, time.monotonic()
            assert time.monotonic() < deadline, f"{url} has not settled: {now}"
            time.sleep(0.05)
        return evaluate(driver, "[window.__longTasks, window.__bundles]")


def test_a_chapter_loads_in_short_tasks(site, tmp_path):
    """Issue 36, "Light pages": no main-thread task over 200 ms while a page loads on a
    quiet machine. A chapter's longest was the widget manager's start: on the page's
    load event require.js ran its three bundles (@jupyter-widgets/base, controls and
    html-manager) in one task, 100-160 ms on a quiet machine in a reader's browser
    (250-400 ms under chromedriver as it stands, see `as_a_reader`). They start one
    per task (_vendor/widgets-setup.js).

    Three cold loads of a chapter (a fresh profile and origin each), as a reader's
    browser runs them. Where each bundle starts is exact, in every load, and is what
    this test asserts: three bundles, three tasks. The tasks' lengths are printed,
    not asserted: under make test's three workers on two cores even the best of three
    loads ran 236-313 ms (100-160 ms on a quiet machine), so the 200 ms goal is
    measured where the machine is quiet, by `make benchmark BENCHMARK_ARGS=site`."""
    explorers = len(explorers_on(site)[MEMORY])
    loads = []
    for run in range(3):
        httpd = serve(site)  # a new origin: nothing cached
        driver = chromium(tmp_path / f"profile-{run}")
        try:
            driver.execute_cdp_cmd(
                "Page.addScriptToEvaluateOnNewDocument",
                {"source": LONG_TASKS + BUNDLE_TASKS},
            )
            loads.append(settled_load(driver, f"{httpd.base}/{MEMORY}", explorers))
        finally:
            driver.quit()
            httpd.shutdown()
            httpd.server_close()

    def task(tasks, start, ms) -> float:
        """ms of the long task that holds ``start``; ``ms`` if none (under 50 ms)."""
        return max((d for s, d in tasks if s <= start <= s + d), default=ms)

    bundle_tasks, longest = [], []
    for tasks, bundles in loads:
        assert set(WIDGET_BUNDLES) <= set(bundles), bundles
        started_in = {name: bundles[name][0] for name in WIDGET_BUNDLES}
        assert len(set(started_in.values())) == 3, f"one task ran two: {bundles}"
        bundle_tasks.append(max(task(tasks, *bundles[n][1:]) for n in WIDGET_BUNDLES))
        longest.append(max((d for _, d in tasks), default=0))
    print(
        "\nlongest task of a bundle's start: "
        + ", ".join(f"{ms:.0f}" for ms in bundle_tasks)
        + " ms; of the load: "
        + ", ".join(f"{ms:.0f}" for ms in longest)
        + " ms"
    )


# --- noise --------------------------------------------------------------------------


def test_pages_load_a_favicon_and_log_no_warnings(site, browser):
    """Chromium finds the book's icon (no /favicon.ico request, no 404) and the widget
    pages log no warning or error."""
    requested = []

    class Recording(_Handler):
        failures = []

        def do_GET(self):
            requested.append(self.path)
            http.server.SimpleHTTPRequestHandler.do_GET(self)

    httpd = http.server.ThreadingHTTPServer(
        ("127.0.0.1", 0), lambda *a: Recording(*a, directory=str(site))
    )
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    base = f"http://127.0.0.1:{httpd.server_port}"
    try:
        browser.get_log("browser"), browser.get_log("performance")
        browser.get(f"{base}/book/intro.html")
        for page in [MEMORY, CALCULATOR]:
            browser.get(f"{base}/{page}")
            wait_for(browser, 0, lambda s: s["draws"] >= 1, page)
        time.sleep(1)  # the icon is fetched after the load event
        noise = [
            e["message"]
            for e in browser.get_log("browser")
            if e["level"] in ("WARNING", "SEVERE")
        ]
        problems = network_problems(browser.get_log("performance"), base)
    finally:
        httpd.shutdown()
        httpd.server_close()
    assert any(p.startswith("/_static/favicon.svg") for p in requested), requested
    assert "/favicon.ico" not in requested
    assert not Recording.failures and not problems, Recording.failures + problems
    assert not noise, noise


def test_pages_without_a_link_load_no_python(site, server, browser):
    """Nothing of the runtime is fetched on page load (without a link), its worker
    included."""
    browser.get_log("performance")
    open_page(browser, server, MEMORY, len(explorers_on(site)[MEMORY]))
    time.sleep(0.5)
    urls = [
        json.loads(e["message"])["message"]["params"].get("request", {}).get("url", "")
        for e in browser.get_log("performance")
    ]
    runtime = [u for u in urls if "/pyodide/" in u or "llmmath-runtime-worker" in u]
    assert not runtime and not [u for u in urls if u.endswith(".whl")], urls


# --- no change is lost (issue 36) ---------------------------------------------------

# Reads what each named control of explorer 0 shows, as its value (a select's option).
SHOWN = """
const [names] = arguments;
const root = document.querySelectorAll('.llmmath-explorer')[0];
const out = {};
for (const name of names) {
  const input = root.querySelector(`[name="${name}"]`);
  out[name] = input.type === "checkbox" ? input.checked : input.value;
}
return out;
"""

# Plays changes [[name, DOM value, delay in ms before it], ...] on explorer 0 at their
# own speed, as a reader would (two at once when the delay is 0), then returns.
PLAY = """
const [steps, done] = [arguments[0], arguments[arguments.length - 1]];
const root = document.querySelectorAll('.llmmath-explorer')[0];
const wait = (ms) => new Promise((ok) => setTimeout(ok, ms));
(async () => {
  for (const [name, value, delay] of steps) {
    if (delay) await wait(delay);
    const input = root.querySelector(`[name="${name}"]`);
    input.value = String(value);
    input.dispatchEvent(new Event("change", {bubbles: true}));
  }
  done(null);
})();
"""


def settled(browser, index: int = 0, wait_s: float = WAIT_S) -> dict:
    """Explorer ``index`` once its newest answer is drawn (live, nothing greyed)."""
    return wait_for(
        browser,
        index,
        lambda s: s["live"] and not stale(browser, index),
        "the newest answer",
        wait_s,
    )


def assert_ends_with(browser, last: dict) -> None:
    """The calculator shows and has computed ``last`` ({name: value}), to Python's
    numbers, once settled."""
    from llmmath.explorers import explore

    controls = {c["name"]: c for c in explore("calculator", {})["controls"]}
    deadline = time.monotonic() + WAIT_S
    while True:  # settled, and stays so: no answer still on its way draws over it
        shown = settled(browser)
        time.sleep(0.3)
        if read(browser, 0)["draws"] == shown["draws"] or time.monotonic() > deadline:
            break
    computed = {name: shown["state"][name] for name in last}
    in_controls = browser.execute_script(SHOWN, list(last))
    expected_dom = {
        name: str(dom_value(controls[name], value)) for name, value in last.items()
    }
    assert computed == last, f"computed {computed}, last changes {last}"
    assert in_controls == expected_dom, f"shown {in_controls}, last {expected_dom}"
    assert_shows_python(shown)


def test_changes_made_while_python_loads_are_all_kept(logged, browser):
    """Cold: batch 4, then a second later (Python still loading) tokens 8192; the
    answer has both, in the controls and the numbers. On a new origin (nothing cached,
    no snapshot of the reader's kept), with the wheel's first byte 3 s late, so that
    Python is still loading a second after the first change however fast it starts."""
    browser.get("about:blank")
    open_page(browser, logged(slow={".whl": 3}), CALCULATOR, 1)
    browser.execute_script(SET, 0, "batch", 4)
    time.sleep(1)
    assert not read(browser, 0)["live"]  # still loading: the race the reader meets
    browser.execute_script(SET, 0, "seq_len", 8192)
    assert_ends_with(browser, {"batch": 4, "seq_len": 8192})


def test_a_held_arrow_key_ends_on_the_last_value(server, browser):
    """Warm: ArrowUp held on batch 100 for 50 presses ends at 150, shown and
    computed."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys

    open_page(browser, server, CALCULATOR, 1)
    change(browser, 0, "batch", 100)
    field = browser.find_element(By.CSS_SELECTOR, '.llmmath-explorer [name="batch"]')
    for _ in range(25):  # as a held key repeats, answers arriving between presses
        field.send_keys(Keys.ARROW_UP * 2)
        time.sleep(0.01)
    assert_ends_with(browser, {"batch": 150})


def _calculator_changes():
    from hypothesis import strategies as st

    from llmmath.explorers import explore

    controls = {c["name"]: c for c in explore("calculator", {})["controls"]}
    choices = {
        name: [v for v, _ in controls[name]["options"] if v != PASTED]
        for name in ("preset", "weights", "kv_dtype", "gpu")
    }
    one = st.one_of(
        st.tuples(st.just("batch"), st.integers(1, 64)),
        st.tuples(st.just("seq_len"), st.integers(1, 32768)),
        *[st.tuples(st.just(n), st.sampled_from(v)) for n, v in choices.items()],
    )
    delay = st.sampled_from([0, 0, 1, 5, 20, 60, 150])
    return controls, st.lists(st.tuples(one, delay), min_size=1, max_size=12)


_CONTROLS, _CHANGES = _calculator_changes()


def test_any_changes_at_any_speed_end_with_the_last_value_of_each(server, browser):
    """A property: any sequence of changes of the calculator's controls, at any speed
    (several in one task, or one every few ms, from the first while Python loads), ends
    with the last value of every control shown in it and computed."""
    from hypothesis import given, settings

    browser.get("about:blank")
    open_page(browser, server, CALCULATOR, 1)  # the first example meets a cold start

    @settings(max_examples=12)
    @given(_CHANGES)
    def play(steps):
        start = read(browser, 0)["state"]
        last = {name: start[name] for (name, _v), _d in steps}
        last.update({name: value for (name, value), _d in steps})
        browser.execute_async_script(
            PLAY,
            [[n, dom_value(_CONTROLS[n], v), d] for (n, v), d in steps],
        )
        assert_ends_with(browser, last)

    play()


def test_an_unreadable_link_after_a_good_one_keeps_its_answer(server, browser):
    """A good link followed at once by one that cannot be read: the second's error
    stays, and the first's answer, computed meanwhile, is not drawn over it."""
    browser.get("about:blank")
    browser.get(link_to(server, {"preset": "gpt2"}))
    wait_for(browser, 0, lambda s: s["link"] == "loading", "the first link")
    browser.execute_script("location.hash = arguments[0]", "#state=[1,2]")
    shown = wait_for(browser, 0, lambda s: s["link"] == "failed", "the second link")
    assert "its state is not a JSON object" in shown["status"], shown["status"]
    browser.execute_async_script(  # Python ready: the first answer came back by now
        "const done = arguments[arguments.length - 1];"
        "llmmathRuntime.load().then(() => setTimeout(done, 1500))"
    )
    again = wait_for(browser, 0, lambda s: True, "the calculator")
    assert again["link"] == "failed" and not again["live"], again
    assert again["status"] == shown["status"]
    assert again["state"]["preset"] != "gpt2"


def test_a_link_keeps_only_the_pages_own_keys(server, browser):
    """Keys the calculator does not have (__proto__, constructor, markup) are dropped,
    not kept in its state nor written back into the link (issue 36)."""
    from urllib.parse import unquote

    hostile = {"__proto__": {"x": 1}, "constructor": 1, "<b>x</b>": 2, "batch": 2}
    browser.get("about:blank")
    browser.get(link_to(server, hostile))
    shown = wait_for(browser, 0, lambda s: s["live"], "the linked answer")
    assert shown["state"]["batch"] == 2 and shown["link"] == "applied"
    assert not {"__proto__", "constructor", "<b>x</b>"} & set(shown["state"])
    time.sleep(0.5)  # the answer is written into the link
    fragment = unquote(browser.current_url.split("#", 1)[1])
    assert fragment == 'state={"batch":2}', fragment
    assert_shows_python(shown)


def test_a_huge_number_in_a_link_is_answered_in_a_short_line(server, browser):
    """{"batch": 1e308} is a whole number of 309 digits: the answer says 1e+308."""
    browser.get("about:blank")
    browser.get(link_to(server, {"batch": 1e308}))
    shown = wait_for(browser, 0, lambda s: s["live"], "the linked answer")
    line = shown["notes"][0]
    assert "batch" in line and "1e+308" in line and len(line) < 120, line
    assert max(len(n) for n in shown["notes"]) < 200, shown["notes"]


def test_the_calculator_warns_past_the_models_context(server, browser):
    """Llama-3-8B at 23,780 tokens fits an H100's memory, but its context is 8,192
    tokens: the calculator says so beside "fit" (issue 36)."""
    open_page(browser, server, CALCULATOR, 1)
    shown = change(browser, 0, "seq_len", 23780)
    assert any("past the 8,192-token context" in n for n in shown["notes"]), shown
    assert_shows_python(shown)
    back = change(browser, 0, "seq_len", 8192)
    assert not any("past the" in n for n in back["notes"])


def test_each_edition_names_itself_as_canonical(site):
    """A zh page's rel=canonical is the zh page, not the English one (issue 36), so
    that search engines keep both editions; an English page's is itself."""
    import re

    baseurl = "https://llm-math.github.io/llm-math/"  # _config.yml's html.baseurl
    for rel in ["chapters/07_kv_cache.html", "book/calculator.html", "search.html"]:
        for prefix in ["", "zh/"]:
            text = (site / prefix / rel).read_text("utf-8")
            (href,) = re.findall(r'<link rel="canonical" href="([^"]+)"', text)
            assert href == baseurl + prefix + rel, (prefix + rel, href)


# --- a page opened from disk (issue 36) ---------------------------------------------

# Waits for MathJax's first typesetting of the page, then reports its math: how many
# formulas the page has (Sphinx's .math elements) and how many MathJax did not draw.
TYPESET = """
const done = arguments[arguments.length - 1];
const report = () => {
  const math = [...document.querySelectorAll(".math")];
  done({math: math.length,
        untypeset: math.filter((m) => !m.querySelector("mjx-container")).length,
        pinned: document.querySelectorAll("template.llmmath-pinned").length});
};
const wait = () => window.MathJax && MathJax.startup && MathJax.startup.promise
  ? MathJax.startup.promise.then(report, (e) => done({error: String(e)}))
  : setTimeout(wait, 50);
wait();
"""


@pytest.mark.parametrize("page", [MEMORY, f"zh/{MEMORY}"])
def test_a_page_opened_from_disk_typesets_and_shows_its_explorers(page, site, browser):
    """A page opened from disk (file://), where browsers refuse every script tag that
    carries an integrity (they cannot read the bytes of a file: URL to check them):
    its scripts all run, its math is all typeset and its explorers show their stored
    numbers, with no warning or error in the console; the first change says that
    Python runs only on a served site, and nothing of the runtime is fetched."""
    from llmmath.explorers import RUNTIME_MESSAGES
    from llmmath.messages import messages

    browser.get_log("browser"), browser.get_log("performance")
    browser.get((site / page).as_uri())
    found = browser.execute_async_script(TYPESET)
    assert found["pinned"] > 10 and found["math"] > 10 and found["untypeset"] == 0
    count = len(explorers_on(site)[MEMORY])
    for index in range(count):
        wait_for(browser, index, lambda s: s["draws"] >= 1, f"explorer {index} drawn")
    (disk,) = [m for m in RUNTIME_MESSAGES if m.startswith("Opened from disk")]
    if page.startswith("zh/"):
        disk = messages("zh_CN", only={disk})[disk]
    assert read(browser, 0)["status"] == disk
    browser.execute_script(SET, 0, "batch", 3)
    time.sleep(1)
    assert read(browser, 0)["status"] == disk and stale(browser)
    noise = [
        e["message"]
        for e in browser.get_log("browser")
        if e["level"] in ("WARNING", "SEVERE")
    ]
    assert not noise, noise
    urls = [
        json.loads(e["message"])["message"]["params"].get("request", {}).get("url", "")
        for e in browser.get_log("performance")
    ]
    assert not [u for u in urls if "/pyodide/" in u or "runtime-worker" in u], urls


# --- screen readers and keyboards (issue 36) ----------------------------------------

# Records, from now on, every text that a live region of an explorer takes: what a
# screen reader is told. Returns how many live regions there are.
HEARD = """
window.__heard = [];
const live = '[aria-live]:not([aria-live="off"]), [role=status], [role=alert], '
  + '[role=log]';
const regions = document.querySelectorAll(`.llmmath-explorer :is(${live})`);
for (const region of regions) {
  new MutationObserver(() => window.__heard.push(region.textContent))
    .observe(region, {childList: true, characterData: true, subtree: true});
}
return regions.length;
"""


def test_a_cold_start_tells_a_screen_reader_a_few_lines(site, browser):
    """From the first change to the first result on a fresh origin (Pyodide downloaded
    byte by byte), a screen reader hears a few lines, not every step of the download,
    and the last is that the answer is live."""
    from llmmath.explorers import explore

    httpd = serve(site)  # a new port: nothing cached
    try:
        browser.get(f"{httpd.base}/{CALCULATOR}")
        wait_for(browser, 0, lambda s: s["draws"] >= 1, "the calculator drawn")
        assert browser.execute_script(HEARD) >= 1
        browser.execute_script(SET, 0, "batch", 4)
        shown = wait_for(browser, 0, lambda s: s["live"], "the first result")
        heard = browser.execute_script("return window.__heard")
    finally:
        httpd.shutdown()
        httpd.server_close()
    assert_shows_python(shown)
    assert shown["state"] == explore("calculator", {"batch": 4})["state"]
    assert 2 <= len(heard) <= 6, heard
    assert sum("%" in line for line in heard) <= 1, heard
    assert heard[-1].startswith(shown["status"]), heard


def test_an_error_in_a_new_answer_is_heard(server, browser):
    """An answer that is an error (a number no config can hold) is said in the live
    region, beside "Live", not only shown in the page."""
    open_page(browser, server, CALCULATOR, 1)
    browser.execute_script(HEARD)
    browser.execute_script(SET, 0, "batch", "1e308")
    shown = wait_for(
        browser,
        0,
        lambda s: s["live"] and "1e+308" in " ".join(s["notes"]),
        "the error",
    )
    error = [n for n in shown["notes"] if "1e+308" in n][0]
    heard = browser.execute_script("return window.__heard")
    assert any(error in line for line in heard), (error, heard)


def test_a_skip_link_takes_the_keyboard_to_the_first_control(server, browser):
    """On a page with explorers, the second Tab reaches a link that puts the focus on
    the first control of the page's first explorer, past its formulas and code."""
    from selenium.webdriver.common.action_chains import ActionChains
    from selenium.webdriver.common.keys import Keys

    open_page(browser, server, MEMORY, 2)
    ActionChains(browser).send_keys(Keys.TAB, Keys.TAB).perform()
    link = browser.switch_to.active_element
    text = link.get_attribute("textContent")  # shown as it slides in
    assert link.tag_name == "a" and "explorer" in text.lower(), text
    ActionChains(browser).send_keys(Keys.ENTER).perform()
    focused = browser.execute_script(
        "const first = document.querySelector('.llmmath-explorer')"
        ".querySelector('input, select, textarea');"
        "return document.activeElement === first"
    )
    assert focused


def test_no_control_is_named_by_a_bare_symbol(site, server, browser):
    """A control whose label is a symbol ("H", "n_kv", "tp") has an accessible name that
    says what it is, the symbol kept in it."""
    import re

    symbol = re.compile(r"[A-Za-z]{1,2}|(\w+ )?[A-Za-z]+_[A-Za-z]+")
    pages = {
        page: kinds
        for page, kinds in explorers_on(site).items()
        if not page.startswith("zh/")
        and {"params", "attention", "layout", "mla"} & set(kinds)
    }
    checked = []
    for page, kinds in pages.items():
        open_page(browser, server, page, len(kinds))
        for label in browser.find_elements("css selector", ".llmmath-control"):
            text = label.find_element("css selector", ".llmmath-label").text
            if not symbol.fullmatch(text):
                continue
            control = label.find_element("css selector", "input, select, textarea")
            name = control.accessible_name
            checked.append(text)
            assert text in name and re.search(r"[a-z]{4,}", name), (page, text, name)
    assert {"H", "n_h", "n_kv", "t", "tp", "pp"} <= set(checked), checked


# --- Python restored from the snapshot, started before the first change (issue 36) ---

#: The runtime's files that a change downloads: the worker and what it loads.
RUNTIME_FILES = ("/pyodide/", ".whl", "/pyodide-snapshot/", "llmmath-runtime-worker")
NEXT = "chapters/07_kv_cache.html"


class _Logged(_Handler):
    """Serves the site; logs the path of each request and (path, status) of each
    response; ``slow`` holds back the first byte of the paths ending so by that many
    seconds, ``gone`` answers 404."""

    requests: list
    responses: list
    slow: dict
    gone: tuple

    def do_GET(self):
        path = self.path.split("?")[0]
        self.requests.append(path)
        for suffix, seconds in self.slow.items():
            if path.endswith(suffix):
                time.sleep(seconds)
        if self.gone and path.endswith(self.gone):
            self.send_error(404)
            return
        super().do_GET()

    def send_response(self, code, message=None):
        self.responses.append((self.path.split("?")[0], code))
        super().send_response(code, message)


@pytest.fixture
def logged(site):
    """``serve(slow=..., gone=...)``: the site on a new port (nothing cached), logging
    each response in ``.responses``; every server is shut down afterwards."""
    servers = []

    def serve_logged(slow=None, gone=()):
        handler = type(
            "Handler",
            (_Logged,),
            {
                "failures": [],
                "requests": [],
                "responses": [],
                "slow": slow or {},
                "gone": gone,
            },
        )
        httpd = http.server.ThreadingHTTPServer(
            ("127.0.0.1", 0), functools.partial(handler, directory=str(site))
        )
        httpd.handle_error = lambda *args: None  # downloads the worker gave up
        threading.Thread(target=httpd.serve_forever, daemon=True).start()
        httpd.base = f"http://127.0.0.1:{httpd.server_port}"
        httpd.requests, httpd.responses = handler.requests, handler.responses
        servers.append(httpd)
        return httpd

    yield serve_logged
    for httpd in servers:
        httpd.shutdown()
        httpd.server_close()


def timings(browser) -> dict | None:
    return browser.execute_script("return llmmathRuntime.timings")


def wait_kept(browser, wait_s: float = 20) -> None:
    """Wait until the worker has kept the reader's own snapshot (after the first
    answer, in the background) in this origin's Cache Storage."""
    deadline = time.monotonic() + wait_s
    while not browser.execute_async_script(
        "caches.open('llmmath-python').then((c) => c.keys())"
        ".then((k) => arguments[0](k.length === 1))"
    ):
        assert time.monotonic() < deadline, "no snapshot kept for the next page"
        time.sleep(0.2)


def runtime_bodies(httpd) -> list[str]:
    """The runtime's files the server sent with a body (200), not a 304."""
    return [
        path
        for path, code in httpd.responses
        if code == 200 and any(part in path for part in RUNTIME_FILES)
    ]


def test_python_is_restored_from_the_snapshot(logged, browser):
    """A reader's first change restores the site's snapshot of Pyodide, started with
    the modules llmmath imports (_vendor/pyodide-snapshot/), instead of starting
    Python: the numbers are Python's, and the snapshot was downloaded once."""
    httpd = logged()
    open_page(browser, httpd, CALCULATOR, 1)
    browser.execute_script(SET, 0, "batch", 3)
    shown = settled(browser)
    assert shown["state"]["batch"] == 3
    assert_shows_python(shown)
    assert timings(browser)["path"] == "snapshot"
    assert runtime_bodies(httpd).count("/_static/pyodide-snapshot/pyodide-snapshot.bin")


@pytest.mark.parametrize("how", ["slow", "missing"])
def test_without_the_snapshot_python_is_started_and_kept(how, site, logged, browser):
    """A snapshot whose download would take longer than starting Python (its first
    byte held back 4 s here) is given up, and so is one the site lacks: Python starts
    from scratch, with the same numbers. That Python, llmmath imported, is then
    snapshotted into the browser's Cache Storage, and the next page restores it
    without asking the network for any snapshot."""
    snapshot = "pyodide-snapshot.bin"
    if how == "slow":
        httpd = logged(slow={snapshot: 4})
    else:
        httpd = logged(gone=(snapshot,))
    open_page(browser, httpd, CALCULATOR, 1)
    browser.execute_script(SET, 0, "batch", 5)
    shown = settled(browser)
    assert shown["state"]["batch"] == 5 and "error" not in shown["status"].lower()
    assert_shows_python(shown)
    assert timings(browser)["path"] == "start" and timings(browser)["snapshot"] is None
    assert [p for p in httpd.requests if p.endswith(snapshot)] == [
        f"/_static/pyodide-snapshot/{snapshot}"
    ]  # asked once, and given up or missing
    wait_kept(browser)

    httpd.requests.clear()
    open_page(browser, httpd, MEMORY, len(explorers_on(site)[MEMORY]))
    shown = change(browser, 0, "batch", read(browser, 0)["state"]["batch"] + 1)
    assert_shows_python(shown)
    assert timings(browser)["path"] == "local"
    assert not [p for p in httpd.requests if p.endswith(snapshot)], httpd.requests


SCROLL_TO_EXPLORER = (
    "document.querySelector('.llmmath-explorer').scrollIntoView({block: 'center'})"
)


def test_python_starts_from_the_cache_when_an_explorer_comes_near(
    site, logged, browser
):
    """Python once per visit: a reader who used an explorer has the runtime in the
    browser's cache and Python with llmmath imported in Cache Storage (the worker's
    own snapshot), and on the next page Python is restored from it as soon as an
    explorer comes near the viewport, before any change; nothing is downloaded again.
    Before the first use, an explorer in view starts and downloads nothing."""
    httpd = logged()
    open_page(browser, httpd, MEMORY, len(explorers_on(site)[MEMORY]))
    browser.execute_script(SCROLL_TO_EXPLORER)
    time.sleep(1.5)
    assert timings(browser) is None and not runtime_bodies(httpd)
    browser.execute_script(SET, 0, "batch", 2)
    settled(browser)
    assert runtime_bodies(httpd)  # the first use downloads it
    assert timings(browser)["path"] == "snapshot"
    wait_kept(browser)

    httpd.responses.clear()
    open_page(browser, httpd, NEXT, len(explorers_on(site)[NEXT]))
    before = read(browser, 0)
    browser.execute_script(SCROLL_TO_EXPLORER)
    deadline = time.monotonic() + WAIT_S
    while timings(browser) is None and time.monotonic() < deadline:
        time.sleep(0.05)
    ready = timings(browser)
    assert ready and ready["path"] == "local"  # llmmath included: nothing imported
    assert read(browser, 0)["draws"] == before["draws"]  # nothing was asked yet
    assert read(browser, 0)["status"] == before["status"]  # and nothing was said
    assert not runtime_bodies(httpd), runtime_bodies(httpd)
    shown = change(browser, 0, "batch", before["state"]["batch"] + 1)
    assert_shows_python(shown)
    assert timings(browser) == ready  # the Python started before the change

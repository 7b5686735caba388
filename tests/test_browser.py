"""Every page of the built book, opened in headless Chromium with every host but this
machine blocked: math typeset, widgets drawn from their stored state, figures loaded, no
errors, and nothing fetched from anywhere but the site itself.

Needs Debian's chromium and chromium-driver (`make test` installs them). Without them
the test skips, or fails when the CI variable is set. A full-page screenshot of every
page is saved under _build/browser/.
"""

import base64
import contextlib
import functools
import http.server
import json
import os
import shutil
import threading
from pathlib import Path

import pytest
import yaml
from selenium import webdriver
from selenium.webdriver.chrome.service import Service

ROOT = Path(__file__).resolve().parents[1]
CHROMIUM = Path("/usr/bin/chromium")
CHROMEDRIVER = Path("/usr/bin/chromedriver")
SHOTS = ROOT / "_build" / "browser"
WAIT_S = 60  # per page, for MathJax, the widgets, fonts and images


def toc_pages() -> list[str]:
    """The HTML page of every file in _toc.yml, plus the pages Sphinx adds."""

    def files(node):
        if isinstance(node, dict):
            if "file" in node:
                yield node["file"]
            for value in node.values():
                yield from files(value)
        elif isinstance(node, list):
            for item in node:
                yield from files(item)

    toc = yaml.safe_load((ROOT / "_toc.yml").read_text(encoding="utf-8"))
    return [f"{page}.html" for page in [toc["root"], *files(toc)]] + [
        "index.html",
        "genindex.html",
        "search.html",
    ]


#: Every page of both editions: English at the root, 简体中文 under zh/
#: (llmmath_book/translation.py).
PAGES = toc_pages() + [f"zh/{page}" for page in toc_pages()]
MISSING = [str(p) for p in (CHROMIUM, CHROMEDRIVER) if not p.exists()]
MISSING_MESSAGE = (
    f"{' and '.join(MISSING)} not found: install Debian's chromium and "
    "chromium-driver (`make test` does, through `make browser`)"
)
if MISSING and not os.environ.get("CI"):
    pytest.skip(MISSING_MESSAGE, allow_module_level=True)


class _Handler(http.server.SimpleHTTPRequestHandler):
    """Serves the site and records every response with status >= 400."""

    failures: list

    def do_GET(self):
        if self.path == "/favicon.ico":  # Chromium asks any server for one by itself;
            self.send_response(204)  # the book has none
            self.end_headers()
            return
        super().do_GET()

    def log_request(self, code="-", size="-"):
        if isinstance(code, int) and code >= 400:
            self.failures.append(f"{code} {self.path}")

    def log_message(self, *args):
        pass


def serve(site: Path) -> http.server.ThreadingHTTPServer:
    """Serve ``site`` on http://127.0.0.1:<free port> from a thread; ``.base`` is its
    URL and ``.failures`` the responses with status >= 400 (also used by the
    benchmark)."""
    handler = type("Handler", (_Handler,), {"failures": []})
    httpd = http.server.ThreadingHTTPServer(
        ("127.0.0.1", 0), functools.partial(handler, directory=str(site))
    )
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    httpd.base = f"http://127.0.0.1:{httpd.server_port}"
    httpd.failures = handler.failures
    return httpd


@pytest.fixture(scope="module")
def server(site):
    httpd = serve(site)
    yield httpd
    httpd.shutdown()
    httpd.server_close()


def chromium(profile: Path) -> webdriver.Chrome:
    """Headless Debian Chromium that resolves no host but this machine (also used by
    tests/benchmarks/run.py)."""
    options = webdriver.ChromeOptions()
    options.binary_location = str(CHROMIUM)
    for arg in [
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-dev-shm-usage",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--disable-extensions",
        "--window-size=1280,1000",
        "--hide-scrollbars",
        f"--user-data-dir={profile}",
        # every host name but localhost resolves to nothing: the site must work offline
        "--host-resolver-rules=MAP * ~NOTFOUND , EXCLUDE localhost , EXCLUDE 127.0.0.1",
    ]:
        options.add_argument(arg)
    options.set_capability(
        "goog:loggingPrefs", {"browser": "ALL", "performance": "ALL"}
    )
    # An explicit driver path: Selenium Manager never runs, so nothing is downloaded.
    driver = webdriver.Chrome(
        service=Service(executable_path=str(CHROMEDRIVER)), options=options
    )
    driver.set_script_timeout(WAIT_S + 10)
    driver.get("about:blank")  # leave Chromium's own start page
    return driver


def evaluate(driver, expression: str):
    """The value of the JavaScript ``expression`` in ``driver``'s page, through the
    DevTools protocol (``Runtime.evaluate``, which works while `as_a_reader` holds the
    Runtime domain off; ``execute_script`` does not)."""
    found = driver.execute_cdp_cmd(
        "Runtime.evaluate", {"expression": expression, "returnByValue": True}
    )
    if "exceptionDetails" in found:
        raise RuntimeError(f"{expression}: {found['exceptionDetails']}")
    return found["result"].get("value")


@contextlib.contextmanager
def as_a_reader(driver):
    """Inside: ``driver``'s pages run as in a reader's browser, for timing how a page
    loads (issue 36). chromedriver keeps DevTools' Runtime domain on (its
    ``execute_script`` runs through it), and with it on Chromium keeps a detailed stack
    trace of every exception a page throws, for the console. The widget manager's
    bundles each throw and catch one while they start (jQuery's test of the ``:has``
    selector), and that trace made V8 parse their functions (1.6 MB of source) again
    for source positions: about 200 ms more in one main-thread task, which no reader's
    browser spends. So the domain is off inside (poll the page with `evaluate`, not
    ``execute_script``, which fails there) and on again after."""
    driver.execute_cdp_cmd("Runtime.disable", {})
    try:
        yield driver
    finally:
        driver.execute_cdp_cmd("Runtime.enable", {})


@pytest.fixture(scope="module")
def browser(tmp_path_factory):
    if MISSING:  # under CI; elsewhere the module skips
        pytest.fail(MISSING_MESSAGE)
    driver = chromium(tmp_path_factory.mktemp("chromium-profile"))
    yield driver
    driver.quit()


@pytest.fixture(scope="module")
def shots():
    shutil.rmtree(SHOTS, ignore_errors=True)
    SHOTS.mkdir(parents=True)
    return SHOTS


# Runs in the page once it has loaded: waits for MathJax's first typesetting, the
# widgets (drawn from the stored state on the load event), fonts and images, then
# reports what is on the page.
INSPECT = (ROOT / "tests" / "inspect_page.js").read_text(encoding="utf-8")

NETWORK_SCHEMES = ("http:", "https:", "ws:", "wss:", "ftp:")


def network_problems(performance_log: list, base: str) -> list[str]:
    """Requests to anywhere but the site, failed loads and HTTP errors, from Chromium's
    log. Only network requests count: Chromium's own pages (chrome://...), data: and
    blob: URLs do not."""
    problems, urls = [], {}
    for entry in performance_log:
        message = json.loads(entry["message"])["message"]
        method, params = message.get("method"), message.get("params", {})
        if method == "Network.requestWillBeSent":
            urls[params["requestId"]] = url = params["request"]["url"]
            if url.startswith(NETWORK_SCHEMES) and not url.startswith(base + "/"):
                problems.append(f"request to another host: {url}")
        elif not urls.get(params.get("requestId"), "").startswith(NETWORK_SCHEMES):
            continue
        elif (
            method == "Network.responseReceived" and params["response"]["status"] >= 400
        ):
            problems.append(
                f"HTTP {params['response']['status']}: {params['response']['url']}"
            )
        elif method == "Network.loadingFailed" and not params.get("canceled"):
            problems.append(
                f"failed load ({params.get('errorText')}): {urls[params['requestId']]}"
            )
    return problems


def full_page_screenshot(driver, path: Path) -> None:
    size = driver.execute_cdp_cmd("Page.getLayoutMetrics", {})["cssContentSize"]
    shot = driver.execute_cdp_cmd(
        "Page.captureScreenshot",
        {
            "format": "png",
            "captureBeyondViewport": True,
            "optimizeForSpeed": True,
            "clip": {
                "x": 0,
                "y": 0,
                "width": size["width"],
                "height": size["height"],
                "scale": 1,
            },
        },
    )
    path.write_bytes(base64.b64decode(shot["data"]))


def test_every_built_page_is_checked(site):
    built = {
        p.relative_to(site).as_posix()
        for p in site.rglob("*.html")
        if "_static" not in p.relative_to(site).parts
    }
    assert built == set(PAGES)


@pytest.mark.parametrize("page", PAGES)
def test_page_renders_offline(page, site, server, browser, shots):
    (
        browser.get_log("browser"),
        browser.get_log("performance"),
    )  # drop the last page's entries
    server.failures.clear()
    browser.get(f"{server.base}/{page}")
    report = browser.execute_async_script(INSPECT, WAIT_S)
    shot = shots / (page.replace("/", "__").removesuffix(".html") + ".png")
    try:
        check_rendered(page, report, shot, browser, server)
    except AssertionError:
        full_page_screenshot(browser, shot)  # what the failing page showed
        raise


def check_rendered(page, report, shot, browser, server) -> None:
    """The assertions of `test_page_renders_offline` on one loaded page."""
    console = [
        e["message"] for e in browser.get_log("browser") if e["level"] == "SEVERE"
    ]
    network = (
        network_problems(browser.get_log("performance"), server.base) + server.failures
    )

    where = f"{page} (screenshot: {shot.relative_to(ROOT)})"
    assert not network, (
        f"{where}: requests failed or left the site (vendor the file into "
        f"_vendor/, see _vendor/README.md): {network}"
    )
    assert "scriptError" not in report, f"{where}: {report}"
    assert not report["timedOut"], (
        f"{where}: still not rendered after {WAIT_S} s: {report}"
    )
    assert not console, f"{where}: console errors: {console}"
    assert not report["errorOutputs"], (
        f"{where}: error or stderr outputs: {report['errorOutputs']}"
    )
    if report["mathElements"]:
        assert report["mjxContainers"] >= report["mathElements"], (
            f"{where}: math not typeset"
        )
    assert not report["untypeset"], f"{where}: math left as TeX: {report['untypeset']}"
    assert not report["mathErrors"], f"{where}: MathJax errors: {report['mathErrors']}"
    assert not report["rawDelimiters"], (
        f"{where}: raw math delimiters in the text: {report['rawDelimiters']}"
    )
    assert not report["brokenImages"], (
        f"{where}: images not loaded: {report['brokenImages']}"
    )
    if page.removeprefix("zh/") != "index.html":  # a redirect to the first page
        # the language switch leads to the same page in the other edition
        href = browser.execute_script(
            "const a = document.querySelector('nav.llmmath-language-switch a');"
            "return a && a.href"
        )
        other = page.removeprefix("zh/") if page.startswith("zh/") else f"zh/{page}"
        assert href == f"{server.base}/{other}", f"{where}: language switch {href}"
    if report["widgetState"]:
        assert report["widgetViews"] and not report["undrawnWidgets"], (
            f"{where}: widgets not drawn: {report['undrawnWidgets']}"
        )
        assert report["widgetControls"] and not report["widgetErrors"], (
            f"{where}: widgets drew errors or nothing: {report}"
        )


# --- the live explorers ---------------------------------------------------------------
# Every explorer on the site runs llmmath.explorers in the page, on Pyodide. These tests
# drive each one through its DOM controls, as a reader would, and compare what the page
# shows with what Python's llmmath computes for the state the page reports.


def explorers_on(site: Path) -> dict[str, list[str]]:
    """{page: [kind, ...]} of the explorers in each built page's stored widget state."""
    found = {}
    for page in PAGES:
        text = (site / page).read_text(encoding="utf-8")
        start = text.find('<script type="application/vnd.jupyter.widget-state+json">')
        if start < 0:
            continue
        body = text[text.index(">", start) + 1 : text.index("</script>", start)]
        models = json.loads(body)["state"].values()
        kinds = [m["state"]["kind"] for m in models if m["model_name"] == "AnyModel"]
        if kinds:
            found[page] = kinds
    return found


# Reads what one explorer shows: its state, how often it drew, its status, notes and
# tables.
READ = """
const root = document.querySelectorAll('.llmmath-explorer')[arguments[0]];
return {
  kind: root.dataset.kind,
  state: JSON.parse(root.dataset.state),
  draws: Number(root.dataset.draws || 0),
  live: root.dataset.live === "true",
  status: root.querySelector('.llmmath-status').textContent,
  output: root.querySelector('.llmmath-output').innerText,
  notes: [...root.querySelectorAll('.llmmath-note')].map(n => n.textContent),
  tables: [...root.querySelectorAll('table.llmmath-table')].map(t =>
    [...t.querySelectorAll('tbody tr')].map(r => [...r.cells].map(c => c.textContent))),
};
"""

# Sets one control of one explorer as a reader would, and fires the event it listens to.
SET = """
const [index, name, value] = arguments;
const root = document.querySelectorAll('.llmmath-explorer')[index];
const input = root.querySelector(`[name="${name}"]`);
if (input.type === "checkbox") input.checked = value;
else input.value = String(value);
const event = input.type === "range" ? "input" : "change";
input.dispatchEvent(new Event(event, {bubbles: true}));
"""


def read(browser, index: int) -> dict:
    return browser.execute_script(READ, index)


def change(browser, index: int, name: str, value, wait_s: float = 30) -> dict:
    """Set a control and wait for the explorer to draw the view computed in the page."""
    import time

    before = read(browser, index)["draws"]
    browser.execute_script(SET, index, name, value)
    deadline = time.monotonic() + wait_s
    while time.monotonic() < deadline:
        now = read(browser, index)
        if now["draws"] > before and now["live"]:
            return now
        if "Could not run Python" in now["status"]:
            raise AssertionError(now["status"])
        time.sleep(0.02)
    raise AssertionError(f"{name} = {value!r}: no live update in {wait_s} s: {now}")


def expected(kind: str, state: dict) -> tuple[list, list]:
    """The notes and table rows Python's llmmath computes for ``state``."""
    from llmmath.explorers import explore

    view = explore(kind, state)
    notes = [b["text"] for b in view["blocks"] if b["type"] == "note"]
    tables = [b["rows"] for b in view["blocks"] if b["type"] == "table"]
    return notes, tables


def assert_shows_python(shown: dict) -> None:
    notes, tables = expected(shown["kind"], shown["state"])
    assert shown["tables"] == tables, f"{shown['kind']} {shown['state']}"
    assert shown["notes"] == notes, f"{shown['kind']} {shown['state']}"


def other_value(control: dict, value, shows=None):
    """A valid value of ``control`` other than ``value``, and how the DOM takes it. A
    select's first other option for which ``shows(option)`` is true, when given (one
    that changes what the explorer shows: selective checkpointing keeps what SDPA
    keeps, so it changes nothing there)."""
    kind = control["type"]
    if kind == "select":
        values = [v for v, _ in control["options"]]
        others = [i for i, v in enumerate(values) if v != value]
        index = next((i for i in others if shows and shows(values[i])), others[0])
        return values[index], str(index)
    if kind == "check":
        return (not value,) * 2
    if kind == "text":
        raw = json.loads(value)
        raw["num_hidden_layers"] += 1
        text = json.dumps(raw, indent=2)
        return text, text
    step = 1 if kind in ("int", "range") else 0.5
    new = value * 2 if value * 2 <= control["max"] else value - step
    if kind == "range":
        new = value + 1 if value + 1 <= control["max"] else value - 1
    return new, new


def dom_value(control: dict, value):
    if control["type"] == "select":
        return str([v for v, _ in control["options"]].index(value))
    return value


@pytest.fixture(scope="module")
def explorer_pages(site):
    pages = explorers_on(site)
    kinds = sorted({k for ks in pages.values() for k in ks})
    assert kinds == sorted(
        [
            "params",
            "attention",
            "rotary",
            "serving",
            "memory",
            "roofline",
            "calculator",
            "mla",
            "layout",
            "speculative",
        ]
    ), pages
    return pages


def open_page(browser, server, page: str, count: int) -> None:
    import time

    browser.get_log("performance")
    browser.get(f"{server.base}/{page}")
    deadline = time.monotonic() + WAIT_S
    while time.monotonic() < deadline:
        if (
            browser.execute_script(
                "return document.querySelectorAll('.llmmath-explorer').length"
            )
            == count
        ):
            return
        time.sleep(0.05)
    raise AssertionError(f"{page}: {count} explorers not drawn in {WAIT_S} s")


def test_every_control_of_every_explorer_is_live(explorer_pages, server, browser):
    """Each control, changed, changes what the explorer shows, to exactly Python's
    numbers; changed back, the explorer shows the first view again. A control the
    first view disables is driven too, once a select has enabled it. Nothing leaves
    the site."""
    from llmmath.explorers import explore
    from llmmath.messages import speaking

    for page, kinds in explorer_pages.items():
        # a zh page's explorers speak Chinese: Python's views in the same language
        with speaking("zh_CN" if page.startswith("zh/") else "en"):
            drive_explorers(page, kinds, server, browser, explore)
    problems = network_problems(browser.get_log("performance"), server.base)
    assert not problems and not server.failures, problems + server.failures


def drive_explorers(page, kinds, server, browser, explore) -> None:
    """Change every control of every explorer of one page, and back."""
    from llmmath.explorers import RUNTIME_MESSAGES
    from llmmath.messages import gettext

    # the idle status, in the page's language, up to the runtime's size
    idle = next(m for m in RUNTIME_MESSAGES if "loaded once on first use" in m)
    once = gettext(idle).split("{size}")[0]
    open_page(browser, server, page, len(kinds))
    in_page = browser.execute_script(
        "return [...document.querySelectorAll('.llmmath-explorer')]"
        ".map(e => e.dataset.kind)"
    )
    assert sorted(in_page) == sorted(kinds), page
    for index, kind in enumerate(in_page):
        first = read(browser, index)
        assert first["kind"] == kind and not first["live"]
        assert "Pyodide" in first["status"], first["status"]
        assert once in first["status"], first["status"]
        assert_shows_python(first)  # the stored view is Python's
        controls = explore(kind, first["state"])["controls"]
        assert len([c for c in controls if not c.get("disabled")]) >= 3, kind
        for control in controls:
            if control.get("disabled"):
                continue
            name, old = control["name"], first["state"][control["name"]]
            new, dom = other_value(control, old, shows(kind, first["state"], name))
            shown = change(browser, index, name, dom)
            where = f"{page} {kind}.{name}: {old!r} -> {new!r}"
            assert shown["state"][name] == new, where
            assert shown["output"] != first["output"], f"{where} changed nothing"
            assert_shows_python(shown)
            if control["type"] != "text":
                back = change(browser, index, name, dom_value(control, old))
                assert back["output"] == first["output"], f"{where} and back"
        for control in [c for c in controls if c.get("disabled")]:
            drive_disabled(browser, index, first, control["name"], explore, page)


def shows(kind: str, state: dict, name: str):
    """Whether ``name`` set to a value changes what Python shows for ``state``."""
    now = expected(kind, state)
    return lambda value: expected(kind, {**state, name: value}) != now


def enabler(kind: str, state: dict, name: str, explore) -> tuple[dict, object]:
    """A select of the view of ``state`` and a value of it whose view enables the
    control ``name`` (the memory explorer's weights in inference, LoRA's rank and
    adapters with LoRA)."""
    for select in explore(kind, state)["controls"]:
        if select["type"] != "select" or select.get("disabled"):
            continue
        for value, _label in select["options"]:
            if value == state[select["name"]]:
                continue
            view = explore(kind, {**state, select["name"]: value})
            spec = {c["name"]: c for c in view["controls"]}.get(name)
            if spec and not spec.get("disabled") and "error" not in view:
                return select, value
    raise AssertionError(f"{kind}: no select enables {name}")


def drive_disabled(browser, index, first, name, explore, page) -> None:
    """A control the first view disables: the select that enables it is changed, the
    control changed and back, then the select back, each view Python's. (From what
    the explorer shows now: a pasted config.json stays as the text control left it.)"""
    kind = first["kind"]
    first = read(browser, index)
    select, value = enabler(kind, first["state"], name, explore)
    key = select["name"]
    opened = change(browser, index, key, dom_value(select, value))
    assert_shows_python(opened)
    specs = explore(kind, opened["state"])["controls"]
    (spec,) = [c for c in specs if c["name"] == name]
    assert not spec.get("disabled"), (kind, name)
    old = opened["state"][name]
    new, dom = other_value(spec, old, shows(kind, opened["state"], name))
    shown = change(browser, index, name, dom)
    where = f"{page} {kind}.{name} (with {key} {value!r}): {old!r} -> {new!r}"
    assert shown["state"][name] == new, where
    assert shown["output"] != opened["output"], f"{where} changed nothing"
    assert_shows_python(shown)
    back = change(browser, index, name, dom_value(spec, old))
    assert back["output"] == opened["output"], f"{where} and back"
    again = change(browser, index, key, dom_value(select, first["state"][key]))
    assert again["output"] == first["output"], f"{where}: {key} back"
    assert_shows_python(again)


CALCULATOR = "book/calculator.html"


def test_calculator_counts_every_preset_config_pasted_in_the_page(server, browser):
    from llmmath import count_params, presets

    open_page(browser, server, CALCULATOR, 1)
    for name in presets.names():
        text = json.dumps(presets.get(name).hf_config)
        shown = change(browser, 0, "config", text)
        assert shown["state"]["preset"] == "(pasted config.json)"
        total = next(r for t in shown["tables"] for r in t if r[0] == "total")
        assert total[1] == f"{count_params(presets.load(name)).total:,}", name
        assert_shows_python(shown)


@pytest.mark.parametrize(
    "text, message",
    [
        ('{"model_type": "t5"}', "model_type 't5' is not supported"),
        ('{"model_type": "llama",', "the pasted config.json is not valid JSON"),
        (
            json.dumps(
                {
                    "model_type": "llama",
                    "hidden_size": 4002,
                    "num_hidden_layers": 2,
                    "num_attention_heads": 32,
                    "intermediate_size": 11008,
                    "vocab_size": 32000,
                }
            ),
            "must be divisible by num_attention_heads",
        ),
        # hostile pastes (issue 18): the one reader refuses them in the page too
        ('{"model_type": "llama", "model_type": "llama"}', "'model_type' twice"),
        ("[" * 100_000, "deeper than 32 levels"),
        ('{"model_type": "llama", "vocab_size": ' + "9" * 5000 + "}", "5,000 digits"),
    ],
    ids=["unsupported", "invalid", "inconsistent", "duplicate", "nested", "huge"],
)
def test_calculator_shows_the_clis_one_line_message(text, message, server, browser):
    open_page(browser, server, CALCULATOR, 1)
    shown = change(browser, 0, "config", text)
    (note,) = shown["notes"]
    assert note.startswith("llmmath: error: ") and message in note
    assert "\n" not in note and "Traceback" not in shown["output"]
    assert not shown["tables"]
    assert_shows_python(shown)


def test_calculator_answer_is_shared_by_its_link(server, browser):
    from llmmath.explorers import explore

    open_page(browser, server, CALCULATOR, 1)
    (preset,) = [
        c for c in explore("calculator", {})["controls"] if c["name"] == "preset"
    ]
    controls = {c["name"]: c for c in explore("calculator", {})["controls"]}
    change(browser, 0, "preset", dom_value(preset, "qwen3-0.6b"))
    change(browser, 0, "batch", 8)
    # the training options too (issue 31): QLoRA at rank 64 with a chunked loss
    change(browser, 0, "method", dom_value(controls["method"], "qlora"))
    change(browser, 0, "lora_rank", 64)
    shown = change(browser, 0, "loss", dom_value(controls["loss"], "chunked"))
    assert {k: shown["state"][k] for k in ("method", "lora_rank", "loss")} == {
        "method": "qlora",
        "lora_rank": 64,
        "loss": "chunked",
    }
    link = browser.current_url
    assert "#state=" in link
    from urllib.parse import unquote

    linked = json.loads(unquote(link.split("#state=")[1].split("&")[0]))
    # the state minus the page's own: the defaults are left out
    assert linked == {
        "preset": "qwen3-0.6b",
        "batch": 8,
        "method": "qlora",
        "lora_rank": 64,
        "loss": "chunked",
    }
    browser.get("about:blank")
    browser.get(
        link
    )  # a reader opening the link sees the same answer, computed on load
    import time

    deadline = time.monotonic() + WAIT_S
    while time.monotonic() < deadline and not (
        browser.execute_script(
            "const e = document.querySelector('.llmmath-explorer');"
            "return e && e.dataset.live === 'true'"
        )
    ):
        time.sleep(0.05)
    again = read(browser, 0)
    assert again["state"] == shown["state"] and again["tables"] == shown["tables"]


@pytest.mark.parametrize(
    "query, page",
    [("参数量", "计算参数量"), ("前馈网络", "前馈网络"), ("显存带宽", "显存与速度")],
)
def test_chinese_search_finds_pages_offline(query, page, server, browser):
    """The zh site's search page (Sphinx's, with jieba's words in its index) finds
    the pages about a term of the glossary, in the reader's browser, offline."""
    import time
    import urllib.parse

    browser.get_log("performance")
    browser.get(f"{server.base}/zh/search.html?q={urllib.parse.quote(query)}")
    deadline = time.monotonic() + WAIT_S
    titles: list[str] = []
    while time.monotonic() < deadline:
        titles = browser.execute_script(
            "return [...document.querySelectorAll('#search-results li a')]"
            ".map(a => a.textContent)"
        )
        done = browser.execute_script(
            "const s = document.querySelector('#search-results .search-summary');"
            "return !!(s && s.textContent.trim())"
        )
        if done:
            break
        time.sleep(0.1)
    assert page in titles, (query, titles)
    problems = network_problems(browser.get_log("performance"), server.base)
    assert not problems and not server.failures, problems + server.failures


def search(browser, server, query: str, lang: str = "") -> list:
    """Search the site as a reader does (its search page), and return [title,
    summary] of each result once every summary is shown."""
    import time
    import urllib.parse

    browser.get(f"{server.base}/{lang}search.html?q={urllib.parse.quote(query)}")
    deadline = time.monotonic() + WAIT_S
    while time.monotonic() < deadline:
        results = browser.execute_script(
            "const s = document.querySelector('#search-results .search-summary');"
            "if (!s || !s.textContent.trim()) return null;"
            "return [...document.querySelectorAll('#search-results li')].map(li =>"
            " [li.querySelector('a').textContent,"
            "  (li.querySelector('p.context') || {}).textContent])"
        )
        if results is not None and all(summary for _, summary in results):
            return results
        time.sleep(0.1)
    raise AssertionError(f"{lang}search.html?q={query}: no results: {results}")


@pytest.mark.parametrize(
    "lang, query, title, words, toc",
    [
        ("", "KV cache", "The KV cache", ["KV cache"], "Contents"),
        ("zh/", "KV 缓存", "KV 缓存", ["KV", "缓存"], "目录"),
    ],
)
def test_search_ranks_the_page_titled_with_the_query_first(
    lang, query, title, words, toc, server, browser
):
    """Issue 36: a search for "KV cache" listed the chapter "The KV cache" 9th (every
    page with a "KV cache" section scored the same, ties alphabetical), summarised as
    "The KV cache Contents…"; the zh chapter's summary was blank lines. The page whose
    title is the query comes first, summarised by its prose about the query."""
    results = search(browser, server, query, lang)
    assert results[0][0] == title, [t for t, _ in results]
    summary = results[0][1]
    assert all(word.lower() in summary.lower() for word in words), summary
    assert toc not in summary and not summary.startswith(title), summary
    assert len(summary.split()) > 5 or len(summary) > 60, summary  # prose, not space


@pytest.mark.parametrize("lang", ["", "zh/"])
def test_the_search_page_never_scrolls_sideways_on_a_phone(lang, server, browser):
    """Issue 36: at 390 px the search page for "KV cache" scrolled 51 px sideways (a
    summary quoting a long file name)."""
    browser.set_window_size(390, 1000)
    try:
        search(browser, server, "KV cache", lang)
        wide = browser.execute_script(
            "const w = document.documentElement.clientWidth;"
            "return [document.documentElement.scrollWidth - w, w,"
            " ...[...document.querySelectorAll('#search-results *')]"
            "  .filter(e => e.getBoundingClientRect().right > w + 1)"
            "  .map(e => e.textContent.slice(0, 80))]"
        )
    finally:
        browser.set_window_size(1280, 1000)
    assert wide[1] == 390, wide
    assert wide[0] <= 0, wide


#: Each solution's title, beside the title of the exercise it links to.
SOLUTION_TITLES = """
return [...document.querySelectorAll('div.solution > .admonition-title')].map(t => {
  const link = t.querySelector('a[href]');
  const target = document.getElementById(decodeURIComponent(link.hash.slice(1)));
  return [t.textContent, link.textContent,
          target && target.querySelector('.admonition-title').textContent];
});
"""


@pytest.mark.parametrize("lang", ["", "zh/"])
def test_a_solution_is_titled_as_its_exercise(lang, site, server, browser):
    """Issue 36: a zh solution's title named its exercise in English ("解答 练习 65
    (Top-1 routing)" under "练习 65 (Top-1 路由)"). Every solution's title links to
    its exercise with that exercise's own title, in the page's language."""
    pages = [
        page
        for page in PAGES
        if page.startswith("zh/") == (lang == "zh/")
        and 'class="solution' in (site / page).read_text(encoding="utf-8")
    ]
    assert len(pages) > 5, pages
    seen = 0
    for page in pages:
        browser.get(f"{server.base}/{page}")
        for title, link, exercise in browser.execute_script(SOLUTION_TITLES):
            assert exercise, f"{page}: {title!r} links to no exercise"
            same = " ".join(link.split()) == " ".join(exercise.split())
            assert same, f"{page}: {title!r} for the exercise {exercise!r}"
            seen += 1
    assert seen > 20, seen


@pytest.mark.parametrize(
    "page", ["book/notation.html", "zh/chapters/02_embeddings.html"]
)
def test_a_page_loads_neither_the_search_index_nor_an_icon_script(
    page, server, browser
):
    """Issue 36: every page loaded Sphinx's search index (234 KB, 352 KB in Chinese)
    and scripts synchronously in its <head>, and fontawesome.js (1.49 MB), which redraws
    each icon as an SVG. A page loads neither (the search page loads the index, see the
    search tests); its icons are drawn from the theme's Font Awesome webfont."""
    import time

    browser.get_log("performance")
    browser.get(f"{server.base}/{page}")
    deadline = time.monotonic() + WAIT_S
    icons = None
    while time.monotonic() < deadline:
        icons = browser.execute_script(
            "if (document.readyState !== 'complete') return null;"
            "return [...document.querySelectorAll('.bd-header i.fa-solid, "
            ".bd-header-article i.fa-solid, .bd-header-article i.fab')].map(i => ["
            " i.className, getComputedStyle(i, '::before').content,"
            " i.getBoundingClientRect().width,"
            " document.fonts.check('900 16px \"Font Awesome 6 Free\"')])"
        )
        if icons and all(drawn for *_, drawn in icons):
            break
        time.sleep(0.1)
    requested = [
        json.loads(entry["message"])["message"]["params"]["request"]["url"]
        for entry in browser.get_log("performance")
        if '"Network.requestWillBeSent"' in entry["message"]
    ]
    loaded = [url.rsplit("/", 1)[-1].split("?")[0] for url in requested]
    for name in ("searchindex.js", "searchtools.js", "fontawesome.js"):
        assert name not in loaded, f"{page} loads {name}: {loaded}"
    assert icons and all(font for *_, font in icons), f"{page}: no webfont: {icons}"
    for name, content, width, font in icons:
        assert content not in ("none", "normal", ""), icons
    assert len([width for *_, width, _ in icons if width > 0]) >= 3, icons  # shown


def test_math_is_typeset_in_short_steps(server, browser):
    """Issue 36: MathJax typeset a whole page in one main-thread task (230-480 ms for
    the notation page here, the longest task of its load). It typesets in steps, each
    short, with the browser free between them, and all the math is typeset."""
    from tests.test_browser_runtime import LONG_TASKS

    added = browser.execute_cdp_cmd(
        "Page.addScriptToEvaluateOnNewDocument", {"source": LONG_TASKS}
    )
    try:
        browser.get(f"{server.base}/book/notation.html")
        report = browser.execute_async_script(INSPECT, WAIT_S)
        steps, tasks = browser.execute_script(
            "return [performance.getEntriesByName('llmmath-mathjax-step')"
            ".map(e => e.duration), window.__longTasks]"
        )
    finally:
        browser.execute_cdp_cmd("Page.removeScriptToEvaluateOnNewDocument", added)
        browser.get("about:blank")
    assert report["mathElements"] > 50 and not report["untypeset"], report
    assert report["mjxContainers"] >= report["mathElements"], report
    print(
        f"\n{len(steps)} steps, longest {max(steps, default=0):.0f} ms; tasks {tasks}"
    )
    assert len(steps) > 3, steps
    # under the goal for any main-thread task (README, issue 36: 200 ms), as the
    # cold-start test asks; a step measured 102 ms on two busy cores
    assert max(steps) < 200, steps

"""Every page of the built book, opened in headless Chromium with every host but this machine
blocked: math typeset, widgets drawn from their stored state, figures loaded, no errors, and
nothing fetched from anywhere but the site itself.

Needs Debian's chromium and chromium-driver (`make test` installs them). Without them the test
skips, or fails when the CI variable is set. A full-page screenshot of every page is saved under
_build/browser/.
"""

import base64
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


PAGES = toc_pages()
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


@pytest.fixture(scope="module")
def server(site):
    """The site on http://127.0.0.1:<free port>, from a thread."""
    handler = type("Handler", (_Handler,), {"failures": []})
    httpd = http.server.ThreadingHTTPServer(
        ("127.0.0.1", 0), functools.partial(handler, directory=str(site))
    )
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    httpd.base = f"http://127.0.0.1:{httpd.server_port}"
    httpd.failures = handler.failures
    yield httpd
    httpd.shutdown()
    httpd.server_close()


@pytest.fixture(scope="module")
def browser(tmp_path_factory):
    if MISSING:  # under CI; elsewhere the module skips
        pytest.fail(MISSING_MESSAGE)
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
        f"--user-data-dir={tmp_path_factory.mktemp('chromium-profile')}",
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
    yield driver
    driver.quit()


@pytest.fixture(scope="module")
def shots():
    shutil.rmtree(SHOTS, ignore_errors=True)
    SHOTS.mkdir(parents=True)
    return SHOTS


# Runs in the page once it has loaded: waits for MathJax's first typesetting, the widgets (drawn
# from the stored state on the load event), fonts and images, then reports what is on the page.
INSPECT = """
const done = arguments[arguments.length - 1];
const waitS = arguments[0];
const sleep = ms => new Promise(resolve => setTimeout(resolve, ms));
const views = [...document.querySelectorAll('script[type="application/vnd.jupyter.widget-view+json"]')];
const hasState = !!document.querySelector('script[type="application/vnd.jupyter.widget-state+json"]');
const drawn = view => {   // the manager puts a .widget-subarea with the view before the script
  const area = view.previousElementSibling;
  const widget = area && area.classList.contains("widget-subarea") && area.querySelector(".jupyter-widgets");
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
    rawDelimiters: ["$$", "\\\\(", "\\\\)", "\\\\[", "\\\\]", "\\\\begin{"].filter(d => prose.textContent.includes(d)),
    errorOutputs: [...document.querySelectorAll(".output.traceback, .output.stderr, .output.error")].map(e => e.textContent.trim().slice(0, 200)),
    brokenImages: [...document.images].filter(img => !(img.complete && img.naturalWidth > 0)).map(img => img.currentSrc || img.src),
    widgetState: hasState,
    widgetViews: views.length,
    undrawnWidgets: views.filter(view => !drawn(view)).map(view => view.textContent.slice(0, 80)),
    widgetErrors: document.querySelectorAll(".jupyter-widgets-error-widget, img.jupyter-widget").length,
    widgetControls: document.querySelectorAll(".widget-subarea .widget-inline-hbox, .widget-subarea .widget-html, .widget-subarea .widget-box").length,
  };
})().then(done, error => done({scriptError: String(error)}));
"""

NETWORK_SCHEMES = ("http:", "https:", "ws:", "wss:", "ftp:")


def network_problems(performance_log: list, base: str) -> list[str]:
    """Requests to anywhere but the site, failed loads and HTTP errors, from Chromium's log.
    Only network requests count: Chromium's own pages (chrome://...), data: and blob: URLs do not."""
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
    full_page_screenshot(browser, shot)
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
    if report["widgetState"]:
        assert report["widgetViews"] and not report["undrawnWidgets"], (
            f"{where}: widgets not drawn: {report['undrawnWidgets']}"
        )
        assert report["widgetControls"] and not report["widgetErrors"], (
            f"{where}: widgets drew errors or nothing: {report}"
        )

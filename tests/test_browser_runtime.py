"""The site's browser runtime and links, in headless Chromium (issue 23): Python runs in
a worker and never blocks the page, a failure to load it is final and says why, a link
with an answer in it shows that answer and nothing else, links are short, and pages
load a favicon and log no warnings.

Uses the server, browser and helpers of tests/test_browser.py (and skips with it when
Chromium is missing). Damaged sites are copies in a temporary folder: the shared build
is never modified.
"""

import base64
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
    assert_shows_python,
    change,
    chromium,
    dom_value,
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


@pytest.fixture
def damaged(site, tmp_path, request):
    """A copy of the site with its wheel tampered with (one byte flipped) or deleted,
    served on its own port."""
    copy = tmp_path / "html"
    shutil.copytree(site, copy)
    (wheel,) = (copy / "_static/runtime").glob("llmmath-*.whl")
    if request.param == "tampered":
        data = bytearray(wheel.read_bytes())
        data[len(data) // 2] ^= 0x01
        wheel.write_bytes(bytes(data))
    else:
        wheel.unlink()
    httpd = serve(copy)
    httpd.handle_error = lambda *args: None  # the downloads the failure cut short
    yield httpd, f"/_static/runtime/{wheel.name}"
    httpd.shutdown()
    httpd.server_close()


@pytest.mark.parametrize(
    "damaged, message",
    [
        ("tampered", "does not match its SHA-384 digest"),
        ("missing", "HTTP 404"),
    ],
    indirect=["damaged"],
)
def test_a_failed_runtime_says_so_for_good(damaged, message, browser):
    """The failure's message stays (no progress message overwrites it, later changes
    do not retry), and the numbers of the old state are greyed out."""
    httpd, wheel = damaged
    browser.get(f"{httpd.base}/{CALCULATOR}")
    wait_for(browser, 0, lambda s: s["draws"] >= 1, "the calculator drawn")
    browser.execute_script(SET, 0, "batch", 8)
    shown = wait_for(
        browser, 0, lambda s: "Could not run Python" in s["status"], "the failure"
    )
    assert wheel in shown["status"] and message in shown["status"], shown["status"]
    failed = shown["status"]
    assert stale(browser) and not shown["live"]
    time.sleep(2)  # the other downloads were under way: none of them may speak now
    assert read(browser, 0)["status"] == failed
    browser.execute_script(SET, 0, "seq_len", 1024)  # a later change does not retry
    time.sleep(1)
    again = read(browser, 0)
    assert again["status"] == failed and stale(browser) and not again["live"]
    assert not browser.execute_script(
        "return document.querySelector('.llmmath-status').textContent"
        ".includes('downloading')"
    )


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
    ],
    ids=["base64", "deflate", "bomb", "json", "array"],
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

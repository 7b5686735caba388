"""The explorers' views in headless Chromium (issue 23): the calculator gives the CLI's
answers, a bad link leaves controls a reader can use, the keyboard keeps its focus,
every page fits a 390 px phone, and the colours keep their contrast in the light and
the dark theme.

Uses the fixtures and helpers of tests/test_browser.py (the strict build, the local
server, Chromium with every other host blocked)."""

# ruff: noqa: F811  (the fixtures browser and server are imported from test_browser)

import json
import time
from urllib.parse import quote

import pytest
from selenium.common.exceptions import JavascriptException
from selenium.webdriver.common.action_chains import ActionChains
from selenium.webdriver.common.keys import Keys

from tests.test_browser import (  # noqa: F401  (browser and server: fixtures)
    CALCULATOR,
    INSPECT,
    PAGES,
    WAIT_S,
    assert_shows_python,
    browser,
    change,
    dom_value,
    open_page,
    read,
    server,
)


def wait_live(browser, index: int, before: int, wait_s: float = 60) -> dict:
    """Wait until explorer ``index`` drew a view computed in the page after ``before``
    draws."""
    deadline, now = time.monotonic() + wait_s, None
    while time.monotonic() < deadline:
        try:
            now = read(browser, index)
        except JavascriptException:  # not drawn yet
            time.sleep(0.05)
            continue
        if now["draws"] > before and now["live"]:
            return now
        time.sleep(0.02)
    raise AssertionError(f"no live update in {wait_s} s: {now}")


def index_of(browser, kind: str) -> int:
    kinds = browser.execute_script(
        "return [...document.querySelectorAll('.llmmath-explorer')]"
        ".map(e => e.dataset.kind)"
    )
    return kinds.index(kind)


# --- one compute path --------------------------------------------------------------


@pytest.mark.parametrize(
    "weights, gpu",
    [("int4", "H100-SXM5-80GB"), ("int8", "A100-SXM4-40GB"), ("bf16", "L4-24GB")],
)
def test_calculator_shows_the_clis_memory_answer(weights, gpu, server, browser, capsys):
    """The page's weights, total and fit are `memory --json`'s, for a few formats and
    GPUs (tests/test_explorers.py compares every preset × format × GPU in Python)."""
    from llmmath.cli import main
    from llmmath.explorers import explore

    controls = {c["name"]: c for c in explore("calculator", {})["controls"]}
    open_page(browser, server, CALCULATOR, 1)
    change(browser, 0, "weights", dom_value(controls["weights"], weights))
    shown = change(browser, 0, "gpu", dom_value(controls["gpu"], gpu))
    assert shown["state"]["weights"] == weights and shown["state"]["gpu"] == gpu
    assert_shows_python(shown)
    argv = ["memory", "llama-3-8b", "--weights", weights, "--gpu", gpu, "--json"]
    assert main(argv) == 0
    cli = json.loads(capsys.readouterr().out)
    rows = {r[0]: r[1] for t in shown["tables"] for r in t}
    weight_row = next(v for k, v in rows.items() if k.startswith("weights ("))
    assert weight_row.startswith(f"{cli['weight_bytes']:,} bytes")
    assert rows["weights + KV cache"].startswith(f"{cli['total_bytes']:,} bytes")
    verdict = "fit" if cli["fits"] else "do not fit"
    assert rows[f"in {gpu} ({cli['gpu_bytes']:,} bytes) they"].startswith(verdict)
    if weights == "int4":
        assert weight_row.startswith("5,700,591,616 bytes")


TRAINING_CASES = [
    {"precision": "amp", "checkpointing": "full", "gpu": "A100-SXM4-40GB"},
    {"method": "lora", "adapter_dtype": "bf16", "optimizer": "adam8bit"},
    {"method": "qlora", "lora_rank": 64, "loss": "chunked", "gpu": "L4-24GB"},
]


@pytest.mark.parametrize("case", TRAINING_CASES, ids=["amp", "lora", "qlora"])
def test_calculator_shows_the_clis_training_answer(case, server, browser):
    """Issue 31: the page's peak of a training step, its moment and items, the parts
    at rest, the fit and the largest batch are ``train-memory --json``'s."""
    from llmmath.explorers import explore
    from tests.test_explorers import cli_json, train_memory_argv

    open_page(browser, server, CALCULATOR, 1)
    for name, value in case.items():
        (control,) = [
            c
            for c in explore("calculator", read(browser, 0)["state"])["controls"]
            if c["name"] == name
        ]
        shown = change(browser, 0, name, dom_value(control, value))
    assert {k: shown["state"][k] for k in case} == case
    assert_shows_python(shown)
    cli = cli_json(train_memory_argv("llama-3-8b", shown["state"]))
    assert (
        f"Peak of a training step ({cli['peak_moment']}): {cli['peak_bytes']:,} bytes"
        in "\n".join(shown["notes"])
    )
    verdict = "the peak fits" if cli["fits"] else "the peak does not fit"
    gb = f"{cli['gpu_bytes'] / 10**9:,.2f}"
    assert (
        f"{cli['gpu']} ({gb} GB): {verdict}; largest batch that fits: "
        f"{cli['max_batch']:,}"
    ) in shown["notes"]
    (peak,) = [t for t in shown["tables"] if t and t[-1][0] == "peak"]
    (rest,) = [t for t in shown["tables"] if t and t[-1][0] == "sum at rest"]
    assert {r[0]: int(r[1].replace(",", "")) for r in peak[:-1]} == cli["peak_items"]
    assert {r[0]: int(r[1].replace(",", "")) for r in rest[:-1]} == cli["items"]
    assert peak[-1][1] == f"{cli['peak_bytes']:,}"
    assert rest[-1][1] == f"{cli['total_bytes']:,}"


def test_a_bad_link_is_one_line_and_the_select_shows_the_state(server, browser):
    from llmmath.explorers import explore

    bad = {"preset": "<img src=x onerror=alert(1)>", "gpu": "B300"}
    browser.get("about:blank")
    browser.get(f"{server.base}/{CALCULATOR}#state={quote(json.dumps(bad))}")
    shown = wait_live(browser, 0, -1)
    line, *notes = shown["notes"]
    assert line.startswith("llmmath: error: preset must be one of") and "\n" not in line
    assert line == explore("calculator", bad)["blocks"][0]["text"]
    assert shown["state"]["preset"] == "llama-3-8b"
    assert shown["state"]["gpu"] == "H100-SXM5-80GB"
    # after the line, the numbers of the state the controls show
    assert_shows_python({**shown, "notes": notes})
    selected = browser.execute_script(
        "const root = document.querySelector('.llmmath-explorer');"
        "return ['preset', 'gpu'].map(n => {"
        "  const s = root.querySelector(`select[name=${n}]`);"
        "  return s.options[s.selectedIndex].text; });"
    )
    assert selected == ["llama-3-8b", "H100-SXM5-80GB"]
    assert not browser.execute_script("return document.querySelectorAll('img[src=x]')")
    # the reader can choose another model, and llama-3-8b again
    (preset,) = [
        c for c in explore("calculator", {})["controls"] if c["name"] == "preset"
    ]
    other = change(browser, 0, "preset", dom_value(preset, "gpt2"))
    assert other["state"]["preset"] == "gpt2" and not other["notes"][0].startswith(
        "llmmath: error"
    )
    back = change(browser, 0, "preset", dom_value(preset, "llama-3-8b"))
    assert back["state"]["preset"] == "llama-3-8b"


# --- focus ---------------------------------------------------------------------------

FOCUSED = """
const a = document.activeElement;
const root = a && a.closest('.llmmath-explorer');
return a && root ? [root.dataset.kind, a.name] : null;
"""

WALKS = [
    ("chapters/01_parameters.html", "params", "preset"),
    ("chapters/01_parameters.html", "params", "num_attention_heads"),
    ("chapters/06_rope.html", "rotary", "head_dim"),
    ("chapters/07b_latent_attention.html", "mla", "preset"),
    ("chapters/09c_many_gpus.html", "layout", "preset"),
]


@pytest.mark.parametrize("page, kind, name", WALKS)
def test_keyboard_only_walk_keeps_focus(page, kind, name, server, browser):
    """Focus a control, press an arrow key twice (towards the side that has values):
    each press changes the state, and focus stays on the control."""
    browser.get(f"{server.base}/{page}")
    browser.execute_async_script(INSPECT, WAIT_S)
    index = index_of(browser, kind)
    element = browser.execute_script(
        "return document.querySelectorAll('.llmmath-explorer')[arguments[0]]"
        ".querySelector(`[name='${arguments[1]}']`)",
        index,
        name,
    )
    browser.execute_script("arguments[0].focus()", element)
    before = read(browser, index)
    for _ in range(2):
        end = browser.execute_script(
            "const e = document.activeElement; return e.tagName !== 'SELECT' ? 'none'"
            " : e.selectedIndex === e.options.length - 1 ? 'last' : 'other'"
        )
        key = Keys.ARROW_UP if end == "last" else Keys.ARROW_DOWN
        ActionChains(browser).send_keys(key).perform()
        now = wait_live(browser, index, before["draws"])
        assert now["state"][name] != before["state"][name], (kind, name, now["state"])
        assert browser.execute_script(FOCUSED) == [kind, name], (kind, name)
        assert_shows_python(now)
        before = now


# --- phone width ---------------------------------------------------------------------

OVERFLOW = """
const doc = document.documentElement, width = doc.clientWidth;
const wide = [...document.querySelectorAll('body *')].filter(e => {
  const r = e.getBoundingClientRect();
  return r.width && r.right > width + 1 && getComputedStyle(e).position !== 'fixed';
}).filter(e => ![...e.children].some(c => c.getBoundingClientRect().right > width + 1))
  .slice(0, 5).map(e => `${e.tagName.toLowerCase()}.${e.className} ` +
    `(${Math.round(e.getBoundingClientRect().right)} px)`);
return {scroll: doc.scrollWidth, client: width, wide};
"""


@pytest.fixture
def phone(browser):
    browser.execute_cdp_cmd(
        "Emulation.setDeviceMetricsOverride",
        {"width": 390, "height": 844, "deviceScaleFactor": 1, "mobile": True},
    )
    yield browser
    browser.execute_cdp_cmd("Emulation.clearDeviceMetricsOverride", {})


def test_every_page_fits_a_phone(server, phone):
    """At 390 px nothing widens the page: figures scale, tables and code scroll in
    their own box, long literals wrap."""
    problems = []
    for page in PAGES:
        phone.get(f"{server.base}/{page}")
        phone.execute_async_script(INSPECT, WAIT_S)
        r = phone.execute_script(OVERFLOW)
        if r["scroll"] > r["client"]:
            problems.append(f"{page}: {r['scroll']} > {r['client']} px: {r['wide']}")
    assert not problems, "\n".join(problems)


# --- accessibility: names and contrast -----------------------------------------------

# WCAG 2.1 contrast ratios of what the explorers draw against the background behind
# them: every bar, dot and line drawn in a palette colour (1.4.11: 3:1) and the
# explorer's text, status line and error text (1.4.3: 4.5:1).
CONTRAST = """
function rgb(text) {
  const m = text.match(/rgba?\\(([^)]+)\\)/);
  if (!m) return null;
  const [r, g, b, a = 1] = m[1].split(',').map(Number);
  return a === 0 ? null : [r, g, b];
}
function lum([r, g, b]) {
  const f = (c) => (c /= 255) <= 0.03928 ? c / 12.92 : ((c + 0.055) / 1.055) ** 2.4;
  return 0.2126 * f(r) + 0.7152 * f(g) + 0.0722 * f(b);
}
function ratio(a, b) {
  const [x, y] = [lum(a), lum(b)].sort((p, q) => q - p);
  return (x + 0.05) / (y + 0.05);
}
function background(e) {
  for (; e; e = e.parentElement) {
    const c = rgb(getComputedStyle(e).backgroundColor);
    if (c) return c;
  }
  return [255, 255, 255];
}
const out = {graphics: [], text: [], unnamed: [], background: null};
for (const root of document.querySelectorAll('.llmmath-explorer')) {
  const bg = background(root);
  out.background = bg;
  for (const svg of root.querySelectorAll('svg')) {
    if (!svg.getAttribute('aria-label')) out.unnamed.push(root.dataset.kind);
  }
  const marks = 'svg rect, svg circle, svg polyline, svg line';
  for (const e of root.querySelectorAll(marks)) {
    const style = e.getAttribute('style') || '';
    if (!/var\\(--llmmath-c\\d\\)/.test(style)) continue;
    const s = getComputedStyle(e);
    const c = rgb(/fill:\\s*none/.test(style) ? s.stroke : s.fill);
    if (c) out.graphics.push([root.dataset.kind, ratio(c, bg)]);
  }
  const texts = [root, root.querySelector('.llmmath-status'),
    ...root.querySelectorAll('.llmmath-note, td, .llmmath-label')];
  for (const e of texts) {
    if (!e) continue;
    const c = rgb(getComputedStyle(e).color);
    out.text.push([root.dataset.kind + ' ' + e.className, ratio(c, background(e))]);
  }
}
return out;
"""

CONTRAST_PAGES = [
    "chapters/01_parameters.html",
    "chapters/06_rope.html",
    "chapters/07b_latent_attention.html",
    "chapters/09_memory.html",
    "chapters/09b_serving.html",
    CALCULATOR,
]


@pytest.mark.parametrize("theme", ["light", "dark"])
@pytest.mark.parametrize("page", CONTRAST_PAGES)
def test_explorer_colours_keep_their_contrast(page, theme, server, browser):
    browser.get(f"{server.base}/{page}")
    browser.execute_async_script(INSPECT, WAIT_S)
    browser.execute_script(
        "document.documentElement.dataset.theme = arguments[0];"
        "document.documentElement.dataset.mode = arguments[0];",
        theme,
    )
    r = browser.execute_script(CONTRAST)
    assert r["graphics"] and r["text"], r
    assert not r["unnamed"], f"figures without a name: {r['unnamed']}"
    low = [(w, round(x, 2)) for w, x in r["graphics"] if x < 3]
    assert not low, f"{page} ({theme}): graphics under 3:1: {low}"
    low = [(w, round(x, 2)) for w, x in r["text"] if x < 4.5]
    assert not low, f"{page} ({theme}): text under 4.5:1: {low}"
    dark = sum(r["background"]) / 3 < 80
    assert dark == (theme == "dark"), f"{page}: the explorer's background {r}"


def test_the_status_line_is_polite(server, browser):
    """What a screen reader hears of an explorer is one polite live region
    (role=status), not assertive (the cold start's lines: test_browser_runtime.py)."""
    open_page(browser, server, CALCULATOR, 1)
    assert browser.execute_script(
        "const root = document.querySelector('.llmmath-explorer');"
        "return root.querySelectorAll('[role=status]').length === 1"
        " && !root.querySelector('[aria-live=assertive], [role=alert]')"
    )


# The WCAG contrast of the text of every element matching arguments[0] against the
# background behind it: [text, ratio], once some match (search results come later).
TEXT_CONTRAST = (
    CONTRAST.split("const out =")[0]
    + """
const [selector, done] = arguments;
const measure = () => {
  const found = [...document.querySelectorAll(selector)];
  if (!found.length) return setTimeout(measure, 100);
  done(found.map((e) => [e.textContent.slice(0, 40),
    ratio(rgb(getComputedStyle(e).color), background(e))]));
};
measure();
"""
)


@pytest.mark.parametrize(
    "page, selector",
    [
        ("chapters/03_attention.html", "caption"),
        ("chapters/07_kv_cache.html", "caption"),
        ("chapters/09c_many_gpus.html", "caption"),
        ("search.html?q=KV+cache", ".highlighted"),
        ("zh/search.html?q=KV+cache", ".highlighted"),
    ],
)
def test_captions_and_search_terms_keep_their_contrast_in_the_dark(
    page, selector, server, browser
):
    """In the dark theme, the captions of the chapters' HTML tables (on the light box
    myst-nb gives HTML outputs) and the search page's highlighted terms, in links
    too, are 4.5:1 or more against what is behind them (issue 36)."""
    browser.get(f"{server.base}/{page}")
    browser.execute_script(
        "localStorage.setItem('mode', 'dark'); localStorage.setItem('theme', 'dark');"
    )
    browser.get(f"{server.base}/{page}")
    assert browser.execute_script("return document.documentElement.dataset.theme") == (
        "dark"
    )
    found = browser.execute_async_script(TEXT_CONTRAST, selector)
    browser.execute_script("localStorage.clear()")
    low = [(text, round(x, 2)) for text, x in found if x < 4.5]
    assert found and not low, low

"""The reader editions in JupyterLab, as a reader opens them (issue 21's "Done when").

The book is built once (the ``site`` fixture of conftest.py); the reader editions that
build writes (``<build>/_build/editions/en/``) are copied into a temporary folder and
served by the JupyterLab that the requirements install, headless, on a free port of
this machine, with its own configuration, runtime, settings and workspaces folders (the
venv's ``share/jupyter`` stays on the path: the widget extensions live there). Headless
Debian Chromium, with every host but this machine blocked, then

- opens chapters 1, 3, 6, 7 and 9, the calculator page and a blank coursework sheet
  without running them, and finds in what JupyterLab renders: no MyST syntax, every
  solution folded until clicked (``<details>`` closed, solution code collapsed), the
  site's glued numbers in the prose in the site's order, the explorers' static snapshot
  (never an object repr) and the figures' captions;
- runs each chapter (Run > Run All Cells) in llmmath's kernel, changes a control of one
  live explorer and compares what it shows with ``llmmath.explorers.explore``.

Needs Debian's chromium and chromium-driver, like tests/test_browser.py (whose setup
this module imports, with its policy: skip without them, fail when CI is set). A
notebook that reads wrong is saved as a screenshot, the whole notebook from top to
bottom, under _build/jupyterlab/ (the failure names it); with
``LLMMATH_JUPYTERLAB_SHOTS=1`` every notebook is (a third of the reading's time: one
screenshot per screenful). Each live explorer, once changed, is saved there too.
"""

import contextlib
import io
import json
import os
import re
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
from bs4 import BeautifulSoup
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import WebDriverWait

from tests.test_browser import (
    MISSING,
    MISSING_MESSAGE,
    READ,
    SET,
    chromium,
    expected,
    network_problems,
    other_value,
)

ROOT = Path(__file__).resolve().parents[1]
SHOTS = ROOT / "_build" / "jupyterlab"
ALL_SHOTS = os.environ.get("LLMMATH_JUPYTERLAB_SHOTS", "") not in ("", "0")
JUPYTER = Path(sys.executable).with_name("jupyter")
WAIT_S = 90  # JupyterLab's first load, a notebook's rendering, a chapter's run

# The notebooks opened, and the kind of explorer each one's first explorer is.
CHAPTERS = {
    "chapters/01_parameters": "params",
    "chapters/03_attention": "attention",
    "chapters/06_rope": "rotary",
    "chapters/07_kv_cache": "serving",
    "chapters/09_memory": "memory",  # and a roofline explorer
    "book/calculator": "calculator",
}
SHEET = "coursework/01_parameters"  # a blank coursework sheet, not on the site

# MyST that must not be seen in a rendered Markdown cell.
# In all the text, code included:
MYST = {
    "option": re.compile(r"^\s*:(label|class|name|figwidth|align):", re.M),
    "fence": re.compile(r"(```|~~~|:::)\s*\{"),
    "target": re.compile(r"^\s*\([\w.:-]+\)=\s*$", re.M),
}
# In the prose, code left out (where braces and dollars are Python's or the shell's):
MYST_PROSE = {
    "role": re.compile(r"\{[a-z][\w:+-]*\}"),  # {glue:text}, {doc}, {cite:p}, ...
    "comment": re.compile(r"^%\s", re.M),
    # math left as TeX: a pair of dollars, or \( and \[
    "untypeset math": re.compile(r"\$[^$\s][^$]*\$|\\\(|\\\["),
}

if MISSING and not os.environ.get("CI"):  # (importing tests.test_browser skips too)
    pytest.skip(MISSING_MESSAGE, allow_module_level=True)


# --- JupyterLab -----------------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Lab:
    """A running JupyterLab: its URL, token, served folder and process."""

    def __init__(self, root: Path, home: Path):
        self.root, self.home = root, home
        self.token = secrets.token_hex(16)
        self.port = free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        self.runs = 0
        env = dict(os.environ)
        # Only the user's folders are fresh: the venv's share/jupyter (the kernel, the
        # widget extensions, JupyterLab's own settings) stays on Jupyter's paths.
        for name in [
            "JUPYTER_CONFIG_DIR",
            "JUPYTER_DATA_DIR",
            "JUPYTER_RUNTIME_DIR",
            "JUPYTERLAB_SETTINGS_DIR",
            "JUPYTERLAB_WORKSPACES_DIR",
            "IPYTHONDIR",
            "MPLCONFIGDIR",
        ]:
            env[name] = str(home / name.lower())
        env["JUPYTER_PLATFORM_DIRS"] = "1"
        env.pop("JUPYTER_PATH", None)
        self.settings(env["JUPYTERLAB_SETTINGS_DIR"])
        args = [
            str(JUPYTER),
            "lab",
            "--no-browser",
            "--ServerApp.ip=127.0.0.1",
            f"--ServerApp.port={self.port}",
            "--ServerApp.port_retries=0",
            f"--ServerApp.root_dir={root}",
            f"--IdentityProvider.token={self.token}",
            "--ServerApp.terminals_enabled=False",
            # nothing reaches the network: no news, no update check, no PyPI
            "--LabApp.news_url=None",
            "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate",
            "--LabApp.extension_manager=readonly",
        ]
        if os.getuid() == 0:
            args.append("--allow-root")
        self.log = (home / "lab.log").open("w")
        self.process = subprocess.Popen(
            args,
            env=env,
            cwd=root,
            stdin=subprocess.DEVNULL,
            stdout=self.log,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # its own process group (kernels get their own)
        )

    @staticmethod
    def settings(folder: str) -> None:
        """User settings: every cell rendered (no windowing, so that the whole notebook
        is in the page), and no news or update check."""
        for plugin, values in {
            "notebook-extension/tracker": {"windowingMode": "none"},
            "apputils-extension/notification": {
                "fetchNews": "false",
                "checkForUpdates": False,
            },
        }.items():
            path = Path(folder, "@jupyterlab", plugin + ".jupyterlab-settings")
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(json.dumps(values), encoding="utf-8")

    def api(self, path: str, method: str = "GET"):
        request = urllib.request.Request(
            f"{self.base}{path}",
            method=method,
            headers={"Authorization": f"token {self.token}"},
        )
        with urllib.request.urlopen(request, timeout=10) as response:
            body = response.read()
        return json.loads(body) if body else None

    def wait_ready(self) -> None:
        deadline = time.monotonic() + WAIT_S
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                break
            try:
                self.api("/api/status")
                return
            except OSError:
                time.sleep(0.2)
        raise AssertionError(f"JupyterLab did not start: {self.output()}")

    def output(self) -> str:
        self.log.flush()
        return (self.home / "lab.log").read_text(encoding="utf-8")[-4000:]

    def url(self, path: str) -> str:
        """The notebook at ``path`` in a workspace of its own, from a clean layout."""
        self.runs += 1
        return (
            f"{self.base}/lab/workspaces/test-{self.runs}/tree/{path}"
            f"?reset&token={self.token}"
        )

    def shut_down_kernels(self) -> None:
        for kernel in self.api("/api/kernels"):
            self.api(f"/api/kernels/{kernel['id']}", method="DELETE")

    def stop(self) -> None:
        try:
            self.shut_down_kernels()
        except OSError:
            pass  # the server stops them too, on SIGTERM
        try:
            os.killpg(self.process.pid, signal.SIGTERM)
            self.process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait()
        except ProcessLookupError:
            pass
        self.log.close()


@pytest.fixture(scope="session")
def editions(site) -> Path:
    """The reader editions the build wrote next to the site."""
    found = site.parent / "editions" / "en"
    assert (found / "chapters" / "01_parameters.ipynb").exists(), found
    return found


@pytest.fixture(scope="module")
def lab(editions, tmp_path_factory):
    home = tmp_path_factory.mktemp("jupyterlab")
    root = home / "root"
    shutil.copytree(editions, root)
    (root / "coursework").mkdir()
    shutil.copy(ROOT / f"{SHEET}.ipynb", root / f"{SHEET}.ipynb")
    server = Lab(root, home)
    try:
        server.wait_ready()
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="module")
def browser(tmp_path_factory):
    if MISSING:  # under CI; elsewhere the module skips
        pytest.fail(MISSING_MESSAGE)
    driver = chromium(tmp_path_factory.mktemp("chromium-profile"))
    driver.set_window_size(1280, 1000)
    yield driver
    driver.quit()


@pytest.fixture(scope="module")
def shots():
    shutil.rmtree(SHOTS, ignore_errors=True)
    SHOTS.mkdir(parents=True)
    return SHOTS


# --- reading a notebook in the page ---------------------------------------------------

# What the open notebook shows: its cells, and the text of its rendered Markdown cells
# with and without what is folded (typeset math left out: MathJax's own text is not
# prose).
PANEL_CSS = ".jp-NotebookPanel:not(.lm-mod-hidden)"
PANEL = f"document.querySelector('{PANEL_CSS}')"
STATE = f"""
const panel = {PANEL};
if (!panel) return null;
const markdown = [...panel.querySelectorAll('.jp-MarkdownCell .jp-RenderedMarkdown')];
const text = (e, visible, code = true) => {{
  const copy = e.cloneNode(true);
  copy.querySelectorAll('mjx-container, mjx-assistive-mml').forEach(m => m.remove());
  if (!code) copy.querySelectorAll('code, pre').forEach(m => m.remove());
  // each block on lines of its own, as innerText has it (but folded text too)
  copy.querySelectorAll('p, li, pre, summary, tr, blockquote, h1, h2, h3, h4, h5, h6')
    .forEach(b => {{ b.before('\\n'); b.after('\\n'); }});
  return visible ? e.innerText : copy.textContent;
}};
return {{
  cells: panel.querySelectorAll('.jp-Notebook .jp-Cell').length,
  markdown: markdown.length,
  math: panel.querySelectorAll('mjx-container').length,
  all: markdown.map(e => text(e, false)).join('\\n\\n'),
  prose: markdown.map(e => text(e, false, false)).join('\\n\\n'),
  // a MyST directive left as a fence: CommonMark makes it code in language "{{name}}"
  directives: markdown.flatMap(e => [...e.querySelectorAll('pre code[class*="{{"]')])
    .map(c => c.className),
  visible: markdown.map(e => text(e, true)).join('\\n\\n'),
  page: panel.innerText,
  snapshots: [...panel.querySelectorAll('.jp-OutputArea-output .llmmath-snapshot')]
    .map(s => [...s.querySelectorAll('table tbody tr')]
      .map(r => [...r.cells].map(c => c.textContent))),
  details: [...panel.querySelectorAll('.jp-RenderedMarkdown details')]
    .map(d => d.open),
  placeholders: [...panel.querySelectorAll('.jp-InputPlaceholder')]
    .filter(p => !p.classList.contains('lm-mod-hidden'))
    .map(p => p.innerText),
  errors: [...panel.querySelectorAll(
    '.jp-OutputArea-output[data-mime-type="application/vnd.jupyter.stderr"]')]
    .map(o => o.innerText),
}};
"""


def notebook(path: Path) -> dict:
    return json.loads(path.read_text(encoding="utf-8"))


def source(cell: dict) -> str:
    return "".join(cell["source"])


def open_notebook(
    browser, lab: Lab, path: str, cells: int, markdown: int, math: bool = False
) -> dict:
    """Open ``path`` in a fresh workspace and wait until every cell is in the page,
    every Markdown cell rendered and MathJax done (its count steady for a second, and
    not 0 if ``math``), then scroll the notebook through."""
    browser.get(lab.url(path))
    WebDriverWait(browser, WAIT_S).until(
        lambda d: (
            (s := d.execute_script(STATE))
            and s["cells"] == cells
            and s["markdown"] == markdown
        ),
        f"{path}: {cells} cells, {markdown} of them Markdown, not rendered",
    )
    # the file browser folds away, so that the notebook has the whole width
    for tab in browser.find_elements(
        By.CSS_SELECTOR, ".jp-SideBar.jp-mod-left .lm-TabBar-tab.lm-mod-current"
    ):
        tab.click()
    steady = {"math": -1, "since": time.monotonic()}

    def typeset(driver):
        math = driver.execute_script(
            f"return {PANEL}.querySelectorAll('mjx-container')"
        )
        if len(math) != steady["math"]:
            steady.update(math=len(math), since=time.monotonic())
        return time.monotonic() - steady["since"] > 1.0 and (steady["math"] or not math)

    WebDriverWait(browser, WAIT_S, poll_frequency=0.2).until(
        typeset, f"{path}: math not typeset"
    )
    scroll_through(browser)
    return browser.execute_script(STATE)


def scroll_through(browser) -> None:
    """Scroll the notebook from top to bottom and back, as a reader would."""
    height, step = browser.execute_script(
        f"const s = {PANEL}.querySelector('.jp-WindowedPanel-outer');"
        "return [s.scrollHeight, s.clientHeight]"
    )
    for top in [*range(0, height, step), 0]:
        browser.execute_script(
            f"{PANEL}.querySelector('.jp-WindowedPanel-outer').scrollTop = "
            "arguments[0]",
            top,
        )


def notebook_screenshot(browser, path: Path) -> None:
    """The whole notebook, top to bottom: one screenshot of JupyterLab's window per
    screenful of the notebook's scroller, pasted below one another."""
    from PIL import Image

    scroller = browser.find_element(
        By.CSS_SELECTOR, ".jp-NotebookPanel:not(.lm-mod-hidden) .jp-WindowedPanel-outer"
    )
    height, step = browser.execute_script(
        "return [arguments[0].scrollHeight, arguments[0].clientHeight]", scroller
    )
    browser.execute_script(  # the toolbar's shadow would line every seam
        "const style = document.createElement('style');"
        "style.textContent = '.jp-Toolbar { box-shadow: none !important; }';"
        "document.head.append(style)"
    )
    pieces = []
    for top in range(0, height, step):
        actual = browser.execute_script(
            "arguments[0].scrollTop = arguments[1]; return arguments[0].scrollTop",
            scroller,
            top,
        )
        shot = Image.open(io.BytesIO(scroller.screenshot_as_png))
        pieces.append((actual, shot))
    scale = pieces[0][1].height / step
    whole = Image.new("RGB", (pieces[0][1].width, round(height * scale)), "white")
    for top, shot in pieces:
        whole.paste(shot, (0, round(top * scale)))
    whole.save(path, compress_level=1)
    browser.execute_script("arguments[0].scrollTop = 0", scroller)


def site_page(site: Path, page: str):
    html = BeautifulSoup((site / f"{page}.html").read_text("utf-8"), "html.parser")
    return html.select_one("article") or html


def site_numbers(site: Path, page: str) -> list[str]:
    """The glued numbers of the site's page, in the order it shows them."""
    spans = site_page(site, page).select("span.pasted-text")
    return [" ".join(span.get_text().split()) for span in spans]


def site_captions(site: Path, page: str) -> list[str]:
    """The site's figure and exercise numbers ("Fig. 5", "Exercise 11"), in order."""
    numbers = site_page(site, page).select(".caption-number")
    return [" ".join(number.get_text().split()) for number in numbers]


def assert_in_order(numbers: list[str], text: str, where: str) -> None:
    text = " ".join(text.split())
    at = 0
    for index, number in enumerate(numbers):
        found = text.find(number, at)
        assert found >= 0, (
            f"{where}: the site's glued value #{index + 1} {number!r} is not in the "
            f"prose (after {text[max(0, at - 80) : at]!r})"
        )
        at = found + len(number)


def assert_no_myst(shown: dict, where: str) -> None:
    for text, patterns in [(shown["all"], MYST), (shown["prose"], MYST_PROSE)]:
        for kind, pattern in patterns.items():
            found = [m.group(0) for m in pattern.finditer(text)]
            assert not found, f"{where}: MyST {kind} shown: {found[:5]}"
    assert not shown["directives"], f"{where}: directives as code blocks"


def test_jupyterlab_is_the_venvs_with_the_widget_extensions(lab, browser):
    specs = lab.api("/api/kernelspecs")
    assert specs["default"] == "python3" and set(specs["kernelspecs"]) == {"python3"}
    browser.get(f"{lab.base}/lab?token={lab.token}")
    config = json.loads(
        browser.find_element(By.ID, "jupyter-config-data").get_attribute("textContent")
    )
    assert config["appVersion"].startswith("4."), config["appVersion"]
    extensions = {e["name"] for e in config["federated_extensions"]}
    assert {"anywidget", "@jupyter-widgets/jupyterlab-manager"} <= extensions
    assert config["news"] == {"disabled": True}


@pytest.mark.parametrize("page", CHAPTERS)
def test_chapter_reads_right_then_runs(page, lab, browser, shots, site):
    """Each chapter, opened and read without running anything, then run, and one
    explorer's control changed."""
    browser.get_log("performance")
    try:
        read_notebook(page, lab, browser, shots, site)
        run_notebook(page, lab, browser, shots)
        problems = [
            p
            for p in network_problems(browser.get_log("performance"), lab.base)
            if "another host" in p
        ]
        assert not problems, f"{page}: {problems}"
    finally:
        browser.get("about:blank")
        lab.shut_down_kernels()


def test_coursework_sheet_reads_right(lab, browser, shots, site):
    """A blank coursework sheet, opened: no MyST, nothing to unfold, and its questions
    shown as headings with their text."""
    try:
        shown = read_notebook(SHEET, lab, browser, shots, site)
        assert re.search(r"^Question 1: \S", shown["visible"], re.M), shown["visible"][
            :300
        ]
    finally:
        browser.get("about:blank")
        lab.shut_down_kernels()


def read_notebook(page: str, lab: Lab, browser, shots: Path, site: Path) -> dict:
    """Opened, not run: no MyST, solutions folded until clicked, the site's numbers,
    snapshots for explorers and captions for figures."""
    nb = notebook(lab.root / f"{page}.ipynb")
    cells = nb["cells"]
    markdown = [source(c) for c in cells if c["cell_type"] == "markdown"]
    math = any("$" in text for text in markdown)
    shown = open_notebook(
        browser, lab, f"{page}.ipynb", len(cells), len(markdown), math=math
    )
    shot = shots / (page.replace("/", "__") + ".png")
    if ALL_SHOTS:
        notebook_screenshot(browser, shot)
    where = f"{page} (screenshot: {shot.relative_to(ROOT)})"
    try:
        check_reading(page, browser, site, nb, shown, where)
    except Exception:
        if not ALL_SHOTS:  # the notebook as it reads wrong
            with contextlib.suppress(Exception):
                notebook_screenshot(browser, shot)
        raise
    return shown


def check_reading(
    page: str, browser, site: Path, nb: dict, shown: dict, where: str
) -> None:
    cells = nb["cells"]
    markdown = [source(c) for c in cells if c["cell_type"] == "markdown"]
    assert_no_myst(shown, where)
    assert "<llmmath.widgets" not in shown["page"], f"{where}: an object repr"
    assert "No renderer could be found" not in shown["page"], where
    assert not shown["errors"], f"{where}: error outputs: {shown['errors']}"

    # every solution folded: its prose in a closed <details>, its code collapsed
    solutions = sum(text.count("<details>") for text in markdown)
    hidden_code = [
        c
        for c in cells
        if c.get("metadata", {}).get("jupyter", {}).get("source_hidden")
    ]
    assert shown["details"] == [False] * solutions, where
    assert len(shown["placeholders"]) == len(hidden_code), where
    solution_code = {
        source(c).splitlines()[0].strip()
        for c in hidden_code
        if source(c).startswith("# @title Solution to Exercise")
    }
    assert solution_code <= {p.strip() for p in shown["placeholders"]}, where
    if page == SHEET:
        assert not solutions, f"{where}: a blank sheet shows solutions"
    elif page.startswith("chapters/"):
        headings = [
            m.group(1)
            for text in markdown
            for m in re.finditer(r"^### (Exercise \d+ \(.*\))$", text, re.M)
        ]
        assert len(headings) == solutions, f"{where}: {headings}"
        for heading in headings:
            assert heading in shown["visible"], f"{where}: {heading} not shown"
        assert_solution_opens(browser, where)

    # the site's numbers, in the site's order
    if page != SHEET:
        numbers = site_numbers(site, page)
        assert numbers or page == "book/calculator", f"{page}: no glued numbers"
        assert_in_order(numbers, shown["prose"], where)

    # explorers: their stored snapshot, the numbers in a table
    snapshots = sum(
        "llmmath-snapshot" in json.dumps(c.get("outputs", [])) for c in cells
    )
    assert len(shown["snapshots"]) == snapshots, f"{where}: explorers' snapshots"
    assert all(shown["snapshots"]), f"{where}: a snapshot without its table"
    if page in CHAPTERS:
        assert snapshots >= (2 if page == "chapters/09_memory" else 1), where
    # figures and exercises numbered as on the site, each figure with its caption
    if page != SHEET:
        captions = site_captions(site, page)
        shown_captions = re.findall(
            r"^(Fig\. \d+)\. \S|^(Exercise \d+) \(", shown["visible"], re.M
        )
        assert [a or b for a, b in shown_captions] == captions, where
    if page == "chapters/01_parameters":
        assert "Fig. 1." in shown["visible"] and "Fig. 2." in shown["visible"], where


def assert_solution_opens(browser, where: str) -> None:
    """The first solution: its prose hidden until its summary is clicked, its code
    collapsed until the placeholder is clicked."""
    details = browser.find_element(
        By.CSS_SELECTOR, f"{PANEL_CSS} .jp-RenderedMarkdown details"
    )
    summary = details.find_element(By.TAG_NAME, "summary")
    body = [
        e for e in details.find_elements(By.XPATH, "./*") if e.tag_name != "summary"
    ]
    assert summary.is_displayed() and summary.text.startswith("Solution to Exercise")
    assert body and not any(e.is_displayed() for e in body), f"{where}: not folded"
    browser.execute_script("arguments[0].scrollIntoView({block: 'center'})", summary)
    summary.click()
    WebDriverWait(browser, 10).until(
        lambda d: all(e.is_displayed() for e in body),
        f"{where}: the solution does not open",
    )
    assert re.search(r"\d", " ".join(e.text for e in body)), where

    placeholder = next(
        p
        for p in browser.find_elements(
            By.CSS_SELECTOR, f"{PANEL_CSS} .jp-InputPlaceholder"
        )
        if "Solution to Exercise" in p.get_attribute("textContent")
    )
    cell = placeholder.find_element(
        By.XPATH, "./ancestor::div[contains(@class, 'jp-Cell ')][1]"
    )
    editor = ".jp-InputArea .cm-content"
    assert not [
        e for e in cell.find_elements(By.CSS_SELECTOR, editor) if e.is_displayed()
    ]
    assert not cell.find_elements(By.CSS_SELECTOR, ".jp-OutputArea-output"), where
    browser.execute_script(
        "arguments[0].scrollIntoView({block: 'center'})", placeholder
    )
    placeholder.find_element(By.CSS_SELECTOR, ".jp-Placeholder-content").click()
    code = WebDriverWait(browser, 10).until(
        lambda d: next(
            (
                e
                for e in cell.find_elements(By.CSS_SELECTOR, editor)
                if e.is_displayed()
            ),
            None,
        ),
        f"{where}: the solution code does not unfold",
    )
    assert "Solution to Exercise" in code.text, where


# --- running a chapter ----------------------------------------------------------------


def click_menu(browser, menu: str, item: str) -> None:
    browser.find_element(
        By.XPATH,
        f"//li[contains(@class, 'lm-MenuBar-item')]"
        f"[.//div[normalize-space()='{menu}']]",
    ).click()
    WebDriverWait(browser, 10).until(
        lambda d: d.find_elements(
            By.XPATH,
            f"//li[contains(@class, 'lm-Menu-item')]"
            "[.//div[contains(@class, 'lm-Menu-itemLabel')]"
            f"[normalize-space()='{item}']]",
        )
    )[0].click()


PROMPTS = f"""
const panel = {PANEL};
return {{
  prompts: [...panel.querySelectorAll('.jp-CodeCell .jp-InputArea-prompt')]
    .map(p => p.textContent.trim()),
  errors: [...panel.querySelectorAll(
    '.jp-OutputArea-output[data-mime-type="application/vnd.jupyter.stderr"]')]
    .map(o => o.innerText).filter(t => /Error|Traceback/.test(t)),
  explorers: panel.querySelectorAll('.llmmath-explorer').length,
}};
"""


def kernel_state(lab: Lab, path: str) -> str | None:
    sessions = [s for s in lab.api("/api/sessions") if s["path"] == path]
    return sessions[0]["kernel"]["execution_state"] if sessions else None


def kernel_argv(lab: Lab, path: str) -> list[str]:
    """The command line of the kernel of the notebook at ``path``."""
    (session,) = [s for s in lab.api("/api/sessions") if s["path"] == path]
    kernel = session["kernel"]["id"]
    for proc in Path("/proc").iterdir():
        try:
            argv = (proc / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if any(f"kernel-{kernel}.json".encode() in a for a in argv):
            return [a.decode() for a in argv if a]
    raise AssertionError(f"{path}: no process for kernel {kernel}")


def wait_for_draw(browser, index: int, before: int, where: str) -> dict:
    return WebDriverWait(browser, 30, poll_frequency=0.05).until(
        lambda d: (now := d.execute_script(READ, index))["draws"] > before and now,
        f"{where}: the explorer did not draw again",
    )


def run_notebook(page: str, lab: Lab, browser, shots: Path) -> None:
    """Run > Run All Cells in llmmath's kernel; then one control of the first
    explorer, changed, makes it show exactly the numbers llmmath.explorers computes
    for its new state."""
    from llmmath.explorers import explore

    nb = notebook(lab.root / f"{page}.ipynb")
    cells = nb["cells"]
    code = [source(c).strip() != "" for c in cells if c["cell_type"] == "code"]
    path = f"{page}.ipynb"
    snapshots = sum(
        "llmmath-snapshot" in json.dumps(c.get("outputs", [])) for c in cells
    )
    # unfold every folded input, so that every code cell shows its prompt
    browser.execute_script(
        f"{PANEL}.querySelectorAll('.jp-InputPlaceholder .jp-Placeholder-content')"
        ".forEach(p => p.click())"
    )
    WebDriverWait(browser, 10).until(
        lambda d: len(d.execute_script(PROMPTS)["prompts"]) == len(code)
    )
    WebDriverWait(browser, WAIT_S, poll_frequency=0.25).until(
        lambda d: kernel_state(lab, path) == "idle", f"{page}: the kernel did not start"
    )
    click_menu(browser, "Run", "Run All Cells")

    # a fresh kernel numbers the cells it runs 1, 2, 3, ... (empty cells are skipped)
    numbers = [f"[{n}]:" for n in range(1, sum(code) + 1)]

    def done(driver):
        now = driver.execute_script(PROMPTS)
        assert not now["errors"], f"{page}: {now['errors']}"
        return [p for p, ran in zip(now["prompts"], code) if ran] == numbers

    WebDriverWait(browser, WAIT_S, poll_frequency=0.25).until(
        done, f"{page}: Run All Cells did not finish"
    )
    WebDriverWait(browser, 30).until(
        lambda d: d.execute_script(PROMPTS)["explorers"] == snapshots,
        f"{page}: the {snapshots} live explorers not drawn",
    )
    argv = kernel_argv(lab, path)
    assert Path(argv[0]) == Path(sys.executable) and argv[1:3] == [
        "-m",
        "ipykernel_launcher",
    ], argv

    first = browser.execute_script(READ, 0)
    assert first["kind"] == CHAPTERS[page], first
    notes, tables = expected(first["kind"], first["state"])
    assert (first["notes"], first["tables"]) == (notes, tables), page
    control = next(
        c
        for c in explore(first["kind"], first["state"])["controls"]
        if not c.get("disabled") and c["type"] in ("select", "int", "float")
    )
    name = control["name"]
    new, dom = other_value(control, first["state"][name])
    browser.execute_script(SET, 0, name, dom)
    shown = wait_for_draw(browser, 0, first["draws"], f"{page} {name}")
    where = f"{page} {first['kind']}.{name}: {first['state'][name]!r} -> {new!r}"
    assert shown["state"][name] == new, where
    assert shown["tables"] != first["tables"] or shown["notes"] != first["notes"], (
        f"{where} changed nothing"
    )
    notes, tables = expected(shown["kind"], shown["state"])
    assert shown["tables"] == tables, where
    assert shown["notes"] == notes, where
    explorer = browser.find_elements(By.CSS_SELECTOR, ".llmmath-explorer")[0]
    browser.execute_script("arguments[0].scrollIntoView()", explorer)
    explorer.screenshot(str(shots / (page.replace("/", "__") + "__live.png")))

"""The 简体中文 edition in Chromium (llmmath/translation.py): the tests of
tests/test_browser.py and the phone width of tests/test_browser_views.py on every zh
page, and the Chinese search. A file of its own so that pytest-xdist runs it beside
the English pages' (another worker, another browser).

- every zh page renders offline (console, network, math, widgets) and its language
  switch leads to the same page in English;
- every control of every explorer and of the calculator, driven on the zh pages,
  shows exactly what Python's llmmath computes, in Chinese;
- every zh page fits a phone;
- the search page finds the pages about a glossary term.
"""

# ruff: noqa: F811  (the fixtures browser, server and phone are imported)
import pytest

from llmmath.explorers import explore
from llmmath.messages import speaking
from tests import test_browser
from tests.test_browser import (  # noqa: F401  (browser and server: fixtures)
    WAIT_S,
    ZH_PAGES,
    browser,
    drive_explorers,
    every_explorer,
    explorers_on,
    network_problems,
    server,
)
from tests.test_browser_views import fit_a_phone, phone  # noqa: F401  (a fixture)


@pytest.fixture(scope="module")
def shots():
    """Screenshots of a failing zh page, beside the English pages' (which their
    module's fixture clears)."""
    folder = test_browser.SHOTS / "zh"
    folder.mkdir(parents=True, exist_ok=True)
    return folder


@pytest.mark.parametrize("page", ZH_PAGES)
def test_zh_page_renders_offline(page, site, server, browser, shots):
    test_browser.test_page_renders_offline(page, site, server, browser, shots)


def test_every_control_of_every_zh_explorer_is_live(site, server, browser):
    """As tests/test_browser.py's test, on the zh pages, against Python's views
    computed in Chinese."""
    pages = every_explorer(explorers_on(site, ZH_PAGES))
    with speaking("zh_CN"):
        for page, kinds in pages.items():
            drive_explorers(page, kinds, server, browser, explore)
    problems = network_problems(browser.get_log("performance"), server.base)
    assert not problems and not server.failures, problems + server.failures


def test_every_zh_page_fits_a_phone(server, phone):
    fit_a_phone(server, phone, ZH_PAGES)


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

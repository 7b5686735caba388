"""The book builds with warnings as errors, every chapter page renders what it stores,
and the site loads nothing from other hosts (tests/test_browser.py then opens every page
in Chromium)."""

import json
import re
from pathlib import Path
from urllib.parse import urlsplit

import pytest
from bs4 import BeautifulSoup

ROOT = Path(__file__).resolve().parents[1]
CHAPTERS = sorted((ROOT / "chapters").glob("*.ipynb"))


def test_front_matter_renders(site):
    assert "Notation" in (site / "book" / "notation.html").read_text(encoding="utf-8")
    assert (site / "index.html").exists()
    assert "分组查询注意力" in (site / "book" / "glossary.html").read_text(
        encoding="utf-8"
    )
    references = (site / "book" / "references.html").read_text(encoding="utf-8")
    bib = (ROOT / "book" / "references.bib").read_text(encoding="utf-8")
    assert references.count('class="citation"') == bib.count("@")  # every entry listed
    assert "Ainslie" in references and "Vaswani" in references


@pytest.mark.parametrize("notebook", CHAPTERS, ids=[p.stem for p in CHAPTERS])
def test_chapter_renders_outputs(site, notebook):
    page = (site / "chapters" / f"{notebook.stem}.html").read_text(encoding="utf-8")
    nb = json.loads(notebook.read_text(encoding="utf-8"))
    assert "Traceback" not in page
    if any(
        "image/png" in out.get("data", {})
        for cell in nb["cells"]
        for out in cell.get("outputs", [])
    ):
        assert "<img" in page  # figures made it
    if "widgets" in nb["metadata"]:
        assert (
            "application/vnd.jupyter.widget-state+json" in page
        )  # widget initial state
    exercises = sum("".join(c["source"]).count("{exercise}") for c in nb["cells"])
    assert page.count('class="exercise admonition"') == exercises
    assert (
        page.count('class="solution dropdown admonition"') == exercises
    )  # hidden solutions
    assert "math notranslate" in page  # math for MathJax
    assert "mybinder.org/v2/gh/" in page and "colab.research.google.com/github/" in page


# What a page loads by itself: <a href> is a link (the launch buttons, the repository),
# not a load.
LOADING_RELS = {
    "stylesheet",
    "preload",
    "modulepreload",
    "prefetch",
    "icon",
    "apple-touch-icon",
    "manifest",
}
CSS_URL = re.compile(r"""url\(\s*['"]?([^'")\s]+)|@import\s+['"]([^'"]+)""")


def is_external(url: str) -> bool:
    """True for a URL on another host (http(s)://..., //...); False for site paths and
    data: URIs."""
    parts = urlsplit(url.strip())
    return bool(parts.netloc) or parts.scheme not in ("", "data", "blob")


def external_loads_in_page(html: str) -> list[str]:
    soup = BeautifulSoup(html, "html.parser")
    found = [
        f"<{tag.name} src={tag['src']}>"
        for tag in soup.find_all(src=True)
        if is_external(tag["src"])
    ]
    found += [
        f"<{tag.name} srcset={tag['srcset']}>"
        for tag in soup.find_all(srcset=True)
        if any(is_external(c.split()[0]) for c in tag["srcset"].split(",") if c.strip())
    ]
    found += [
        f"<object data={tag['data']}>"
        for tag in soup.find_all("object", data=True)
        if is_external(tag["data"])
    ]
    found += [
        f"<link rel={' '.join(tag.get('rel', []))} href={tag['href']}>"
        for tag in soup.find_all("link", href=True)
        if LOADING_RELS & {rel.lower() for rel in tag.get("rel", [])}
        and is_external(tag["href"])
    ]
    styles = [tag.get_text() for tag in soup.find_all("style")]
    styles += [tag["style"] for tag in soup.find_all(style=True)]
    found += [f"CSS {url}" for css in styles for url in external_urls_in_css(css)]
    return found


def external_urls_in_css(css: str) -> list[str]:
    css = re.sub(r"/\*.*?\*/", "", css, flags=re.S)  # comments cite their sources
    return [
        url
        for match in CSS_URL.finditer(css)
        for url in match.groups()
        if url and is_external(url)
    ]


def test_site_loads_nothing_from_other_hosts(site):
    pages = sorted(
        p for p in site.rglob("*.html") if "_static" not in p.relative_to(site).parts
    )
    assert len(pages) > len(CHAPTERS)
    offenders = {
        str(p.relative_to(site)): bad
        for p in pages
        if (bad := external_loads_in_page(p.read_text(encoding="utf-8")))
    }
    offenders |= {
        str(p.relative_to(site)): bad
        for p in sorted(site.rglob("*.css"))
        if (bad := external_urls_in_css(p.read_text(encoding="utf-8")))
    }
    assert not offenders, (
        "pages or stylesheets load from other hosts (serve it from the site: "
        f"_vendor/README.md): {offenders}"
    )
    # no page even names a CDN (sphinx-thebe's inline script did, hence its removal);
    # the vendored libraries keep theirs as defaults for features the book does not use
    cdn = re.compile(r"unpkg\.com|jsdelivr\.net|cdnjs\.|googleapis\.com|plausible\.io")
    named = [
        str(p.relative_to(site))
        for p in pages
        if cdn.search(p.read_text(encoding="utf-8"))
    ]
    assert not named, f"pages that name a CDN: {named}"
    # the vendored MathJax and widget manager are where the pages point
    kv = (site / "chapters" / "07_kv_cache.html").read_text(encoding="utf-8")
    for asset in (
        "mathjax/tex-chtml.js",
        "requirejs/require.js",
        "html-manager/embed-amd.js",
    ):
        assert f"_static/{asset}" in kv and (site / "_static" / asset).is_file(), asset

"""The reader editions (llmmath_book/editions.py): what Binder, Colab and VS Code open.

- The committed ``editions/`` equal what the strict test build writes.
- Rendered as plain CommonMark (markdown-it-py with no MyST plugin), no notebook a
  reader opens there (every edition and every coursework sheet) shows MyST syntax.
- Their prose shows the site's numbers, in the site's order.
- Every exercise is a heading and every solution folded; figures keep captions.
- The site's Binder and Colab buttons open the editions.
- The rewriting itself, on a small notebook: roles, directives, errors.
"""

import json
import re
from pathlib import Path

import pytest
from bs4 import BeautifulSoup
from markdown_it import MarkdownIt

from llmmath_book import editions
from llmmath_book.editions import EditionError, Resolved, edition

ROOT = Path(__file__).resolve().parents[1]
SOURCES = sorted((ROOT / "chapters").glob("*.ipynb")) + [
    ROOT / "book" / "errata.ipynb",
    ROOT / "book" / "calculator.ipynb",
]
COMMITTED = ROOT / "editions" / "en"
#: Each language's committed editions and the folder of its site
#: (llmmath_book.translation).
LANGUAGES = {
    "en": ("", ROOT / "editions" / "en"),
    "zh_CN": ("zh", ROOT / "editions" / "zh"),
}
SHEETS = sorted((ROOT / "coursework").glob("*.ipynb"))
SITE_URL = "https://llm-math.github.io/llm-math/"

#: What a reader must never see: MyST roles, directive fences and options, targets,
#: substitutions.
MYST = re.compile(
    r"\{(?:glue|doc|ref|numref|cite|eval|term|math|exercise|solution|figure)[^}]*\}"
    r"|^\s*:(?:label|class|name|caption):"
    r"|```\{|^:::"
    r"|^\([\w.:-]+\)=\s*$"
    r"|\{\{",
    re.M,
)


def _docname(source: Path) -> str:
    return f"{source.parent.name}/{source.stem}"


def _edition(source: Path, root: Path = COMMITTED) -> dict:
    """A page's committed edition (English unless ``root`` is another language's)."""
    return json.loads((root / f"{_docname(source)}.ipynb").read_text("utf-8"))


def _cells(nb: dict, kind: str) -> list[str]:
    return ["".join(c["source"]) for c in nb["cells"] if c["cell_type"] == kind]


def _plain_text(markdown: str) -> str:
    """What CommonMark with no extension shows of a markdown cell (tags dropped)."""
    html = MarkdownIt("commonmark").render(markdown)
    return BeautifulSoup(html, "html.parser").get_text()


@pytest.mark.parametrize("lang", LANGUAGES)
def test_editions_built_for_every_notebook_page(lang):
    committed = LANGUAGES[lang][1]
    assert sorted(p.relative_to(committed) for p in committed.rglob("*.ipynb")) == [
        Path(f"{_docname(s)}.ipynb") for s in sorted(SOURCES)
    ]


@pytest.mark.parametrize("lang", LANGUAGES)
def test_committed_editions_are_current(site, lang):
    """``make book`` wrote them: the test build's editions are byte for byte the
    committed ones (run ``make book`` and commit ``editions/`` if this fails)."""
    COMMITTED = LANGUAGES[lang][1]
    built = site.parent / "editions" / COMMITTED.name
    stale = [
        str(path.relative_to(built))
        for path in sorted(built.rglob("*.ipynb"))
        if (COMMITTED / path.relative_to(built)).read_bytes() != path.read_bytes()
    ]
    assert not stale, f"editions/ is out of date; run make book: {stale}"
    assert {p.relative_to(built) for p in built.rglob("*.ipynb")} == {
        p.relative_to(COMMITTED) for p in COMMITTED.rglob("*.ipynb")
    }


@pytest.mark.parametrize(
    "notebook",
    sorted(COMMITTED.rglob("*.ipynb"))
    + sorted(LANGUAGES["zh_CN"][1].rglob("*.ipynb"))
    + SHEETS,
    ids=lambda p: f"{p.parent.name}/{p.stem}",
)
def test_plain_commonmark_shows_no_myst(notebook):
    nb = json.loads(notebook.read_text("utf-8"))
    for source in _cells(nb, "markdown"):
        shown = _plain_text(source)
        assert not MYST.search(source), MYST.search(source).group(0)
        assert not MYST.search(shown), MYST.search(shown).group(0)
    for cell in nb["cells"]:
        for output in cell.get("outputs", []):
            data = output.get("data", {})
            assert not any(m.startswith(editions.GLUE_MIME) for m in data)
            assert "<llmmath.widgets" not in json.dumps(data)
            if notebook.is_relative_to(COMMITTED.parent):
                assert editions.WIDGET_MIME not in data  # a snapshot, not a dead widget
    assert "widgets" not in nb["metadata"] or notebook in SHEETS


@pytest.mark.parametrize("lang", LANGUAGES)
@pytest.mark.parametrize("source", SOURCES, ids=lambda p: p.stem)
def test_prose_shows_the_sites_numbers(site, source, lang):
    """Every glued number of the page, in the page's order, is in the edition's
    prose (solutions included), in each language."""
    folder, committed = LANGUAGES[lang]
    page = site / folder / f"{_docname(source)}.html"
    soup = BeautifulSoup(page.read_text("utf-8"), "html.parser")
    glued = [span.get_text() for span in soup.select("span.pasted-text")]
    assert glued or source.parent.name == "book", "no glued number on the page"
    prose = _plain_text("\n\n".join(_cells(_edition(source, committed), "markdown")))
    position = 0
    for value in glued:
        found = prose.find(value, position)
        assert found >= 0, f"{value!r} (after character {position}) not in the prose"
        position = found + len(value)


@pytest.mark.parametrize("source", SOURCES, ids=lambda p: p.stem)
def test_exercises_headed_solutions_folded_figures_captioned(site, source):
    """As many exercise headings, folded solutions and captions as the source has,
    numbered as the site numbers them (the numbers run on across chapters)."""
    soup = BeautifulSoup(
        (site / f"{_docname(source)}.html").read_text("utf-8"), "html.parser"
    )
    site_exercises = [
        t.get_text(" ", strip=True)
        for t in soup.select("div.exercise > p.admonition-title > span.caption-number")
    ]
    site_figures = [
        t.get_text(" ", strip=True)
        for t in soup.select("figure figcaption span.caption-number")
    ]
    src = json.loads(source.read_text("utf-8"))
    text = "\n".join(_cells(src, "markdown"))
    n_exercises = len(re.findall(r"^```\{exercise\}", text, re.M))
    n_solutions = len(re.findall(r"^```\{solution-start\}", text, re.M))
    figures = [
        c["metadata"]["mystnb"]["figure"]
        for c in src["cells"]
        if "figure" in c.get("metadata", {}).get("mystnb", {})
    ]
    nb = _edition(source)
    prose = _cells(nb, "markdown")
    headings = [s for s in prose if re.match(r"### Exercise \d+", s)]
    assert len(headings) == n_exercises
    assert [re.match(r"### (Exercise \d+)", s)[1] for s in headings] == site_exercises
    folded = [s for s in prose if s.startswith("<details>\n<summary>Solution to ")]
    assert len(folded) == n_solutions
    assert all(s.rstrip().endswith("</details>") for s in folded)
    for cell in nb["cells"]:
        if cell["cell_type"] == "code" and "".join(cell["source"]).startswith(
            "# @title Solution to Exercise"
        ):
            assert cell["metadata"]["jupyter"]["source_hidden"] is True
            assert cell["metadata"]["cellView"] == "form"
            assert cell["outputs"] == []  # no answer in plain sight
    captions = [s for s in prose if s.startswith("**Fig. ")]
    assert len(captions) == len(figures)
    for number, caption, figure in zip(site_figures, captions, figures, strict=True):
        assert caption.startswith(f"**{number}.** ")
        assert figure["caption"].split("$")[0].strip()[:40] in caption


@pytest.mark.parametrize("lang", LANGUAGES)
def test_launch_buttons_open_the_editions(site, lang):
    folder, committed = LANGUAGES[lang]
    page = (site / folder / "chapters" / "01_parameters.html").read_text("utf-8")
    links = re.findall(r'href="([^"]*(?:binder|colab)[^"]*)"', page)
    assert len(links) == 2
    for link in links:
        assert link.endswith(
            f"/editions/{committed.name}/chapters/01_parameters.ipynb"
        ), link


def test_explorer_outputs_carry_a_snapshot():
    """A stored explorer output shows its numbers without a kernel: ``text/html``
    holds every table cell of the view, ``text/plain`` the same rows."""
    from llmmath.widgets import AttentionExplorer, ParamExplorer, ServingExplorer

    for widget in (ParamExplorer(), AttentionExplorer(), ServingExplorer()):
        data, _ = widget._repr_mimebundle_()
        assert editions.WIDGET_MIME in data  # the live widget stays first
        html, text = data["text/html"], data["text/plain"]
        assert "object at 0x" not in text
        cells = [
            c
            for b in widget.view["blocks"]
            if b["type"] == "table"
            for r in b["rows"]
            for c in r
        ]
        assert cells
        for cell in cells:
            assert f">{cell}<" in html.replace("&#x27;", "'")
        assert widget.text in text


# --- the rewriting, on a small notebook -----------------------------------------------


def _notebook(*cells) -> dict:
    out = []
    for i, (kind, source, *rest) in enumerate(cells):
        cell = {"cell_type": kind, "id": f"c{i}", "metadata": {}, "source": source}
        if kind == "code":
            cell.update(execution_count=i, outputs=rest[0] if rest else [])
        out.append(cell)
    return {"cells": out, "metadata": {}, "nbformat": 4, "nbformat_minor": 5}


def _resolved(**roles) -> Resolved:
    classes = {"pasted-text": [], "std-doc": [], "std-ref": [], "std-numref": []}
    classes["bibtex-citation"] = []
    classes.update(roles)
    return Resolved(roles=classes, exercises={"ex-a": 1, "ex-b": 2}, figures={"f": 3})


GLUE = {
    "output_type": "display_data",
    "metadata": {"scrapbook": {"name": "n", "mime_prefix": editions.GLUE_MIME}},
    "data": {editions.GLUE_MIME + "text/plain": "'7'"},
}


def test_roles_become_the_resolved_text():
    nb = _notebook(
        (
            "markdown",
            "(sec)=\n## A\n\nN = {glue:text}`n` and {glue:text}`m:,.0f` "
            "({cite:p}`x2020`, see {doc}`02_embeddings` and "
            "[notation](../book/notation.md)).",
        ),
        (
            "code",
            "glue_int('n', 7)",
            [GLUE, {"output_type": "stream", "name": "stdout", "text": "7\n"}],
        ),
    )
    resolved = _resolved(
        **{
            "pasted-text": ["7", "1,024"],
            "bibtex-citation": ["\\[[X20](https://e/references.html#x)\\]"],
            "std-doc": [
                "[Embeddings](https://e/02.html)",
                "[notation](https://e/n.html)",
            ],
        }
    )
    out = edition(nb, "chapters/01_x", resolved, SITE_URL)
    prose = "".join(out["cells"][0]["source"])
    assert prose == (
        "## A\n\nN = 7 and 1,024 (\\[[X20](https://e/references.html#x)\\], see "
        "[Embeddings](https://e/02.html) and [notation](https://e/n.html))."
    )
    assert out["cells"][1]["outputs"] == [nb["cells"][1]["outputs"][1]]  # glue gone


def test_exercise_solution_and_figure():
    nb = _notebook(
        (
            "markdown",
            "## Exercises\n\n```{exercise} Count it\n:label: ex-a\n\n"
            "How many? $H = 4096$.\n```\n\n"
            "```{solution-start} ex-a\n:class: dropdown\n```",
        ),
        (
            "code",
            "x = 1\nx",
            [
                {
                    "output_type": "execute_result",
                    "data": {"text/plain": "1"},
                    "metadata": {},
                    "execution_count": 1,
                }
            ],
        ),
        ("markdown", "So {glue:text}`x`.\n\n```{solution-end}\n```\n\nAfter."),
        ("code", "plot()", []),
    )
    nb["cells"][3]["metadata"] = {
        "mystnb": {"figure": {"caption": "A plot of {glue:text}`y`.", "name": "f"}},
        "tags": ["hide-input"],
    }
    out = edition(nb, "chapters/x", _resolved(**{"pasted-text": ["1", "9"]}), SITE_URL)
    kinds = [(c["cell_type"], "".join(c["source"])) for c in out["cells"]]
    assert kinds[0] == ("markdown", "## Exercises")
    assert kinds[1] == (
        "markdown",
        "### Exercise 1 (Count it)\n\nHow many? $H = 4096$.",
    )
    assert kinds[2][1].startswith("<details>\n<summary>Solution to Exercise 1 (Count")
    assert "So 1." in kinds[2][1] and kinds[2][1].endswith("</details>")
    code = out["cells"][3]
    assert "".join(code["source"]).startswith("# @title Solution to Exercise 1")
    assert code["outputs"] == [] and code["metadata"]["jupyter"]["source_hidden"]
    assert kinds[4] == ("markdown", "After.")
    assert out["cells"][5]["metadata"]["jupyter"] == {"source_hidden": True}
    assert kinds[6] == ("markdown", "**Fig. 3.** A plot of 9.")


@pytest.mark.parametrize(
    ("source", "resolved", "message"),
    [
        ("{glue:text}`a` {glue:text}`b`", {"pasted-text": ["1"]}, "more {glue:text}"),
        ("{glue:text}`a`", {"pasted-text": ["1", "2"]}, "matched no role"),
        ("{term}`GQA`", {}, "the role {term} has no reader-edition form"),
        ("```{note}\nx\n```", {}, "the directive {note} has no reader-edition form"),
        (
            "```{exercise}\n:label: ex-z\nx\n```",
            {},
            "the exercise 'ex-z' has no number",
        ),
        ("```{exercise}\n:label: ex-a\nx", {}, "is not closed"),
        ("```{solution-end}\n```", {}, "a solution ends that never started"),
        (
            "```{solution-start} ex-a\n```\n```{solution-end}\n```",
            {},
            "comes before its exercise",
        ),
        ("```{solution-start} ex-a\n```", {}, "a solution is not closed"),
    ],
)
def test_what_has_no_plain_form_is_refused(source, resolved, message):
    with pytest.raises(EditionError, match=re.escape(message)):
        edition(
            _notebook(("markdown", source)),
            "chapters/x",
            _resolved(**resolved),
            SITE_URL,
        )


def test_code_blocks_in_prose_are_left_alone():
    source = "```python\n{glue:text}`not a role`\n```"
    out = edition(_notebook(("markdown", source)), "chapters/x", _resolved(), SITE_URL)
    assert "".join(out["cells"][0]["source"]) == source


def test_site_only_prose_is_left_out():
    nb = _notebook(
        ("markdown", "On this page, {glue:text}`a` is computed in your browser."),
        ("markdown", "Everywhere: {glue:text}`b`."),
    )
    nb["cells"][0]["metadata"]["tags"] = ["site-only"]
    out = edition(nb, "book/x", _resolved(**{"pasted-text": ["1", "2"]}), SITE_URL)
    assert ["".join(c["source"]) for c in out["cells"]] == ["Everywhere: 2."]


def test_chinese_explorer_snapshots_are_chinese():
    """Issue 36: the zh editions' explorer snapshots (seen before the cell runs) were
    the English ones. Each is drawn in Chinese from the view it snapshots: the same
    numbers as the English edition's, Chinese words and the Chinese note."""
    from collections import Counter

    from llmmath.explorers import SNAPSHOT_NOTE
    from llmmath.messages import gettext

    notes = {lang: gettext(SNAPSHOT_NOTE, lang).replace("*", "") for lang in LANGUAGES}
    assert notes["en"] != notes["zh_CN"]
    found = 0
    for zh_path in sorted(LANGUAGES["zh_CN"][1].rglob("*.ipynb")):
        en_path = COMMITTED / zh_path.relative_to(LANGUAGES["zh_CN"][1])
        snapshots = {}
        for lang, path in (("en", en_path), ("zh_CN", zh_path)):
            outputs = [
                output.get("data", {})
                for cell in json.loads(path.read_text("utf-8"))["cells"]
                for output in cell.get("outputs", [])
            ]
            snapshots[lang] = [
                data
                for data in outputs
                if any(
                    note in "".join(data.get("text/plain", ""))
                    for note in notes.values()
                )
            ]
        assert len(snapshots["en"]) == len(snapshots["zh_CN"]), zh_path
        for en, zh in zip(snapshots["en"], snapshots["zh_CN"]):
            en_text, zh_text = "".join(en["text/plain"]), "".join(zh["text/plain"])
            assert notes["zh_CN"] in zh_text and notes["en"] not in zh_text, zh_path
            numbers = [
                Counter(re.findall(r"\d[\d,.]*\d|\d", text))
                for text in (en_text, zh_text)
            ]
            assert numbers[0] == numbers[1], zh_path  # in the words' order
            assert re.search(r"[\u4e00-\u9fff]", "".join(zh["text/html"])), zh_path
            found += 1
    assert found >= 10, found

"""The figures in Chinese (`llmmath.figures`, issue 33): labels, legends and titles
come from figures.po, drawn with the CJK font llmmath carries; the zh site and reader
editions show the stored Chinese figures, which must be current."""

from __future__ import annotations

import base64
import json
import warnings
from pathlib import Path

import pytest

from llmmath import figures
from llmmath_book.translation import (
    check_catalogue,
    translate_notebook,
    translate_outputs,
)

ROOT = Path(__file__).resolve().parents[1]
LANG = "zh_CN"


def test_every_figure_message_is_translated_and_keeps_its_numbers():
    problems = check_catalogue(figures.catalogue_path(LANG))
    assert problems == []
    assert len(figures.catalogue(LANG)) > 50  # the catalogue was read


def test_every_chapter_figure_has_a_current_chinese_figure():
    """No chapter figure without its Chinese one, none drawn with a translation that
    has changed since, none left over (python -m llmmath.figures remakes them)."""
    assert figures.problems(LANG) == []


def test_a_changed_translation_makes_its_figure_stale(monkeypatch):
    index = figures.read_index(LANG)
    key, entry = next(iter(index.items()))
    message = next(iter(entry["messages"]))
    table = dict(figures.catalogue(LANG))
    table[message] = table[message] + "（改）"
    monkeypatch.setitem(figures._CATALOGUES, LANG, table)
    found = figures.problems(LANG)
    assert any("stale" in line and repr(message) in line for line in found), found


def test_the_font_draws_every_translation():
    """Each translation drawn with matplotlib and the font subset: a missing glyph
    (matplotlib's warning) is an error."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figures.use_font()
    texts = sorted(set(figures.catalogue(LANG).values()))
    fig, ax = plt.subplots()
    try:
        for i, text in enumerate(texts):
            ax.text(0, i, text)
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            fig.canvas.draw()
        # the check itself: a character the subset lacks is found
        ax.text(0, -1, "龘")
        with pytest.raises(UserWarning, match="missing from font"):
            with warnings.catch_warnings():
                warnings.simplefilter("error")
                fig.canvas.draw()
    finally:
        plt.close(fig)
    assert figures.needed_characters(texts) <= figures.font_characters()


def test_a_figure_is_drawn_in_chinese_and_stays_english_outside():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    table = figures.catalogue(LANG)
    fig, ax = plt.subplots()
    try:
        ax.barh(["attention", "FFN"], [3, 5])  # categorical ticks, set at draw time
        ax.set_xlabel("share of parameters (%)")
        ax.set_title("context 4096")
        with figures.translating(LANG, strict=True):
            fig.canvas.draw()
            ticks = [t.get_text() for t in ax.get_yticklabels()]
            assert ax.get_xlabel() == table["share of parameters (%)"]
            assert ax.get_title() == table["context {0}"].format("4096")
            assert ticks == [table["attention"], table["FFN"]]
        assert ax.get_xlabel() == "share of parameters (%)"
        with pytest.raises(figures.FigureTranslationError, match="no words like these"):
            with figures.translating(LANG, strict=True):
                ax.set_xlabel("no words like these")
                fig.canvas.draw()
    finally:
        plt.close(fig)


def test_numbers_names_and_mathtext_are_not_messages():
    assert figures.message("Llama-2-7B") is None
    assert figures.message("1,024") is None
    assert figures.message("$\\mathdefault{10^{3}}$") is None
    assert figures.message("context 4096") == "context {0}"


def _a_figure(page: str):
    path = ROOT / f"{page}.ipynb"
    notebook = json.loads(path.read_text("utf-8"))
    cell, output = figures.figure_outputs(notebook)[0]
    return notebook, cell, output


def test_the_zh_site_and_editions_show_the_chinese_figure():
    """`translate_outputs` (the zh site's source-read) and `translate_notebook` (the
    zh reader editions) put the stored Chinese PNG in place of the English one."""
    notebook, cell, output = _a_figure("chapters/09_memory")
    english = "".join(output["data"]["image/png"])
    chinese = figures.figures_dir(LANG) / f"{figures.digest(english)[:16]}.png"
    for translated in (
        translate_outputs(notebook, {}, "chapters/09_memory", language=LANG),
        translate_notebook(notebook, {}, "chapters/09_memory"),
    ):
        (_, got), *_ = figures.figure_outputs(translated)
        png = base64.b64decode("".join(got["data"]["image/png"]))
        assert png == chinese.read_bytes()
        assert png != base64.b64decode(english)
    # the English notebook is not changed
    assert "".join(output["data"]["image/png"]) == english


def test_the_committed_zh_editions_show_the_chinese_figures():
    edition = ROOT / "editions" / "zh" / "chapters" / "09_memory.ipynb"
    notebook = json.loads(edition.read_text("utf-8"))
    stored = {p.read_bytes() for p in figures.figures_dir(LANG).glob("*.png")}
    found = figures.figure_outputs(notebook)
    assert found
    for _, output in found:
        assert base64.b64decode("".join(output["data"]["image/png"])) in stored
    first = next(c for c in notebook["cells"] if c.get("id") == "llmmath-language")
    assert "llmmath.figures.install()" in "".join(first["source"])

"""Glued text in the page's language (llmmath/localize.py, issue 33).

- Each rule of `render`: counts, lists (、 and 和), dates (2024 年 4 月 18 日), numbers
  and percentages (no space before %), in English as the chapters wrote them and in
  Chinese as Babel's zh_CN data and the book's spacing write them.
- The glue helpers store the spec beside the English text, and the Chinese build
  writes the spec in Chinese (`llmmath_book.translation.localize_glue`).
- Every value glued by every notebook reads as Chinese on the zh pages: no English
  word (no number word, month, "and", "of"…) in it.
"""

import datetime
import json
import re
from pathlib import Path

import pytest
from babel.dates import format_date
from babel.lists import format_list
from babel.numbers import format_decimal, format_percent

from llmmath import book, localize
from llmmath.localize import MIME, render, space_cjk
from llmmath_book.translation import localize_glue

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted((ROOT / "chapters").glob("*.ipynb")) + sorted(
    (ROOT / "book").glob("*.ipynb")
)
RECORD = book.GLUE_PREFIX


# --- the rules ----------------------------------------------------------------------


@pytest.mark.parametrize(
    "spec, english, chinese",
    [
        ({"count": 4, "capital": True}, "Four", "4"),
        ({"count": 0, "capital": False}, "no", "0"),
        ({"count": 12, "capital": False}, "12", "12"),
        (
            {"list": ["LLaMA-65B", "LLaMA-7B", "Llama-3.1-405B", "Qwen3-0.6B"]}
            | {"conj": "and"},
            "LLaMA-65B, LLaMA-7B, Llama-3.1-405B and Qwen3-0.6B",
            "LLaMA-65B、LLaMA-7B、Llama-3.1-405B 和 Qwen3-0.6B",
        ),
        ({"list": ["A", "B"], "conj": "and"}, "A and B", "A 和 B"),
        ({"list": ["A", "B", "C"], "conj": "or"}, "A, B or C", "A、B 或 C"),
        ({"list": ["A"], "conj": "and"}, "A", "A"),
        ({"list": ["32", "64", "4", "0"], "conj": ""}, "32, 64, 4, 0", "32、64、4、0"),
        ({"date": "2024-04-18"}, "18 April 2024", "2024 年 4 月 18 日"),
        ({"date": "2024-07"}, "July 2024", "2024 年 7 月"),
        ({"int": 6738415616}, "6,738,415,616", "6,738,415,616"),
        ({"percent": 0.32, "digits": 0}, "32%", "32%"),
        ({"percent": 0.123456, "digits": 2}, "12.35%", "12.35%"),
        ({"percent": 0.0009, "digits": 4}, "0.0900%", "0.0900%"),
    ],
)
def test_render(spec, english, chinese):
    assert render(spec, "en") == english
    assert render(spec, "zh_CN") == chinese


def test_english_is_babels_en_gb():
    """The kernel writes English without Babel; it is what Babel's British English
    data writes (lists without the Oxford comma, day month year)."""
    items = ["Llama-2-70B", "Llama-3-70B", "Qwen2.5-3B"]
    assert render({"list": items, "conj": "and"}) == format_list(items, locale="en_GB")
    date = datetime.date(2024, 4, 18)
    assert render({"date": "2024-04-18"}) == format_date(date, "long", locale="en_GB")


@pytest.mark.parametrize("n", [0, 7, 4096, 6738415616, 10**15 + 1])
def test_numbers_read_the_same(n):
    """Why `glue_int` and `glue_pct` glue plain text: Babel's zh_CN writes numbers
    and percentages as English does (no space before the sign)."""
    assert format_decimal(n, locale="zh_CN") == f"{n:,}"
    assert format_percent(n / 10**6, locale="zh_CN") == f"{n / 10**6:,.0%}"


def test_spacing_between_chinese_and_latin():
    assert space_cjk("2024年4月18日") == "2024 年 4 月 18 日"
    assert space_cjk("A、B和C") == "A、B 和 C"
    assert space_cjk("（8B）和 70B") == "（8B）和 70B"


@pytest.mark.parametrize(
    "spec, language",
    [
        ({"count": -1, "capital": False}, "en"),
        ({"list": [], "conj": "and"}, "en"),
        ({"list": ["A"], "conj": "and also"}, "en"),
        ({"date": "18 April 2024"}, "zh_CN"),
        ({"int": 1.5}, "en"),
        ({"words": "Four"}, "en"),
        ({"int": 4}, "fr"),
    ],
)
def test_a_bad_spec_is_refused(spec, language):
    with pytest.raises(ValueError):
        render(spec, language)


# --- glued, then built --------------------------------------------------------------


@pytest.fixture
def displayed(monkeypatch):
    """What the glue helpers display, instead of displaying it."""
    import IPython.display

    shown = []
    monkeypatch.setattr(
        IPython.display, "display", lambda data, **kw: shown.append((data, kw))
    )
    return shown


def test_glue_helpers_store_the_spec(displayed):
    book.glue_list("models", ["A", "B", "C"])
    book.glue_count("n", 4, capital=True)
    book.glue_date("day", datetime.date(2024, 4, 18))
    book.glue_date("month", "2024-07")
    texts, specs, names = [], [], []
    for data, kw in displayed:
        texts.append(data[RECORD + "text/plain"])
        specs.append(data[RECORD + MIME])
        names.append(kw["metadata"]["scrapbook"])
    assert texts == ["'A, B and C'", "'Four'", "'18 April 2024'", "'July 2024'"]
    assert specs[2] == {"date": "2024-04-18"} and specs[3] == {"date": "2024-07"}
    assert names[0] == {"name": "models", "mime_prefix": RECORD}
    with pytest.raises(TypeError):
        book.glue_count("n", 4.0)


class _Renderer:
    """The parts of MyST-NB's notebook renderer that `localize_glue` reads."""

    def __init__(self, glue_data):
        client = type("Client", (), {"glue_data": glue_data})()
        self.renderer = type("Inner", (), {"nb_client": client})()


def test_the_chinese_build_writes_the_spec():
    glue_data = {
        "models": {
            "data": {"text/plain": "'A, B and C'", MIME: {"list": ["A", "B", "C"]}}
        },
        "total": {"data": {"text/plain": "'6,738,415,616'"}},
    }
    glue_data["models"]["data"][MIME]["conj"] = "and"
    english = _Renderer(json.loads(json.dumps(glue_data)))
    localize_glue(english, "en")
    assert english.renderer.nb_client.glue_data == glue_data
    chinese = _Renderer(glue_data)
    localize_glue(chinese, "zh_CN")
    localize_glue(chinese, "zh_CN")  # once per page
    assert glue_data["models"]["data"]["text/plain"] == "'A、B 和 C'"
    assert glue_data["total"]["data"]["text/plain"] == "'6,738,415,616'"


# --- every notebook -----------------------------------------------------------------

#: An English word in a zh sentence: a number word, a month, or a lowercase word
#: (model names, units and identifiers carry digits, capitals or underscores).
MONTHS = localize.MONTHS
NUMBER_WORDS = "no one two three four five six seven eight nine ten".split()
#: Lowercase tokens that are units, not words.
UNITS = {"ms", "s"}
TOKEN = re.compile(r"[A-Za-z_][\w.+/-]*")


def english_words(text: str) -> list[str]:
    """The English words in a glued value as the zh page shows it."""
    found = []
    for token in TOKEN.findall(text):
        word = token.rstrip(".")
        if word.lower() in NUMBER_WORDS or word in MONTHS:
            found.append(word)
        elif re.fullmatch(r"[a-z]{2,}", word) and word not in UNITS:
            found.append(word)
    return found


def glued_records(path: Path):
    for cell in json.loads(path.read_text("utf-8"))["cells"]:
        for output in cell.get("outputs", []):
            scrapbook = output.get("metadata", {}).get("scrapbook")
            if scrapbook:
                yield scrapbook["name"], output["data"]


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_every_glued_value_reads_as_chinese(path):
    """A value with a spec is its English text in English and reads as Chinese on
    the zh page; a value without one must read the same in both languages."""
    problems = []
    for name, data in glued_records(path):
        text = data[RECORD + "text/plain"].strip("'\"")
        spec = data.get(RECORD + MIME)
        if spec is not None:
            assert render(spec, "en") == text, name
            text = render(spec, "zh_CN")
        if english_words(text):
            problems.append(f"{name}: {text!r} {english_words(text)}")
    assert not problems, f"{path.name}: English in a zh sentence: {problems}"


def test_the_word_rule_catches_english():
    assert english_words("Four") == ["Four"]
    assert english_words("3 of the 10") == ["of", "the"]
    assert english_words("18 April 2024") == ["April"]
    assert english_words("LLaMA-65B, LLaMA-7B and Qwen3-0.6B") == ["and"]
    assert english_words("kv_dim = H = 4096 (Llama-2-7B), 16.06 GB, 1.2 ms") == []

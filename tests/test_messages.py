"""llmmath's own gettext catalogue (llmmath.messages): complete, compiled, and the
explorers' Chinese views the English ones in other words, with the same numbers."""

from __future__ import annotations

import ast
import gettext
import io
import json
import os
import re
import string
import subprocess
import sys
from pathlib import Path

import pytest
from babel.messages.mofile import write_mo
from babel.messages.pofile import read_po

from llmmath import explorers, messages
from llmmath_book import runtime

LOCALE = Path(messages.__file__).with_name("locale")
PO = LOCALE / "zh_CN" / "LC_MESSAGES" / "llmmath.po"
MO = PO.with_suffix(".mo")
FIELD = re.compile(r"\{(\w*)\}")
NUMBER = re.compile(r"\d+")


def read_catalogue():
    with PO.open("rb") as f:
        return read_po(f, locale="zh_CN")


CATALOGUE = read_catalogue()
#: msgid → msgstr of every message whose translation differs from the English.
TRANSLATED = {
    m.id: m.string for m in CATALOGUE if m.id and m.string and m.string != m.id
}

#: States of every explorer: its defaults, and some that move it (another preset, a
#: bad value that brings a one-line answer, an unusual combination).
STATES = {
    "params": [{}, {"preset": "mixtral-8x7b"}, {"num_attention_heads": 31}],
    "attention": [{}, {"seq_len": 0}],
    "rotary": [{}, {"position": 5000, "pair": 3, "head_dim": 64}],
    "serving": [{}, {"batch": 100000}, {"gpu_gb": "x"}],
    "memory": [{}, {"optimizer": "none (inference)"}, {"seq_len": 10**6}],
    "roofline": [{}, {"batch": 1024}],
    "calculator": [
        {},
        {"weights": "int4"},
        {"preset": explorers.PASTED, "config": "{bad"},
    ],
    "mla": [{}, {"preset": "llama-3-8b"}],
    "layout": [{}, {"gpus": 3}, {"zero": 3, "recompute": True}],
    "speculative": [{}, {"alpha": 2}],
}
CASES = [(kind, state) for kind, states in STATES.items() for state in states]


def test_every_explorer_has_states_here():
    assert set(STATES) == set(explorers.EXPLORERS)


def test_every_message_is_translated_and_not_fuzzy():
    assert not CATALOGUE.fuzzy, "the catalogue's header is fuzzy: pybabel skips it"
    untranslated = [m.id for m in CATALOGUE if m.id and not m.string]
    fuzzy = [m.id for m in CATALOGUE if m.id and m.fuzzy]
    assert not untranslated and not fuzzy
    assert not list(CATALOGUE.obsolete)


def test_translations_keep_the_fields():
    for m in CATALOGUE:
        if m.id:
            assert sorted(FIELD.findall(m.string)) == sorted(FIELD.findall(m.id)), m.id


def test_mo_is_compiled_from_the_po():
    compiled = io.BytesIO()
    write_mo(compiled, read_catalogue())
    compiled.seek(0)
    expected = gettext.GNUTranslations(compiled)._catalog
    with MO.open("rb") as f:
        shipped = gettext.GNUTranslations(f)._catalog
    assert shipped == expected, "run: pybabel compile -D llmmath -d llmmath/locale"


def strings(view: dict) -> list[str]:
    """Every string a reader sees in a view, in order: controls and their options,
    notes, tables, bars, stacks and plots."""
    found = []
    for control in view["controls"]:
        found.append(control["label"])
        found += [str(label) for _value, label in control.get("options", [])]
    for block in view["blocks"]:
        kind = block["type"]
        if kind == "note":
            found.append(block["text"])
        elif kind == "table":
            found += block["headers"] or []
            found += [cell for row in block["rows"] for cell in row]
        elif kind == "bars":
            found.append(block.get("title") or "")
            found += [f"{i['label']} {i['text']}" for i in block["items"]]
        elif kind == "stack":
            found += [i["label"] for i in block["items"]]
            found.append(block["limit_label"])
        elif kind == "plot":
            found.append(block.get("title") or "")
            found += [block[a].get("label") or "" for a in ("x", "y")]
            found += [s.get("label") or "" for s in block["series"]]
    return [s for s in found if s]


def views(kind: str, state: dict) -> tuple[dict, dict]:
    english = explorers.explore(kind, state)
    with messages.speaking("zh_CN"):
        chinese = explorers.explore(kind, state)
    return english, chinese


@pytest.mark.parametrize(("kind", "state"), CASES)
def test_chinese_views_have_the_same_numbers(kind, state):
    english, chinese = views(kind, state)
    assert chinese["state"] == english["state"]
    assert [c["name"] for c in chinese["controls"]] == [
        c["name"] for c in english["controls"]
    ]
    for en, zh in zip(strings(english), strings(chinese), strict=True):
        assert NUMBER.findall(zh) == NUMBER.findall(en), (en, zh)
    en_text = explorers.view_snapshot_text(english)
    with messages.speaking("zh_CN"):  # the snapshot's own words: when it is written
        zh_text = explorers.view_snapshot_text(chinese)
    assert NUMBER.findall(zh_text) == NUMBER.findall(en_text)


@pytest.mark.parametrize(("kind", "state"), CASES)
def test_chinese_views_leave_no_catalogue_words_in_english(kind, state):
    english, chinese = views(kind, state)
    said = set(strings(chinese))
    left = [s for s in strings(english) if s in TRANSLATED and s in said]
    assert not left
    with messages.speaking("zh_CN"):
        snapshot = explorers.view_snapshot_text(chinese)
        html = explorers.view_html(chinese)
    assert explorers.SNAPSHOT_NOTE.replace("*", "") not in snapshot
    assert "is drawn when the cell runs" not in html
    assert any(s in TRANSLATED for s in strings(english))


def test_english_is_the_default_and_comes_back():
    before = explorers.explore("params", {})
    with messages.speaking("zh_CN") as lang:
        assert lang == "zh_CN" and messages.current() == "zh_CN"
        assert explorers.explore("params", {}) != before
    assert messages.current() == "en" and explorers.explore("params", {}) == before
    assert messages.gettext("weights", "zh_CN") == "权重"
    assert messages.gettext("weights") == "weights"


def test_runtime_words_come_from_the_catalogue():
    table = runtime.runtime_messages("zh_CN")
    assert set(table) == set(explorers.RUNTIME_MESSAGES)
    assert all(table[m] != m for m in table)
    assert runtime.runtime_messages("en") == {}
    template = runtime.TEMPLATE.read_text("utf-8")
    assert "__MESSAGES__" in template
    for message in explorers.RUNTIME_MESSAGES:  # the JS says them word for word
        first = message.split("{")[0]
        js = template + (runtime.TEMPLATE.parent / "explorer.js").read_text("utf-8")
        assert first[:30] in js, message


def test_a_chinese_page_shows_a_chinese_view_first():
    view = explorers.explore("memory", {"batch": 2})
    page = {
        "state": {
            "m": {
                "model_name": "AnyModel",
                "state": {"kind": "memory", "view": view, "inputs": view["state"]},
            }
        }
    }
    text = json.dumps(page)
    english = json.loads(runtime.current_front_end(text))["state"]["m"]["state"]
    chinese = json.loads(runtime.current_front_end(text, "zh_CN"))["state"]["m"][
        "state"
    ]
    assert english["view"] == view
    assert chinese["view"] == views("memory", view["state"])[1]
    assert chinese["inputs"] == view["state"]
    assert messages.current() == "en"


# --- the package's own words: errors, the CLI (issue 33, items 5 and 6) ---------------

ROOT = LOCALE.parents[1]
#: The modules `make catalogues` extracts llmmath.po's messages from (the Makefile's
#: MESSAGE_SOURCES: llmmath's, and the book's builders in book/_ext/llmmath_book/).
SOURCES = sorted(
    ROOT / folder / name
    for folder, names in re.findall(
        r"\$\(addprefix ([\w/]+)/,(.*?)\)",
        re.search(
            r"^MESSAGE_SOURCES := (.*?[^\\])\n",
            (ROOT / "Makefile").read_text("utf-8"),
            re.DOTALL | re.M,
        )
        .group(1)
        .replace("\\\n", " "),
        re.DOTALL,
    )
    for name in names.split()
)
#: Messages whose Chinese is the English: formulas, a bare field, and chapter 10's
#: title (the zh edition's own: "LLaMA 1 → 3").
SAME_IN_CHINESE = {
    "GPU",
    "LLaMA 1 → 3",
    "gpu {rule}",
    "2 * L * batch * cached_tokens * n_kv * d_h * bytes_per_element",
    "L * batch * cached_tokens * (kv_lora_rank + qk_rope_head_dim) * bytes_per_element",
    "L * batch * cached_tokens * n_h * (qk_nope_head_dim + qk_rope_head_dim + "
    "v_head_dim) * bytes_per_element",
}
#: A literal marked for translation, also inside an f-string (which Babel's extractor
#: does not read: such a message would be missing from the catalogue).
MARKED = re.compile(
    r"""(?<![\w.])(?:_|N_|gettext)\(\s*("(?:\\.|[^"\\])*"|'(?:\\.|[^'\\])*')\s*\)"""
)


def placeholders(text: str, flags=()) -> list[tuple]:
    """The fields of a message's text, sorted: ``{name}`` with its conversion and spec
    (a python-brace-format message), or ``%(name)s``, ``%s``, ``%r`` (python-format,
    in ``flags``)."""
    if "python-format" in flags:
        return sorted(re.findall(r"%(\(\w+\))?([sdr%])", text))
    return sorted(
        (name, conversion or "", spec)
        for _text, name, spec, conversion in string.Formatter().parse(text)
        if name is not None
    )


def test_the_makefile_extracts_every_module_that_speaks():
    """Every module of llmmath and of the book's builders (but the coursework, with its
    own catalogue, and the runtime, which only hands catalogues to the page) that
    translates is a source."""
    speaking = {
        path
        for folder in ("llmmath", "book/_ext")
        for path in (ROOT / folder).rglob("*.py")
        if "coursework" not in path.parts
        and path.name != "runtime.py"
        and re.search(r"from llmmath\.messages import .*\b(?:gettext|N_)\b",
                      path.read_text("utf-8"))
    }  # fmt: skip
    assert speaking <= set(SOURCES), sorted(map(str, speaking - set(SOURCES)))


def test_the_catalogue_holds_exactly_what_the_sources_mark():
    """A fresh extraction (Babel, as ``make catalogues`` runs it) finds the catalogue's
    messages and no others; a marked literal inside an f-string, which Babel does not
    read, is in the catalogue too."""
    from babel.messages.extract import extract_from_file

    found = {
        message if isinstance(message, str) else message[0]
        for path in SOURCES
        for _line, message, _comments, _context in extract_from_file("python", path)
    }
    ids = {m.id for m in CATALOGUE if m.id}
    assert found == ids, (sorted(found - ids), sorted(ids - found))
    for path in SOURCES:
        for literal in MARKED.findall(path.read_text("utf-8")):
            text = ast.literal_eval(literal)
            assert text in ids or path.name == "messages.py", (path.name, text)


def test_every_message_has_chinese_words():
    same = {m.id for m in CATALOGUE if m.id and m.string == m.id}
    assert same == SAME_IN_CHINESE


def test_every_placeholder_is_kept():
    """Each message's fields, with their conversions and specs ({value!r}, {n:,}),
    or its %-fields, are the English ones, each as often: values are formatted once,
    the same in every language."""
    for m in CATALOGUE:
        if m.id:
            assert placeholders(m.string, m.flags) == placeholders(m.id, m.flags), m.id


def test_placeholders_are_read_both_ways():
    assert placeholders("{a!r} of {b:,}") == [("a", "r", ""), ("b", "", ",")]
    assert placeholders("{b:,} 的 {a}") != placeholders("{a!r} of {b:,}")
    assert placeholders("argument %(name)s: %s", {"python-format"}) == [
        ("", "s"),
        ("(name)", "s"),
    ]
    assert "python-format" in CATALOGUE["usage: "].flags or not CATALOGUE[
        "argument %(argument_name)s: %(message)s"
    ].flags.isdisjoint({"python-format"})


def test_no_error_message_is_built_in_english_only():
    """Every ConfigError, argparse type error and argparse error of the package (the
    coursework aside) is built from a translated message, never from an f-string or
    a plain literal."""
    kinds = {"ConfigError", "ArgumentTypeError", "ArgumentError"}
    found = []
    for path in (ROOT / "llmmath").rglob("*.py"):
        if "coursework" in path.parts:
            continue
        for node in ast.walk(ast.parse(path.read_text("utf-8"))):
            if not isinstance(node, ast.Call) or not node.args:
                continue
            name = getattr(node.func, "id", getattr(node.func, "attr", None))
            message = node.args[-1] if name == "ArgumentError" else node.args[0]
            if name in kinds and isinstance(message, ast.JoinedStr | ast.Constant):
                found.append(f"{path.name}:{node.lineno}")
    assert not found


def test_the_language_comes_from_llmmath_lang(monkeypatch):
    for value, lang in [
        ("zh", "zh_CN"),
        ("zh_CN.UTF-8", "zh_CN"),
        ("zh-Hans", "zh_CN"),
        ("en_US", "en"),
        ("fr", "en"),
        ("", "en"),
    ]:
        monkeypatch.setenv("LLMMATH_LANG", value)
        assert messages._from_environment() == lang, value
    monkeypatch.delenv("LLMMATH_LANG")
    monkeypatch.setenv("LLMMATH_LANGUAGE", "zh_CN")  # its earlier name
    assert messages._from_environment() == "zh_CN"


def test_english_loads_no_catalogue():
    """English is the source: `gettext` returns it without reading a catalogue (or
    importing the gettext module), so ``import llmmath`` and ``params`` stay light."""
    code = (
        "import sys; import llmmath\n"
        "from llmmath.config import ModelConfig\n"
        "try:\n    ModelConfig(1, 1, 1, 1, 1, 2)\nexcept llmmath.ConfigError as e:\n"
        "    print(e)\n"
        "print('gettext' in sys.modules)"
    )
    run = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True,
        env={k: v for k, v in os.environ.items() if not k.startswith("LLMMATH_LANG")},
    )  # fmt: skip
    assert run.stdout.splitlines() == [
        "num_key_value_heads (2) must not exceed num_attention_heads (1)",
        "False",
    ]


@pytest.mark.parametrize(
    ("state", "english", "chinese"),
    [
        (
            {"preset": explorers.PASTED, "config": '{"model_type": "bert"}'},
            "llmmath: error: model_type 'bert' is not supported; llmmath models "
            "llama, mistral",
            "llmmath：错误：不支持 model_type 'bert'；llmmath 支持的模型类型为 "
            "llama、mistral",
        ),
        (
            {"preset": explorers.PASTED, "config": "{bad"},
            "llmmath: error: the pasted config.json is not valid JSON (",
            "llmmath：错误：粘贴的 config.json 不是有效的 JSON（",
        ),
        (
            {"preset": explorers.PASTED, "config": '{"a": 1, "a": 2}'},
            "llmmath: error: the pasted config.json gives the key 'a' twice",
            "llmmath：错误：粘贴的 config.json 两次给出键 'a'",
        ),
    ],
)
def test_the_calculator_refuses_in_the_pages_language(state, english, chinese):
    """The calculator on a zh page answers a bad config.json with the CLI's one line
    in Chinese (the explorers know their page's language, `messages.use`)."""
    en, zh = views("calculator", state)
    assert en["blocks"][0]["text"].startswith(english)
    assert zh["blocks"][0]["text"].startswith(chinese)
    assert zh["blocks"][0]["tone"] == "error"
    assert zh["error"] in zh["blocks"][0]["text"]


@pytest.mark.parametrize(
    ("kind", "state", "chinese"),
    [
        (
            "speculative",
            {"alpha": 2},
            "配置无效：alpha 必须在 0 到 0.99 之间，收到的是 2.0",
        ),
        ("layout", {"gpus": 3}, "配置无效：gpus（3）必须能被 tp·pp（8·1 = 8）整除"),
        ("serving", {"gpu_gb": "x"}, "配置无效：gpu_gb 必须是数，收到的是 'x'"),
    ],
)
def test_an_explorer_refuses_in_the_pages_language(kind, state, chinese):
    english, zh = views(kind, state)
    assert any(b.get("text", "").startswith(chinese) for b in zh["blocks"]), zh
    assert "error" in english and english["error"] != zh["error"]


def test_the_solution_button_reads_as_chinese():
    """Item 5: no space between the exercise's heading and 的解答 (the typography
    the book's catalogues follow)."""
    with messages.speaking("zh_CN"):
        button = messages.gettext("Solution to {heading}").format(
            heading="练习 1（引言）"
        )
        code = messages.gettext("Solution to {label}: the code").format(
            label="练习 1（引言）"
        )
    assert button == "练习 1（引言）的解答"
    assert code == "练习 1（引言）的解答：代码"


def test_the_layout_note_says_what_pp_offers():
    """Item 5: the divisors pp offers, in Chinese that says what {gpus} counts, and
    the verdict after the memory it is about."""
    english, chinese = views("layout", {})
    notes = [b["text"] for b in chinese["blocks"] if b["type"] == "note"]
    assert any(
        re.search(r"pp 只提供既能整除 \d+ 层、又能整除 [\d,]+（GPU 总数 ÷ tp）的值", n)
        for n in notes
    ), notes
    assert any(re.search(r"[\d,]+ GB 显存中放(得|不)下", n) for n in notes)
    assert any("Llama 3 技术报告第 3.3.2 节" in n for n in notes)
    assert any(
        "Llama 3 report, Sec. 3.3.2" in b.get("text", "") for b in english["blocks"]
    )

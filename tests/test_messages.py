"""llmmath's own gettext catalogue (llmmath.messages): complete, compiled, and the
explorers' Chinese views the English ones in other words, with the same numbers."""

from __future__ import annotations

import gettext
import io
import json
import re
from pathlib import Path

import pytest
from babel.messages.mofile import write_mo
from babel.messages.pofile import read_po

from llmmath import explorers, messages, runtime

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

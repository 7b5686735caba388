"""The explorers' functions (`llmmath.explorers`): state in, view out, never a
traceback.

Numbers are checked against closed forms written here from the chapters' formulas and
against publishers' counts, not against the code that draws them."""

import json
import subprocess
import sys

import pytest
from hypothesis import given
from hypothesis import strategies as st

from llmmath import count_params, presets
from llmmath.config import ConfigError
from llmmath.explorers import EXPLORERS, PASTED, explore, explore_json, view_text
from tests.conftest import hf_config

# Exact totals the publishers state (model cards and papers, as in
# tests/test_published_counts)
PUBLISHED = {
    "llama-2-7b": 6_738_415_616,
    "qwen3-0.6b": 596_049_920,
    "llama-3.1-405b": 405_853_388_800,
}


def table_rows(view):
    return [row for b in view["blocks"] if b["type"] == "table" for row in b["rows"]]


def row(view, label):
    (found,) = [r for r in table_rows(view) if r[0] == label]
    return found


def as_int(text: str) -> int:
    return int(text.split()[0].replace(",", ""))


@pytest.mark.parametrize("name", sorted(PUBLISHED))
def test_params_total_is_the_published_count(name):
    view = explore("params", {"preset": name})
    assert as_int(row(view, "total")[1]) == PUBLISHED[name]
    calc = explore("calculator", {"preset": name})
    assert as_int(row(calc, "total")[1]) == PUBLISHED[name]


@pytest.mark.parametrize("name", presets.names())
def test_calculator_counts_every_pasted_preset_config_exactly(name):
    text = json.dumps(hf_config(name))
    view = explore("calculator", {"preset": PASTED, "config": text})
    assert view["state"]["preset"] == PASTED
    counts = count_params(presets.load(name))
    assert as_int(row(view, "total")[1]) == counts.total
    assert as_int(row(view, "active per token")[1]) == counts.active
    groups = ("embedding", "attention", "FFN", "norms", "LM head")
    assert sum(as_int(row(view, g)[1]) for g in groups) == counts.total


def test_calculator_kv_cache_is_the_closed_form():
    cfg = presets.load("llama-3-8b")
    view = explore(
        "calculator",
        {"preset": "llama-3-8b", "batch": 8, "seq_len": 1000, "dtype": "fp8"},
    )
    d_h = cfg.hidden_size // cfg.num_attention_heads
    per_token = (
        2 * cfg.num_hidden_layers * cfg.num_key_value_heads * d_h * 1
    )  # fp8: 1 B
    assert as_int(row(view, "KV cache per token (fp8)")[1]) == per_token
    assert as_int(row(view, "KV cache, batch 8 × 1,000 tokens")[1]) == per_token * 8000


def test_calculator_edited_text_is_a_pasted_config():
    view = explore("calculator", {"preset": "llama-2-7b"})
    raw = json.loads(view["state"]["config"])
    raw["num_key_value_heads"] = 8
    edited = explore("calculator", {**view["state"], "config": json.dumps(raw)})
    assert edited["state"]["preset"] == PASTED
    expected = count_params(presets.load("llama-2-7b").replace(num_key_value_heads=8))
    assert as_int(row(edited, "total")[1]) == expected.total


def cli_error(tmp_path, text: str) -> str:
    path = tmp_path / "config.json"
    path.write_text(text, encoding="utf-8")
    result = subprocess.run(
        [sys.executable, "-m", "llmmath", "params", str(path)],
        capture_output=True,
        text=True,
    )
    assert result.returncode == 2 and result.stdout == ""
    (line,) = result.stderr.splitlines()
    return line


@pytest.mark.parametrize(
    "text",
    [
        '{"model_type": "t5", "d_model": 512}',  # unsupported model type
        json.dumps({**hf_config("llama-2-7b"), "num_key_value_heads": 5}),  # 32 % 5
        json.dumps({**hf_config("llama-2-7b"), "hidden_size": 4002}),  # 4002 % 32
    ],
)
def test_calculator_refuses_bad_configs_with_the_cli_message(tmp_path, text):
    view = explore("calculator", {"preset": PASTED, "config": text})
    assert view_text(view) == cli_error(tmp_path, text)
    assert view["blocks"][0]["tone"] == "error"


def test_calculator_refuses_invalid_json_with_the_cli_reason(tmp_path):
    text = '{"model_type": "llama",'
    view = explore("calculator", {"preset": PASTED, "config": text})
    message = view_text(view)
    cli = cli_error(tmp_path, text)
    assert message.startswith(
        "llmmath: error: the pasted config.json is not valid JSON ("
    )
    assert message.split("is not valid JSON")[1] == cli.split("is not valid JSON")[1]
    array = explore("calculator", {"preset": PASTED, "config": "[1, 2]"})
    assert "must hold a JSON object, got list" in view_text(array)


def test_attention_explorer_kv_bytes_closed_form():
    view = explore("attention", {"preset": "llama-3-8b", "num_key_value_heads": 2})
    # 2 (K and V) × n_kv × d_h × 2 bytes (bf16), per layer; 32 layers
    assert (
        as_int(row(view, "KV cache bytes per token (bf16)")[1]) == 2 * 2 * 128 * 2 * 32
    )
    assert (
        as_int(row(view, "KV cache bytes per token (bf16)")[2]) == 2 * 32 * 128 * 2 * 32
    )


def test_memory_explorer_inference_is_weights_plus_cache():
    cfg = presets.load("llama-2-7b")
    state = {"preset": "llama-2-7b", "optimizer": "none (inference)", "dtype": "int8"}
    view = explore("memory", {**state, "batch": 2, "seq_len": 100})
    weights = count_params(cfg).total  # int8: one byte each
    cache = 2 * 32 * 2 * 100 * 32 * 128 * 2
    assert as_int(row(view, "total")[1]) == weights + cache
    (flash,) = [c for c in view["controls"] if c["name"] == "flash"]
    assert flash["disabled"]  # no activations to keep when serving


def test_unknown_explorer_and_non_dict_state_are_refused():
    with pytest.raises(ConfigError, match="unknown explorer 'nope'"):
        explore("nope", {})
    with pytest.raises(ConfigError, match="must be a dict"):
        explore("params", [1, 2])


def test_explore_json_round_trips():
    out = json.loads(explore_json("roofline", json.dumps({"batch": 64})))
    assert out == json.loads(json.dumps(explore("roofline", {"batch": 64})))


JUNK = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(10**30), max_value=10**30),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=20),
    st.lists(st.integers(), max_size=3),
    st.sampled_from(["llama-2-7b", "bf16", "int4", "H100-SXM5-80GB", PASTED]),
)


@given(kind=st.sampled_from(sorted(EXPLORERS)), data=st.data())
def test_any_state_gets_a_view_never_a_traceback(kind, data):
    start = explore(kind, {})["state"]
    names = sorted(start)
    changes = data.draw(st.dictionaries(st.sampled_from(names), JUNK, max_size=3))
    view = explore(kind, {**start, **changes})
    json.dumps(view, allow_nan=False)  # the browser gets strict JSON
    assert view["kind"] == kind and view["blocks"]

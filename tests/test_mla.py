"""Chapter 7b's explorer (`llmmath.explorers.mla`) and its widget: cached values per
token for MHA, GQA, MQA and MLA, checked against the DeepSeek-V2 report's Table 1
formulas written out here and DeepSeek-V3's 70,272 bytes per token."""

import pytest

from llmmath.explorers import explore, view_text


def rows(view) -> dict[str, list[str]]:
    (table,) = [b for b in view["blocks"] if b["type"] == "table"]
    return {r[0]: r for r in table["rows"]}


def as_int(text: str) -> int:
    return int(text.split()[0].replace(",", ""))


def test_deepseek_v3_default_view():
    view = explore("mla", {})
    shown = rows(view)
    n_h, d_k, d_v, L = 128, 128 + 64, 128, 61
    assert as_int(shown["MHA"][1]) == n_h * (d_k + d_v)
    assert as_int(shown["GQA"][1]) == 16 * (d_k + d_v)  # n_kv = n_h / 8
    assert as_int(shown["MQA"][1]) == d_k + d_v
    assert as_int(shown["MLA"][1]) == 512 + 64
    assert as_int(shown["MLA"][2]) == 70_272 == L * 576 * 2
    assert as_int(shown["MLA"][3]) == 70_272 * 32768


def test_llama_twin_uses_v2s_choice_for_mla():
    view = explore("mla", {"preset": "llama-2-7b", "seq_len": 4096, "batch": 2})
    shown = rows(view)
    d_h, L = 128, 32
    assert as_int(shown["MLA"][1]) == 4 * d_h + d_h // 2  # d_c = 4 d_h, d_r = d_h / 2
    assert as_int(shown["MHA"][3]) == 2 * L * 32 * d_h * 2 * 4096 * 2
    assert view["state"]["num_key_value_heads"] == 4


def test_controls_change_the_numbers():
    base = explore("mla", {})
    state = dict(base["state"])
    for name, value in [
        ("kv_lora_rank", 256),
        ("qk_rope_head_dim", 32),
        ("num_key_value_heads", 8),
        ("dtype", "fp8"),
        ("batch", 3),
        ("seq_len", 100),
    ]:
        changed = explore("mla", {**state, name: value})
        assert changed["state"][name] == value
        assert view_text(changed) != view_text(base), name


@pytest.mark.parametrize(
    "changes, message",
    [
        ({"num_key_value_heads": 5}, "must be divisible by num_key_value_heads"),
        ({"kv_lora_rank": 0}, "kv_lora_rank must be between"),
        ({"preset": "nope"}, "preset must be one of"),
    ],
)
def test_bad_values_are_shown_not_raised(changes, message):
    view = explore("mla", {"loaded": "deepseek-v3", **changes})
    assert message in view_text(view)


def test_widget():
    from llmmath.widgets import LatentAttentionExplorer

    explorer = LatentAttentionExplorer()
    assert explorer.values["MLA"] == 576 and explorer.error is None
    explorer.set(kv_lora_rank=1024)
    assert explorer.values["MLA"] == 1024 + 64

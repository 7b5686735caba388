"""The explorers as widgets: anywidgets whose view is `llmmath.explorers.explore`."""

import math

import anywidget
import ipywidgets
import pytest

from llmmath import count_params, presets
from llmmath.explorers import divisors, explore
from llmmath.widgets import (
    AttentionExplorer,
    Calculator,
    LatentAttentionExplorer,
    LayoutExplorer,
    MemoryBudget,
    ParamExplorer,
    RooflineExplorer,
    RotaryExplorer,
    ServingExplorer,
    SpeculativeExplorer,
)

ALL = (
    ParamExplorer,
    AttentionExplorer,
    RotaryExplorer,
    ServingExplorer,
    MemoryBudget,
    RooflineExplorer,
    Calculator,
    LatentAttentionExplorer,
    SpeculativeExplorer,
    LayoutExplorer,
)


def test_divisors():
    assert divisors(12) == [1, 2, 3, 4, 6, 12]
    assert divisors(1) == [1]
    assert divisors(64) == [2**k for k in range(7)]


@pytest.mark.parametrize("cls", ALL)
def test_every_explorer_is_an_ipywidget_with_one_front_end(cls):
    explorer = cls()
    assert isinstance(explorer, anywidget.AnyWidget)
    assert isinstance(explorer, ipywidgets.DOMWidget)
    state = explorer.get_state()
    assert "export default" in state["_esm"] and state["view"] == explorer.view
    assert explorer.view == explore(explorer.kind, explorer.inputs)
    assert explorer.error is None


def test_param_explorer_starts_at_the_preset():
    explorer = ParamExplorer("llama-2-7b")
    assert explorer.config == presets.load("llama-2-7b")
    assert "6,738,415,616" in explorer.text  # Meta's published count for Llama-2-7B
    (n_kv,) = [
        c for c in explorer.view["controls"] if c["name"] == "num_key_value_heads"
    ]
    assert [value for value, _ in n_kv["options"]] == divisors(32)


def test_front_end_changes_recompute_in_the_kernel():
    explorer = ParamExplorer("llama-2-7b")
    # what the front end sends: the whole state with one value changed
    explorer.inputs = {**explorer.inputs, "num_key_value_heads": 8}
    explorer.inputs = {**explorer.inputs, "tie_word_embeddings": True}
    expected = presets.load("llama-2-7b").replace(
        num_key_value_heads=8, tie_word_embeddings=True
    )
    assert explorer.config == expected
    assert f"{count_params(expected).total:,}" in explorer.text


def test_switching_preset_loads_its_sizes_and_keeps_head_dim():
    explorer = ParamExplorer("llama-2-7b")
    explorer.set(preset="qwen3-0.6b")
    assert explorer.config == presets.load("qwen3-0.6b")
    assert explorer.config.head_dim == 128 != 1024 // 16
    assert (
        explorer.inputs["hidden_size"] == 1024
    )  # the kernel sends the loaded sizes back


def test_invalid_sizes_show_the_message_not_a_traceback():
    explorer = ParamExplorer("llama-2-7b")
    explorer.set(hidden_size=4002)  # not divisible by 32 heads
    assert explorer.config is None
    assert "must be divisible by num_attention_heads" in explorer.error
    explorer.set(hidden_size=-5)
    assert "hidden_size must be between 1" in explorer.error
    explorer.set(hidden_size="many")
    assert "hidden_size must be a whole number" in explorer.error


def test_only_divisors_of_n_h_are_offered():
    explorer = AttentionExplorer("qwen2.5-3b", seq_len=1000)
    explorer.set(num_attention_heads=8)  # n_kv 2 divides 8: kept
    assert explorer.state["num_key_value_heads"] == 2
    explorer.set(num_attention_heads=9)  # 2 does not divide 9: back to MHA
    assert explorer.state["num_key_value_heads"] == 9
    assert "must be divisible" in explorer.error  # 2048 % 9 != 0


def test_rotary_numbers_agree_with_the_torch_rope():
    from llmmath.rope import rope_cos_sin, rope_inv_freq

    explorer = RotaryExplorer(position=100, pair=8, base=1e4, head_dim=128)
    v = explorer.numbers()
    assert math.isclose(v["theta"], float(rope_inv_freq(128, 1e4)[8]), rel_tol=1e-12)
    cos, sin = rope_cos_sin(128, 1, 1e4, offset=100)
    assert math.isclose(v["cos"], float(cos[0, 8]), rel_tol=1e-9)
    assert math.isclose(v["sin"], float(sin[0, 8]), rel_tol=1e-9)
    explorer.set(head_dim=64, pair=40)  # 32 pairs now: the pair is clamped
    (pair,) = [c for c in explorer.view["controls"] if c["name"] == "pair"]
    assert explorer.state["pair"] == pair["max"] == 31


def test_serving_and_memory_and_roofline_numbers():
    from llmmath.memory import serving_fit
    from llmmath.roofline import decode_step

    cfg = presets.load("llama-3-8b")
    serving = ServingExplorer("llama-3-8b", batch=8, seq_len=8192, gpu_gb=80)
    serving.set(cache_dtype="int4")
    fit = serving_fit(cfg, 80 * 10**9, 8, 8192, cache_dtype="int4")
    assert (
        f"{fit.max_batch:,}" in serving.text and f"{fit.cache_bytes:,}" in serving.text
    )
    budget = MemoryBudget("llama-3-8b")
    assert f"{sum(budget.items.values()):,}" in budget.text
    roofline = RooflineExplorer("llama-3-8b", batch=16, context=4096)
    assert roofline.step == decode_step(cfg, "H100-SXM5-80GB", 16, 4096)
    assert f"{roofline.step.flops:,}" in roofline.text


def test_a_kernel_update_is_fast():
    import time

    explorer = RooflineExplorer()
    start = time.perf_counter()
    for batch in range(1, 11):
        explorer.set(batch=batch)
    assert (time.perf_counter() - start) / 10 < 0.05  # the 50 ms budget of a change

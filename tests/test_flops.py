"""Attention FLOPs: the formula against FlopCounterMode on the reference module."""

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from torch.utils.flop_counter import FlopCounterMode

from llmmath import ConfigError, ModelConfig, presets
from llmmath.flops import attention_flops, attention_pairs, decode_attention_flops
from llmmath.modules import Attention, build_model
from tests.strategies import any_config


def measured(module, *inputs) -> dict[str, int]:
    counter = FlopCounterMode(display=False)
    with counter, torch.no_grad():
        module(*inputs)
    return {
        str(op).split(".")[-1]: n
        for op, n in counter.get_flop_counts()["Global"].items()
    }


@given(any_config(), st.integers(1, 9), st.integers(1, 3))
@settings(max_examples=30)
def test_flop_counter_equals_formula(raw, t, batch):
    cfg = ModelConfig.from_hf_config(raw).replace(num_hidden_layers=1)
    attn = Attention(cfg)
    counts = measured(attn, torch.randn(batch, t, cfg.hidden_size))
    expected = attention_flops(cfg, t, causal=False, batch=batch)
    linear = counts.get("mm", 0) + counts.get("addmm", 0)
    assert linear == expected.projections
    assert counts["bmm"] == expected.scores + expected.weighted_sum


def test_whole_model_attention_is_counted_per_layer():
    cfg = presets.load("minimind2-small").replace(num_hidden_layers=3, vocab_size=64)
    model = build_model(cfg, device="cpu")
    counts = measured(model, torch.randint(0, 64, (1, 10)))
    assert counts["bmm"] == attention_flops(cfg, 10).quadratic


def test_causal_half_and_pairs():
    assert (
        attention_pairs(4, causal=False) == 16 and attention_pairs(4, causal=True) == 10
    )
    cfg = presets.load("llama-2-7b")
    full, causal = attention_flops(cfg, 4096), attention_flops(cfg, 4096, causal=True)
    assert full.projections == causal.projections
    assert causal.scores * 2 * 4096 == full.scores * (4096 + 1)
    # Kaplan et al. 2020, Table 1, "Attention: Mask" row: 2·n_layer·n_ctx·d_attn FLOPs
    # per token for the logits QKᵀ (d_attn = n_h·d_h = 4096 here); AV costs as much
    # again.
    assert full.scores // 4096 == 2 * 32 * 4096 * 4096 == full.weighted_sum // 4096


def test_decode_step_measured():
    cfg = presets.load("qwen2.5-3b").replace(
        hidden_size=64,
        num_attention_heads=4,
        num_key_value_heads=2,
        intermediate_size=32,
        num_hidden_layers=1,
        vocab_size=50,
    )
    model = build_model(cfg, device="cpu")
    cache = model.new_cache()
    with torch.no_grad():
        model(torch.randint(0, 50, (1, 11)), cache)
    counts = measured(model.layers[0].self_attn, torch.randn(1, 1, 64), cache, 0)
    step = decode_attention_flops(cfg, context=12)
    assert counts["bmm"] == step.quadratic
    assert counts.get("mm", 0) + counts.get("addmm", 0) == step.projections


def test_decode_with_sliding_window_reads_at_most_w_keys():
    mistral = presets.load("mistral-7b-v0.1")
    assert (
        decode_attention_flops(mistral, 100_000).scores
        == decode_attention_flops(mistral, 4096).scores
    )


@given(st.one_of(st.none(), st.integers(1, 6)), st.integers(2, 40))
def test_decode_step_is_the_difference_of_causal_counts(w, context):
    cfg = presets.load("mistral-7b-v0.1").replace(sliding_window=w)
    step = decode_attention_flops(cfg, context)
    before, after = (
        attention_flops(cfg, context - 1, causal=True),
        attention_flops(cfg, context, causal=True),
    )
    assert step.quadratic == after.quadratic - before.quadratic
    # the pairs by brute force: query i reads keys j with i - W < j <= i
    pairs = sum(
        1
        for i in range(context)
        for j in range(context)
        if j <= i and (w is None or j > i - w)
    )
    assert after.scores == 2 * 32 * 32 * 128 * pairs


def test_sliding_window_decode_measured_equals_formula():
    cfg = presets.load("mistral-7b-v0.1").replace(
        hidden_size=64,
        num_attention_heads=4,
        num_key_value_heads=2,
        intermediate_size=32,
        num_hidden_layers=1,
        vocab_size=50,
        sliding_window=5,
    )
    model = build_model(cfg, device="cpu")
    cache = model.new_cache()
    with torch.no_grad():
        model(torch.randint(0, 50, (1, 11)), cache)
    counts = measured(model.layers[0].self_attn, torch.randn(1, 1, 64), cache, 0)
    assert counts["bmm"] == decode_attention_flops(cfg, context=12).quadratic


@pytest.mark.parametrize("t", [0, -2, 1.5, True])
def test_bad_length(t):
    with pytest.raises(ConfigError, match="seq_len"):
        attention_flops(presets.load("gpt2"), t)
    with pytest.raises(ConfigError, match="context"):
        decode_attention_flops(presets.load("gpt2"), t)


@pytest.mark.parametrize("batch", [0, -1])
def test_bad_batch(batch):
    with pytest.raises(ConfigError, match="batch"):
        attention_flops(presets.load("gpt2"), 8, batch=batch)
    with pytest.raises(ConfigError, match="batch"):
        decode_attention_flops(presets.load("gpt2"), 8, batch=batch)

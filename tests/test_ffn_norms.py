"""FFN sizing rules against published sizes; norm invariances (hypothesis) and costs."""

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from llmmath import ConfigError, ModelConfig, count_params, presets
from llmmath.ffn import (
    equivalent_plain_ratio,
    ffn_ratio,
    llama_intermediate_size,
    minimind_intermediate_size,
    round_up,
)
from llmmath.flops import ffn_flops
from llmmath.modules import DecoderBlock, LayerNorm, RMSNorm
from llmmath.norms import norm_cost


@pytest.mark.parametrize(
    "dim, multiple_of, multiplier, published",
    [
        (4096, 256, None, 11008),  # Llama-2-7B
        (5120, 256, None, 13824),  # Llama-2-13B
        (8192, 4096, 1.3, 28672),  # Llama-2-70B and Llama-3-70B
        (4096, 1024, 1.3, 14336),  # Llama-3-8B
        (16384, 4096, 1.2, 53248),  # Llama-3.1-405B
    ],
)
def test_meta_rule_gives_published_sizes(dim, multiple_of, multiplier, published):
    assert llama_intermediate_size(dim, multiple_of, multiplier) == published


def test_meta_rule_agrees_with_the_presets():
    for name, args in (
        ("llama-2-7b", (256,)),
        ("llama-3-8b", (1024, 1.3)),
        ("llama-3-70b", (4096, 1.3)),
        ("llama-3.1-405b", (4096, 1.2)),
    ):
        cfg = presets.load(name)
        assert llama_intermediate_size(cfg.hidden_size, *args) == cfg.intermediate_size


def test_minimind_rule():
    assert (
        minimind_intermediate_size(512)
        == 1408
        == presets.load("minimind2-small").intermediate_size
    )
    assert (
        minimind_intermediate_size(768) == 2048
    )  # note 003 says 2112; 768·8/3 is exactly 2048


@given(st.integers(1, 10**6), st.integers(1, 4096))
def test_round_up(value, multiple):
    r = round_up(value, multiple)
    assert r % multiple == 0 and value <= r < value + multiple


def test_note_000_ratios():
    assert ffn_ratio(presets.load("gpt2")) == 4
    assert ffn_ratio(presets.load("llama-3-8b")) == 3.5
    assert ffn_ratio(presets.load("qwen2.5-3b")) == 5.375
    assert (
        ffn_ratio(presets.load("deepseek-llm-7b"))
        == 2.6875
        == ffn_ratio(presets.load("llama-2-7b"))
    )
    assert equivalent_plain_ratio(presets.load("llama-3-8b")) == 5.25


def test_swiglu_at_8h_over_3_matches_gelu_at_4h():
    plain = ModelConfig(
        vocab_size=1,
        hidden_size=768,
        intermediate_size=4 * 768,
        num_hidden_layers=1,
        num_attention_heads=12,
        mlp_type="plain",
        hidden_act="gelu",
    )
    gated = plain.replace(
        mlp_type="gated", hidden_act="silu", intermediate_size=8 * 768 // 3
    )
    assert (
        count_params(plain).by_group()["ffn"] == count_params(gated).by_group()["ffn"]
    )
    assert ffn_flops(plain) == ffn_flops(gated) == 2 * 2 * 768 * 4 * 768


def test_ffn_flops_are_twice_the_ffn_weights():
    for name in ("gpt2", "llama-3-8b", "qwen2.5-7b"):
        cfg = presets.load(name)
        weights = sum(
            t.numel
            for t in count_params(cfg).tensors
            if t.group == "ffn" and t.name.endswith(".weight")
        )
        assert ffn_flops(cfg, tokens=3) == 3 * 2 * cfg.num_hidden_layers * weights


floats = st.floats(-100, 100, allow_nan=False, allow_infinity=False)


@given(st.lists(floats, min_size=2, max_size=16), st.floats(0.01, 1000))
def test_rmsnorm_is_scale_invariant(values, a):
    x = torch.tensor(values, dtype=torch.float64)
    norm = RMSNorm(len(values), eps=0.0).double()
    if x.abs().max() < 1e-3:
        return
    torch.testing.assert_close(norm(a * x), norm(x))


@given(st.lists(floats, min_size=2, max_size=16), st.floats(0.01, 1000), floats)
def test_layernorm_is_scale_and_shift_invariant(values, a, c):
    x = torch.tensor(values, dtype=torch.float64)
    if x.std() < 1e-3:
        return
    norm = LayerNorm(len(values), eps=0.0).double()
    torch.testing.assert_close(norm(a * x + c), norm(x))


@given(st.lists(floats, min_size=2, max_size=16))
def test_rmsnorm_is_layernorm_on_zero_mean_input(values):
    x = torch.tensor(values, dtype=torch.float64)
    x = x - x.mean()
    if x.abs().max() < 1e-3:
        return
    torch.testing.assert_close(
        RMSNorm(len(values), eps=1e-6).double()(x),
        LayerNorm(len(values), eps=1e-6).double()(x),
    )


def test_norm_cost_and_memory_bound():
    rms, ln = norm_cost("rmsnorm", 4096, 1), norm_cost("layernorm", 4096, 1)
    assert rms.flops == 4 * 4096 and ln.flops == 7 * 4096
    assert rms.bytes == 2 * (3 * 4096) and ln.bytes == 2 * (4 * 4096)
    assert rms.intensity < 1 and ln.intensity < 1  # far below any GPU ridge point
    with pytest.raises(ConfigError, match="norm_type"):
        norm_cost("batchnorm", 8)


def test_post_norm_block_has_the_same_parameters_and_differs_in_output():
    cfg = presets.load("minimind2-small").replace(
        hidden_size=32,
        num_attention_heads=4,
        num_key_value_heads=2,
        intermediate_size=64,
    )
    torch.manual_seed(0)
    pre = DecoderBlock(cfg)
    post = DecoderBlock(cfg, pre_norm=False)
    post.load_state_dict(pre.state_dict())
    x = torch.randn(1, 5, 32)
    assert not torch.allclose(pre(x), post(x))
    out = post(x)  # a post-norm output is normalized
    torch.testing.assert_close(
        out.pow(2).mean(-1), torch.ones(1, 5), rtol=1e-3, atol=1e-3
    )

"""The torch reference modules behave as the architectures they stand for."""

import pytest
import torch
from hypothesis import given, settings

from llmmath import ConfigError, ModelConfig, presets
from llmmath.modules import (
    Attention,
    LayerNorm,
    RMSNorm,
    build_model,
    mha_to_gqa,
    repeat_kv,
)
from tests.strategies import any_config


@pytest.mark.parametrize(
    "ours, reference, eps",
    [(RMSNorm, torch.nn.RMSNorm, 1e-6), (LayerNorm, torch.nn.LayerNorm, 1e-5)],
)
def test_norms_equal_torch(ours, reference, eps):
    torch.manual_seed(0)
    x = torch.randn(2, 5, 16)
    mine, ref = ours(16, eps=eps), reference(16, eps=eps)
    with torch.no_grad():
        for name, p in mine.named_parameters():  # random affine parameters, copied over
            p.copy_(torch.randn(16))
            getattr(ref, name).copy_(p)
    assert {n for n, _ in mine.named_parameters()} == {
        n for n, _ in ref.named_parameters()
    }
    torch.testing.assert_close(mine(x), ref(x))


def test_repeat_kv_equals_repeat_interleave():
    x = torch.arange(2 * 3 * 4 * 5, dtype=torch.float32).reshape(2, 3, 4, 5)
    for n_rep in (1, 2, 4):
        assert torch.equal(
            repeat_kv(x, n_rep), torch.repeat_interleave(x, n_rep, dim=1)
        )


def test_gqa_with_shared_kv_equals_mha_with_repeated_kv_weights():
    """GQA is MHA whose K/V projections repeat each key/value head g times."""
    torch.manual_seed(0)
    gqa_cfg = ModelConfig(
        vocab_size=8,
        hidden_size=32,
        intermediate_size=8,
        num_hidden_layers=1,
        num_attention_heads=8,
        num_key_value_heads=2,
    )
    gqa, mha = Attention(gqa_cfg), Attention(gqa_cfg.replace(num_key_value_heads=8))
    with torch.no_grad():
        mha.q_proj.weight.copy_(gqa.q_proj.weight)
        mha.o_proj.weight.copy_(gqa.o_proj.weight)
        for name in ("k_proj", "v_proj"):
            w = getattr(gqa, name).weight.view(2, 4, 32)  # (n_kv, d_h, H)
            getattr(mha, name).weight.copy_(
                w.repeat_interleave(4, dim=0).reshape(32, 32)
            )
    x = torch.randn(2, 6, 32)
    torch.testing.assert_close(gqa(x), mha(x))


@given(any_config())
@settings(max_examples=20)
def test_forward_shapes_and_causality(raw):
    cfg = ModelConfig.from_hf_config(raw)
    model = build_model(cfg, device="cpu", seed=0)
    t = min(6, cfg.max_position_embeddings)
    ids = torch.randint(
        0, cfg.vocab_size, (2, t), generator=torch.Generator().manual_seed(0)
    )
    with torch.no_grad():
        logits = model(ids)
        assert logits.shape == (2, t, cfg.vocab_size)
        if t > 1:  # changing the last token cannot change earlier positions
            changed = ids.clone()
            changed[:, -1] = (changed[:, -1] + 1) % cfg.vocab_size
            torch.testing.assert_close(model(changed)[:, :-1], logits[:, :-1])


def test_seeded_models_are_identical():
    cfg = presets.load("minimind2-small").replace(num_hidden_layers=1)
    a, b = (
        build_model(cfg, device="cpu", seed=3),
        build_model(cfg, device="cpu", seed=3),
    )
    assert all(torch.equal(p, q) for p, q in zip(a.parameters(), b.parameters()))


@pytest.mark.parametrize("name", ["gpt2", "qwen3-0.6b"])
def test_dtype_option(name):
    model = build_model(presets.load(name), dtype=torch.bfloat16)
    assert {p.dtype for p in model.parameters()} == {torch.bfloat16}


def test_mha_to_gqa_mean_pools_each_group():
    torch.manual_seed(0)
    cfg = ModelConfig(
        vocab_size=8,
        hidden_size=32,
        intermediate_size=8,
        num_hidden_layers=1,
        num_attention_heads=8,
        qkv_bias=True,
    )
    mha = Attention(cfg)
    gqa = mha_to_gqa(mha, 2)
    assert gqa.k_proj.weight.shape == (2 * 4, 32) and gqa.v_proj.bias.shape == (8,)
    k = mha.k_proj.weight.view(2, 4, 4, 32)  # (groups, heads per group, d_h, H)
    torch.testing.assert_close(gqa.k_proj.weight.view(2, 4, 32), k.mean(dim=1))
    assert torch.equal(gqa.q_proj.weight, mha.q_proj.weight)
    saved = sum(p.numel() for p in mha.parameters()) - sum(
        p.numel() for p in gqa.parameters()
    )
    assert saved == 2 * (32 * 32 - 32 * 8) + 2 * (32 - 8)  # K and V weights and biases


def test_mha_to_gqa_is_exact_when_heads_in_a_group_agree():
    torch.manual_seed(0)
    cfg = ModelConfig(
        vocab_size=8,
        hidden_size=32,
        intermediate_size=8,
        num_hidden_layers=1,
        num_attention_heads=8,
    )
    mha = Attention(cfg)
    with torch.no_grad():  # make the 4 heads of each group equal
        for name in ("k_proj", "v_proj"):
            w = getattr(mha, name).weight.view(2, 4, 4, 32)
            w.copy_(w[:, :1].expand_as(w))
    x = torch.randn(2, 5, 32)
    torch.testing.assert_close(mha_to_gqa(mha, 2)(x), mha(x))
    torch.testing.assert_close(mha_to_gqa(mha, 8)(x), mha(x))  # g = 1: a copy


def test_mha_to_gqa_leaves_the_global_rng_alone():
    cfg = ModelConfig(
        vocab_size=8,
        hidden_size=32,
        intermediate_size=8,
        num_hidden_layers=1,
        num_attention_heads=8,
    )
    mha = Attention(cfg)
    torch.manual_seed(5)
    mha_to_gqa(mha, 2)
    after = torch.rand(3)
    torch.manual_seed(5)
    assert torch.equal(after, torch.rand(3))


def test_mha_to_gqa_refuses_non_divisor():
    cfg = ModelConfig(
        vocab_size=8,
        hidden_size=32,
        intermediate_size=8,
        num_hidden_layers=1,
        num_attention_heads=8,
    )
    with pytest.raises(ConfigError, match="must divide"):
        mha_to_gqa(Attention(cfg), 3)

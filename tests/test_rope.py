"""RoPE: the package's rotation equals both layouts of the notes, and depends only on m
− n."""

import math

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from llmmath import presets
from llmmath.flops import lm_head_flops, rope_flops
from llmmath.positions import sinusoidal_positions
from llmmath.rope import (
    apply_rope,
    apply_rope_interleaved,
    half_layout_permutation,
    llama3_inv_freq,
    ntk_scaled_theta,
    permute_for_rotate_half,
    position_interpolation_inv_freq,
    rope_cos_sin,
    rope_freqs_cis,
    rope_inv_freq,
    rotate_half,
)

head_dims = st.integers(1, 16).map(lambda n: 2 * n)


def note_002_meta(xq: torch.Tensor, dim: int, end: int, theta: float) -> torch.Tensor:
    """Meta's precompute_freqs_cis + apply_rotary_emb as quoted in note 002 (float64
    here)."""
    freqs = 1.0 / (theta ** (torch.arange(0, dim, 2)[: (dim // 2)].double() / dim))
    freqs = torch.outer(torch.arange(end, dtype=torch.float64), freqs)
    freqs_cis = torch.polar(torch.ones_like(freqs), freqs)
    xq_ = torch.view_as_complex(xq.reshape(*xq.shape[:-1], -1, 2))
    shape = [d if i == 1 or i == xq_.ndim - 1 else 1 for i, d in enumerate(xq_.shape)]
    return torch.view_as_real(xq_ * freqs_cis.view(*shape)).flatten(3)


def note_001_rotate_half(
    q: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor
) -> torch.Tensor:
    """Notes 001 and 003: q * cos + rotate_half(q) * sin with (x1, x2) → (−x2, x1)."""
    x1, x2 = q[..., : q.shape[-1] // 2], q[..., q.shape[-1] // 2 :]
    return q * cos + torch.cat([-x2, x1], dim=-1) * sin


@given(
    head_dims,
    st.integers(1, 12),
    st.sampled_from([10_000.0, 500_000.0, 1e6]),
    st.integers(0, 2**31 - 1),
)
def test_package_rope_equals_both_note_layouts(d, t, theta, seed):
    x = torch.randn(
        2, t, 3, d, dtype=torch.float64, generator=torch.Generator().manual_seed(seed)
    )
    p = half_layout_permutation(d)
    cos, sin = rope_cos_sin(d, t, theta)
    ours = apply_rope(x.transpose(1, 2), cos, sin)  # (b, h, t, d)
    torch.testing.assert_close(ours, note_001_rotate_half(x.transpose(1, 2), cos, sin))
    meta = note_002_meta(x, d, t, theta)
    torch.testing.assert_close(
        apply_rope_interleaved(x, rope_freqs_cis(d, t, theta)), meta
    )
    # the two layouts agree once each head's dimensions are permuted
    half = apply_rope(x[..., p].transpose(1, 2), cos, sin).transpose(1, 2)
    torch.testing.assert_close(half, meta[..., p])


@given(
    head_dims,
    st.integers(0, 500),
    st.integers(0, 500),
    st.integers(-50, 50),
    st.integers(0, 2**31 - 1),
)
def test_scores_depend_only_on_relative_position(d, m, n, shift, seed):
    gen = torch.Generator().manual_seed(seed)
    q, k = (
        torch.randn(d, dtype=torch.float64, generator=gen),
        torch.randn(d, dtype=torch.float64, generator=gen),
    )

    def score(i, j):
        cos, sin = rope_cos_sin(d, max(i, j) + 1)
        return apply_rope(q, cos[i], sin[i]) @ apply_rope(k, cos[j], sin[j])

    m2, n2 = m + abs(shift), n + abs(shift)
    assert math.isclose(score(m, n), score(m2, n2), rel_tol=1e-9, abs_tol=1e-9)


def test_rotation_preserves_norm_and_rotate_half_is_a_quarter_turn():
    x = torch.randn(4, 16, dtype=torch.float64)
    cos, sin = rope_cos_sin(16, 4, offset=7)
    torch.testing.assert_close(apply_rope(x, cos, sin).norm(dim=-1), x.norm(dim=-1))
    torch.testing.assert_close(rotate_half(rotate_half(x)), -x)


def test_permuted_weights_give_the_same_attention_scores():
    """Converting W_q, W_k to the rotate_half layout leaves every score unchanged."""
    gen = torch.Generator().manual_seed(0)
    H, n_h, d, t = 24, 3, 8, 6
    wq, wk = (
        torch.randn(n_h * d, H, dtype=torch.float64, generator=gen),
        torch.randn(n_h * d, H, dtype=torch.float64, generator=gen),
    )
    x = torch.randn(1, t, H, dtype=torch.float64, generator=gen)
    q, k = (x @ wq.T).view(1, t, n_h, d), (x @ wk.T).view(1, t, n_h, d)
    fc = rope_freqs_cis(d, t)
    qh = (x @ permute_for_rotate_half(wq, n_h).T).view(1, t, n_h, d).transpose(1, 2)
    kh = (x @ permute_for_rotate_half(wk, n_h).T).view(1, t, n_h, d).transpose(1, 2)
    cos, sin = rope_cos_sin(d, t)
    hf = apply_rope(qh, cos, sin) @ apply_rope(kh, cos, sin).transpose(
        -1, -2
    )  # (1, h, t, t)
    meta_scores = torch.einsum(
        "bthd,bshd->bhts", apply_rope_interleaved(q, fc), apply_rope_interleaved(k, fc)
    )
    torch.testing.assert_close(hf, meta_scores)


def test_llama31_rope_scaling_matches_its_rules():
    """Llama 3.1: factor 8, low/high frequency factors 1 and 4, original context 8K."""
    base = rope_inv_freq(128, 500_000.0)
    scaled = llama3_inv_freq(base, 8.0, 1.0, 4.0, 8192)
    wavelen = 2 * math.pi / base
    short, long = wavelen < 8192 / 4, wavelen > 8192 / 1
    assert torch.equal(scaled[short], base[short])  # high frequencies kept
    torch.testing.assert_close(scaled[long], base[long] / 8)  # low frequencies ÷ 8
    middle = ~short & ~long
    assert (
        middle.any()
        and (
            (scaled[middle] < base[middle]) & (scaled[middle] > base[middle] / 8)
        ).all()
    )


def test_context_extension_rules():
    base = rope_inv_freq(128, 10_000.0)
    torch.testing.assert_close(position_interpolation_inv_freq(base, 4.0), base / 4)
    ntk = rope_inv_freq(128, ntk_scaled_theta(10_000.0, 4.0, 128))
    assert ntk[0] == 1.0  # highest frequency unchanged
    torch.testing.assert_close(ntk[-1], base[-1] / 4)  # lowest divided by the factor


def test_odd_head_dim_refused():
    with pytest.raises(ValueError, match="must be even"):
        rope_inv_freq(7)
    with pytest.raises(ValueError, match="must be even"):
        sinusoidal_positions(4, 7)


def test_sinusoidal_table_equals_note_001():
    import numpy as np

    def note_001(max_len, hidden_dim):
        position = np.arange(max_len)[:, np.newaxis]
        div_term = np.exp(np.arange(0, hidden_dim, 2) * -(np.log(10000.0) / hidden_dim))
        pe = np.zeros((max_len, hidden_dim))
        pe[:, 0::2] = np.sin(position * div_term)
        pe[:, 1::2] = np.cos(position * div_term)
        return pe

    np.testing.assert_allclose(
        sinusoidal_positions(512, 64).numpy(), note_001(512, 64), atol=1e-9
    )


def test_rope_and_lm_head_flops():
    llama = presets.load("llama-3-8b")
    assert rope_flops(llama, 10) == 32 * 10 * 3 * (32 + 8) * 128
    assert rope_flops(presets.load("gpt2"), 10) == 0
    assert lm_head_flops(llama, 3) == 3 * 2 * 4096 * 128256


def test_rope_scaling_read_and_applied_by_the_reference_attention():
    from llmmath import ConfigError, ModelConfig
    from llmmath.modules import Attention
    from llmmath.rope import scaled_inv_freq

    cfg = presets.load("llama-3.1-405b")
    assert (cfg.rope_scaling.rope_type, cfg.rope_scaling.factor) == ("llama3", 8.0)
    assert presets.load("llama-3.2-1b").rope_scaling.factor == 32.0
    assert presets.load("llama-3-8b").rope_scaling is None
    torch.testing.assert_close(
        scaled_inv_freq(cfg),
        llama3_inv_freq(rope_inv_freq(128, 500_000.0), 8.0, 1.0, 4.0, 8192),
    )
    linear = ModelConfig.from_hf_config(
        {
            **presets.get("llama-2-7b").hf_config,
            "rope_scaling": {"type": "linear", "factor": 4.0},
        }
    )
    torch.testing.assert_close(scaled_inv_freq(linear), rope_inv_freq(128) / 4)
    yarn = ModelConfig.from_hf_config(
        {
            **presets.get("qwen2.5-3b").hf_config,
            "rope_scaling": {
                "rope_type": "yarn",
                "factor": 4.0,
                "original_max_position_embeddings": 32768,
            },
        }
    )
    assert yarn.rope_scaling.rope_type == "yarn"  # kept by name; counts unaffected
    small = yarn.replace(hidden_size=32, num_attention_heads=4, num_key_value_heads=2)
    with pytest.raises(ConfigError, match="'yarn' is not modelled"):
        Attention(small)(torch.randn(1, 3, 32))
    with pytest.raises(ConfigError, match="rope_scaling.factor"):
        ModelConfig.from_hf_config(
            {
                **presets.get("llama-2-7b").hf_config,
                "rope_scaling": {"rope_type": "linear", "factor": 0},
            }
        )

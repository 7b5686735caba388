"""Serving fit: weights + KV cache against GPU memory; the answers are the largest that
fit."""

import pytest
from hypothesis import given
from hypothesis import strategies as st

from llmmath import ConfigError, presets
from llmmath.kvcache import kv_cache_bytes
from llmmath.memory import serving_fit, weight_bytes

GPU = 80 * 10**9


def test_weight_bytes():
    assert weight_bytes(presets.load("llama-2-7b"), "bf16") == 2 * 6_738_415_616
    assert weight_bytes(presets.load("gpt2"), "int4") == 124_439_808 // 2


@given(
    st.sampled_from(
        ["llama-2-7b", "llama-3-8b", "qwen2.5-3b", "gpt2", "minimind2-small"]
    ),
    st.integers(1, 64),
    st.integers(1, 200_000),
    st.sampled_from(["bf16", "fp8", "int4"]),
)
def test_max_batch_and_context_are_maximal(name, batch, seq_len, cache_dtype):
    cfg = presets.load(name)
    fit = serving_fit(cfg, GPU, batch, seq_len, cache_dtype=cache_dtype)
    weights = weight_bytes(cfg)
    assert fit.fits == (
        weights + kv_cache_bytes(cfg, batch, seq_len, cache_dtype) <= GPU
    )
    if fit.max_batch:
        assert weights + kv_cache_bytes(cfg, fit.max_batch, seq_len, cache_dtype) <= GPU
    assert weights + kv_cache_bytes(cfg, fit.max_batch + 1, seq_len, cache_dtype) > GPU
    assert fit.max_seq_len <= cfg.max_position_embeddings == fit.context_limit
    if fit.max_seq_len:
        assert weights + kv_cache_bytes(cfg, batch, fit.max_seq_len, cache_dtype) <= GPU
    if fit.max_seq_len < cfg.max_position_embeddings:
        assert (
            weights + kv_cache_bytes(cfg, batch, fit.max_seq_len + 1, cache_dtype) > GPU
        )


def test_model_too_large():
    fit = serving_fit(presets.load("llama-3.1-405b"), GPU)
    assert not fit.fits and fit.max_batch == 0 and fit.max_seq_len == 0


def test_sliding_window_caps_cache_not_context():
    mistral = presets.load("mistral-7b-v0.1")
    fit = serving_fit(mistral, GPU, batch=8, seq_len=10**6)
    assert fit.fits and fit.max_seq_len == mistral.max_position_embeddings == 32768


def test_learned_positions_cap_the_context():
    fit = serving_fit(presets.load("gpt2"), GPU)
    assert fit.max_seq_len == 1024


def test_bad_gpu_bytes():
    with pytest.raises(ConfigError, match="gpu_bytes"):
        serving_fit(presets.load("gpt2"), 0)

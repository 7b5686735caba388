"""KV cache: formula = measured bytes of the torch cache; decoding with the cache =
recomputation; published per-token figures."""

import json
import subprocess
import sys

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from llmmath import ConfigError, ModelConfig, presets
from llmmath.kvcache import cached_tokens, kv_cache_bytes, kv_cache_bytes_per_token
from llmmath.modules import build_model, generate
from tests.conftest import hf_config
from tests.strategies import any_config

TORCH_DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp64": torch.float64}


@given(
    any_config(),
    st.integers(1, 3),
    st.integers(1, 6),
    st.integers(1, 6),
    st.sampled_from(sorted(TORCH_DTYPES)),
    st.one_of(st.none(), st.integers(1, 5)),
)
@settings(max_examples=30)
def test_measured_cache_bytes_equal_formula(raw, batch, prompt, new, dtype, window):
    cfg = ModelConfig.from_hf_config(raw)
    if window is not None and cfg.position_embedding_type == "rope":
        cfg = cfg.replace(sliding_window=window)
    if cfg.position_embedding_type == "learned":
        cfg = cfg.replace(max_position_embeddings=prompt + new)
    model = build_model(cfg, device="cpu", dtype=TORCH_DTYPES[dtype], seed=0)
    ids = torch.randint(
        0, cfg.vocab_size, (batch, prompt), generator=torch.Generator().manual_seed(1)
    )
    tokens, cache = generate(model, ids, new)
    fed = prompt + new - 1  # the last generated token is never fed back
    assert cache.seen == fed
    assert (
        cache.nbytes()
        == cache.storage_nbytes()
        == kv_cache_bytes(cfg, batch, fed, dtype)
    )
    assert tokens.shape == (batch, prompt + new)


@given(any_config(), st.integers(1, 5), st.one_of(st.none(), st.integers(1, 4)))
@settings(max_examples=30)
def test_decoding_with_cache_equals_recomputation(raw, prompt, window):
    cfg = ModelConfig.from_hf_config(raw)
    if window is not None and cfg.position_embedding_type == "rope":
        cfg = cfg.replace(sliding_window=window)
    new = 8
    if cfg.position_embedding_type == "learned":
        cfg = cfg.replace(max_position_embeddings=prompt + new)
    model = build_model(cfg, device="cpu", dtype=torch.float64, seed=0)
    ids = torch.randint(
        0, cfg.vocab_size, (2, prompt), generator=torch.Generator().manual_seed(2)
    )
    with_cache, _ = generate(model, ids, new, use_cache=True)
    without, none = generate(model, ids, new, use_cache=False)
    assert none is None
    assert torch.equal(with_cache, without)


def test_cached_logits_equal_full_forward():
    cfg = presets.load("qwen3-0.6b").replace(
        hidden_size=64,
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=32,
        intermediate_size=48,
        num_hidden_layers=2,
        vocab_size=100,
    )
    model = build_model(cfg, device="cpu", dtype=torch.float64, seed=0)
    ids = torch.randint(0, 100, (1, 7), generator=torch.Generator().manual_seed(0))
    cache = model.new_cache()
    pieces = [
        model(ids[:, :4], cache),
        model(ids[:, 4:5], cache),
        model(ids[:, 5:], cache),
    ]
    torch.testing.assert_close(torch.cat(pieces, dim=1), model(ids))


def test_note_002_example():
    """32 layers, batch 16, 1024 tokens, 32 heads of 128 (hidden 4096), fp16."""
    cfg = presets.load("llama-2-7b")
    true = kv_cache_bytes(cfg, batch=16, seq_len=1024, dtype="fp16")
    assert true == 2 * 32 * 16 * 1024 * 32 * 128 * 2 == 8 * 2**30
    note = 32 * 16 * 1024 * 32 * 4096 * 2  # heads × full hidden size, no factor 2
    assert note == 128 * 2**30 == 16 * true
    assert (
        kv_cache_bytes(cfg.replace(num_key_value_heads=8), 16, 1024, "fp16")
        == 2 * 2**30
    )


def test_note_003_minimind_gqa_saves_75_percent():
    small = presets.load("minimind2-small")
    mha = small.replace(num_key_value_heads=8)
    assert 4 * kv_cache_bytes(small, 1, 512) == kv_cache_bytes(mha, 1, 512)


def test_published_per_token_figures():
    # vLLM (Kwon et al. 2023, Sec. 3): OPT-13B stores 800 KB of KV cache per token (KB =
    # 1024 B): 2 (key and value) × 5120 (hidden) × 40 (layers) × 2 bytes (FP16).
    opt13b = ModelConfig(
        vocab_size=50272,
        hidden_size=5120,
        intermediate_size=20480,
        num_hidden_layers=40,
        num_attention_heads=40,
        model_type="opt",
    )
    assert kv_cache_bytes_per_token(opt13b, "fp16") == 800 * 1024
    # NVIDIA's inference-optimisation guide: Llama 2 7B, batch 1, 4096 tokens, FP16 → ~2
    # GB.
    assert kv_cache_bytes(presets.load("llama-2-7b"), 1, 4096, "fp16") == 2 * 2**30
    # Mistral 7B (Jiang et al. 2023, Sec. 2): the rolling buffer cuts the cache 8x at
    # 32k tokens.
    mistral = presets.load("mistral-7b-v0.1")
    no_window = mistral.replace(sliding_window=None)
    assert kv_cache_bytes(no_window, 1, 32768) == 8 * kv_cache_bytes(mistral, 1, 32768)


@pytest.mark.parametrize(
    "dtype, bits",
    [("fp32", 32), ("bf16", 16), ("fp16", 16), ("fp8", 8), ("int8", 8), ("int4", 4)],
)
def test_dtypes(dtype, bits):
    cfg = presets.load("llama-3-8b")
    assert (
        kv_cache_bytes(cfg, 3, 1000, dtype) == 2 * 32 * 3 * 1000 * 8 * 128 * bits // 8
    )
    assert kv_cache_bytes_per_token(cfg, dtype) * 8 == 2 * 32 * 8 * 128 * bits


def test_sliding_window_caps_cached_length():
    mistral = presets.load("mistral-7b-v0.1")
    assert cached_tokens(mistral, 100) == 100 and cached_tokens(mistral, 10_000) == 4096
    assert kv_cache_bytes(mistral, 1, 10_000) == kv_cache_bytes(mistral, 1, 4096)


@pytest.mark.parametrize(
    "kwargs, field",
    [
        ({"batch": 0}, "batch"),
        ({"seq_len": -1}, "seq_len"),
        ({"dtype": "fp7"}, "dtype"),
    ],
)
def test_bad_arguments(kwargs, field):
    with pytest.raises(ConfigError, match=field):
        kv_cache_bytes(presets.load("gpt2"), **kwargs)


def kv_cli(*args):
    return subprocess.run(
        [sys.executable, "-m", "llmmath", "kv-cache", *args],
        capture_output=True,
        text=True,
        timeout=60,
    )


@pytest.mark.parametrize(
    "name",
    [
        "llama-3-8b",
        "mistral-7b-v0.1",
        "qwen2.5-3b",
        "qwen3-0.6b",
        "mixtral-8x7b",
        "minimind2-moe",
        "gpt2",
    ],
)
def test_cli_answers_every_model_type_from_a_config_file(name, write_config):
    path = write_config(hf_config(name))
    out = kv_cli(
        str(path), "--seq-len", "8192", "--batch", "2", "--dtype", "fp16", "--json"
    )
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    cfg = presets.load(name)
    assert (
        data["bytes_per_token"]
        == 2 * cfg.num_hidden_layers * cfg.num_key_value_heads * cfg.head_dim * 2
    )
    kept = min(8192, cfg.sliding_window or 8192)
    assert data["bytes"] == 2 * kept * data["bytes_per_token"]


@pytest.mark.parametrize(
    "args",
    [
        ["gpt2"],
        ["gpt2", "--seq-len", "0"],
        ["gpt2", "--seq-len", "x"],
        ["gpt2", "--seq-len", "5", "--dtype", "fp7"],
        ["nope", "--seq-len", "5"],
        ["/absent/config.json", "--seq-len", "5"],
    ],
)
def test_cli_bad_input(args):
    out = kv_cli(*args)
    assert out.returncode == 2 and out.stdout == ""
    assert len(out.stderr.strip().splitlines()) == 1 and "Traceback" not in out.stderr


def test_learned_positions_beyond_the_table_are_refused():
    cfg = presets.load("gpt2").replace(num_hidden_layers=1, max_position_embeddings=4)
    model = build_model(cfg, device="cpu")
    with pytest.raises(ConfigError, match="beyond max_position_embeddings"):
        generate(model, torch.zeros(1, 3, dtype=torch.long), 3)

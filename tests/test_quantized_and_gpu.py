"""Quantized checkpoint bytes (`llmmath.memory.quantized_weight_bytes`) and the GPUs'
memory (`llmmath.roofline.GPUS`), checked against independent arithmetic.

Llama-3-8B's shapes are written out here from its ``config.json`` (H = 4096, L = 32,
n_kv = 8, d_h = 128, I = 14336, V = 128256, untied head), not read from ``llmmath``.
"""

import pytest

from llmmath import presets
from llmmath.config import ConfigError
from llmmath.memory import GPU_80GB, quantized_weight_bytes, weight_bytes
from llmmath.roofline import GPUS, decode_step

H, L, KV, FF, V = 4096, 32, 8 * 128, 14336, 128256
BLOCK_MATRICES = L * (2 * H * H + 2 * H * KV + 3 * H * FF)  # q, o; k, v; gate, up, down
NORMS = (2 * L + 1) * H
N = 2 * V * H + BLOCK_MATRICES + NORMS  # Llama-3-8B, published: 8,030,261,248


def test_llama3_8b_int4_g128():
    q = quantized_weight_bytes(presets.load("llama-3-8b"))
    assert N == 8_030_261_248
    assert q["quantized weights"] == BLOCK_MATRICES // 2
    # one bf16 scale per 128 weights of a row; rows of 4096 and 14336 are whole groups
    assert q["scales"] == 2 * (L * (2 * H * H // 128 + 2 * KV * H // 128)) + 2 * L * (
        2 * FF * H // 128 + H * FF // 128
    )
    assert q["scales"] == 2 * BLOCK_MATRICES // 128
    assert q["embedding and LM head"] == 2 * 2 * V * H
    assert q["norms and biases"] == 2 * NORMS
    plain_int4 = N // 2  # weight_bytes(cfg, "int4"): every parameter in 4 bits
    assert weight_bytes(presets.load("llama-3-8b"), "int4") == plain_int4
    assert round(q["scales"] / plain_int4, 3) == 0.027  # "g128 scales add 2.7 %"
    extra_vocab = q["embedding and LM head"] - 2 * V * H // 2
    assert round(extra_vocab / plain_int4, 2) == 0.39  # "bf16 embedding and head: 39 %"


def test_int4_decode_speedup_about_three():
    cfg = presets.load("llama-3-8b")
    h100 = GPUS["H100-SXM5-80GB"]
    kv = 2 * L * KV * 2 * 4096  # K and V, bf16, 4096 tokens
    bf16_read = 2 * (BLOCK_MATRICES + NORMS + V * H + H)  # head + one embedding row
    assert decode_step(cfg, h100, 1, 4096).bytes == bf16_read + kv
    int4_read = (
        BLOCK_MATRICES // 2 + 2 * BLOCK_MATRICES // 128 + 2 * (NORMS + V * H + H)
    )
    speedup = (bf16_read + kv) / (int4_read + kv)  # both memory-bound at batch 1
    assert round(speedup, 1) == 3.0
    naive = decode_step(cfg, h100, 1, 4096, weight_dtype="int4")
    assert round((bf16_read + kv) / naive.bytes, 2) == 3.62  # every weight in 4 bits


def test_scales_pad_rows_to_whole_groups_and_count_experts():
    tiny = presets.load("llama-3-8b").replace(
        hidden_size=96,
        intermediate_size=200,
        num_attention_heads=4,
        num_key_value_heads=2,
        num_hidden_layers=2,
        vocab_size=50,
    )
    q = quantized_weight_bytes(tiny, group_size=64)
    # d_h = 24. Rows whose input is 96 wide (q 96, k 48, v 48, o 96, gate 200, up 200)
    # take ceil(96/64) = 2 groups; down_proj's 96 rows are 200 wide: 4 groups each.
    per_layer = (96 + 48 + 48 + 96 + 200 + 200) * 2 + 96 * 4
    assert q["scales"] == 2 * 2 * per_layer  # 2 layers, 2 bytes per bf16 scale
    mix = presets.load("mixtral-8x7b")
    experts = 32 * 8 * 3 * 4096 * 14336
    attention = 32 * (2 * 4096 * 4096 + 2 * 4096 * 1024)
    router = 32 * 8 * 4096
    assert (
        quantized_weight_bytes(mix)["quantized weights"]
        == (experts + attention + router) // 2
    )


def test_bad_arguments():
    cfg = presets.load("llama-3-8b")
    with pytest.raises(ConfigError):
        quantized_weight_bytes(cfg, bits=0)
    with pytest.raises(ConfigError):
        quantized_weight_bytes(cfg, group_size=-1)


def test_gpu_memory_as_reported_and_the_80gb_rule():
    a100, h100 = GPUS["A100-SXM4-80GB"], GPUS["H100-SXM5-80GB"]
    assert a100.reported_memory == 81920 * 2**20  # nvidia-smi: 81920 MiB
    assert h100.reported_memory == 81559 * 2**20  # nvidia-smi: 81559 MiB
    assert GPU_80GB == 80 * 10**9 == a100.memory == h100.memory  # the capacity rule
    assert all(GPU_80GB < gpu.reported_memory for gpu in GPUS.values())


def test_minimind_counts_are_labelled_computed():
    """MiniMind's README prints only 26M, 104M and 145M; the exact counts come from
    running its training script, so the presets label them computed."""
    readme = {"minimind2-small": 26, "minimind2": 104, "minimind2-moe": 145}
    for name, millions in readme.items():
        preset = presets.get(name)
        assert preset.params_kind == "computed"
        assert round(preset.published_params / 10**6) == millions
        assert preset.published_label == f"{millions}M"
    others = [n for n in presets.names() if n not in readme]
    assert all(presets.get(n).params_kind == "published" for n in others)

"""llama.cpp's Q4_K_M recipe (`llmmath.quantization.q4_k_m_types`) against what
llama.cpp itself prints for a published Q4_K_M file of the Llama-3.1-8B architecture,
and its bytes against the ``gguf`` package's own block sizes and a file it writes.

The published figures are llama.cpp's loader log for such a file (DeepSeek-R1-Distill-
Llama-8B, Llama-3.1-8B's shapes: n_embd 4096, n_layer 32, n_head_kv 8, n_ff 14336,
n_vocab 128256; quoted in abetlen/llama-cpp-python issue 1693 for LongWriter-llama3.1-8b
and in an ollama log of the distilled model): ``type f32: 66 tensors``, ``type q4_K:
193 tensors``, ``type q6_K: 33 tensors``, ``file size = 4.58 GiB (4.89 BPW)`` and, with
every layer offloaded, ``CPU_Mapped model buffer size = 281.81 MiB``: the token
embedding, which llama.cpp keeps in host memory. Llama-3.1's file holds one tensor more
than Llama-3-8B's, ``rope_freqs.weight`` (64 F32 values, 256 bytes).
"""

import math
from collections import Counter

import pytest

from llmmath import count_params, presets
from llmmath.config import ConfigError
from llmmath.quantization import (
    Q4_K_M_STYLE,
    gguf_bytes,
    gguf_tensor_bytes,
    gguf_tensor_shapes,
    q4_k_m_types,
    use_more_bits,
)

GiB, MiB = 2**30, 2**20
L = 32


def test_use_more_bits_picks_16_of_32_layers():
    """i < 4, i >= 28, and every third layer from 6: (i - 4) % 3 == 2."""
    chosen = [i for i in range(L) if use_more_bits(i, L)]
    assert chosen == [0, 1, 2, 3, 6, 9, 12, 15, 18, 21, 24, 27, 28, 29, 30, 31]
    # C integer division: n = 12 gives n/8 = 1 and 7n/8 = 10
    assert [i for i in range(12) if use_more_bits(i, 12)] == [0, 3, 6, 9, 10, 11]


def test_llama3_8b_types_match_llama_cpp_log():
    cfg = presets.load("llama-3-8b")
    types = q4_k_m_types(cfg)
    counts = Counter(types.values())
    assert counts["Q4_K"] == 193 and counts["Q6_K"] == 33
    assert counts["F32"] == 66 - 1  # Llama-3.1 adds rope_freqs.weight (F32)
    assert set(counts) == {"Q4_K", "Q6_K", "F32"}
    assert types["output.weight"] == "Q6_K" and types["token_embd.weight"] == "Q4_K"
    for i in range(L):
        more = i < 4 or i >= 28 or (i - 4) % 3 == 2
        for part in ("attn_v", "ffn_down"):
            assert types[f"blk.{i}.{part}.weight"] == ("Q6_K" if more else "Q4_K")
        for part in ("attn_q", "attn_k", "attn_output", "ffn_gate", "ffn_up"):
            assert types[f"blk.{i}.{part}.weight"] == "Q4_K"


def test_llama3_8b_bytes_match_the_published_file():
    """llama.cpp prints the file size in GiB to two decimals (± 0.005 GiB, about
    5.4 MB) and BPW = 8 × bytes / parameters to two decimals; the 256 bytes of
    rope_freqs are far below that."""
    cfg = presets.load("llama-3-8b")
    b = gguf_tensor_bytes(cfg, q4_k_m_types(cfg))
    total = sum(b.values())
    assert abs(total / GiB - 4.58) <= 0.005
    assert abs(8 * total / count_params(cfg).total - 4.89) <= 0.005
    assert abs(b["token_embd.weight"] / MiB - 281.81) <= 0.005
    # the simplified mix the book used before (every attn_v Q6_K, no ffn_down) is not it
    style = sum(gguf_bytes(cfg, Q4_K_M_STYLE).values())
    assert abs(style / GiB - 4.58) > 0.1


def test_bytes_are_ggufs_block_sizes():
    """Each tensor's bytes from gguf's own GGML_QUANT_SIZES."""
    pytest.importorskip("gguf")
    from gguf.constants import GGML_QUANT_SIZES
    from gguf.constants import GGMLQuantizationType as T

    for name in ("llama-3-8b", "llama-3.2-1b", "minimind2-small"):
        cfg = presets.load(name)
        types = q4_k_m_types(cfg)
        ours = gguf_tensor_bytes(cfg, types)
        for tensor, shape in gguf_tensor_shapes(cfg).items():
            n, size = GGML_QUANT_SIZES[T[types[tensor]]]
            assert ours[tensor] == math.prod(shape) // n * size


def test_a_gguf_file_with_the_recipe(tmp_path):
    gguf = pytest.importorskip("gguf")
    import numpy as np
    from gguf.constants import GGMLQuantizationType as T

    cfg = presets.load("llama-3-8b").replace(
        hidden_size=256,
        intermediate_size=512,
        num_attention_heads=4,
        num_key_value_heads=1,
        head_dim=64,
        num_hidden_layers=8,
        vocab_size=64,
    )
    types = q4_k_m_types(cfg)
    writer = gguf.GGUFWriter(tmp_path / "q4km.gguf", "llama")
    for tensor, shape in gguf_tensor_shapes(cfg).items():
        kind = T[types[tensor]]
        raw = gguf.quants.quant_shape_to_byte_shape(shape, kind)
        if kind == T.F32:
            writer.add_tensor(tensor, np.zeros(shape, np.float32))
        else:
            data = np.zeros(raw, np.uint8)
            writer.add_tensor(tensor, data, raw_shape=data.shape, raw_dtype=kind)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    read = gguf.GGUFReader(tmp_path / "q4km.gguf").tensors
    assert {t.name: t.tensor_type.name for t in read} == types
    ours = gguf_tensor_bytes(cfg, types)
    assert {t.name: int(t.n_bytes) for t in read} == ours
    # n = 8: n/8 = 1, 7n/8 = 7: i < 1, i >= 7 or (i - 1) % 3 == 2
    more = [i for i in range(8) if types[f"blk.{i}.ffn_down.weight"] == "Q6_K"]
    assert more == [0, 3, 6, 7]


def test_tied_fallback_and_70b_rules():
    small = presets.load("llama-3.2-1b")  # tied: token_embd takes the output rule
    t = q4_k_m_types(small)
    assert "output.weight" not in t and t["token_embd.weight"] == "Q6_K"
    mm = q4_k_m_types(presets.load("minimind2-small"))  # I = 1408: not whole 256s
    assert {mm[f"blk.{i}.ffn_down.weight"] for i in range(8)} == {"Q5_0", "Q8_0"}
    big = q4_k_m_types(presets.load("llama-3-70b"))  # LLM_TYPE_70B: attn_v >= Q5_K
    assert {big[f"blk.{i}.attn_v.weight"] for i in range(80)} == {"Q5_K", "Q6_K"}
    with pytest.raises(ConfigError, match="dense"):
        q4_k_m_types(presets.load("mixtral-8x7b"))
    with pytest.raises(ConfigError, match="no GGML type"):
        gguf_tensor_bytes(small, {})

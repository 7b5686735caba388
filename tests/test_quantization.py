"""Quantized bytes (`llmmath.quantization`) against closed forms written here and
against torchao's quantized tensors: the quantized state dict's bytes equal the formula.

torchao (pinned in requirements.txt) quantizes a small reference model
(`llmmath.modules.build_model`, random weights) on the CPU; every tensor torchao keeps
(``__tensor_flatten__``: values, scales, zero points) is counted with ``nbytes``.
"""

from fractions import Fraction

import pytest

from llmmath import presets
from llmmath.config import ConfigError
from llmmath.quantization import (
    GGUF_BLOCKS,
    Q4_K_M_STYLE,
    TORCHAO_FP8,
    TORCHAO_INT4_CPU,
    TORCHAO_INT8,
    WeightFormat,
    bits_per_weight,
    checkpoint_bits_per_weight,
    gguf_bits_per_weight,
    gguf_bytes,
    kv_cache_quantized_bytes,
    quantized_bytes,
    weight_format,
)

H, L, KV, FF, V = 4096, 32, 8 * 128, 14336, 128256  # Llama-3-8B's config.json
BLOCK = L * (2 * H * H + 2 * H * KV + 3 * H * FF)
NORMS = (2 * L + 1) * H


@pytest.mark.parametrize("g", [32, 64, 128])
def test_bits_per_weight_closed_forms(g):
    assert bits_per_weight(4, g) == 4 + Fraction(16, g)
    assert bits_per_weight(8, g) == 8 + Fraction(16, g)
    assert bits_per_weight(4, g, "fp16", "int4") == 4 + Fraction(20, g)  # AWQ-style
    assert WeightFormat("int4", 4, g).bits_per_weight == 4 + Fraction(16, g)
    assert bits_per_weight(4, 32) == Fraction(9, 2) and bits_per_weight(4, 128) == 4.125


def test_llama3_8b_int4_checkpoint():
    cfg = presets.load("llama-3-8b")
    for g in (32, 64, 128):
        q = quantized_bytes(cfg, WeightFormat("int4", 4, g, "bf16", "int8"))
        assert q["quantized weights"] == BLOCK // 2
        assert q["scales"] == 2 * BLOCK // g  # every row is whole groups
        assert q["zero points"] == BLOCK // g
        assert q["embedding and LM head"] == 2 * 2 * V * H
        assert q["norms and biases"] == 2 * NORMS
    int8 = quantized_bytes(cfg, weight_format("int8"))  # one bf16 scale per row
    rows = L * (H + 2 * KV + H + 2 * FF + H)
    assert int8["scales"] == 2 * rows and int8["quantized weights"] == BLOCK
    assert quantized_bytes(cfg, None) == {"weights": 2 * (BLOCK + NORMS + 2 * V * H)}
    whole = checkpoint_bits_per_weight(cfg, weight_format("int4"))
    n = BLOCK + NORMS + 2 * V * H
    assert whole == Fraction(8 * (BLOCK // 2 + 2 * BLOCK // 128 + 2 * (n - BLOCK)), n)
    assert 5.6 < whole < 5.7  # far above 4.125: the bf16 embedding and head


def test_gguf():
    assert gguf_bits_per_weight("Q8_0") == Fraction(17, 2)
    assert gguf_bits_per_weight("Q4_K") == Fraction(9, 2)
    assert gguf_bits_per_weight("Q6_K") == Fraction(105, 16)
    # block_q4_K: fp16 d and dmin, 12 bytes of scales, 256 / 2 bytes of values
    assert GGUF_BLOCKS["Q4_K"] == (256, 2 + 2 + 12 + 128)
    assert GGUF_BLOCKS["Q6_K"] == (256, 128 + 64 + 16 + 2)
    cfg = presets.load("llama-3-8b")
    b = gguf_bytes(cfg, Q4_K_M_STYLE)
    v_proj = L * KV * H
    q4 = BLOCK - v_proj + V * H  # matrices and the embedding in Q4_K
    assert sum(b.values()) == q4 * 144 // 256 + (v_proj + V * H) * 210 // 256 + (
        4 * NORMS
    )
    with pytest.raises(ConfigError, match="blocks of 256"):
        gguf_bytes(presets.load("minimind2-small"), {"default": "Q4_K"})  # I = 1408
    with pytest.raises(ConfigError, match="GGUF type"):
        gguf_bytes(cfg, {"default": "Q9_K"})


def test_kv_cache_fp8_and_scales():
    cfg = presets.load("llama-3-8b")
    kv = kv_cache_quantized_bytes(cfg, 2, 4096, "fp8")
    assert kv["values"] == 2 * L * 2 * 4096 * KV  # one byte per value
    assert kv["scales"] == 4 * 2 * L * 2 * 4096 * 8  # an fp32 scale per head and token
    assert kv_cache_quantized_bytes(cfg, 1, 10, "int8", None)["scales"] == 0


def test_bad_formats():
    cfg = presets.load("llama-3-8b")
    with pytest.raises(ConfigError, match="weights must be one of"):
        weight_format("int3")
    with pytest.raises(ConfigError, match="group_size"):
        weight_format("int4", 0)
    with pytest.raises(ConfigError, match="group_size applies"):
        weight_format("bf16", 64)
    with pytest.raises(ConfigError, match="dtype"):
        quantized_bytes(cfg, WeightFormat("int4", 4, 64, "bf17"))


# --- against torchao's tensors --------------------------------------------------------


def tiny():
    return presets.load("llama-3-8b").replace(
        hidden_size=128,
        intermediate_size=256,
        num_attention_heads=4,
        num_key_value_heads=2,
        num_hidden_layers=2,
        vocab_size=64,
    )


def torchao_bytes(config) -> dict[str, int]:
    """Quantize the tiny model's block matrices with torchao; bytes of each part of the
    state dict, measured."""
    torch = pytest.importorskip("torch")
    quantization = pytest.importorskip("torchao.quantization")
    from torch import nn

    from llmmath.modules import build_model

    model = build_model(tiny(), device="cpu", dtype=torch.bfloat16)
    quantization.quantize_(
        model,
        config,
        filter_fn=lambda m, fqn: isinstance(m, nn.Linear) and fqn != "lm_head",
    )
    out = {"qdata": 0, "scale": 0, "zero_point": 0, "embedding and LM head": 0}
    out["norms"] = 0
    for name, t in model.state_dict().items():
        if hasattr(t, "__tensor_flatten__"):
            for part in t.__tensor_flatten__()[0]:
                out[part] += getattr(t, part).nbytes
        elif "embed" in name or "lm_head" in name:
            out["embedding and LM head"] += t.nbytes
        else:
            out["norms"] += t.nbytes
    return out


def expected(fmt):
    q = quantized_bytes(tiny(), fmt)
    return {
        "qdata": q["quantized weights"],
        "scale": q["scales"],
        "zero_point": q["zero points"],
        "embedding and LM head": q["embedding and LM head"],
        "norms": q["norms and biases"],
    }


@pytest.mark.parametrize("g", [32, 64, 128])
def test_torchao_int4_bytes_equal_the_formula(g):
    torch = pytest.importorskip("torch")
    from torchao.quantization import IntxWeightOnlyConfig
    from torchao.quantization.granularity import PerGroup
    from torchao.quantization.quant_primitives import MappingType

    config = IntxWeightOnlyConfig(
        weight_dtype=torch.int4,
        granularity=PerGroup(g),
        mapping_type=MappingType.ASYMMETRIC,
    )
    fmt = WeightFormat("int4", 4, g, "bf16", "int8", storage_bits=8)
    assert torchao_bytes(config) == expected(fmt)
    assert fmt == WeightFormat(**{**TORCHAO_INT4_CPU.__dict__, "group_size": g})


def test_torchao_int8_and_fp8_bytes_equal_the_formula():
    pytest.importorskip("torch")
    from torchao.quantization import Float8WeightOnlyConfig, Int8WeightOnlyConfig

    assert torchao_bytes(Int8WeightOnlyConfig()) == expected(TORCHAO_INT8)
    assert torchao_bytes(Float8WeightOnlyConfig()) == expected(TORCHAO_FP8)


def test_int4_values_pack_two_to_a_byte():
    """torchao's int4 values lie in [-8, 7]; packed two to a byte they take the
    formula's 4 bits per weight, and unpack to the same values."""
    torch = pytest.importorskip("torch")
    from torch import nn
    from torchao.quantization import IntxWeightOnlyConfig, quantize_
    from torchao.quantization.granularity import PerGroup

    torch.manual_seed(0)
    layer = nn.Linear(256, 96, bias=False).to(torch.bfloat16)
    quantize_(layer, IntxWeightOnlyConfig(torch.int4, PerGroup(64)))
    q = layer.weight.qdata
    assert q.dtype == torch.int8 and int(q.min()) >= -8 and int(q.max()) <= 7
    nibbles = (q.to(torch.int16) & 0xF).to(torch.uint8).reshape(-1, 2)
    packed = nibbles[:, 0] | (nibbles[:, 1] << 4)
    low, high = (packed & 0xF).to(torch.int16), (packed >> 4).to(torch.int16)
    unpacked = torch.stack([low, high], 1).reshape(q.shape)
    assert torch.equal(
        torch.where(unpacked > 7, unpacked - 16, unpacked), q.to(torch.int16)
    )
    assert packed.nbytes == 96 * 256 * 4 // 8


def test_quantized_decode_step_bytes():
    from llmmath.quantization import quantized_decode_step
    from llmmath.roofline import decode_step

    for name in ("llama-3-8b", "llama-3.2-1b"):  # untied and tied heads
        cfg = presets.load(name)
        for b in (1, 64):
            plain = decode_step(cfg, "H100-SXM5-80GB", b, 4096)
            step = quantized_decode_step(cfg, "H100-SXM5-80GB", None, b, 4096)
            assert step.bytes == plain.bytes and step.flops == plain.flops
    cfg = presets.load("llama-3-8b")
    step = quantized_decode_step(cfg, "H100-SXM5-80GB", weight_format("int4"), 1, 4096)
    kv = 2 * L * KV * 2 * 4096
    assert step.bytes == BLOCK // 2 + 2 * BLOCK // 128 + 2 * (NORMS + V * H + H) + kv


# --- against gguf's constants and a GGUF file it writes -------------------------------


def test_gguf_blocks_are_ggmls():
    gguf = pytest.importorskip("gguf")
    for kind, (n, size) in GGUF_BLOCKS.items():
        assert gguf.GGML_QUANT_SIZES[gguf.GGMLQuantizationType[kind]] == (n, size)


def test_a_gguf_file_holds_the_formulas_bytes(tmp_path):
    """Write a tiny model's tensors with gguf's own quantizers (Q4_0, Q8_0, F32), read
    the file back with gguf's reader: the tensors' bytes are `gguf_bytes`."""
    gguf = pytest.importorskip("gguf")
    import math

    import numpy as np
    from gguf import GGMLQuantizationType as T

    from llmmath.counting import count_params

    cfg = tiny()
    recipe = {"default": "Q4_0", "v_proj": "Q8_0", "lm_head": "Q8_0", "norm": "F32"}
    writer = gguf.GGUFWriter(tmp_path / "tiny.gguf", "llama")
    rng = np.random.default_rng(0)
    counts = count_params(cfg)
    for t in counts.tensors:
        layers = counts.total_of(t) // math.prod(t.shape)
        for i in range(layers):
            x = rng.standard_normal(t.shape).astype(np.float32)
            if len(t.shape) == 1:
                writer.add_tensor(f"{i}.{t.name}", x)
                continue
            kind = next((recipe[p] for p in t.name.split(".") if p in recipe), "Q4_0")
            q = gguf.quants.quantize(x, T[kind])
            writer.add_tensor(f"{i}.{t.name}", q, raw_shape=q.shape, raw_dtype=T[kind])
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    stored = sum(
        int(t.n_bytes) for t in gguf.GGUFReader(tmp_path / "tiny.gguf").tensors
    )
    assert stored == sum(gguf_bytes(cfg, recipe).values())

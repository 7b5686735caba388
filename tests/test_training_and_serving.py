"""FLOP conventions, training compute and memory, and the decode roofline, against
published figures (typed here from their sources) and against torch's FlopCounterMode.
"""

import json
import subprocess
import sys

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from torch.utils.flop_counter import FlopCounterMode

from llmmath import ConfigError, ModelConfig, count_params, presets
from llmmath.flops import (
    CONVENTIONS,
    forward_flops_per_token,
    kaplan_forward_flops,
    matmul_weights,
    palm_forward_flops,
    training_days,
    training_flops,
)
from llmmath.memory import (
    MIXED_PRECISION_ADAM,
    activation_bytes_per_layer,
    training_state_bytes,
)
from llmmath.modules import build_model
from llmmath.roofline import GPUS, compute_bound_batch, decode_step, mfu
from tests.conftest import hf_config
from tests.strategies import any_config

GPT3 = ModelConfig(
    vocab_size=50257,
    hidden_size=12288,
    intermediate_size=4 * 12288,
    num_hidden_layers=96,
    num_attention_heads=96,
    max_position_embeddings=2048,
    norm_type="layernorm",
    mlp_type="plain",
    hidden_act="gelu",
    position_embedding_type="learned",
    qkv_bias=True,
    o_proj_bias=True,
    mlp_bias=True,
    tie_word_embeddings=True,
    model_type="gpt3",
)


def test_nanogpt_gpt2_test_vector():
    """nanoGPT transformer_sizing.ipynb: GPT-2 124M without biases, T = 1024, full
    attention."""
    cfg = presets.load("gpt2").replace(
        qkv_bias=False, o_proj_bias=False, mlp_bias=False
    )
    f = forward_flops_per_token(cfg, 1024, "full")
    assert f.total * 1024 == 291_648_307_200
    assert f.parts["lm_head"] * 1024 == 79_047_426_048


def test_cli_reproduces_the_gpt2_vector():
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "llmmath",
            "flops",
            "gpt2",
            "--seq-len",
            "1024",
            "--attention",
            "full",
            "--json",
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    data = json.loads(out.stdout)
    assert data["forward_flops_per_token"] * 1024 == 291_648_307_200
    assert data["parts"]["lm_head"] * 1024 == 79_047_426_048


@given(any_config(), st.integers(1, 8))
@settings(max_examples=25)
def test_flop_counter_on_the_whole_model(raw, t):
    cfg = ModelConfig.from_hf_config(raw)
    model = build_model(cfg, device="cpu")
    counter = FlopCounterMode(display=False)
    with counter, torch.no_grad():
        model(torch.zeros(2, t, dtype=torch.long))
    assert (
        counter.get_total_flops()
        == 2 * t * forward_flops_per_token(cfg, t, "full").total
    )


def test_causal_average():
    cfg = presets.load("llama-2-7b")
    f = forward_flops_per_token(cfg, 4096, "causal")
    assert f.attention == 2 * 32 * 32 * 128 * (4096 + 1)


def test_kaplan_table_1():
    """Kaplan et al. 2020: N = 2·d_model·n_layer·(2·d_attn + d_ff), C = 2N +
    2·n_layer·n_ctx·d_attn."""
    cfg = presets.load("gpt2")
    n = 2 * 768 * 12 * (2 * 768 + 3072)
    assert kaplan_forward_flops(cfg, 1024) == 2 * n + 2 * 12 * 1024 * 768


def test_palm_appendix_b():
    cfg = presets.load("llama-3-8b")
    n = sum(matmul_weights(cfg).values())
    assert 3 * palm_forward_flops(cfg, 8192) == 6 * n + 12 * 32 * 32 * 128 * 8192


def test_conventions_are_close_for_a_7b_model():
    cfg = presets.load("llama-2-7b")
    values = [float(fn(cfg, 2048)) for fn in CONVENTIONS.values()]
    assert max(values) / min(values) < 1.15


def test_gpt3_parameters_against_note_004_and_the_paper():
    exact = count_params(GPT3).total
    d, v, l, i = 12288, 50257, 96, 4 * 12288
    note = 2 * d * v + 4 * l * d * d + 2 * l * d * i
    assert note == 175_181_291_520
    biases = l * (3 * d + d + i + d)
    norms = (2 * l + 1) * 2 * d
    positions = 2048 * d
    assert (
        exact == note - v * d + biases + norms + positions
    )  # tied, plus the small parameters
    assert round(exact / 1e9) == 175  # the paper's "175.0B", to 3 digits


def test_gpt3_training_compute():
    """Brown et al. 2020, Table D.1: 3.14E+23 FLOPs for 300B tokens (6·N·D)."""
    six_nd = 6 * count_params(GPT3).total * 300 * 10**9
    assert f"{six_nd:.2e}" == "3.14e+23"
    with_attention = training_flops(GPT3, 300 * 10**9, 2048)
    assert six_nd < with_attention < 1.03 * six_nd
    assert training_days(3.14e23, 1024, 312e12, 0.5) == pytest.approx(
        3.14e23 / (1024 * 312e12 * 0.5) / 86400
    )
    with pytest.raises(ConfigError, match="mfu"):
        training_days(1e20, 8, 1e15, 1.5)


def test_mixed_precision_adam_is_16_bytes_per_parameter():
    """ZeRO (Rajbhandari et al. 2020), Sec. 3.1: 2Ψ + 2Ψ + 12Ψ."""
    assert sum(MIXED_PRECISION_ADAM.values()) == 16
    state = training_state_bytes(presets.load("llama-2-7b"))
    assert sum(state.values()) == 16 * 6_738_415_616


def test_korthikanti_gpt3_activation_formula():
    """Korthikanti et al. 2022, Eq. 2: s·b·h·(34 + 5·a·s/h) bytes per layer."""
    for s, b in ((2048, 1), (1024, 4)):
        total = sum(activation_bytes_per_layer(GPT3, s, b, dropout=True).values())
        assert total * 12288 == s * b * 12288 * (34 * 12288 + 5 * 96 * s)


def test_activation_variants():
    cfg = presets.load("llama-3-8b")
    plain = activation_bytes_per_layer(cfg, 4096, 1)
    flash = activation_bytes_per_layer(cfg, 4096, 1, flash_attention=True)
    assert "softmax output" in plain and "softmax output" not in flash
    assert sum(flash.values()) < sum(plain.values())
    mha = activation_bytes_per_layer(cfg.replace(num_key_value_heads=32), 4096, 1)
    assert sum(mha.values()) - sum(plain.values()) == 2 * 4096 * 2 * (
        4096 - 1024
    )  # K and V wider


def test_decode_roofline():
    cfg = presets.load("llama-3-8b")
    one = decode_step(cfg, "H100-SXM5-80GB", batch=1, context=128)
    assert one.memory_bound and 0.9 < one.intensity < 1.1  # ~2 FLOPs per 2-byte weight
    b = compute_bound_batch(cfg, "H100-SXM5-80GB", context=128)
    assert not decode_step(cfg, "H100-SXM5-80GB", b, 128).memory_bound
    assert decode_step(cfg, "H100-SXM5-80GB", b - 1, 128).memory_bound
    assert (
        compute_bound_batch(cfg, "A100-SXM4-80GB", context=128) < b
    )  # lower ridge point
    assert GPUS["H100-SXM5-80GB"].ridge_point == pytest.approx(989.4e12 / 3.35e12)
    assert mfu(1000, 2e9, 1, 1e12) == 2.0


@pytest.mark.parametrize(
    "name",
    [
        "llama-3-8b",
        "mistral-7b-v0.1",
        "qwen2.5-3b",
        "qwen3-0.6b",
        "gpt2",
        "mixtral-8x7b",
        "minimind2-moe",
    ],
)
def test_cli_flops_answers_every_model_type(name, write_config):
    path = write_config(hf_config(name))
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "llmmath",
            "flops",
            str(path),
            "--seq-len",
            "2048",
            "--json",
        ],
        capture_output=True,
        text=True,
    )
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    cfg = presets.load(name)
    assert data["forward_flops_per_token"] == pytest.approx(
        float(forward_flops_per_token(cfg, 2048).total)
    )
    assert data["matmul_flops_per_token"] == 2 * sum(matmul_weights(cfg).values())


@pytest.mark.parametrize(
    "args",
    [
        ["gpt2"],
        ["gpt2", "--seq-len", "-3"],
        ["gpt2", "--seq-len", "8", "--attention", "half"],
        ["nope", "--seq-len", "8"],
    ],
)
def test_cli_flops_bad_input(args):
    out = subprocess.run(
        [sys.executable, "-m", "llmmath", "flops", *args],
        capture_output=True,
        text=True,
    )
    assert out.returncode == 2 and out.stdout == ""
    assert len(out.stderr.strip().splitlines()) == 1 and "Traceback" not in out.stderr


def test_weights_read_skips_unused_embedding_rows():
    from llmmath.memory import weight_bytes
    from llmmath.roofline import weights_read

    l3, qwen = presets.load("llama-3-8b"), presets.load("qwen2.5-3b")
    assert weight_bytes(l3) - weights_read(l3, 1) == 2 * (128256 - 1) * 4096  # untied
    assert weight_bytes(qwen) - weights_read(qwen, 1) == -2 * 2048  # tied: +1 row
    assert weights_read(l3, 10**6) == weight_bytes(l3)  # every row used


def test_prefill_is_compute_bound_and_decode_is_not():
    from llmmath.roofline import prefill_step

    cfg = presets.load("llama-3-8b")
    pre = prefill_step(cfg, "H100-SXM5-80GB", tokens=4096)
    assert pre.flops == 4096 * forward_flops_per_token(cfg, 4096).total
    assert not pre.memory_bound and pre.batch == 4096
    assert decode_step(cfg, "H100-SXM5-80GB", 1, 4096).memory_bound


def test_memory_and_roofline_widgets():
    """Issue 31: chapter 9's memory explorer counts training memory with
    `llmmath.training` (``train-memory``'s report) and inference with ``memory``'s;
    `memory_budget`, a second path, is gone."""
    import llmmath.memory
    from llmmath.kvcache import kv_cache_bytes
    from llmmath.reports import memory_report, train_memory_report
    from llmmath.training import training_peak
    from llmmath.widgets import MemoryBudget, RooflineExplorer

    assert not hasattr(llmmath.memory, "memory_budget")
    cfg = presets.load("llama-3-8b")
    budget = MemoryBudget("llama-3-8b", batch=1, seq_len=4096)
    assert budget.report == train_memory_report(
        "Llama-3-8B", cfg, batch=1, seq_len=4096, gpu="H100-SXM5-80GB"
    )
    assert budget.items == training_peak(cfg, batch=1, seq_len=4096).items
    assert f"{sum(budget.items.values()):,}" in budget.text
    serving = MemoryBudget("llama-3-8b", mode="inference", weights="int4", batch=4)
    assert serving.report == memory_report(
        "Llama-3-8B", cfg, "int4", None, "bf16", 4, 4096, "H100-SXM5-80GB"
    )
    assert serving.items["KV cache"] == kv_cache_bytes(cfg, 4, 4096)
    explorer = RooflineExplorer("llama-3-8b", "H100-SXM5-80GB", batch=16, context=4096)
    assert explorer.step == decode_step(
        presets.load("llama-3-8b"), "H100-SXM5-80GB", 16, 4096
    )
    (plot,) = [b for b in explorer.view["blocks"] if b["type"] == "plot"]
    assert plot["x"]["log"] and plot["y"]["log"]  # the roofline, drawn by the front end
    explorer.set(batch=512)
    assert explorer.step.batch == 512


def test_qk_norm_activations_and_mfu_validation():
    q3 = presets.load("qwen3-0.6b")
    assert "inputs of the q and k norms" in activation_bytes_per_layer(q3, 128)
    with pytest.raises(ConfigError, match="tokens_per_second"):
        mfu(0, 1e9, 1, 1e12)


@pytest.mark.parametrize(
    "name, attention",
    [("gpt2", "full"), ("mistral-7b-v0.1", "causal"), ("llama-3-8b", "causal")],
)
def test_cli_flops_table(name, attention):
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "llmmath",
            "flops",
            name,
            "--seq-len",
            "10000",
            "--attention",
            attention,
        ],
        capture_output=True,
        text=True,
    )
    assert out.returncode == 0, out.stderr
    total = forward_flops_per_token(presets.load(name), 10000, attention).total
    shown = f"{int(total):,}" if total.denominator == 1 else f"{float(total):,.2f}"
    assert "total" in out.stdout and shown in out.stdout


def test_moe_activations_count_the_experts_a_token_uses():
    mixtral = presets.load("mixtral-8x7b")
    dense = mixtral.replace(num_local_experts=None, num_experts_per_tok=None)
    moe, one = (
        activation_bytes_per_layer(mixtral, 128),
        activation_bytes_per_layer(dense, 128),
    )
    assert moe["gate and up outputs"] == 2 * one["gate and up outputs"]  # k = 2 experts
    assert moe["router logits"] == 2 * 128 * 8

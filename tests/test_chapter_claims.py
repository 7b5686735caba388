"""Claims the chapters 1-6 make about the study notes, checked again here, computed
from the configs' fields rather than taken from the chapters."""

import ast
import subprocess
import sys
from fractions import Fraction
from pathlib import Path

import pytest

from llmmath import count_params, presets
from llmmath.flops import matmul_weights
from tests.notebook_outputs import glued

ROOT = Path(__file__).resolve().parents[1]


def test_ffn_does_not_import_config_at_module_level():
    """config imports ffn (MiniMind's sizing rule); ffn must not import config back."""
    tree = ast.parse((ROOT / "llmmath" / "ffn.py").read_text(encoding="utf-8"))
    top = [n for n in tree.body if isinstance(n, ast.Import | ast.ImportFrom)]
    modules = {n.module for n in top if isinstance(n, ast.ImportFrom)}
    assert "llmmath.config" not in modules
    code = "import llmmath.ffn, llmmath.config; print(llmmath.config.ModelConfig)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr


def test_note001_ffn_with_default_biases():
    """Ch. 4: note 001's nn.Linear layers keep bias=True: 3HI + 2I + H per layer."""
    torch = pytest.importorskip("torch")
    cfg = presets.load("llama-2-7b")
    H, I = cfg.hidden_size, cfg.intermediate_size
    with torch.device("meta"):
        layers = [
            torch.nn.Linear(H, I),
            torch.nn.Linear(H, I),
            torch.nn.Linear(I, H),
        ]
    numel = sum(p.numel() for layer in layers for p in layer.parameters())
    assert numel == 3 * H * I + 2 * I + H
    with_bias = count_params(cfg.replace(mlp_bias=True))
    per_layer = sum(t.numel for t in with_bias.tensors if t.group == "ffn")
    assert per_layer == numel
    plain = sum(t.numel for t in count_params(cfg).tensors if t.group == "ffn")
    assert numel - plain == 2 * I + H == 26_112


@pytest.mark.parametrize("name", ["llama-2-7b", "mistral-7b-v0.1", "llama-3.1-405b"])
def test_kv_dim_is_h_over_g(name):
    """Ch. 3: note 000's "H = kv_dim × num_kv_heads" counts the heads twice."""
    raw = presets.get(name).hf_config
    H, n_h = raw["hidden_size"], raw["num_attention_heads"]
    n_kv = raw.get("num_key_value_heads", n_h)
    d_h = raw.get("head_dim", H // n_h)
    kv_dim = n_kv * d_h
    assert H == n_h * d_h
    assert kv_dim * (n_h // n_kv) == H
    assert kv_dim * n_kv != H


def test_llama2_pie_shares_round_to_32_and_64():
    """Ch. 1: note 001's pie gives FFN 65 %; the exact share rounds to 64."""
    cfg = presets.load("llama-2-7b")
    L, H, I, V = (
        cfg.num_hidden_layers,
        cfg.hidden_size,
        cfg.intermediate_size,
        cfg.vocab_size,
    )
    total = 2 * V * H + L * (4 * H * H + 3 * H * I + 2 * H) + H
    assert total == count_params(cfg).total
    assert round(100 * L * 4 * H * H / total) == 32
    assert round(100 * L * 3 * H * I / total) == 64


def test_mixtral_flops_count_the_active_experts():
    """Ch. 2: a token of Mixtral-8x7B runs 2 of its 8 experts: about 25.5 GFLOP of
    matrix products, not the 93.14 of all experts."""
    raw = presets.get("mixtral-8x7b").hf_config
    H, I, L, V = (
        raw["hidden_size"],
        raw["intermediate_size"],
        raw["num_hidden_layers"],
        raw["vocab_size"],
    )
    n_h, n_kv, E, k = (
        raw["num_attention_heads"],
        raw["num_key_value_heads"],
        raw["num_local_experts"],
        raw["num_experts_per_tok"],
    )
    d_h = H // n_h
    attention = 2 * H * n_h * d_h + 2 * H * n_kv * d_h
    active = 2 * (L * (attention + E * H + k * 3 * H * I) + V * H)
    everything = 2 * (L * (attention + E * H + E * 3 * H * I) + V * H)
    assert active == 2 * sum(matmul_weights(presets.load("mixtral-8x7b")).values())
    assert f"{active / 1e9:.1f}" == "25.5"
    assert f"{everything / 1e9:.2f}" == "93.14"


def test_llama3_8b_uses_the_multiplier():
    """Ch. 4: not only the 70B models: Llama-3-8B's 14336 needs the 1.3 multiplier."""
    dim, multiple_of = 4096, 1024
    two_thirds = int(2 * 4 * dim / 3)
    with_mult = -(-int(1.3 * two_thirds) // multiple_of) * multiple_of
    without = -(-two_thirds // multiple_of) * multiple_of
    assert presets.load("llama-3-8b").intermediate_size == with_mult == 14336 != without


def test_llama2_7b_bare_two_thirds_is_under_one_percent_wide():
    """Ch. 4: Llama-2-7B takes int(2/3 of 4H) = 10922, rounds it up to 256: 11008,
    0.8 % above 8H/3 (the glued figures, recomputed)."""
    dim = 4096
    bare = int(2 * 4 * dim / 3)
    size = -(-bare // 256) * 256
    assert presets.load("llama-2-7b").intermediate_size == size
    shown = glued(ROOT / "chapters" / "04_ffn.ipynb")
    assert shown["meta_bare_7b"] == f"{bare} → {size}"
    assert shown["meta_bare_over"] == f"{size / (8 * dim / 3) - 1:.1%}"


def test_ffn_sizes_and_ratios_glued_in_chapter_4():
    """Ch. 4: MiniMind's rule at H = 512 and 768 (1408; 2048 = 32 blocks of 64, not
    note 003's 2112), the ratios M = I/H (43/16 = 2.6875 for Llama-2-7B and
    DeepSeek-LLM-7B, 37/7 for Qwen2.5-7B, ...), their plain ratios 1.5·M and the
    28,672 of Llama-2-70B (and Llama-3-70B): the glued figures, recomputed from the
    configs' fields and by hand."""
    shown = glued(ROOT / "chapters" / "04_ffn.ipynb")

    def minimind(h):  # int(8h/3) rounded up to a multiple of 64, by hand
        return -(-(8 * h // 3) // 64) * 64

    assert presets.load("minimind2-small").intermediate_size == minimind(512) == 1408
    assert 8 * 768 % 3 == 0 and 8 * 768 // 3 % 64 == 0  # rounding changes nothing
    assert shown["mm_512"] == str(minimind(512))
    assert shown["mm_768_exact"] == shown["mm_768"] == str(minimind(768)) != "2112"
    assert shown["mm_768_blocks"] == str(minimind(768) // 64)
    assert 2112 - minimind(768) == 64

    def ratio(name):
        cfg = presets.load(name)
        return Fraction(cfg.intermediate_size, cfg.hidden_size)

    def decimal(q, places):
        text = f"{float(q):.{places}f}"
        return text.rstrip("0").rstrip(".") if Fraction(text) == q else text

    exact = {  # glue name: (preset, the exact M)
        "m_l2_7b": ("llama-2-7b", Fraction(43, 16)),
        "m_l3_8b": ("llama-3-8b", Fraction(7, 2)),
        "m_l31_405b": ("llama-3.1-405b", Fraction(13, 4)),
        "m_l32_1b": ("llama-3.2-1b", 4),
        "m_qwen25_3b": ("qwen2.5-3b", Fraction(43, 8)),
        "m_qwen3_06b": ("qwen3-0.6b", 3),
        "m_gpt2": ("gpt2", 4),
    }
    for key, (name, m) in exact.items():
        assert ratio(name) == m
        assert Fraction(shown[key]) == m and shown[key] == decimal(m, 4)
    assert ratio("deepseek-llm-7b") == ratio("llama-2-7b")
    assert shown["m_l2_7b_frac"] == "43/16" and shown["m_l32_3b"] == "8/3"
    assert ratio("llama-3.2-3b") == Fraction(8, 3)
    for key, name, m in (
        ("m_qwen25_7b", "qwen2.5-7b", Fraction(37, 7)),
        ("m_qwen25_05b", "qwen2.5-0.5b", Fraction(38, 7)),
    ):
        assert ratio(name) == m
        assert shown[f"{key}_frac"] == f"{m.numerator}/{m.denominator}"
        assert shown[key] == f"{round(m.numerator / m.denominator, 4):.4f}"
    # a gated FFN's 3·H·I weights are a plain MLP's 2·H·I' at I' = 1.5·I
    plain_l3 = Fraction(3 * 14336, 2 * 4096)
    assert 3 * 4096 * 14336 == 2 * 4096 * (plain_l3 * 4096)
    assert shown["plain_l3_8b"] == decimal(plain_l3, 4) == "5.25"
    plain_l2 = Fraction(3, 2) * ratio("llama-2-7b")
    assert plain_l2 == Fraction(129, 32) and shown["plain_l2_7b"] == "4.031"
    assert 4 < plain_l2 < Fraction(404, 100)
    l70 = presets.load("llama-2-70b")  # the exercise's model; Llama-3-70B's I too
    assert l70.intermediate_size == presets.load("llama-3-70b").intermediate_size
    two_thirds = int(2 * 4 * 8192 / 3)  # params.json: dim 8192, x1.3, multiple of 4096
    assert l70.intermediate_size == -(-int(1.3 * two_thirds) // 4096) * 4096
    assert shown["ex_70_I"] == f"{l70.intermediate_size:,}" == "28,672"


def test_mistral_config_declares_more_than_it_trained():
    """Ch. 2: max_position_embeddings is what the config declares (32768 for
    Mistral-7B-v0.1), not the 8192 its paper trained at."""
    assert presets.load("mistral-7b-v0.1").max_position_embeddings == 32768 != 8192


def test_embedding_shares_and_pairs_glued_in_chapter_2():
    """Ch. 2: Llama-2-7B's embedding V·H is 1.9 % of an even 7·10^9 as well as (to one
    decimal) of its exact N, as note 001 rounds it; note 001's sinusoidal table of
    d = 4096 columns has d/2 = 2,048 (sine, cosine) pairs: the glued figures,
    recomputed from the config's fields and by hand."""
    shown = glued(ROOT / "chapters" / "02_embeddings.ipynb")
    cfg = presets.load("llama-2-7b")
    emb = cfg.vocab_size * cfg.hidden_size
    assert emb == 32000 * 4096 == 131_072_000
    assert shown["l2_emb_share_7e9"] == f"{emb / 7e9:.1%}" == "1.9%"
    assert f"{emb / count_params(cfg).total:.1%}" == shown["l2_emb_share_7e9"]
    d = 4096  # note 001: sinusoidal_position_encoding(512, 4096)
    assert shown["ex_pairs"] == f"{d // 2:,}" == "2,048"

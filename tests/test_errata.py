"""The slips of the study notes collected in the appendix ``book/errata.ipynb``, one
test each.

Each test holds the note's figure as the note prints it and the right figure, derived
here by independent arithmetic from the model's shapes (or taken from its publisher).
It then checks that `llmmath` gives the right figure and that the note's differs from
it by exactly the amount the appendix explains. Nothing here is copied from
`llmmath`'s output. Test names follow the appendix: note number, then the slip.
"""

import datetime
from fractions import Fraction
from pathlib import Path

import pytest
import torch
from torch import nn

from llmmath import ModelConfig, count_params, presets
from llmmath.ffn import ffn_ratio, minimind_intermediate_size
from llmmath.flops import decode_attention_flops, ffn_flops, forward_flops_per_token
from llmmath.kvcache import kv_cache_bytes, kv_cache_bytes_per_token
from llmmath.memory import serving_fit
from llmmath.modules import KVCache, LayerNorm, RMSNorm, numel
from tests.notebook_outputs import glued

ROOT = Path(__file__).resolve().parents[1]
MI, GI = 2**20, 2**30  # the binary units the notes slip into
GB = 10**9

# Note 000's "Mistral 7B" example: H, V, L and I = M·H with M = 3.5.
H0, V0, L0, I0 = 4096, 32000, 32, 14336
NOTE000_ESTIMATE = (
    V0 * H0 + L0 * 4 * H0**2 + L0 * 3 * H0 * I0 + V0 * H0
)  # VH + L·4H² + L·3MH² + VH

# Qwen2.5-3B as note 000 reads it off the printout (biases on q, k, v; tied head).
QV, QH, QL, QI, QKV = 151936, 2048, 36, 11008, 256
QWEN_BIASES = QL * (QH + QKV + QKV)
QWEN_NORMS = (2 * QL + 1) * QH
QWEN_EXACT = (
    QV * QH
    + QL * (QH * QH + 2 * QH * QKV + QH * QH + 3 * QH * QI)
    + QWEN_BIASES
    + QWEN_NORMS
)

# Llama-2-7B (Touvron et al. 2023): published count of the Hugging Face checkpoint.
LLAMA2_PUBLISHED = 6_738_415_616

# GPT-3 175B (Brown et al. 2020, Table 2.1): tied, learned positions, biases,
# LayerNorm, I = 4D.
GD, GV, GL, GP = 12288, 50257, 96, 2048
GI_ = 4 * GD
GPT3 = ModelConfig(
    vocab_size=GV,
    hidden_size=GD,
    intermediate_size=GI_,
    num_hidden_layers=GL,
    num_attention_heads=96,
    max_position_embeddings=GP,
    norm_type="layernorm",
    mlp_type="plain",
    hidden_act="gelu",
    position_embedding_type="learned",
    qkv_bias=True,
    o_proj_bias=True,
    mlp_bias=True,
    tie_word_embeddings=True,
    model_type="gpt2",
)


def layer_sum(counts, group, suffix=""):
    """Whole-model parameters of the per-layer tensors in ``group`` whose names end
    in ``suffix``."""
    return sum(
        counts.total_of(t)
        for t in counts.tensors
        if t.per_layer and t.group == group and t.name.endswith(suffix)
    )


def crossover(cfg):
    """Where 4·L·n_h·d_h·t equals the weight matmuls of the layers (no LM head)."""
    f = forward_flops_per_token(cfg, 1)
    return Fraction(
        f.parts["attention"] + f.parts["ffn"],
        4 * cfg.num_hidden_layers * cfg.num_attention_heads * cfg.head_dim,
    )


# ----------------------------------------------------------------------------- note 000


def test_note000_7_5B_is_in_units_of_2_30():
    note_vocab, note_blocks, note_total = 250, 7.25, 7.5  # "250M + 7.25B = 7.5B"
    assert 2 * V0 * H0 == note_vocab * MI
    assert L0 * (4 * H0**2 + 3 * H0 * I0) == note_blocks * GI
    assert round(NOTE000_ESTIMATE / GI, 1) == note_total  # binary: the note's figure
    assert round(NOTE000_ESTIMATE / GB, 2) == 8.05  # decimal, as the note declares
    # "131M + 7.25B + 131M ≈ 7.51B": decimal millions plus binary billions
    assert round((2 * 131 * 10**6) / GB + note_blocks, 2) == 7.51
    # the example's other figures are binary too: "232M", "64M", "2B", "40M", "1.25G"
    assert (4 * H0**2 + 3 * H0 * I0) == 232 * MI and 4 * H0**2 == 64 * MI
    assert L0 * 4 * H0**2 == 2 * GI
    assert (
        H0**2 * (2 + Fraction(2, 4)) == 40 * MI
        and L0 * H0**2 * (2 + Fraction(2, 4)) == 1.25 * GI
    )
    mha = count_params(presets.load("mistral-7b-v0.1").replace(num_key_value_heads=32))
    assert mha.total - mha.by_group()["norm"] == NOTE000_ESTIMATE


def test_note000_8_053B_converts_the_rounded_7_5():
    note_converted = 8.053  # "7.5 × 1024³ / 1000³ ≈ 8.053B"
    assert round(7.5 * GI / GB, 3) == note_converted
    assert round(NOTE000_ESTIMATE / GB, 3) == 8.047
    assert int(7.5 * GI) - NOTE000_ESTIMATE == 6 * MI  # the rounding of 7.494 Gi to 7.5
    mha = count_params(presets.load("mistral-7b-v0.1").replace(num_key_value_heads=32))
    assert round((mha.total - mha.by_group()["norm"]) / GB, 3) != note_converted


def test_note000_mistral_estimate_ignores_gqa():
    published = 7_241_732_096  # Mistral-7B-v0.1 checkpoint (Hugging Face model page)
    note_label = 7.2  # "the real Mistral 7B is 7.2B"
    gqa_gap = L0 * 2 * H0 * (H0 - 8 * 128)  # K, V at width 4096, not n_kv·d_h
    norms = (2 * L0 + 1) * H0  # RMSNorm adds parameters
    assert NOTE000_ESTIMATE - gqa_gap + norms == published
    assert round(published / GB, 1) == note_label
    exact = count_params(presets.load("mistral-7b-v0.1"))
    assert exact.total == published
    assert exact.by_group()["norm"] == norms
    assert not [t.name for t in exact.tensors if t.name.endswith(".bias")]  # no biases
    assert NOTE000_ESTIMATE - exact.total == gqa_gap - norms


def test_note000_mha_kv_dim_is_hidden_size():
    n_kv, head_dim, hidden = 32, 128, 4096  # Llama-2-7B, MHA
    kv_dim = n_kv * head_dim
    note_hidden = kv_dim * n_kv  # "H = kv_dim × num_kv_heads"
    assert kv_dim == hidden and note_hidden == n_kv * hidden
    counts = count_params(presets.load("llama-2-7b"))
    k_proj = next(t for t in counts.tensors if t.name == "self_attn.k_proj.weight")
    assert k_proj.shape == (kv_dim, hidden)
    assert presets.load("llama-2-7b").hidden_size != note_hidden


def test_note000_llama_ffn_mult_3_5_is_one_models_ratio():
    note_llama, note_qwen, note_deepseek = 3.5, 5.375, 2.6875
    assert ffn_ratio(presets.load("llama-3-8b")) == Fraction(14336, 4096) == note_llama
    assert ffn_ratio(presets.load("llama-2-7b")) == Fraction(11008, 4096) != note_llama
    assert (
        ffn_ratio(presets.load("llama-3.1-405b"))
        == Fraction(53248, 16384)
        != note_llama
    )
    assert ffn_ratio(presets.load("qwen2.5-3b")) == Fraction(11008, 2048) == note_qwen
    assert ffn_ratio(presets.load("qwen2.5-7b")) == Fraction(18944, 3584) != note_qwen
    assert ffn_ratio(presets.load("deepseek-llm-7b")) == note_deepseek


def test_note000_3MH2_overcounts_a_plain_mlp():
    hidden, m, layers = 768, 4, 12  # GPT-2, "GPT models usually 4.0"
    note = 3 * m * hidden**2  # the estimate's L·3MH², per layer
    plain = 2 * m * hidden**2 + m * hidden + hidden  # c_fc, c_proj and their biases
    gpt2 = count_params(presets.load("gpt2"))
    assert layer_sum(gpt2, "ffn") == layers * plain
    assert note - plain == m * hidden**2 - m * hidden - hidden


def test_note000_qwen_embedding_product_mistyped():
    note = 311_205_888  # "151936 × 2048 = 311,205,888"
    right = QV * QH
    assert note - right == 20 * QH and note == (QV + 20) * QH  # one digit of V: 151956
    assert right == 296.75 * MI  # the note's "296.75M" is right
    assert count_params(presets.load("qwen2.5-3b")).by_group()["embedding"] == right


def test_note000_qwen_group_size_is_8_not_2():
    as_written = QL * QH**2 * (2 + Fraction(2, 2))  # "36 × 2048² × (2 + 2/2)"
    right = QL * QH**2 * (2 + Fraction(2, 16 // 2))
    assert as_written == 432 * MI and right == 324 * MI  # the note's "324M" is right
    counts = count_params(presets.load("qwen2.5-3b"))
    assert layer_sum(counts, "attention", ".weight") == right != as_written


def test_note000_qwen_num_group_is_the_head_dim():
    note_num_group = 256 // 2  # "num_group = 256/2 = 128"
    cfg = presets.load("qwen2.5-3b")
    assert note_num_group == cfg.head_dim == QH // 16
    assert cfg.num_key_value_heads == 2 != note_num_group  # the number of groups
    assert cfg.group_size == 16 // 2


def test_note000_qwen_biases_and_norms_left_out():
    counts = count_params(presets.load("qwen2.5-3b"))
    assert layer_sum(counts, "attention", ".bias") == QWEN_BIASES
    assert counts.by_group()["norm"] == QWEN_NORMS
    note_attention = 324 * MI  # weights only
    assert counts.by_group()["attention"] - note_attention == QWEN_BIASES


def test_note000_qwen_tied_output_layer_counted_twice():
    note_output = 296.75 * MI  # "output layer: 296.75M"
    cfg = presets.load("qwen2.5-3b")
    tied = count_params(cfg)
    assert cfg.tie_word_embeddings and tied.by_group()["lm_head"] == 0
    assert (
        count_params(cfg.replace(tie_word_embeddings=False)).total - tied.total
        == note_output
    )


def test_note000_qwen_3_16G_is_in_units_of_2_30():
    note_sum = int((2322 + 324 + 2 * 296.75) * MI)  # "2322M + 324M + 296.75M × 2"
    assert round(note_sum / GI, 2) == 3.16 and round(note_sum / GB, 2) == 3.40
    assert note_sum - QV * QH + QWEN_BIASES + QWEN_NORMS == QWEN_EXACT
    assert round(QWEN_EXACT / GB, 2) == 3.09  # Qwen2.5-3B model card: 3.09B
    counts = count_params(presets.load("qwen2.5-3b"))
    assert counts.total == QWEN_EXACT
    assert (
        round(counts.non_embedding / GB, 2) == 2.77
    )  # model card: 2.77B non-embedding


# ----------------------------------------------------------------------------- note 001


def test_note001_32_times_202M_is_not_6_46B():
    per_layer = 4 * 4096**2 + 3 * 4096 * 11008 + 2 * 4096
    assert (
        round(per_layer / 10**6) == 202 and round(32 * 202 / 1000, 2) == 6.46
    )  # the note
    assert round(32 * per_layer / GB, 2) == 6.48
    assert count_params(presets.load("llama-2-7b")).per_layer == per_layer


def test_note001_pie_embedding_and_head_is_not_2_percent():
    note_share = 2
    share = 2 * 32000 * 4096 / LLAMA2_PUBLISHED
    assert (
        round(100 * share, 2) == 3.89 and round(100 * share / 2, 1) == 1.9
    )  # one matrix
    shares = count_params(presets.load("llama-2-7b")).shares()
    assert shares["embedding"] + shares["lm_head"] == pytest.approx(share, abs=1e-15)
    assert round(100 * share) != note_share


def test_note001_pie_norm_is_not_1_percent():
    note_share = 1
    norms = (2 * 32 + 1) * 4096
    counts = count_params(presets.load("llama-2-7b"))
    assert counts.by_group()["norm"] == norms
    assert round(100 * norms / LLAMA2_PUBLISHED, 4) == 0.0040
    assert 100 * counts.shares()["norm"] < note_share / 200


def test_note001_pie_ffn_is_64_not_65_percent():
    note_share = 65
    ffn = 32 * 3 * 4096 * 11008
    counts = count_params(presets.load("llama-2-7b"))
    assert counts.by_group()["ffn"] == ffn
    assert round(100 * ffn / LLAMA2_PUBLISHED) == 64 == note_share - 1


def test_note001_pie_mistakes_cancel():
    """The note's slices sum to 100 only because its slips cancel: the embedding and
    LM head slice is 2 points short, and the FFN and the norm slices each have 1 more
    than their whole percent (appendix 001-4)."""
    note = {"attention": 32, "ffn": 65, "embedding + head": 2, "norm": 1}
    V, H, L, I_ = 32000, 4096, 32, 11008
    exact = {
        "attention": L * 4 * H * H,
        "ffn": L * 3 * H * I_,
        "embedding + head": 2 * V * H,
        "norm": (2 * L + 1) * H,
    }
    assert sum(exact.values()) == LLAMA2_PUBLISHED
    whole = {k: round(100 * n / LLAMA2_PUBLISHED) for k, n in exact.items()}
    assert whole == {"attention": 32, "ffn": 64, "embedding + head": 4, "norm": 0}
    assert sum(note.values()) == sum(whole.values()) == 100
    assert note["embedding + head"] - whole["embedding + head"] == -2
    assert note["ffn"] - whole["ffn"] == note["norm"] - whole["norm"] == 1


def test_note001_swiglu_code_has_biases():
    class SwiGLUFeedForward(nn.Module):  # note 001, section 6.2, as written
        def __init__(self, hidden_dim, intermediate_dim):
            super().__init__()
            self.gate_proj = nn.Linear(hidden_dim, intermediate_dim)
            self.up_proj = nn.Linear(hidden_dim, intermediate_dim)
            self.down_proj = nn.Linear(intermediate_dim, hidden_dim)

    note_table = 3 * 4096 * 11008  # "3 × 4096 × 11008 = 135,266,304"
    assert note_table == 135_266_304
    with torch.device("meta"):
        module = SwiGLUFeedForward(4096, 11008)
    assert numel(module) == note_table + 2 * 11008 + 4096
    llama2 = presets.load("llama-2-7b")
    assert layer_sum(count_params(llama2), "ffn") == 32 * note_table
    biased = count_params(llama2.replace(mlp_bias=True))
    assert layer_sum(biased, "ffn") == 32 * numel(module)
    assert biased.total - count_params(llama2).total == 32 * (2 * 11008 + 4096)


# ----------------------------------------------------------------------------- note 002


def test_note002_kv_cache_128GB_is_16_times_too_large():
    layers, batch, tokens, heads, hidden = 32, 16, 1024, 32, 4096
    note_bytes = (
        layers * batch * tokens * heads * hidden * 2
    )  # "N×B×L×H×D", float16: "128GB"
    note_gqa = note_bytes // 4  # "32GB"
    assert note_bytes == 128 * GI and note_gqa == 32 * GI
    right = (
        2 * layers * batch * tokens * heads * (hidden // heads) * 2
    )  # K and V, d_h per head
    assert right == 8 * GI and note_bytes == 16 * right
    llama2 = presets.load("llama-2-7b")
    assert kv_cache_bytes(llama2, batch, tokens, "fp16") == right
    assert (
        kv_cache_bytes(llama2.replace(num_key_value_heads=8), batch, tokens, "fp16")
        == right // 4
    )
    assert right // 4 == 2 * GI != note_gqa


def test_note002_mha_cache_fits_an_80GB_gpu():
    weights = LLAMA2_PUBLISHED * 2  # float16
    per_sequence = 2 * 32 * 1024 * 32 * 128 * 2
    gpu = 80 * GB  # "the RAM 80GB" of an A100
    assert weights + 16 * per_sequence < gpu
    fit = serving_fit(
        presets.load("llama-2-7b"),
        gpu,
        batch=16,
        seq_len=1024,
        weight_dtype="fp16",
        cache_dtype="fp16",
    )
    assert fit.fits and fit.total_bytes == weights + 16 * per_sequence
    assert fit.max_batch == (gpu - weights) // per_sequence


def test_note002_layernorm_is_over_the_features():
    torch.manual_seed(0)
    x = torch.randn(1, 6, 8, dtype=torch.float64)
    changed = x.clone()
    changed[:, -1] += 10  # only the last token changes
    ln = LayerNorm(8).double()
    with torch.no_grad():
        torch.testing.assert_close(
            ln(x), torch.nn.functional.layer_norm(x, (8,), eps=ln.eps)
        )
        assert torch.equal(ln(changed)[:, :-1], ln(x)[:, :-1])

    def over_sequence(v, eps=1e-5):  # note 002, read literally
        mean, var = v.mean(1, keepdim=True), v.var(1, keepdim=True, unbiased=False)
        return (v - mean) / torch.sqrt(var + eps)

    assert (over_sequence(changed) - over_sequence(x))[:, :-1].abs().max() > 0.1


def test_note002_llama2_has_gqa_only_at_70b():
    published_heads = {
        "llama-2-7b": (32, 32),
        "llama-2-13b": (40, 40),
        "llama-2-70b": (64, 8),
    }
    for name, (n_h, n_kv) in published_heads.items():  # the configs' n_h and n_kv
        cfg = presets.load(name)
        assert (cfg.num_attention_heads, cfg.num_key_value_heads) == (n_h, n_kv)
    assert kv_cache_bytes_per_token(presets.load("llama-2-70b")) == 2 * 80 * 8 * 128 * 2
    assert kv_cache_bytes_per_token(presets.load("llama-2-7b")) == 2 * 32 * 32 * 128 * 2
    assert 2 * 80 * 8 * 128 * 2 < 2 * 32 * 32 * 128 * 2


def test_note002_llama3_date():
    note = {
        "2302.13971": datetime.date(2023, 2, 27),  # LLaMA
        "2307.09288": datetime.date(2023, 7, 19),  # Llama 2
        "2407.21783": datetime.date(2024, 11, 23),
    }  # The Llama 3 Herd of Models
    months = {a: datetime.date(2000 + int(a[:2]), int(a[2:4]), 1) for a in note}
    assert [months[a] == d.replace(day=1) for a, d in note.items()] == [
        True,
        True,
        False,
    ]
    release = datetime.date(2024, 4, 18)  # Llama 3 8B and 70B released
    assert release < months["2407.21783"] < note["2407.21783"]
    assert (
        presets.load("llama-3-8b").max_position_embeddings == 8192
    )  # the note's "8K" holds


# ----------------------------------------------------------------------------- note 003


def test_note003_intermediate_size_for_768_is_2048():
    note = 2112  # "768 → 2112 (64 × 33)"
    n = 768 * 8 // 3
    right = -(-n // 64) * 64  # round up to a multiple of 64
    assert right == 2048 and note - right == 64
    assert minimind_intermediate_size(768) == right != note
    assert minimind_intermediate_size(512) == 1408  # the note's first example holds


def test_note003_there_is_no_q_cache():
    layers, n_h, n_kv, head_dim = 8, 8, 2, 64  # MiniMind2-Small
    kv_per_token = 2 * layers * n_kv * head_dim * 2  # bf16 keys and values
    assert n_kv * head_dim * 4 == n_h * head_dim  # the quarter is the width
    mm = presets.load("minimind2-small")
    assert kv_cache_bytes_per_token(mm) == kv_per_token
    assert (
        kv_cache_bytes_per_token(mm.replace(num_key_value_heads=8)) == 4 * kv_per_token
    )
    cache = KVCache(layers)
    assert (
        hasattr(cache, "keys")
        and hasattr(cache, "values")
        and not hasattr(cache, "queries")
    )


def test_note003_23_layers_are_not_75M():
    note_8, note_23 = 26, 75  # "about 26M", "about 75M+"
    embedding = 6400 * 512  # tied
    layer = 2 * 512 * 512 + 2 * 512 * 128 + 3 * 512 * 1408 + 2 * 512
    total_8, total_23 = embedding + 8 * layer + 512, embedding + 23 * layer + 512
    assert round(total_8 / 10**6) == note_8 and round(note_8 * 23 / 8) == note_23
    assert round(total_23 / 10**6) == 68 < note_23
    mm = presets.load("minimind2-small")
    assert count_params(mm).total == total_8
    assert count_params(mm.replace(num_hidden_layers=23)).total == total_23


# ----------------------------------------------------------------------------- note 004


def test_note004_mlp_line_is_three_times_too_large():
    layers, hidden, inter = 32, 4096, 11008  # Llama-2-7B, b·t = 1
    note_line = layers * 2 * hidden * 3 * inter * 3  # "L·2·b·t·D·3·I·3"
    right = 6 * layers * hidden * inter  # the note's own total: 6LDI
    assert note_line == 3 * right
    assert ffn_flops(presets.load("llama-2-7b")) == right


def test_note004_gated_flops_with_plain_parameters():
    note_ffn = 6 * GL * GD * GI_  # 6LDI, a gated FFN
    right = 4 * GL * GD * GI_  # GPT-3's plain MLP: W_up, W_down
    assert ffn_flops(GPT3) == right == note_ffn - 2 * GL * GD * GI_
    assert crossover(GPT3) == 2 * GD + GI_ == 73728 != 2 * GD + Fraction(3, 2) * GI_


def test_note004_2D_plus_1_5T_is_2D_plus_1_5I():
    note = 24704  # "2D + 1.5I = 24704"
    assert 2 * 4096 + Fraction(3, 2) * 11008 == note
    assert crossover(presets.load("llama-2-7b")) == note


def test_note004_gpt3_has_fewer_parameters():
    note = 175_181_291_520  # N = 2DV + 4LD² + 2LDI
    assert note == 2 * GD * GV + 4 * GL * GD**2 + 2 * GL * GD * GI_
    per_layer = 4 * GD**2 + 4 * GD + 2 * GD * GI_ + GI_ + GD + 2 * 2 * GD
    right = GV * GD + GP * GD + GL * per_layer + 2 * GD
    assert (
        note - right == GV * GD - GP * GD - GL * (4 * GD + GI_ + GD + 4 * GD) - 2 * GD
    )
    assert count_params(GPT3).total == right
    assert (
        f"{6 * right * 300 * 10**9:.2E}" == "3.14E+23"
    )  # Brown et al. 2020, Table D.1
    assert f"{6 * note * 300 * 10**9:.2E}" != "3.14E+23"


# ----------------------------------------------------- statements that need a qualifier


def test_note000_attention_depends_on_head_dim():
    hidden, n_h, head_dim = 1024, 16, 128  # Qwen3-0.6B: n_h·d_h = 2H
    mha = count_params(presets.load("qwen3-0.6b").replace(num_key_value_heads=16))
    assert (
        layer_sum(mha, "attention")
        == 28 * 4 * hidden * n_h * head_dim
        != 28 * 4 * hidden**2
    )


def test_note001_layernorm_output_variance_below_one():
    torch.manual_seed(0)
    x = 0.01 * torch.randn(1, 1, 8, dtype=torch.float64)
    ln = LayerNorm(8).double()
    sigma2 = x.var(-1, unbiased=False)
    with torch.no_grad():
        torch.testing.assert_close(
            ln(x).var(-1, unbiased=False), sigma2 / (sigma2 + ln.eps)
        )
        assert ln(x).var(-1, unbiased=False).item() < 0.95


def test_note002_rope_m_is_a_position():
    from llmmath.rope import rope_cos_sin

    positions, head_dim = 4096, 128
    cos, sin = rope_cos_sin(head_dim, positions)
    assert cos.shape == sin.shape == (positions, head_dim)  # one row per position m
    torch.testing.assert_close(
        cos[0], torch.ones(head_dim, dtype=cos.dtype)
    )  # m = 0: no turn


def test_note002_rmsnorm_scale_invariance_needs_a_positive_scale():
    torch.manual_seed(1)
    v = torch.randn(1, 1, 8, dtype=torch.float64)
    exact, with_eps = RMSNorm(8, eps=0.0).double(), RMSNorm(8, eps=1e-6).double()
    with torch.no_grad():
        torch.testing.assert_close(exact(3 * v), exact(v))  # y(ax) = y(x) for a > 0
        torch.testing.assert_close(exact(-3 * v), -exact(v))  # a < 0 flips the sign
        assert not torch.equal(with_eps(3 * v), with_eps(v))  # ε breaks it, slightly
        torch.testing.assert_close(with_eps(3 * v), with_eps(v), rtol=1e-5, atol=1e-5)


def test_note002_swiglu_and_silu_are_the_same_ffn():
    for name in ("llama-1-7b", "llama-2-7b", "llama-3-8b"):
        cfg = presets.load(name)
        assert (cfg.mlp_type, cfg.hidden_act) == ("gated", "silu")


def test_note003_gqa_saves_bytes_more_than_flops():
    mm = presets.load("minimind2-small")
    mha = mm.replace(num_key_value_heads=8)
    gqa_step, mha_step = (
        decode_attention_flops(mm, 512),
        decode_attention_flops(mha, 512),
    )
    # only the K and V projections shrink: 2·H·(n_h − n_kv)·d_h per layer and token,
    # 2 FLOPs each
    assert mha_step.total - gqa_step.total == 8 * 2 * 2 * 512 * (8 - 2) * 64
    assert Fraction(gqa_step.total, mha_step.total) == Fraction(3, 4)
    assert Fraction(
        kv_cache_bytes(mm, 1, 512), kv_cache_bytes(mha, 1, 512)
    ) == Fraction(1, 4)


def test_note004_8LD2_assumes_mha():
    hidden, inter, g = 4096, 14336, 4  # Llama-3-8B
    note = 2 * hidden + Fraction(3, 2) * inter
    right = hidden + Fraction(hidden, g) + Fraction(3, 2) * inter
    assert crossover(presets.load("llama-3-8b")) == right < note


def test_intro_gqa_removes_eleven_percent_of_mistral():
    """The front page: GQA removes 805,306,368 of Mistral-7B's MHA parameters, ~11 %."""
    text = (Path(__file__).resolve().parents[1] / "book" / "intro.md").read_text()
    gap = (
        L0 * 2 * H0 * (H0 - 8 * 128)
    )  # K and V at width 4096 instead of n_kv·d_h = 1024
    mistral_published = 7_241_732_096
    assert count_params(presets.load("mistral-7b-v0.1")).total == mistral_published
    assert f"remove {gap:,} of the" in text
    assert f"about {round(100 * gap / mistral_published)} % of the model" in text
    assert "barely" not in text


# --- Issue 14: note 003's training branch, note 001's claims and questions


def test_note003_training_branch_needs_repeat_kv_or_enable_gqa():
    """8 query heads against 2 key/value heads: no broadcast, a shape error."""
    torch.manual_seed(0)
    q = torch.randn(1, 8, 5, 64)
    k, v = torch.randn(1, 2, 5, 64), torch.randn(1, 2, 5, 64)
    sdpa = torch.nn.functional.scaled_dot_product_attention
    with pytest.raises(RuntimeError):
        sdpa(q, k, v, is_causal=True)
    by_hand = sdpa(
        q, k.repeat_interleave(4, dim=1), v.repeat_interleave(4, dim=1), is_causal=True
    )
    torch.testing.assert_close(sdpa(q, k, v, is_causal=True, enable_gqa=True), by_hand)


def _attend(x, w_q, w_k, w_v, causal):
    scores = (x @ w_q) @ (x @ w_k).T / x.shape[-1] ** 0.5
    if causal:
        mask = torch.ones(len(x), len(x), dtype=torch.bool).triu(1)
        scores = scores.masked_fill(mask, float("-inf"))
    return scores.softmax(-1) @ (x @ w_v)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_note001_cat_chases_dog_without_positions(seed):
    """Bidirectional attention without positions is permutation-equivariant; a causal
    decoder is not, and two causal layers tell orders apart at the same last token."""
    g = torch.Generator().manual_seed(seed)
    emb = torch.randn(3, 8, generator=g, dtype=torch.float64)
    w = [torch.randn(8, 8, generator=g, dtype=torch.float64) / 8**0.5 for _ in range(3)]
    a, b, c = emb[[0, 1, 2]], emb[[2, 1, 0]], emb[[1, 0, 2]]  # 猫追狗, 狗追猫, 追猫狗
    torch.testing.assert_close(_attend(a, *w, False), _attend(b, *w, False)[[2, 1, 0]])
    assert not torch.allclose(_attend(a, *w, True)[-1], _attend(b, *w, True)[-1])
    one_a, one_c = _attend(a, *w, True), _attend(c, *w, True)
    torch.testing.assert_close(one_a[-1], one_c[-1])  # same last query, same key set
    two_a, two_c = _attend(a + one_a, *w, True), _attend(c + one_c, *w, True)
    assert not torch.allclose(two_a[-1], two_c[-1])


def test_note001_q1_reencoding_a_conversation():
    """Ten turns of 500 tokens: 5,000 tokens with a cache, 27,500 re-encoded."""
    assert sum(500 * k for k in range(1, 11)) == 27_500 == 5.5 * 10 * 500


def test_note001_q2_rope_scores_depend_on_distance_only():
    torch.manual_seed(1)
    d = 128
    q, k = torch.randn(d, dtype=torch.float64), torch.randn(d, dtype=torch.float64)
    inv = 1 / 10000 ** (torch.arange(0, d, 2, dtype=torch.float64) / d)

    def rotate(x, pos):  # rotate_half layout: pair i is (x_i, x_{i + d/2})
        ang = torch.cat([pos * inv, pos * inv])
        x1, x2 = x[: d // 2], x[d // 2 :]
        return x * ang.cos() + torch.cat([-x2, x1]) * ang.sin()

    scores = [rotate(q, m) @ rotate(k, m - 3) for m in (5, 105, 1005)]
    assert max(scores) - min(scores) < 1e-9
    pe = torch.zeros(2048, d, dtype=torch.float64)
    pos = torch.arange(2048, dtype=torch.float64)[:, None]
    pe[:, 0::2], pe[:, 1::2] = (pos * inv).sin(), (pos * inv).cos()
    added = [(q + pe[m]) @ (k + pe[m - 3]) for m in (5, 105, 1005)]
    assert max(added) - min(added) > 1e-3


def test_note001_q3_cache_against_weights_llama2_7b():
    """Cached tokens of Llama-2-7B whose bf16 bytes equal the weights a decode step of
    one sequence reads, by chapter 9's rule (``decode_step``, issue 32): every weight
    but the 31,999 embedding rows its one token does not use (the LM head, untied, is
    read whole). With the whole table counted it would be 25,706 (errata book-4)."""
    n = 6_738_415_616  # published
    V, H = 32000, 4096
    m_kv = 2 * 32 * 32 * 128 * 2  # K and V, 32 layers, 32 heads of 128, bf16
    read = 2 * (n - (V - 1) * H)  # one embedding row of V
    even = -(-read // m_kv)
    assert even == 25_206 and (even - 1) * m_kv < read <= even * m_kv
    assert -(-2 * n // m_kv) == 25_706  # the whole table: the old figure
    cache = 32 * 8192 * m_kv
    assert cache / (2 * (n - (V - 32) * H) + cache) > 0.9  # 32 sequences of 8192
    ffn = 32 * 3 * 4096 * 11008
    assert round(ffn / n, 2) == 0.64
    g = glued(ROOT / "book" / "errata.ipynb")
    assert g["e_even_tokens"] == g["b_even_rows"] == f"{even:,}"
    assert g["b_even_whole"] == "25,706" and g["e_q3_share_l2"] == "91%"
    assert g["b_emb_unread_GB"] == f"{2 * (V - 1) * H / GB:.2f} GB" == "0.26 GB"
    # the rule is chapter 9's: decode_step reads weights_read plus the cache
    from llmmath.roofline import decode_step, weights_read

    llama2 = presets.load("llama-2-7b")
    assert weights_read(llama2, 1) == read
    assert decode_step(llama2, "H100-SXM5-80GB", 1, even).bytes == read + even * m_kv


def test_errata_book4_follows_the_book_slips():
    """book-4 sits after book-3, before the declared approximations, and its row in
    the book's table names 001-6."""
    import json

    path = ROOT / "book" / "errata.ipynb"
    text = "".join(
        "".join(c["source"]) for c in json.loads(path.read_text("utf-8"))["cells"]
    )
    assert text.index("(errata-book-3)=") < text.index("(errata-book-4)=")
    assert text.index("(errata-book-4)=") < text.index("(errata-approximations)=")
    assert "{ref}`book-4 <errata-book-4>` | 001-6 above" in text


def test_declared_approximations_section():
    """000-2, 000-10, 001-1 and 003-3 sit under 'Declared approximations'."""
    import json

    path = Path(__file__).resolve().parents[1] / "book" / "errata.ipynb"
    md = "\n".join(
        "".join(c["source"])
        for c in json.loads(path.read_text())["cells"]
        if c["cell_type"] == "markdown"
    )
    start = md.index("(errata-approximations)=")
    end = md.index("(errata-qualifiers)=")
    for label in ("000-2", "000-10", "001-1", "003-3"):
        assert start < md.index(f"(errata-{label})=") < end
    for label in ("000-13", "001-6", "001-7", "003-4"):
        assert md.index(f"(errata-{label})=") < start

"""Issue 15's model types: DeepSeek-V2/V3 (MLA, DeepSeekMoE, MTP), Qwen3-MoE, Gemma
1/2/3, Phi-3 and OLMo 2 read from config.json, counted exactly, and refused with one
line naming the field when their fields do not fit together.

Counts here are typed from the architectures' shapes (transformers' modeling files)
or from the publishers; tests/test_transformers_oracle.py checks them against
transformers itself.
"""

import json
import subprocess
import sys

import pytest

from llmmath import ConfigError, ModelConfig, count_params
from llmmath.kvcache import (
    cached_tokens_per_layer,
    kv_cache_bytes,
    kv_cache_bytes_per_token,
)

TINY_DEEPSEEK = {
    "model_type": "deepseek_v3",
    "vocab_size": 50,
    "hidden_size": 16,
    "intermediate_size": 24,
    "moe_intermediate_size": 6,
    "num_hidden_layers": 3,
    "num_attention_heads": 4,
    "num_key_value_heads": 4,
    "q_lora_rank": 12,
    "kv_lora_rank": 8,
    "qk_nope_head_dim": 4,
    "qk_rope_head_dim": 2,
    "v_head_dim": 3,
    "n_routed_experts": 5,
    "n_shared_experts": 2,
    "num_experts_per_tok": 2,
    "first_k_dense_replace": 1,
    "num_nextn_predict_layers": 1,
}


def tiny(model_type: str, **changes) -> dict:
    base = {
        "model_type": model_type,
        "vocab_size": 50,
        "hidden_size": 16,
        "intermediate_size": 24,
        "num_hidden_layers": 4,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
        "head_dim": 6,
    }
    return {**base, **changes}


def test_deepseek_v3_tiny_counted_by_hand():
    cfg = ModelConfig.from_hf_config(TINY_DEEPSEEK)
    H, V, n_h, d_q, d_c, d_n, d_r, d_v = 16, 50, 4, 12, 8, 4, 2, 3
    attention = (
        H * d_q
        + d_q
        + d_q * n_h * (d_n + d_r)  # q_a, its norm, q_b
        + H * (d_c + d_r)
        + d_c  # kv_a_proj_with_mqa, kv_a_layernorm
        + d_c * n_h * (d_n + d_v)  # kv_b_proj
        + n_h * d_v * H  # o_proj
    )
    dense_ffn = 3 * H * 24
    moe = 5 * H + 5 + (5 + 2) * 3 * H * 6  # router, score bias, routed + shared
    norms = 2 * H
    total = V * H * 2 + H + 3 * (attention + norms) + dense_ffn + 2 * moe
    counts = count_params(cfg)
    assert counts.total == total
    assert counts.active == total - 2 * (5 - 2) * 3 * H * 6  # 3 idle experts, 2 layers
    assert counts.layer_params(0) == attention + norms + dense_ffn
    assert counts.per_layer == counts.layer_params(2) == attention + norms + moe
    # MTP: enorm, hnorm, eh_proj (H x 2H), one MoE block, the output norm
    assert counts.mtp == 3 * H + 2 * H * H + attention + norms + moe
    assert "mtp" in counts.as_dict() and counts.as_dict()["total"] == total


def test_deepseek_v2_uncompressed_query_and_no_score_bias():
    raw = {**TINY_DEEPSEEK, "model_type": "deepseek_v2", "q_lora_rank": None}
    del raw["num_nextn_predict_layers"]
    cfg = ModelConfig.from_hf_config(raw)
    names = {t.name for t in count_params(cfg).tensors}
    assert (
        "self_attn.q_proj.weight" in names and "self_attn.q_a_proj.weight" not in names
    )
    assert "mlp.e_score_correction_bias" not in names
    assert count_params(cfg).mtp == 0 and cfg.head_dim == 6


@pytest.mark.parametrize(
    "field",
    [
        "kv_lora_rank",
        "qk_nope_head_dim",
        "qk_rope_head_dim",
        "v_head_dim",
        "q_lora_rank",
        "n_routed_experts",
        "moe_intermediate_size",
    ],
)
def test_deepseek_missing_field_is_named(field):
    raw = {k: v for k, v in TINY_DEEPSEEK.items() if k != field}
    with pytest.raises(ConfigError, match=f"^{field} is missing"):
        ModelConfig.from_hf_config(raw)


@pytest.mark.parametrize(
    "changes, message",
    [
        ({"moe_layer_freq": 2}, "moe_layer_freq must be 1"),
        ({"first_k_dense_replace": 9}, "first_k_dense_replace must be"),
        ({"kv_lora_rank": 0}, "kv_lora_rank must be a positive integer"),
        ({"num_experts_per_tok": 6}, r"num_experts_per_tok \(6\) must not exceed"),
    ],
)
def test_deepseek_inconsistent_fields(changes, message):
    with pytest.raises(ConfigError, match=message):
        ModelConfig.from_hf_config({**TINY_DEEPSEEK, **changes})


def test_mla_fields_on_their_own_are_refused():
    with pytest.raises(ConfigError, match="^qk_nope_head_dim is missing"):
        ModelConfig(1, 8, 1, 1, 2, kv_lora_rank=4)


def test_cli_deepseek_without_kv_lora_rank_exits_2_with_one_line(write_config):
    raw = {k: v for k, v in TINY_DEEPSEEK.items() if k != "kv_lora_rank"}
    out = subprocess.run(
        [sys.executable, "-m", "llmmath", "params", str(write_config(raw))],
        capture_output=True,
        text=True,
    )
    assert out.returncode == 2 and out.stdout == ""
    assert out.stderr.count("\n") == 1 and "kv_lora_rank is missing" in out.stderr


def test_mla_kv_cache_latent_and_expanded():
    cfg = ModelConfig.from_hf_config(TINY_DEEPSEEK)
    assert kv_cache_bytes_per_token(cfg, "bf16") == 3 * (8 + 2) * 2
    assert kv_cache_bytes_per_token(cfg, "bf16", "expanded") == 3 * 4 * (4 + 2 + 3) * 2
    assert kv_cache_bytes(cfg, 2, 7, "fp32") == 2 * 7 * 3 * 10 * 4
    with pytest.raises(ConfigError, match="layout must be one of latent, expanded"):
        kv_cache_bytes(cfg, layout="compressed")


def test_qwen3_moe_sparse_step_and_mlp_only_layers():
    raw = tiny(
        "qwen3_moe",
        num_experts=4,
        num_experts_per_tok=2,
        moe_intermediate_size=5,
        decoder_sparse_step=2,
        mlp_only_layers=[3],
    )
    cfg = ModelConfig.from_hf_config(raw)
    assert cfg.dense_layers == (0, 2, 3)  # (i + 1) % 2 != 0, or listed
    counts = count_params(cfg)
    assert counts.layer_params(1) - counts.layer_params(0) == (
        4 * 16 + 4 * 3 * 16 * 5 - 3 * 16 * 24
    )
    dense = ModelConfig.from_hf_config(tiny("qwen3_moe", num_experts=0))
    assert not dense.is_moe


def test_gemma_layouts():
    g1 = ModelConfig.from_hf_config(tiny("gemma", hidden_act="gelu"))
    assert g1.tie_word_embeddings and g1.hidden_act == "gelu_pytorch_tanh"
    assert g1.embedding_scale and g1.layer_types is None
    g2 = ModelConfig.from_hf_config(tiny("gemma2", sliding_window=3))
    assert g2.layer_types == ("sliding_attention", "full_attention") * 2
    g3 = ModelConfig.from_hf_config(
        tiny("gemma3_text", num_hidden_layers=7, sliding_window=3)
    )
    assert g3.layer_types.count("full_attention") == 1 and g3.layer_types[5] == (
        "full_attention"
    )
    n1, n2, n3 = (count_params(c).by_group()["norm"] for c in (g1, g2, g3))
    assert n1 == (2 * 4 + 1) * 16 and n2 == (4 * 4 + 1) * 16
    assert n3 == (4 * 7 + 1) * 16 + 2 * 6 * 7  # four norms, q/k norms of d_h
    assert cached_tokens_per_layer(g2, 10) == [3, 10, 3, 10]
    assert kv_cache_bytes(g2, 1, 10, "bf16") == (3 + 10 + 3 + 10) * 2 * 2 * 6 * 2


def test_gemma_sliding_layers_need_a_window():
    raw = tiny("gemma2", sliding_window=None)
    assert ModelConfig.from_hf_config(raw).sliding_window == 4096  # the default
    with pytest.raises(ConfigError, match="layer_types must list one type per layer"):
        ModelConfig.from_hf_config(tiny("gemma2", layer_types=["full_attention"]))


def test_phi3_fused_tensors_count_like_separate_ones():
    phi = count_params(ModelConfig.from_hf_config(tiny("phi3")))
    llama = count_params(ModelConfig.from_hf_config(tiny("llama")))
    assert phi.total == llama.total
    names = {t.name for t in phi.tensors}
    assert {"self_attn.qkv_proj.weight", "mlp.gate_up_proj.weight"} <= names


def test_olmo2_norms_after_blocks_and_over_all_heads():
    counts = count_params(ModelConfig.from_hf_config(tiny("olmo2")))
    norms = {t.name: t.shape for t in counts.tensors if t.group == "norm"}
    assert norms == {
        "self_attn.q_norm.weight": (4 * 6,),
        "self_attn.k_norm.weight": (2 * 6,),
        "post_attention_layernorm.weight": (16,),
        "post_feedforward_layernorm.weight": (16,),
        "norm.weight": (16,),
    }


@pytest.mark.parametrize("model_type", ["gemma3", "deepseek", "phi"])
def test_unsupported_relatives_still_refused_by_name(model_type):
    with pytest.raises(
        ConfigError, match=f"model_type '{model_type}' is not supported"
    ):
        ModelConfig.from_hf_config(tiny(model_type))


def test_cli_json_for_a_tiny_deepseek(write_config):
    out = subprocess.run(
        [sys.executable, "-m", "llmmath", "params", str(write_config(TINY_DEEPSEEK))]
        + ["--json"],
        capture_output=True,
        text=True,
        check=True,
    )
    report = json.loads(out.stdout)
    counts = count_params(ModelConfig.from_hf_config(TINY_DEEPSEEK))
    assert (report["total"], report["active"], report["mtp"]) == (
        counts.total,
        counts.active,
        counts.mtp,
    )


# --- torch reference modules ---------------------------------------------------------

TINY_CONFIGS = {
    "deepseek_v3": TINY_DEEPSEEK,
    "deepseek_v2": {**TINY_DEEPSEEK, "model_type": "deepseek_v2", "q_lora_rank": None},
    "qwen3_moe": tiny(
        "qwen3_moe",
        num_experts=4,
        num_experts_per_tok=2,
        moe_intermediate_size=5,
        mlp_only_layers=[0],
    ),
    "gemma": tiny("gemma"),
    "gemma2": tiny("gemma2", sliding_window=3),
    "gemma3_text": tiny("gemma3_text", sliding_window=3, sliding_window_pattern=2),
    "phi3": tiny("phi3", sliding_window=3),
    "olmo2": tiny("olmo2"),
}


@pytest.mark.parametrize("model_type", TINY_CONFIGS)
def test_reference_model_numel_and_cached_decoding(model_type):
    import torch

    from llmmath.modules import build_model, generate
    from tests.test_three_ways import check_three_ways

    cfg = ModelConfig.from_hf_config(TINY_CONFIGS[model_type])
    check_three_ways(cfg)
    model = build_model(cfg, device="cpu", dtype=torch.float64)
    prompt = torch.randint(
        0, cfg.vocab_size, (2, 3), generator=torch.Generator().manual_seed(0)
    )
    cached, cache = generate(model, prompt, 5)
    uncached, _ = generate(model, prompt, 5, use_cache=False)
    assert torch.equal(cached, uncached)
    # the cache holds what llmmath.kvcache says (latent layout for MLA)
    assert cache.nbytes() == kv_cache_bytes(cfg, 2, 7, "fp64")


def test_mla_absorbed_equals_naive():
    import torch

    from llmmath.modules import MLAttention

    cfg = ModelConfig.from_hf_config(TINY_DEEPSEEK)
    torch.manual_seed(0)
    naive = MLAttention(cfg).double()
    absorbed = MLAttention(cfg, absorbed=True).double()
    absorbed.load_state_dict(naive.state_dict())
    x = torch.randn(2, 5, cfg.hidden_size, dtype=torch.float64)
    torch.testing.assert_close(absorbed(x), naive(x))


def test_mla_expanded_layout_is_the_naive_forms_keys_and_values():
    import torch

    from llmmath.modules import MLAttention

    cfg = ModelConfig.from_hf_config(TINY_DEEPSEEK)
    attn = MLAttention(cfg)
    c, k_r = attn.latent(torch.randn(2, 5, cfg.hidden_size))
    k, v = attn.expand(c, k_r)
    one_layer = cfg.replace(num_hidden_layers=1, dense_layers=())
    assert k.nbytes + v.nbytes == kv_cache_bytes(one_layer, 2, 5, "fp32", "expanded")
    assert c.nbytes + k_r.nbytes == kv_cache_bytes(one_layer, 2, 5, "fp32", "latent")


def measured_flops(module, *inputs) -> int:
    import torch
    from torch.utils.flop_counter import FlopCounterMode

    counter = FlopCounterMode(display=False)
    with counter, torch.no_grad():
        module(*inputs)
    return counter.get_total_flops()


@pytest.mark.parametrize("model_type", ["deepseek_v3", "deepseek_v2", "phi3", "olmo2"])
def test_attention_flops_measured(model_type):
    import torch

    from llmmath.flops import attention_flops
    from llmmath.modules import Attention, MLAttention

    cfg = ModelConfig.from_hf_config(TINY_CONFIGS[model_type])
    cfg = cfg.replace(num_hidden_layers=1, dense_layers=())
    attn = (MLAttention if cfg.is_mla else Attention)(cfg)
    flops = measured_flops(attn, torch.randn(2, 5, cfg.hidden_size))
    assert flops == attention_flops(cfg, 5, batch=2).total


@pytest.mark.parametrize("form, absorbed", [("recompute", False), ("absorbed", True)])
def test_mla_decode_flops_measured(form, absorbed):
    import torch

    from llmmath.flops import mla_decode_flops
    from llmmath.modules import KVCache, MLAttention

    cfg = ModelConfig.from_hf_config(TINY_DEEPSEEK)
    cfg = cfg.replace(num_hidden_layers=1, dense_layers=())
    attn, cache = MLAttention(cfg, absorbed=absorbed), KVCache(1)
    with torch.no_grad():
        attn(torch.randn(1, 6, cfg.hidden_size), cache)
    cache.seen = 6
    step = measured_flops(attn, torch.randn(1, 1, cfg.hidden_size), cache)
    assert step == mla_decode_flops(cfg, 7, form)

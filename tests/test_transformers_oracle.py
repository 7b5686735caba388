"""transformers as an independent oracle (issue 15).

- Every preset's config.json, instantiated by transformers on the meta device: its
  ``numel`` equals llmmath's total.
- Tiny random configs of every supported model type that transformers models (all but
  ``minimind``, which is not a transformers model): the same parameter count, and a
  prefill through transformers fills a cache whose tensors' bytes equal llmmath's KV
  bytes.

Where transformers counts or caches differently, the test says so and checks the
difference exactly:

- DeepSeek-V3's ``e_score_correction_bias`` (E values per MoE layer, 58 × 256 for the
  release) is a buffer in transformers 5 (``nn.Buffer`` in ``DeepseekV3TopkRouter``)
  and a parameter in DeepSeek's own ``modeling_deepseek.py`` and checkpoint; llmmath
  counts it as a parameter.
- transformers 5 caches MLA's latent (``DeepseekV3Attention`` calls
  ``past_key_values.update`` on the compressed ``kv_nope`` and ``k_rot``), so its cache
  equals llmmath's ``"latent"`` layout; the ``"expanded"`` layout (per-head keys and
  values, as a naive implementation stores them) is checked against the reference
  module's expansion in tests/test_modern_architectures.py.
- A sliding-window layer of transformers keeps W − 1 tokens after a prefill longer than
  W (``DynamicSlidingWindowLayer``: the next token makes W); llmmath and Mistral's
  rolling buffer count W.

transformers is a test-only dependency: llmmath never imports it (checked here).
"""

import random
import subprocess
import sys

import pytest

from llmmath import ModelConfig, count_params, presets
from llmmath.kvcache import kv_cache_bytes, kv_values_per_token_per_layer
from tests.test_modern_architectures import TINY_CONFIGS, tiny

transformers = pytest.importorskip("transformers")
torch = pytest.importorskip("torch")

#: Fields of the released configs that only the remote code or quantised loading reads.
NOT_FOR_TRANSFORMERS = ("auto_map", "quantization_config")


def hf_model(raw: dict, device: str = "meta"):
    """transformers' causal LM for a config.json dict, on ``device``."""
    raw = {k: v for k, v in raw.items() if k not in NOT_FOR_TRANSFORMERS}
    config = transformers.AutoConfig.for_model(raw.pop("model_type"), **raw)
    config._attn_implementation = "eager"
    config._experts_implementation = "eager"  # grouped_mm wants 16-byte strides
    torch.manual_seed(0)
    with torch.device(device):
        return transformers.AutoModelForCausalLM.from_config(config)


def hf_numel(model) -> tuple[int, int]:
    """(parameters, values of score-correction buffers)."""
    params = sum(p.numel() for p in model.parameters())
    bias = sum(
        b.numel()
        for name, b in model.named_buffers()
        if name.endswith("e_score_correction_bias")
    )
    return params, bias


@pytest.mark.parametrize(
    "name", [n for n in presets.names() if not n.startswith("minimind")]
)
def test_every_preset_numel_equals_llmmath_total(name):
    raw = dict(presets.get(name).hf_config)
    cfg = ModelConfig.from_hf_config(raw)
    params, bias = hf_numel(hf_model(raw))
    assert params + bias == count_params(cfg).total
    if cfg.router_score_bias:  # a buffer in transformers, a parameter in llmmath
        assert bias == cfg.num_moe_layers * cfg.num_local_experts


def test_deepseek_v3_score_bias_is_58_by_256():
    cfg = presets.load("deepseek-v3")
    assert (cfg.num_moe_layers, cfg.num_local_experts) == (58, 256)
    assert hf_numel(hf_model(presets.get("deepseek-v3").hf_config))[1] == 58 * 256


#: Tiny configs of the older model types (the new ones from test_modern_architectures).
OLDER = {
    "llama": tiny("llama", attention_bias=True, mlp_bias=True),
    "mistral": tiny("mistral", sliding_window=3),
    "qwen2": tiny("qwen2"),
    "qwen3": tiny("qwen3", attention_bias=True),
    "mixtral": tiny("mixtral", num_local_experts=3, num_experts_per_tok=2),
    "gpt2": {
        "model_type": "gpt2",
        "vocab_size": 50,
        "n_embd": 16,
        "n_layer": 2,
        "n_head": 4,
        "n_positions": 32,
    },
}
#: transformers' DeepSeek router groups experts (n_group); one group for 5 experts.
GROUPS = {"n_group": 1, "topk_group": 1}
#: Fields transformers needs for a tiny vocabulary or few experts (no effect on counts).
FOR_TINY = {
    "deepseek_v3": GROUPS,
    "deepseek_v2": GROUPS,
    "phi3": {"pad_token_id": 0},  # Phi3Config defaults to 32000
}
ALL = {**OLDER, **{k: {**v, **FOR_TINY.get(k, {})} for k, v in TINY_CONFIGS.items()}}


def cache_bytes(cache) -> int:
    return sum(t.nbytes for layer in cache.layers for t in (layer.keys, layer.values))


def prefill(raw: dict, batch: int, seq_len: int):
    model = hf_model(raw, device="cpu").eval()
    ids = torch.randint(
        0, 20, (batch, seq_len), generator=torch.Generator().manual_seed(0)
    )
    with torch.no_grad():
        return model(ids, use_cache=True).past_key_values


@pytest.mark.parametrize("model_type", ALL)
def test_tiny_numel_and_prefill_cache_bytes(model_type):
    raw = ALL[model_type]
    cfg = ModelConfig.from_hf_config(raw)
    assert sum(hf_numel(hf_model(raw))) == count_params(cfg).total
    seq_len = 2  # below every window's W - 1: every layer keeps all tokens
    assert cache_bytes(prefill(raw, 3, seq_len)) == kv_cache_bytes(
        cfg, 3, seq_len, "fp32", "latent"
    )


@pytest.mark.parametrize("model_type", ["mistral", "gemma2", "gemma3_text", "phi3"])
def test_sliding_layers_keep_w_minus_one_in_transformers(model_type):
    raw = ALL[model_type]
    cfg = ModelConfig.from_hf_config(raw)
    batch, seq_len, w = 2, 7, cfg.sliding_window
    sliding = sum(cfg.window_of(i) is not None for i in range(cfg.num_hidden_layers))
    one = batch * kv_values_per_token_per_layer(cfg) * 4  # one token, one layer, fp32
    assert seq_len > w and sliding > 0
    assert cache_bytes(prefill(raw, batch, seq_len)) == (
        kv_cache_bytes(cfg, batch, seq_len, "fp32") - sliding * one
    )


def test_random_llama_and_deepseek_shapes_agree():
    rng = random.Random(15)
    for _ in range(4):
        n_h = rng.choice([1, 2, 4])
        raw = {
            **TINY_CONFIGS["deepseek_v3"],
            **GROUPS,
            "num_attention_heads": n_h,
            "num_key_value_heads": n_h,
            "q_lora_rank": rng.choice([None, 3, 7]),
            "kv_lora_rank": rng.randint(1, 9),
            "qk_nope_head_dim": rng.randint(1, 5),
            "qk_rope_head_dim": 2 * rng.randint(1, 3),
            "v_head_dim": rng.randint(1, 5),
            "first_k_dense_replace": rng.randint(0, 3),
        }
        cfg = ModelConfig.from_hf_config(raw)
        assert sum(hf_numel(hf_model(raw))) == count_params(cfg).total
        assert cache_bytes(prefill(raw, 1, 3)) == kv_cache_bytes(cfg, 1, 3, "fp32")


def test_llmmath_and_its_cli_never_import_transformers():
    code = (
        "import sys, llmmath, llmmath.cli, llmmath.kvcache, llmmath.flops, "
        "llmmath.explorers; llmmath.cli.main(['params', 'deepseek-v3', '--json']); "
        "assert 'transformers' not in sys.modules, 'transformers imported'"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=False
    )
    assert out.returncode == 0, out.stderr


def random_config(rng: random.Random, model_type: str) -> dict:
    """A tiny random config.json of ``model_type`` (sizes transformers accepts)."""
    n_h = rng.choice([2, 4])
    raw = tiny(
        model_type,
        num_hidden_layers=rng.randint(1, 4),
        num_attention_heads=n_h,
        num_key_value_heads=rng.choice([d for d in (1, 2, 4) if n_h % d == 0]),
        head_dim=2 * rng.randint(1, 4),
        hidden_size=4 * rng.randint(2, 6),
        intermediate_size=rng.randint(3, 20),
        vocab_size=rng.randint(20, 60),
        tie_word_embeddings=rng.random() < 0.5,
        **FOR_TINY.get(model_type, {}),
    )
    if model_type in ("gemma2", "gemma3_text", "phi3"):
        raw["sliding_window"] = rng.randint(2, 6)
    if model_type == "qwen3_moe":
        raw |= {
            "num_experts": rng.randint(1, 4),
            "num_experts_per_tok": 1,
            "moe_intermediate_size": rng.randint(2, 9),
            "decoder_sparse_step": rng.randint(1, 2),
        }
    if model_type in ("olmo2", "qwen3_moe", "gemma"):
        raw["attention_bias"] = rng.random() < 0.5
    if model_type == "phi3":  # head_dim = H / n_h, even for RoPE
        del raw["head_dim"]
        raw["hidden_size"] = n_h * 2 * rng.randint(1, 4)
    return raw


@pytest.mark.parametrize(
    "model_type", ["qwen3_moe", "gemma", "gemma2", "gemma3_text", "phi3", "olmo2"]
)
def test_random_configs_of_the_new_types(model_type):
    rng = random.Random(model_type)
    for _ in range(3):
        raw = random_config(rng, model_type)
        cfg = ModelConfig.from_hf_config(raw)
        assert sum(hf_numel(hf_model(raw))) == count_params(cfg).total, raw
        seq_len = 1  # one token: below every window
        assert cache_bytes(prefill(raw, 2, seq_len)) == kv_cache_bytes(
            cfg, 2, seq_len, "fp32"
        )


def reference_state_dict(hf, model_type: str) -> dict:
    """transformers' weights under the reference model's names: Gemma's RMSNorms hold
    w with output x·(1 + w) (the reference's hold 1 + w); fused experts ``(E, 2I, H)``
    split into each expert's gate and up."""
    out = {}
    for name, p in hf.named_parameters():
        name = name.removeprefix("model.")
        if model_type.startswith("gemma") and "norm" in name:
            p = 1 + p
        if name.endswith("mlp.gate.weight"):
            name = name.replace("mlp.gate.", "mlp.router.")
        if name.endswith("experts.gate_up_proj"):
            prefix = name.removesuffix("gate_up_proj")
            for e, w in enumerate(p):
                gate, up = w.chunk(2, dim=0)
                out[f"{prefix}{e}.gate_proj.weight"] = gate
                out[f"{prefix}{e}.up_proj.weight"] = up
            continue
        if name.endswith("experts.down_proj"):
            for e, w in enumerate(p):
                out[f"{name.removesuffix('down_proj')}{e}.down_proj.weight"] = w
            continue
        out[name] = p
    return out


@pytest.mark.parametrize(
    "model_type",
    [t for t in ALL if not t.startswith("deepseek") and t != "gpt2"],
)
def test_reference_model_computes_what_transformers_computes(model_type):
    """Same weights, same logits: the reference modules' norm placement, fused
    projections, q/k norms, windows, soft-capping, √H scale and RoPE bases are
    transformers'. (DeepSeek's router, sigmoid scores over expert groups, is not
    modelled by the reference MoE, and GPT-2 stores Conv1D weights transposed.)"""
    from llmmath.modules import build_model

    raw = ALL[model_type]
    cfg = ModelConfig.from_hf_config(raw)
    hf = hf_model(raw, device="cpu").double().eval()
    ours = build_model(cfg, device="cpu", dtype=torch.float64).eval()
    missing, unexpected = ours.load_state_dict(
        reference_state_dict(hf, model_type), strict=False
    )
    assert not unexpected and set(missing) <= {"lm_head.weight"}  # tied: one tensor
    ids = torch.randint(0, 20, (2, 7), generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        torch.testing.assert_close(ours(ids), hf(ids).logits, rtol=1e-6, atol=1e-6)

"""FLOPs per module (`llmmath.flops_by_module`) against torch's FlopCounterMode on tiny
reference models (`llmmath.modules.build_model`, eager experts) of every supported
model type, forward and backward; the CLI's ``--by-module --json`` against the
function; totals against `forward_flops_per_token`.

FlopCounterMode is compared module by module in the forward pass. In the backward pass
its module attribution (``torch.utils.module_tracker``) keeps a module open until its
input's gradient is complete, so leaves sharing an input (q/k/v, gate/up) collect
their siblings' matmuls; the backward is compared where that attribution is exact:
each layer's ``self_attn`` and ``mlp``, each layer, the LM head and the whole model.
"""

import contextlib
import io
import json

import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from torch.utils.flop_counter import FlopCounterMode

from llmmath import ModelConfig, presets
from llmmath.cli import main, resolve
from llmmath.flops import forward_flops_per_token
from llmmath.flops_by_module import (
    ATTENTION_CORE,
    by_module_report,
    layer_totals,
    module_flops,
)
from tests.strategies import rope_config

SMALL = {
    "vocab_size": 50,
    "hidden_size": 16,
    "intermediate_size": 24,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "head_dim": 4,
}
MOE = {"moe_intermediate_size": 6, "num_experts_per_tok": 2}
DEEPSEEK = {
    "q_lora_rank": 12,
    "kv_lora_rank": 8,
    "qk_nope_head_dim": 4,
    "qk_rope_head_dim": 2,
    "v_head_dim": 3,
    "n_routed_experts": 5,
    "n_shared_experts": 2,
    "first_k_dense_replace": 1,
    "num_hidden_layers": 3,
    "num_key_value_heads": 4,
}
GPT2 = {"vocab_size": 50, "n_embd": 16, "n_layer": 2, "n_head": 4, "n_inner": 24}
# real configs (the presets' config.json), shrunk; sliding windows of 3 tokens
TINY = {
    "llama": ("llama-3.2-1b", SMALL),
    "mistral (sliding window)": ("mistral-7b-v0.1", {**SMALL, "sliding_window": 3}),
    "qwen2 (qkv biases)": ("qwen2.5-0.5b", SMALL),
    "qwen3": ("qwen3-0.6b", SMALL),
    "gemma2": ("gemma-2-2b", {**SMALL, "sliding_window": 3}),
    "phi3 (fused)": ("phi-3-mini-4k", {**SMALL, "sliding_window": 3}),
    "gpt2": ("gpt2", GPT2),
    "mixtral (eager experts)": (
        "mixtral-8x7b",
        {**SMALL, **MOE, "num_local_experts": 4},
    ),
    "qwen3_moe (eager experts)": ("qwen3-30b-a3b", {**SMALL, **MOE, "num_experts": 4}),
    "deepseek_v3 (MLA)": ("deepseek-v3", {**SMALL, **MOE, **DEEPSEEK}),
    "minimind (MoE)": ("minimind2-moe", {**SMALL, **MOE}),
}
DROP = (
    "layer_types",
    "max_window_layers",
    "num_nextn_predict_layers",
    "n_group",
    "topk_group",
    "mlp_only_layers",
    "decoder_sparse_step",
    "rope_scaling",
)
T, BATCH = 6, 2


def tiny(key: str) -> ModelConfig:
    preset, changes = TINY[key]
    raw = {k: v for k, v in presets.get(preset).hf_config.items() if k not in DROP}
    return ModelConfig.from_hf_config({**raw, **changes})


def measure(cfg: ModelConfig) -> tuple[dict, dict]:
    """FlopCounterMode's counts by module (the ``DecoderLM.`` prefix dropped, ``""``
    the whole model): of the forward, and of the backward of a scalar loss."""
    from llmmath.modules import build_model

    model = build_model(cfg, device="cpu", dtype=torch.float64)
    ids = torch.randint(0, cfg.vocab_size, (BATCH, T), generator=torch.manual_seed(0))
    with FlopCounterMode(display=False) as fwd:
        model(ids)
    with FlopCounterMode(display=False) as both:
        model(ids).pow(2).mean().backward()

    def flat(counter) -> dict:
        out = {}
        for k, ops in counter.get_flop_counts().items():
            if k != "Global":
                out[k.removeprefix("DecoderLM").removeprefix(".")] = sum(ops.values())
        assert out[""] == counter.get_total_flops()
        return out

    forward, total = flat(fwd), flat(both)
    return forward, {k: v - forward.get(k, 0) for k, v in total.items()}


def subtree(counts: dict, name: str) -> int:
    """A module's FLOPs; a ModuleList (experts), never called itself, as the sum of
    its members."""
    if name in counts:
        return counts[name]
    depth = name.count(".") + 1
    return sum(
        v
        for k, v in counts.items()
        if k.startswith(name + ".") and k.count(".") == depth
    )


def predicted(rows, prefix: str, field: str) -> int:
    return sum(
        getattr(r, field)
        for r in rows
        if r.name == prefix or r.name.startswith(prefix + ".")
    )


@pytest.mark.parametrize("key", list(TINY))
def test_per_module_equals_flop_counter(key):
    cfg = tiny(key)
    rows = module_flops(cfg, T, BATCH, attention="full")
    forward, backward = measure(cfg)
    # forward, module by module: every matmul module is a row, the attention core is
    # self_attn's own matmuls (with MLA also kv_b_proj, an einsum on its weight there)
    for i in range(cfg.num_hidden_layers):
        attn = f"layers.{i}.self_attn"
        own = forward[attn]
        for r in rows:
            leaf = r.name.rsplit(".", 1)[-1]
            if r.layer != i or leaf in ATTENTION_CORE:
                continue
            if r.name.startswith(attn + ".") and r.name not in forward:
                assert leaf == "kv_b_proj" and cfg.is_mla, r.name
                continue
            assert subtree(forward, r.name) == r.forward, r.name
            if r.name.startswith(attn + "."):
                own -= r.forward
        core = {"scores", "weighted_sum"} | ({"kv_b_proj"} if cfg.is_mla else set())
        assert own == sum(
            r.forward for r in rows if r.name in {f"{attn}.{n}" for n in core}
        )
    assert forward["lm_head"] == rows[-1].forward
    # backward: 2 x forward, where FlopCounterMode's attribution is exact
    names = [f"layers.{i}" for i in range(cfg.num_hidden_layers)]
    names += [f"{n}.{part}" for n in names for part in ("self_attn", "mlp")]
    for name in names + ["lm_head"]:
        assert backward[name] == predicted(rows, name, "backward"), name
    assert backward[""] == sum(r.backward for r in rows) == 2 * forward[""]
    for layer in layer_totals(rows):
        assert forward[layer.name] == layer.forward


@settings(max_examples=8, deadline=None, derandomize=True)
@given(raw=rope_config("llama"))
def test_random_llama_configs(raw):
    cfg = ModelConfig.from_hf_config(raw)
    rows = module_flops(cfg, T, BATCH, attention="full")
    forward, backward = measure(cfg)
    for r in rows:
        if r.name in forward:
            assert forward[r.name] == r.forward, r.name
    for name in [f"layers.{i}" for i in range(cfg.num_hidden_layers)] + ["lm_head"]:
        assert backward[name] == predicted(rows, name, "backward"), name
    assert backward[""] == sum(r.backward for r in rows)


@pytest.mark.parametrize("name", presets.names())
@pytest.mark.parametrize("attention", ["causal", "full"])
def test_totals_equal_forward_flops_per_token(name, attention):
    cfg = presets.get(name).config
    t = 4097
    rows = module_flops(cfg, t, 3, attention)
    per_token = forward_flops_per_token(cfg, t, attention)
    assert sum(r.forward for r in rows) == per_token.total * t * 3
    assert sum(r.backward for r in rows) == 2 * per_token.total * t * 3


def test_recomputation():
    cfg = tiny("mistral (sliding window)")
    none, sel, full = (
        module_flops(cfg, 9, 1, "causal", m) for m in ("none", "selective", "full")
    )
    assert all(r.recompute == 0 for r in none)
    core = [r for r in sel if r.recompute]
    assert {r.name.rsplit(".", 1)[-1] for r in core} == set(ATTENTION_CORE)
    assert all(r.recompute == r.forward for r in core)
    # full: every layer's forward again, not the LM head (3x), 4x for the layers
    assert sum(r.training for r in full) == sum(
        (4 if r.layer is not None else 3) * r.forward for r in full
    )
    # the window caps each query at 3 keys: 3 + 3 + 3·... pairs, not 9·10/2
    scores = next(r for r in none if r.name == "layers.0.self_attn.scores")
    assert scores.forward == 2 * 4 * 4 * (1 + 2 + 3 * 7)


def run(argv):
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        status = main(argv)
    return status, out.getvalue(), err.getvalue()


@pytest.mark.parametrize("recompute", [None, "none", "selective", "full"])
def test_cli_json_equals_the_function(recompute):
    argv = ["flops", "deepseek-v3", "--seq-len", "4096", "--by-module", "--json"]
    if recompute:
        argv += ["--recompute", recompute]
    status, out, err = run(argv)
    assert status == 0 and err == ""
    name, cfg = resolve("deepseek-v3", None)
    report = by_module_report(name, cfg, 4096, 1, "causal", recompute or "none")
    assert json.loads(out) == report


def test_cli_batch_is_the_functions_batch():
    """``--batch B`` is the function's ``batch``: FLOPs of B sequences, B times one
    sequence's (every module's FLOPs are per token or per sequence)."""
    argv = ["flops", "qwen3-0.6b", "--seq-len", "512", "--by-module", "--json"]
    status, out, err = run([*argv, "--batch", "3"])
    assert status == 0 and err == ""
    name, cfg = resolve("qwen3-0.6b", None)
    three = json.loads(out)
    assert three == by_module_report(name, cfg, 512, 3, "causal", "none")
    one = json.loads(run(argv)[1])
    assert three["batch"] == 3 and one["batch"] == 1
    assert three["total"] == {k: 3 * v for k, v in one["total"].items()}
    status, out, err = run(["flops", "qwen3-0.6b", "--seq-len", "8", "--batch", "2"])
    assert status == 2 and "--batch needs --by-module" in err
    status, out, err = run([*argv, "--batch", "0"])
    assert status == 2 and "--batch" in err


def test_cli_table_and_refusals():
    status, out, err = run(["flops", "llama-3-8b", "--seq-len", "8", "--by-module"])
    assert status == 0 and "layers 0-31, each:" in out and "self_attn.scores" in out
    status, out, err = run(
        ["flops", "llama-3-8b", "--seq-len", "8", "--recompute", "full"]
    )
    assert status == 2 and "--recompute needs --by-module" in err
    status, out, err = run(
        [
            "flops",
            "llama-3-8b",
            "--seq-len",
            "8",
            "--by-module",
            "--recompute",
            "full",
            "--recompute",
            "none",
        ]
    )
    assert status == 2 and "given twice" in err


def test_the_tiny_models_are_what_their_names_say():
    assert tiny("mistral (sliding window)").sliding_window == 3
    assert tiny("qwen2 (qkv biases)").qkv_bias
    assert tiny("gemma2").attn_logit_softcapping and tiny("gemma2").layer_types
    assert tiny("phi3 (fused)").fused_qkv and tiny("phi3 (fused)").fused_gate_up
    for key in ("mixtral", "qwen3_moe", "deepseek_v3", "minimind"):
        cfg = tiny(next(k for k in TINY if k.startswith(key)))
        assert cfg.is_moe and cfg.num_local_experts > cfg.num_experts_per_tok, key
    assert tiny("deepseek_v3 (MLA)").is_mla and tiny("deepseek_v3 (MLA)").dense_layers


def test_full_recomputation_measured_with_checkpoint():
    """Every layer under torch.utils.checkpoint: FlopCounterMode's whole step (forward,
    backward, the layers' forward again) equals the rows' training FLOPs."""
    from torch.utils.checkpoint import checkpoint

    from llmmath.modules import build_model

    cfg = tiny("mixtral (eager experts)")
    model = build_model(cfg, device="cpu", dtype=torch.float64)
    ids = torch.randint(0, cfg.vocab_size, (BATCH, T), generator=torch.manual_seed(0))
    with FlopCounterMode(display=False) as counter:
        x = model.embed_tokens(ids)
        for i, layer in enumerate(model.layers):
            x = checkpoint(layer, x, None, i, use_reentrant=False)
        model.lm_head(model.norm(x)).pow(2).mean().backward()
    rows = module_flops(cfg, T, BATCH, "full", "full")
    assert counter.get_total_flops() == sum(r.training for r in rows)
    assert sum(r.recompute for r in rows) == sum(r.forward for r in rows[1:-1])


def test_flop_counter_under_sdpa_is_not_causal():
    """The stated difference: FlopCounterMode's sdpa formula counts all t² pairs
    whatever ``is_causal`` (on meta); torch 2.13's CPU kernel has no formula (0)."""
    full = 2 * (2 * 2 * 8 * 8 * 4)  # QKᵀ and AV, b = 1, n_h = 2, t = 8, d_h = 4
    for device in ("meta", "cpu"):
        q = torch.ones(1, 2, 8, 4, device=device)
        for causal in (False, True):
            with FlopCounterMode(display=False) as counter:
                F.scaled_dot_product_attention(q, q, q, is_causal=causal)
            assert counter.get_total_flops() in (
                (full,) if device == "meta" else (0, full)
            )

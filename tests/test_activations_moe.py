"""Mixture-of-experts and multi-head latent attention: what transformers' own modules
keep for the backward pass, counted by autograd, against `llmmath.activations`
(issue 31).

Tiny random Mixtral, Qwen3-MoE, DeepSeek-V2 and DeepSeek-V3 models run a training
forward pass (``labels`` given) in bf16 on the CPU, under
``torch.autograd.graph.saved_tensors_hooks``. Every tensor autograd saves is packed
in a box held only by autograd; once the forward pass returns, the boxes still alive
are what the backward pass will read (a router's group choice, whose graph dies when
only its indices escape, is gone). Their unique storages, parameters and buffers
left out, are summed per decoder layer (the module that first saved each) and must
equal `saved_activations`' items for that layer, byte for byte, or differ by a
remainder computed exactly and named here:

- **The RoPE tables** are first saved by layer 0 and shared by all layers: they are
  `saved_activations`' ``shared`` item (MLA: d_r wide; DeepSeek-V2: one complex64
  ``freqs_cis``), checked apart.
- **MLA under SDPA**: PyTorch's CPU flash kernel, like CUDA's, refuses q/k and v of
  unequal head widths, and the CPU falls back to the math kernel (fp32 q, kᵀ, v and
  softmax, and a contiguous copy of the output for ``o_proj``), where CUDA runs the
  memory-efficient kernel that llmmath models. Eager MLA is checked exactly.
- **DeepSeek-V2's ``group_limited_greedy``** (the released model's ``topk_method``)
  keeps its bool expert mask, E bytes per token, which llmmath leaves out.
- **The eager experts loop** (``experts_implementation="eager"``) against llmmath's
  ``grouped_mm`` (the default): per (token, expert) pair the ``index_add_`` source
  (2·H bytes) more and 8 bytes of indices less, and no int32 offsets.

What the routed experts keep depends on the number of (token, expert) pairs, never on
which experts got them: ``grouped_mm`` runs all pairs as one sorted batch, and the
eager loop's tensors, one set per expert hit, sum over the experts to k rows per
token. The eager test reads the router's top-k from a forward hook and sums the rows
each expert got. Widths are multiples of 8 (bf16 ``grouped_mm`` wants 16-byte
strides). Full activation checkpointing
(``gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant":
False})``) keeps each layer's input only.
"""

from __future__ import annotations

import weakref
from collections import Counter

import pytest

from llmmath import ModelConfig
from llmmath.activations import Recipe, saved_activations

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")
#: transformers 5.23 renames gradient checkpointing "activation checkpointing"
pytestmark = pytest.mark.filterwarnings("ignore:.*is deprecated:FutureWarning")

B, T = 2, 16
BASE = {
    "vocab_size": 128,
    "hidden_size": 64,
    "intermediate_size": 96,
    "num_hidden_layers": 3,
    "num_attention_heads": 4,
}
MLA = {
    "num_key_value_heads": 4,
    "kv_lora_rank": 32,
    "qk_nope_head_dim": 16,
    "qk_rope_head_dim": 8,
    "v_head_dim": 16,  # q/k heads 24 wide, v heads 16: unequal, as DeepSeek's
    "n_routed_experts": 8,
    "n_shared_experts": 2,
    "num_experts_per_tok": 2,
    "moe_intermediate_size": 32,
    "first_k_dense_replace": 1,
    "n_group": 2,
    "topk_group": 1,
}
CONFIGS = {
    "mixtral": {
        **BASE,
        "model_type": "mixtral",
        "num_key_value_heads": 2,
        "head_dim": 16,
        "num_local_experts": 4,
        "num_experts_per_tok": 2,
    },
    "qwen3_moe": {
        **BASE,
        "model_type": "qwen3_moe",
        "num_key_value_heads": 2,
        "head_dim": 16,
        "num_experts": 4,
        "num_experts_per_tok": 2,
        "moe_intermediate_size": 32,
        "mlp_only_layers": [0],
        "norm_topk_prob": True,
    },
    "deepseek_v3": {
        **BASE,
        **MLA,
        "model_type": "deepseek_v3",
        "q_lora_rank": 48,
    },
    "deepseek_v2": {
        **BASE,
        **MLA,
        "model_type": "deepseek_v2",
        "q_lora_rank": None,
        "topk_method": "group_limited_greedy",
    },
}


def hf_model(
    raw: dict, attention: str = "sdpa", experts: str | None = None, dtype=None
):
    """transformers' causal LM for ``raw`` in training mode, bf16 weights unless
    ``dtype`` says otherwise."""
    raw = dict(raw)
    config = transformers.AutoConfig.for_model(raw.pop("model_type"), **raw)
    config._attn_implementation = attention
    if experts is not None:
        config._experts_implementation = experts
    torch.manual_seed(0)
    model = transformers.AutoModelForCausalLM.from_config(config)
    return model.to(dtype or torch.bfloat16).train()


class _Box:
    """What autograd holds for one saved tensor (alive as long as autograd needs it)."""

    __slots__ = ("tensor", "module", "__weakref__")


def saved_storages(model, ids) -> tuple[Counter, int, dict]:
    """Bytes of the unique storages autograd keeps after a training forward pass, by
    decoder layer (the module that first saved each), the bytes of the RoPE tables
    kept (the rotary embedding's outputs), and the router's top-k indices by layer."""
    params = {t.untyped_storage().data_ptr() for t in model.parameters()}
    params |= {t.untyped_storage().data_ptr() for t in model.buffers()}
    stack, boxes, hooks, rope, topk = ["model"], [], [], [], {}

    def enter(module, *args):
        stack.append(module._llmmath_name)

    def leave(module, *args):
        stack.pop()

    for name, module in model.named_modules():
        module._llmmath_name = name
        hooks += [
            module.register_forward_pre_hook(enter),
            module.register_forward_hook(leave),
        ]
        if name.endswith("mlp.gate") and "layers." in name:
            layer = int(name.split("layers.")[1].split(".")[0])
            hooks.append(
                module.register_forward_hook(
                    lambda m, a, out, i=layer: topk.__setitem__(i, out[2])
                )
            )
    rotary = model.model.rotary_emb
    hooks.append(rotary.register_forward_hook(lambda m, a, out: rope.append(out)))

    def pack(tensor):
        box = _Box()
        box.tensor, box.module = tensor, stack[-1]
        boxes.append(weakref.ref(box))
        return box

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda box: box.tensor):
        model(input_ids=ids, labels=ids)
    for hook in hooks:
        hook.remove()
    tables = {
        t.untyped_storage().data_ptr(): t.untyped_storage().nbytes()
        for out in rope
        for t in (out if isinstance(out, tuple) else (out,))
    }
    seen, by_layer = set(), Counter()
    for ref in boxes:
        box = ref()
        if box is None:
            continue
        storage = box.tensor.untyped_storage()
        ptr = storage.data_ptr()
        if ptr in params or ptr in seen or not ptr:
            continue
        seen.add(ptr)
        if ptr in tables:
            continue
        if ".layers." in box.module:
            by_layer[int(box.module.split(".layers.")[1].split(".")[0])] += (
                storage.nbytes()
            )
    return by_layer, sum(n for ptr, n in tables.items() if ptr in seen), topk


def config(model_type: str) -> ModelConfig:
    return ModelConfig.from_hf_config(CONFIGS[model_type])


def run(model_type: str, attention: str = "sdpa", experts: str | None = None):
    return saved_storages(
        hf_model(CONFIGS[model_type], attention, experts), token_ids()
    )


def token_ids():
    return torch.randint(0, 128, (B, T), generator=torch.Generator().manual_seed(0))


def cpu_math_sdpa_remainder(cfg: ModelConfig, recipe: Recipe) -> int:
    """Bytes per token the CPU's math SDPA keeps for MLA beyond the CUDA
    memory-efficient kernel llmmath models: fp32 q (scaled), kᵀ, v and softmax, and
    ``o_proj``'s own copy of the output (when its weight trains), instead of q, k,
    ``kv_b_proj``'s output (v's storage), the output and the fp32 log-sum-exp."""
    n, d_v = cfg.num_attention_heads, cfg.v_head_dim
    d_qk = cfg.qk_nope_head_dim + cfg.qk_rope_head_dim
    cpu = 4 * n * (2 * d_qk + d_v + T) + (0 if recipe.lora else 2 * n * d_v)
    cuda = 2 * n * (2 * d_qk) + 2 * n * (cfg.qk_nope_head_dim + d_v) + 2 * n * d_v
    return cpu - cuda - 4 * n


def remainder(cfg: ModelConfig, index: int, recipe: Recipe) -> int:
    """The named differences of layer ``index`` on a CPU (see above)."""
    moe = index not in cfg.dense_layers
    extra = 0
    if cfg.is_mla and recipe.attention == "sdpa":
        extra += cpu_math_sdpa_remainder(cfg, recipe) * B * T
    if CONFIGS[cfg.model_type].get("topk_method") == "group_limited_greedy" and moe:
        extra += cfg.num_local_experts * B * T  # the bool mask
    return extra


@pytest.mark.parametrize("attention", ["sdpa", "eager"])
@pytest.mark.parametrize("model_type", list(CONFIGS))
def test_layers_keep_what_llmmath_counts(model_type, attention):
    cfg = config(model_type)
    by_layer, tables, _ = run(model_type, attention)
    recipe = Recipe(attention=attention)
    want = saved_activations(cfg, B, T, recipe)
    for i, items in enumerate(want.layers):
        assert by_layer[i] == sum(items.values()) + remainder(cfg, i, recipe), i
    assert tables == sum(want.shared.values())


@pytest.mark.parametrize("model_type", ["mixtral", "qwen3_moe", "deepseek_v3"])
def test_eager_experts_loop_keeps_the_index_add_sources(model_type):
    """Each expert keeps its rows' tensors; the rows the router sent it, summed over
    the experts, are k per token, so the sizes do not depend on the routing."""
    cfg = config(model_type)
    by_layer, _, topk = run(model_type, "eager", experts="eager")
    recipe = Recipe(attention="eager")
    want = saved_activations(cfg, B, T, recipe)
    H, E = cfg.hidden_size, cfg.num_local_experts
    for i, items in enumerate(want.layers):
        extra = remainder(cfg, i, recipe)
        if i in topk:
            rows = torch.bincount(topk[i].flatten(), minlength=E)
            assert int(rows.sum()) == B * T * cfg.num_experts_per_tok
            extra += int(rows.sum()) * (2 * H - 8) - 4 * E
        assert by_layer[i] == sum(items.values()) + extra, i


@pytest.mark.parametrize("model_type", list(CONFIGS))
def test_full_checkpointing_keeps_each_layers_input(model_type):
    model = hf_model(CONFIGS[model_type])
    model.gradient_checkpointing_enable(
        gradient_checkpointing_kwargs={"use_reentrant": False}
    )
    by_layer, _, _ = saved_storages(model, token_ids())
    want = saved_activations(config(model_type), B, T, checkpointing="full")
    assert [by_layer[i] for i in range(len(want.layers))] == list(want.layer_totals)
    assert want.layer_totals[0] == 2 * BASE["hidden_size"] * B * T


@pytest.mark.parametrize("model_type", list(CONFIGS))
def test_amp_experts_run_in_fp32(model_type):
    """PyTorch AMP over fp32 weights: the router's and the attention's Linear modules
    cast to bf16 (with autocast's cached bf16 weights), the experts' ``grouped_mm``
    does not and runs in fp32."""
    cfg = config(model_type)
    model = hf_model(CONFIGS[model_type], dtype=torch.float32)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        by_layer, tables, _ = saved_storages(model, token_ids())
    recipe = Recipe(precision="amp")
    want = saved_activations(cfg, B, T, recipe)
    for i, items in enumerate(want.layers):
        assert by_layer[i] == sum(items.values()) + remainder(cfg, i, recipe), i
    assert tables == sum(want.shared.values())


#: Attention projections a LoRA adapts (peft 0.21 maps gate_proj, up_proj and
#: down_proj onto the routed experts' 3-D parameters, which llmmath does not model).
LORA_TARGETS = {
    "mixtral": ("q_proj", "k_proj", "v_proj", "o_proj"),
    "qwen3_moe": ("q_proj", "k_proj", "v_proj", "o_proj"),
    "deepseek_v3": (
        "q_a_proj",
        "q_b_proj",
        "kv_a_proj_with_mqa",
        "kv_b_proj",
        "o_proj",
    ),
    "deepseek_v2": ("q_proj", "kv_a_proj_with_mqa", "kv_b_proj", "o_proj"),
}


@pytest.mark.parametrize("model_type", list(CONFIGS))
def test_lora_on_attention_freezes_router_and_experts(model_type):
    """peft's LoRA (fp32 adapters, its default) on the attention: the frozen router
    and experts keep no matmul inputs, the adapted modules their fp32 copies."""
    peft = pytest.importorskip("peft")
    cfg, targets = config(model_type), LORA_TARGETS[model_type]
    model = peft.get_peft_model(
        hf_model(CONFIGS[model_type]), peft.LoraConfig(r=8, target_modules=targets)
    )
    by_layer, _, _ = saved_storages(model.base_model.model, token_ids())
    recipe = Recipe(method="lora", lora_rank=8, targets=frozenset(targets))
    want = saved_activations(cfg, B, T, recipe)
    for i, items in enumerate(want.layers):
        assert by_layer[i] == sum(items.values()) + remainder(cfg, i, recipe), i


@pytest.mark.parametrize("model_type", list(CONFIGS))
def test_paper_formula_widths_are_the_modules(model_type):
    """`llmmath.memory.activation_bytes_per_layer` (Korthikanti et al.'s items, used by
    chapter 9) sizes each item at the width transformers' module runs: the experts'
    FFN tensors at ``moe_intermediate_size`` for k routed and S shared experts, the
    dense layers' at I, MLA's V and the output projection's input at ``v_head_dim``
    (the query and key at d_n + d_r)."""
    from transformers.integrations.sdpa_attention import sdpa_attention_forward

    from llmmath.memory import activation_bytes_per_layer

    qkv, o_in, act_in = {}, Counter(), Counter()

    def layer_of(name: str) -> int:
        return int(name.split("layers.")[1].split(".")[0])

    def capture(module, query, key, value, *args, **kwargs):
        qkv[module.layer_idx] = (query.numel(), key.numel(), value.numel())
        return sdpa_attention_forward(module, query, key, value, *args, **kwargs)

    transformers.AttentionInterface.register("llmmath_capture", capture)
    model = hf_model(CONFIGS[model_type], "llmmath_capture")
    for name, module in model.named_modules():
        if name.endswith("self_attn.o_proj"):
            module.register_forward_pre_hook(
                lambda m, a, i=layer_of(name): o_in.update({i: a[0].numel()})
            )
        elif name.endswith("act_fn") and ".mlp" in name:  # routed, shared or dense
            module.register_forward_pre_hook(
                lambda m, a, i=layer_of(name): act_in.update({i: a[0].numel()})
            )
    with torch.no_grad():
        model(input_ids=token_ids())
    cfg = config(model_type)
    for i in range(cfg.num_hidden_layers):
        items = activation_bytes_per_layer(cfg, T, B, flash_attention=True, layer=i)
        q, k, v = qkv[i]
        assert items["Q and K (inputs of QKᵀ)"] == 2 * (q + k)
        assert items["V (input of AV)"] == 2 * v
        assert items["input of the output projection"] == 2 * o_in[i]
        assert items["gate and up outputs"] == 2 * 2 * act_in[i]
    if cfg.dense_layers:  # the default is a mixture-of-experts layer
        last = cfg.num_hidden_layers - 1
        assert activation_bytes_per_layer(cfg, T, B) == activation_bytes_per_layer(
            cfg, T, B, layer=last
        )


def test_paper_formula_layer_out_of_range_is_named():
    from llmmath import ConfigError
    from llmmath.memory import activation_bytes_per_layer

    with pytest.raises(ConfigError, match=r"layer must be an integer in 0 \.\. 2"):
        activation_bytes_per_layer(config("deepseek_v3"), T, B, layer=3)

"""Activations as a training step keeps them: what autograd saves in transformers'
modules, tensor by tensor, for the backward pass.

`saved_activations` sizes, per decoder layer and for the LM head and loss, every tensor
that PyTorch's autograd saves when a transformers causal LM (the modules people train,
``modeling_llama.py`` and its kin) runs a training forward pass, in the recipes of
`llmmath.training` (precision, LoRA adapters' dtype, checkpointing, attention kernel).
Each item follows one line of transformers' code; the rules are:

- **A tensor is saved once, however many ops save it** (autograd keeps a reference,
  not a copy): the output of a norm that q, k and v all read is one tensor.
- **An op saves only what a gradient it must compute needs**: a frozen ``Linear``
  (LoRA's base) keeps no input, ``x * cos`` keeps only ``cos``, a norm whose weight
  is frozen keeps no normalized copy, and nothing is saved before the first tensor
  that requires a gradient (LoRA's first norm).
- **Norms upcast** (``LlamaRMSNorm``: ``x.to(float32)``, kept by ``pow`` and ``mul``;
  its normalized ``bf16`` copy, kept by ``weight * x``; Gemma's and OLMo 2's keep
  the normalized copy in fp32): 8 bytes per element in bf16 where the paper's
  formula counts 4 (Korthikanti et al. 2022, Sec. 4.1).
- **PyTorch AMP** (``torch.autocast``) casts per op: each ``Linear`` that reads an
  fp32 tensor keeps its own bf16 copy, and every ``Linear`` keeps a bf16 copy of its
  fp32 weight (autocast's weight cache) until its backward ran.
- **peft's LoRA** casts a layer's input to the adapters' dtype (fp32 by default,
  ``autocast_adapter_dtype=True``), so each adapted module keeps its own fp32 copy.
- **Attention by SDPA** (FlashAttention-2 or the memory-efficient kernel) keeps q,
  k, v, the output and one fp32 log-sum-exp per row and head; keys and values at
  n_kv·d_h when transformers passes ``enable_gqa`` (no mask, equal head widths ≤ 256),
  else at n_h·d_h after ``repeat_kv``; a layer whose sliding window needs a mask
  (t ≥ window) keeps SDPA's float copy of it (b·t² elements); Phi-3's V is a slice
  of ``qkv_proj``'s output and keeps all of it. **Eager attention** keeps the fp32
  softmax and its bf16 copy (6·n_h·t² bytes per sequence, plus the soft-capped
  scores' ``tanh`` for Gemma 2).
- **Shared by the layers**: one RoPE cos and sin table per sequence position
  (transformers broadcasts ``position_ids`` (1, t) over the batch); under full
  checkpointing also the position ids and masks each checkpoint keeps. GPT-2 trains
  with dropout (`DROPOUT_TYPES`), one bool mask per dropout on a GPU.
- **Mixture of experts** (`_moe`, `_router`): the routed experts run as one
  ``grouped_mm`` over the k·b·t (token, expert) pairs, so what they keep is k
  experts' tensors per token at width I_e (``moe_intermediate_size``), whatever the
  routing; fp32 under AMP (``grouped_mm`` is not autocast-enabled). **Multi-head
  latent attention** (`_mla_attention`): the latents' norms, q and k n_h·(d_n + d_r)
  wide, and V as a view of ``kv_b_proj``'s whole output.

Checked against ``torch.autograd.graph.saved_tensors_hooks`` in transformers' own
modules for every supported type (``tests/test_activations.py``; mixtures of
experts and MLA in ``tests/test_activations_moe.py``) and against the
peaks measured on an H200 (``tests/test_training_peak.py``). Explained in chapter 9
(*Memory and speed*).
"""

from __future__ import annotations

from typing import NamedTuple

from llmmath.config import ConfigError, ModelConfig, check_positive_int, one_of
from llmmath.messages import gettext as _

#: Training precisions: ``bf16`` (weights, gradients, optimizer state in bf16),
#: ``amp`` (PyTorch autocast to bf16 over fp32 weights, gradients and state),
#: ``mixed`` (bf16 weights and gradients, an fp32 master copy and fp32 state, as
#: Megatron-LM and DeepSpeed keep them), ``fp32``.
PRECISIONS = ("bf16", "amp", "mixed", "fp32")
ATTENTIONS = ("sdpa", "eager")
ADAPTER_DTYPES = ("fp32", "bf16")
LOSSES = ("full", "chunked")
CHECKPOINTING = ("none", "selective", "full")
#: Norm implementations in transformers, by model type (``"llama"``: LlamaRMSNorm and
#: its copies; ``"gemma"``: x·(1 + w) in fp32; ``"olmo2"``: (w·x) in fp32, then cast;
#: ``"layernorm"``: torch's LayerNorm).
NORM_KINDS = {
    "gemma": "gemma",
    "gemma2": "gemma",
    "gemma3_text": "gemma",
    "olmo2": "olmo2",
    "gpt2": "layernorm",
}


#: Model types whose transformers configuration turns dropout on by default:
#: GPT2Config's ``embd_pdrop = resid_pdrop = attn_pdrop = 0.1`` (the released
#: config.json's too); every other supported configuration defaults to 0, and
#: ``dropout(x, 0.0)`` keeps nothing. On a GPU ``F.dropout`` runs ATen's
#: ``native_dropout``, which keeps a bool mask (1 byte per element; modelled here); on
#: the CPU ``_dropout_impl`` multiplies by a noise tensor of the input's dtype and
#: keeps that instead. Attention dropout costs nothing on a GPU (the flash and
#: memory-efficient kernels keep a Philox seed and offset, not a mask).
DROPOUT_TYPES = ("gpt2",)


def default_attention(cfg: ModelConfig) -> str:
    """The attention transformers trains ``cfg`` with by default: ``eager`` for a
    model with ``attn_logit_softcapping`` (Gemma 2, which refuses SDPA), else
    ``sdpa``."""
    return "eager" if cfg.attn_logit_softcapping else "sdpa"


class Precision(NamedTuple):
    """Bytes of an element: ``act`` of activations a matmul reads (bf16 under AMP),
    ``resid`` of the residual stream and the norms' inputs (fp32 under AMP), and
    whether each ``Linear`` casts its fp32 input (``autocast``)."""

    act: int
    resid: int
    autocast: bool


def precision_of(precision: str) -> Precision:
    """The element sizes of a training precision (`PRECISIONS`).

    Raises:
        ConfigError: an unknown precision.
    """
    _one_of("precision", precision, PRECISIONS)
    return {
        "bf16": Precision(2, 2, False),
        "mixed": Precision(2, 2, False),
        "amp": Precision(2, 4, True),
        "fp32": Precision(4, 4, False),
    }[precision]


def _one_of(name: str, value: str, allowed) -> None:
    if value not in allowed:
        shown = value if len(str(value)) <= 40 else f"{str(value)[:40]}..."
        raise ConfigError(one_of(name, allowed, shown))


class Recipe(NamedTuple):
    """What decides the saved tensors besides the model: ``precision`` (`PRECISIONS`),
    ``method`` (``full``, ``lora``, ``qlora``), LoRA ``lora_rank``, ``targets`` (module
    names that carry adapters) and ``adapter_dtype``, ``attention`` (`ATTENTIONS`)."""

    precision: str = "bf16"
    method: str = "full"
    lora_rank: int = 16
    targets: frozenset = frozenset()
    adapter_dtype: str = "fp32"
    attention: str = "sdpa"

    @property
    def lora(self) -> bool:
        return self.method != "full"


class _Layer:
    """Accumulates one layer's saved bytes per token, by item."""

    def __init__(self, cfg: ModelConfig, recipe: Recipe, tokens: int):
        self.cfg, self.r, self.p = cfg, recipe, precision_of(recipe.precision)
        self.tokens = tokens
        self.items: dict[str, int] = {}

    def add(self, item: str, per_token: int, once: int = 0) -> None:
        """Add ``per_token`` bytes for each token and ``once`` bytes for the layer."""
        n = per_token * self.tokens + once
        if n:
            self.items[item] = self.items.get(item, 0) + n

    def linear_inputs(
        self, item: str, width: int, modules: tuple[str, ...], dtype_bytes: int,
        already_saved: bool = False,
    ) -> None:  # fmt: skip
        """The input (``width`` wide, ``dtype_bytes`` per element) that the Linear
        ``modules`` read, as they keep it: full fine-tuning one shared tensor (one
        bf16 copy per module under autocast when the input is fp32); LoRA nothing for
        the frozen base, and for each adapted module its lora_A's input, cast to the
        adapters' dtype (a copy per module when that differs), plus lora_B's r-wide
        input. ``already_saved``: another op keeps the same tensor."""
        r, p = self.r, self.p
        if not r.lora:
            if p.autocast and dtype_bytes == 4:
                self.add(item + " (bf16 copies, autocast)", 2 * width * len(modules))
            elif not already_saved:
                self.add(item, dtype_bytes * width)
            return
        adapted = [m for m in modules if m in r.targets]
        if not adapted:
            return
        a = 4 if r.adapter_dtype == "fp32" else 2
        if p.autocast:  # lora_A under autocast reads a bf16 copy
            self.add(
                item + " (bf16 copies for LoRA, autocast)", 2 * width * len(adapted)
            )
        elif a != dtype_bytes:
            self.add(
                item + f" ({r.adapter_dtype} copies for LoRA)", a * width * len(adapted)
            )
        elif not already_saved:
            self.add(item, dtype_bytes * width)
        self.add("LoRA A outputs (rank r)", (2 if p.autocast else a) * r.lora_rank
                 * len(adapted))  # fmt: skip

    def norm(
        self, item: str, width: int, in_grad: bool, rows: int = 1,
        weight_trainable: bool | None = None, dtype: int | None = None,
    ) -> None:  # fmt: skip
        """A norm of ``width`` elements per row (``rows`` rows per token), as
        transformers' class for the model type computes it (`NORM_KINDS`), of an
        input of ``dtype`` bytes per element (the residual stream's by default; q/k
        norms read a projection's output, bf16 under autocast).

        ``LlamaRMSNorm``: ``x.to(torch.float32)`` kept by ``pow`` and by ``x *
        torch.rsqrt(...)`` with the fp32 1/rms, and ``self.weight *
        x.to(input_dtype)`` keeps the normalized copy in the input's dtype when the
        weight trains. ``GemmaRMSNorm``: ``output * (1.0 + self.weight.float())``
        keeps the fp32 ``1 + weight`` when the input needs a gradient and the fp32
        normalized ``output`` when the weight trains. ``Olmo2RMSNorm``: ``(self.weight
        * x)`` in fp32 (the weight itself for the input's gradient)."""
        cfg, p = self.cfg, self.p
        kind = NORM_KINDS.get(cfg.model_type, "llama")
        trainable = (not self.r.lora) if weight_trainable is None else weight_trainable
        if kind == "layernorm":
            if in_grad or trainable:
                self.add(f"{item}: input", p.resid * width * rows)
                self.add(f"{item}: mean and 1/std (fp32)", 2 * 4 * rows)
            return
        if in_grad:
            self.add(f"{item}: fp32 input", 4 * width * rows)
            self.add(f"{item}: 1/rms (fp32)", 4 * rows)
            if kind == "gemma":
                self.add(f"{item}: 1 + weight (fp32)", 0, once=4 * width)
        if trainable:
            # llama: the normalized tensor cast back to the input's dtype; gemma and
            # olmo2 multiply in fp32 and keep the fp32 normalized tensor.
            size = (p.resid if dtype is None else dtype) if kind == "llama" else 4
            self.add(f"{item}: normalized copy", size * width * rows)


def _width(cfg: ModelConfig) -> dict[str, int]:
    q = cfg.num_attention_heads * cfg.head_dim
    return {
        "q": q,
        "kv": cfg.num_key_value_heads * cfg.head_dim,
        "a": cfg.num_attention_heads,
    }


def _attention(layer: _Layer, t: int, index: int, first: bool) -> None:
    cfg, r, p = layer.cfg, layer.r, layer.p
    H = cfg.hidden_size
    w = _width(cfg)
    q, kv, a = w["q"], w["kv"], w["a"]
    d_v = cfg.head_dim
    post = cfg.norm_layout == "post"
    if post:  # OLMo 2: q, k, v read the residual stream itself
        layer.linear_inputs("input of q, k, v", H, ("q_proj", "k_proj", "v_proj"),
                            p.resid)  # fmt: skip
    else:
        layer.norm("attention norm", H, in_grad=not first)
        names = ("qkv_proj",) if cfg.fused_qkv else ("q_proj", "k_proj", "v_proj")
        if cfg.model_type == "gpt2":  # one Conv1D: ``self.c_attn(hidden_states)``
            names = ("c_attn",)
        layer.linear_inputs("attention norm: output (input of q, k, v)", H, names,
                            p.resid)  # fmt: skip
    if cfg.qk_norm:
        if cfg.qk_norm_per_head:
            layer.norm("q norm", cfg.head_dim, True, rows=a, dtype=p.act)
            layer.norm("k norm", cfg.head_dim, True, rows=cfg.num_key_value_heads,
                       dtype=p.act)  # fmt: skip
        else:
            layer.norm("q norm", q, True, dtype=p.act)
            layer.norm("k norm", kv, True, dtype=p.act)
    window = cfg.window_of(index)
    # masking_utils._ignore_causal_mask_sdpa: a window needs a mask once
    # ``kv_length >= local_attention_size``
    masked = window is not None and window <= t
    if r.attention == "eager":
        # eager_attention_forward: repeat_kv, then matmul's reshape copies each of
        # q, k, v to (b·n_h, t, d_h); softmax(..., dtype=float32).to(query.dtype)
        rep = q
        layer.add("Q", p.act * q)
        layer.add("K (repeated to n_h heads)", p.act * rep)
        layer.add("V (repeated to n_h heads)", p.act * rep)
        if cfg.model_type == "gpt2":  # GPT-2's own: ``softmax(attn_weights)`` in the
            # compute dtype (fp32 under CUDA's autocast), then ``.type(value.dtype)``
            if p.autocast:
                layer.add("softmax output (fp32, autocast)", 4 * a * t)
            layer.add("softmax output", p.act * a * t)
        else:
            layer.add("softmax output (fp32)", 4 * a * t)
            layer.add("softmax output, bf16 copy", p.act * a * t if p.act == 2 else 0)
        if cfg.model_type in DROPOUT_TYPES:  # ``dropout(attn_weights, p=dropout)``
            layer.add("attention dropout mask (bool)", a * t)
            layer.add("attention probabilities after dropout", p.act * a * t)
        if cfg.attn_logit_softcapping:
            layer.add("soft-capped scores (tanh output)", p.act * a * t)
        out_saved = False  # o_proj reads ``attn_output.transpose(1, 2).contiguous()``
    else:
        # sdpa_attention_forward: ``enable_gqa`` when use_gqa_in_sdpa (no mask, equal
        # head widths <= 256), else repeat_kv's copies when n_h > n_kv
        gqa = not masked and cfg.head_dim == d_v <= 256
        repeated = cfg.num_key_value_heads < cfg.num_attention_heads and not gqa
        kvw = q if repeated else kv
        layer.add("Q", p.act * q)
        layer.add("K (repeated to n_h heads)" if repeated else "K", p.act * kvw)
        if repeated:
            layer.add("V (repeated to n_h heads)", p.act * q)
        elif cfg.fused_qkv:  # Phi-3: ``value_states = qkv[..., q + kv:]``, a view
            layer.add("V (a slice of qkv_proj's output, kept whole)",
                      p.act * (q + 2 * kv))  # fmt: skip
        else:
            layer.add("V", p.act * kv)
        layer.add("attention output", p.act * q)
        layer.add("log-sum-exp (fp32)", 4 * a)
        if masked:  # SDPA's convert_boolean_attn_mask: a float copy per call
            layer.add("attention mask (SDPA's float copy, b·t² per layer)", p.act * t)
        # Phi-3's rotated query is a new (b, n_h, t, d_h) tensor; the kernel lays
        # its output out like the query, so ``attn_output.transpose(1, 2)
        # .contiguous()`` copies it and o_proj keeps the copy
        out_saved = not cfg.fused_qkv
    layer.linear_inputs("attention output (input of o_proj)", q, ("o_proj",), p.act,
                        already_saved=out_saved)  # fmt: skip
    if cfg.model_type in DROPOUT_TYPES:  # GPT2Attention: resid_dropout(c_proj(...))
        layer.add("attention output dropout mask (bool)", H)
    if post:
        layer.norm("post-attention norm", H, in_grad=True)
    elif cfg.norm_layout == "sandwich":
        layer.norm("post-attention norm", H, in_grad=True)


def _mlp(layer: _Layer, I: int) -> None:
    cfg, p = layer.cfg, layer.p
    H = cfg.hidden_size
    post = cfg.norm_layout == "post"
    gated = cfg.mlp_type == "gated"
    names = (
        (("gate_up_proj",) if cfg.fused_gate_up else ("gate_proj", "up_proj"))
        if gated
        else ("c_fc",)
    )
    if post:
        layer.linear_inputs("input of gate and up", H, names, p.resid)
    else:
        name = "FFN norm" if cfg.norm_layout == "sandwich" else "post-attention norm"
        if cfg.norm_layout == "sandwich":
            name = "pre-FFN norm"
        layer.norm(name, H, in_grad=True)
        layer.linear_inputs(f"{name}: output (input of the FFN)", H, names, p.resid)
    act = cfg.hidden_act
    if gated:
        layer.add("gate output (input of the activation)", p.act * I)
        layer.add("activation output", p.act * I)
        layer.add("up output", p.act * I)
        layer.linear_inputs("product (input of down_proj)", I, ("down_proj",), p.act)
    else:
        out = p.act
        if act == "gelu_new" and p.autocast:
            # CUDA's autocast runs ``torch.pow`` in fp32: pow keeps an fp32 copy of
            # its input, and tanh, 1 + tanh and the output follow in fp32
            layer.add("gelu_new: fp32 copy of its input (autocast's pow)", 4 * I)
            layer.add("gelu_new intermediates (tanh, x/2, 1 + tanh)", 10 * I)
            out = 4
        elif act == "gelu_new":  # NewGELUActivation: ``0.5 * input * (1.0 +
            # torch.tanh(... torch.pow(input, 3.0)))`` keeps its input, tanh's
            # output, x/2 and 1 + tanh
            layer.add("input of the activation", p.act * I)
            layer.add("gelu_new intermediates (tanh, x/2, 1 + tanh)", 3 * p.act * I)
        else:
            layer.add("input of the activation", p.act * I)
        layer.linear_inputs("activation output (input of c_proj)", I, ("c_proj",),
                            out)  # fmt: skip
        if cfg.model_type in DROPOUT_TYPES:  # GPT2MLP: dropout(c_proj(...))
            layer.add("FFN output dropout mask (bool)", H)
    if post or cfg.norm_layout == "sandwich":
        layer.norm("post-FFN norm", H, in_grad=True)


class SavedActivations(NamedTuple):
    """What a training forward pass keeps, in bytes by item: ``layers`` (one dict per
    decoder layer), ``shared`` (tensors every layer reads: RoPE's tables, a mask),
    ``head`` (final norm and LM head input) and ``logits`` (the logits the model
    returns, the loss's fp32 log-softmax). ``loss_backward`` is what the loss's
    backward adds for a moment (its two fp32 gradients), ``forward_extra`` what the
    forward pass holds only briefly (the fp32 copy of the logits)."""

    layers: tuple[dict[str, int], ...]
    shared: dict[str, int]
    head: dict[str, int]
    logits: dict[str, int]
    loss_backward: int
    forward_extra: int

    @property
    def layer_totals(self) -> tuple[int, ...]:
        return tuple(sum(x.values()) for x in self.layers)

    @property
    def total(self) -> int:
        return (
            sum(self.layer_totals)
            + sum(self.shared.values())
            + sum(self.head.values())
            + sum(self.logits.values())
        )


def layer_saved(
    cfg: ModelConfig, recipe: Recipe, batch: int, seq_len: int, index: int
) -> dict[str, int]:
    """Bytes that decoder layer ``index`` (0-based) keeps for its backward pass, by
    item, without checkpointing (see the module's rules)."""
    layer = _Layer(cfg, recipe, batch * seq_len)
    first = index == 0 and recipe.lora  # nothing before it requires a gradient
    if cfg.is_mla:
        _mla_attention(layer, seq_len, first)
    else:
        _attention(layer, seq_len, index, first)
    moe = cfg.is_moe and index not in cfg.dense_layers
    if moe:
        _moe(layer, cfg)
    else:
        _mlp(layer, cfg.intermediate_size)
    if recipe.precision == "amp":
        layer.items["bf16 copies of the weights (autocast)"] = 2 * _linear_params(
            cfg, index, recipe
        )
    return layer.items


def _linear_params(cfg: ModelConfig, index: int, recipe: Recipe) -> int:
    """Weights of layer ``index``'s Linear modules (autocast keeps a bf16 copy of each
    that runs; LoRA: the frozen base's are copied too)."""
    from llmmath.counting import count_params

    counts = count_params(cfg)
    total = 0
    for t in counts.tensors:
        if not t.per_layer or len(t.shape) != 2:
            continue
        if t.layer_set is not None and index not in t.layer_set:
            continue
        if t.name.startswith("mlp.experts."):
            continue  # routed experts: grouped_mm is not autocast-enabled (`_moe`)
        total += t.numel
    return total


def _moe(layer: _Layer, cfg: ModelConfig) -> None:
    """A mixture-of-experts FFN as transformers 5 trains it: the post-attention norm,
    the router (`_router`), the routed experts and DeepSeek's shared experts.

    The routed experts run as ``grouped_mm_experts_forward``
    (``integrations/moe.py``), the default ``_experts_implementation`` on a GPU and
    on CPUs with torch > 2.10 (``get_correct_experts_implementation`` in
    ``modeling_utils.py`` picks ``"grouped_mm"`` when none is asked for; its autograd
    node ``GroupedMmBackward0`` keeps the same tensors on every device). Its k·b·t
    rows, one per (token, expert) pair, are sorted by expert and run as one batch, so
    what it keeps depends on the pairs, k per token, never on how the router spread
    them. Per pair, with e the experts' element size:

    - the sort's int64 permutations: ``perm // k`` (kept by the gather, moe.py:441),
      ``perm`` (by the routing weights' gather, :442) and the inverse (:529), 24 B;
    - the gathered input, e·H (kept by ``grouped_mm`` for the weights' gradient);
    - ``gate_up``'s output, e·2·I_e (SiLU keeps its ``gate`` half and the product
      its ``up`` half, both views of it, :579), SiLU's output, e·I_e, and the
      product, e·I_e (``down``'s input, kept for its weights' gradient);
    - ``down``'s output, e·H, and the routing weight, kept by their product (:524).

    Per layer, the int32 offsets (E values, :450). e is the compute dtype's size
    except under AMP, where it is 4: ``grouped_mm`` is not autocast-enabled and
    transformers casts its input to the experts' fp32 weights (moe.py:379). The
    ``"eager"`` loop (one ``F.linear`` per expert hit, what
    ``tests/test_transformers_oracle.py`` selects on CPUs) keeps per pair H elements
    more (``index_add_`` keeps its source, the weighted rows in the hidden states'
    dtype) and 8 B less (``token_idx`` and ``top_k_pos``, two views of one
    ``torch.where`` result, instead of three permutations), and no offsets.
    ``"batched_mm"`` gathers each pair's expert weights (``self.gate_up_proj[
    expert_ids]``) and ``bmm`` keeps them: 3·I_e·H elements per pair, not modelled.
    LoRA trains neither the experts (3-D parameters) nor the router, so neither
    keeps the inputs of its matmuls.

    DeepSeek's ``n_shared_experts`` (S) run as one gated MLP of width S·I_e on every
    token (``DeepseekV3MoE``: ``self.shared_experts(residuals)``), and keep what a
    dense FFN keeps (`_mlp`). Layers in ``cfg.dense_layers`` take `_mlp` at width
    I instead (`layer_saved`).
    """
    p, r = layer.p, layer.r
    H, I_e, k = cfg.hidden_size, cfg.expert_intermediate_size, cfg.num_experts_per_tok
    E, S = cfg.num_local_experts, cfg.n_shared_experts
    train = not r.lora
    name = "post-attention norm"
    layer.norm(name, H, in_grad=True)
    router_keeps_output = _router(layer, cfg, f"{name}: output")
    if S:
        layer.linear_inputs(
            f"{name}: output (input of the shared experts)", H,
            ("gate_proj", "up_proj"), p.resid, already_saved=router_keeps_output,
        )  # fmt: skip
    e = 4 if p.autocast else p.act
    layer.add("experts: sort permutations (3 × int64 per pair)", 3 * 8 * k)
    layer.add("experts: grouped_mm offsets (int32)", 0, once=4 * E)
    if train:
        layer.add("experts: gathered inputs (input of gate_up)", e * H * k)
    layer.add("experts: gate_up outputs (the activation's input)", e * 2 * I_e * k)
    layer.add("experts: activation outputs", e * I_e * k)
    if train:
        layer.add("experts: products (input of down)", e * I_e * k)
    layer.add("experts: down outputs (kept by the weighting)", e * H * k)
    layer.add("experts: routing weights", _routing_weight_bytes(cfg, p) * k)
    if S:
        Is = S * I_e
        layer.add("shared experts: gate output (input of the activation)", p.act * Is)
        layer.add("shared experts: activation output", p.act * Is)
        layer.add("shared experts: up output", p.act * Is)
        layer.linear_inputs("shared experts: product (input of down_proj)", Is,
                            ("down_proj",), p.act)  # fmt: skip


def _router_score_bytes(cfg: ModelConfig, p: Precision) -> int:
    """Element size of the router's probabilities: fp32 (Mixtral and Qwen3-MoE
    softmax in fp32, DeepSeek computes its logits in fp32), except DeepSeek-V3's
    sigmoid under AMP, whose ``F.linear`` autocast returns in bf16."""
    if cfg.model_type == "deepseek_v3" and p.autocast:
        return 2
    return 4


def _routing_weight_bytes(cfg: ModelConfig, p: Precision) -> int:
    """Element size of the routing weights the experts multiply by: Qwen3-MoE casts
    them to the logits' dtype (``router_top_value.to(router_logits.dtype)``,
    modeling_qwen3_moe.py:264), the others keep the router's."""
    if cfg.model_type == "qwen3_moe":
        return p.act
    return _router_score_bytes(cfg, p)


def _router(layer: _Layer, cfg: ModelConfig, item: str) -> bool:
    """What the router of a MoE layer keeps, per token: its input, its E
    probabilities, the k int64 indices of ``topk``, and with renormalisation the sum
    and the k weights the in-place division keeps. Returns whether its input is the
    norm's output itself (kept once for the shared experts too).

    - Mixtral (``MixtralTopKRouter``, modeling_mixtral.py:105-108):
      ``F.linear(hidden_states, weight)`` keeps the norm's output, ``softmax`` of the
      fp32 logits its fp32 output, and the weights are always renormalised.
    - Qwen3-MoE (``Qwen3MoeTopKRouter``, modeling_qwen3_moe.py:259-264): the same,
      renormalised only with ``norm_topk_prob``.
    - DeepSeek-V2/V3 (``DeepseekV2TopkRouter``, modeling_deepseek_v2.py:99-115;
      ``DeepseekV3TopkRouter``, modeling_deepseek_v3.py:135-157): ``F.linear`` of
      fp32 copies of the input (4·H B per token) and of the weight (4·E·H B per
      layer), then V2's softmax or V3's sigmoid (fp32); V3 renormalises with
      ``norm_topk_prob`` (the denominator and the gathered weights), V2 never. V3's
      group-limited choice (the score bias ``e_score_correction_bias``, the top-2
      sums of ``n_group`` groups, the group mask) keeps nothing: only indices
      leave it, so its graph is freed when the router returns. V2's
      ``topk_method="group_limited_greedy"`` keeps its bool mask (E B per token,
      ``masked_fill`` feeds the top-k values): not counted, as `ModelConfig` does
      not carry ``topk_method`` (transformers' default is ``"greedy"``).
    """
    p = layer.p
    H, E, k = cfg.hidden_size, cfg.num_local_experts, cfg.num_experts_per_tok
    train = not layer.r.lora
    deepseek = cfg.model_type in ("deepseek_v2", "deepseek_v3")
    if deepseek and p.act == 2 and not p.autocast:
        if train:
            layer.add("router: input, fp32 copy", 4 * H)
        layer.add("router: weight, fp32 copy", 0, once=4 * E * H)
        keeps_output = False
    else:  # the norm's output, or autocast's bf16 copy of it
        layer.linear_inputs(f"{item} (input of the router)", H, ("gate",), p.resid)
        keeps_output = train and not p.autocast
    score = _router_score_bytes(cfg, p)
    kind = "sigmoid" if cfg.model_type == "deepseek_v3" else "softmax"
    layer.add(f"router: {kind} output", score * E)
    layer.add("router: top-k indices (int64)", 8 * k)
    renorm = {"mixtral": True, "deepseek_v2": False}.get(
        cfg.model_type, cfg.norm_topk_prob
    )
    if renorm:
        layer.add("router: renormalisation (sum and top-k weights)", score * (1 + k))
    return keeps_output


def _mla_attention(layer: _Layer, t: int, first: bool) -> None:
    """Multi-head latent attention as transformers' ``DeepseekV3Attention`` and
    ``DeepseekV2Attention`` train it (modeling_deepseek_v3.py:430-481), per token:

    - the attention norm, whose output ``q_a_proj`` (or ``q_proj`` without
      ``q_lora_rank``) and ``kv_a_proj_with_mqa`` read;
    - ``q_a_layernorm`` on the d_c' query latent and ``kv_a_layernorm`` on the d_c
      key-value latent (`_latent_norm`), whose outputs ``q_b_proj`` and
      ``kv_b_proj`` read;
    - RoPE on the d_r-wide ``q_pe`` and the shared ``k_pe`` keeps only the tables'
      views (counted once for all layers in `saved_activations`' ``shared``);
    - the query ``torch.cat((q_pass, q_rot))`` and the key ``new_empty`` filled
      with k_nope and the broadcast k_pe, both n_h·(d_n + d_r) wide; the value is a
      view of ``kv_b_proj``'s output (``torch.split``, :417), so what attention
      keeps for V is that whole output, n_h·(d_n + d_v) wide;
    - SDPA: n_kv = n_h (no ``enable_gqa``), and its q, k and v have unequal head
      widths (d_n + d_r = 192 against d_v = 128 in DeepSeek-V3). PyTorch's flash
      kernel refuses unequal widths (``check_head_dim_size_flash``), so CUDA runs
      the memory-efficient kernel, which keeps q, k, v, its n_h·d_v output (also
      ``o_proj``'s input) and an fp32 log-sum-exp per row and head (its rows padded
      to a multiple of 32); a CPU runs the math kernel instead (fp32 q, kᵀ, v and
      softmax; checked in ``tests/test_activations_moe.py``). Eager attention keeps
      q, k, a contiguous copy of v (``torch.matmul`` folds the strided view into
      (b·n_h, t, d_v)), the fp32 softmax and its bf16 copy, and its output's
      contiguous copy as ``o_proj``'s input.
    """
    cfg, r, p = layer.cfg, layer.r, layer.p
    H, n = cfg.hidden_size, cfg.num_attention_heads
    d_n, d_r, d_v = cfg.qk_nope_head_dim, cfg.qk_rope_head_dim, cfg.v_head_dim
    layer.norm("attention norm", H, in_grad=not first)
    q_in = "q_a_proj" if cfg.q_lora_rank else "q_proj"
    layer.linear_inputs("attention norm: output (input of q and kv_a)", H,
                        (q_in, "kv_a_proj_with_mqa"), p.resid)  # fmt: skip
    if cfg.q_lora_rank:
        _latent_norm(layer, "q_a_layernorm", cfg.q_lora_rank, "q_b_proj")
    # kv_nope is a view of kv_a's output: in fp32 ``.to(float32)`` keeps the view
    _latent_norm(layer, "kv_a_layernorm", cfg.kv_lora_rank, "kv_b_proj",
                 viewed=cfg.kv_lora_rank + d_r)  # fmt: skip
    layer.add("Q (q_nope and the rotated q_pe)", p.act * n * (d_n + d_r))
    layer.add("K (k_nope and the shared rotated k_pe)", p.act * n * (d_n + d_r))
    if r.attention == "eager":  # matmul folds V's strided view into a copy
        layer.add("V (contiguous copy)", p.act * n * d_v)
        layer.add("softmax output (fp32)", 4 * n * t)
        layer.add("softmax output, bf16 copy", p.act * n * t if p.act == 2 else 0)
        out_saved = False
    else:
        layer.add("kv_b_proj output (V is a view of it)", p.act * n * (d_n + d_v))
        layer.add("attention output", p.act * n * d_v)
        layer.add("log-sum-exp (fp32)", 4 * n)
        out_saved = True
    layer.linear_inputs("attention output (input of o_proj)", n * d_v, ("o_proj",),
                        p.act, already_saved=out_saved)  # fmt: skip


def _latent_norm(
    layer: _Layer, module: str, width: int, reader: str, viewed: int | None = None
) -> None:
    """An MLA latent's RMSNorm (``DeepseekV3RMSNorm``, LlamaRMSNorm's code) on a
    projection's output in the compute dtype: its fp32 copy and 1/rms, the
    normalized copy in that dtype (when the weight trains), and its output (the
    weight times it: fp32 under AMP, where the weight is fp32) as ``reader``'s
    input. ``viewed``: the width of the tensor the input is a view of (in fp32 the
    upcast is a no-op that keeps the view's storage)."""
    p = layer.p
    upcast = (viewed or width) if p.act == 4 else width
    layer.add(f"{module}: fp32 input", 4 * upcast)
    layer.add(f"{module}: 1/rms (fp32)", 4)
    if not layer.r.lora:
        layer.add(f"{module}: normalized copy", p.act * width)
    out = 4 if p.autocast else p.act
    layer.linear_inputs(f"{module}: output (input of {reader})", width, (reader,), out)


def saved_activations(
    cfg: ModelConfig,
    batch: int,
    seq_len: int,
    recipe: Recipe = Recipe(),
    checkpointing: str = "none",
    loss: str = "full",
) -> SavedActivations:
    """Bytes that one training forward pass keeps for the backward pass, by item:
    every decoder layer, the tensors they share, the head and the logits.

    ``checkpointing``: ``none``; ``selective`` (the attention's t²-sized tensors
    recomputed, Korthikanti et al. 2022, Sec. 5; nothing to drop with SDPA);
    ``full`` (transformers' ``gradient_checkpointing_enable(use_reentrant=False)``:
    each layer keeps only its input, ``resid`` bytes × H per token; one layer's
    tensors are rebuilt during its backward, see `llmmath.training.training_peak`).
    ``loss``: ``full`` (transformers' ``ForCausalLMLoss``: the logits in the compute
    dtype, held by the model's output, and ``cross_entropy`` of their fp32 copy,
    which keeps an fp32 log-softmax: 6 bytes per logit in bf16; its backward holds
    two fp32 gradients, 8 bytes per logit) or ``chunked`` (a fused linear
    cross-entropy such as Liger-Kernel's, which computes the loss and its gradients
    chunk by chunk in the forward pass and keeps the gradient of the last hidden
    state and of the LM head's weight instead of logits).

    Raises:
        ConfigError: an unknown option, or a size that is not a positive integer.
    """
    check_positive_int("batch", batch)
    check_positive_int("seq_len", seq_len)
    _one_of("checkpointing", checkpointing, CHECKPOINTING)
    _one_of("loss", loss, LOSSES)
    _one_of("attention", recipe.attention, ATTENTIONS)
    _one_of("adapter_dtype", recipe.adapter_dtype, ADAPTER_DTYPES)
    if recipe.attention == "sdpa" and cfg.attn_logit_softcapping:
        raise ConfigError(
            _(
                "attention must be eager for a model with attn_logit_softcapping "
                "(transformers' SDPA refuses soft-capping)"
            )
        )
    p = precision_of(recipe.precision)
    H, V, L = cfg.hidden_size, cfg.vocab_size, cfg.num_hidden_layers
    tokens = batch * seq_len
    if checkpointing == "full":
        layers = tuple(
            {"layer input (checkpoint)": p.resid * H * tokens} for _ in range(L)
        )
    else:
        layers = tuple(layer_saved(cfg, recipe, batch, seq_len, i) for i in range(L))
        if checkpointing == "selective":
            t2 = ("softmax output", "soft-capped")
            layers = tuple(
                {k: v for k, v in x.items() if not k.startswith(t2)} for x in layers
            )
    shared = {}
    if cfg.position_embedding_type == "rope":
        # one (1, t, d_h) cos and sin per table: ``position_ids =
        # position_ids.unsqueeze(0)`` when none are passed, broadcast over the
        # batch; ``cos.to(dtype=x.dtype)`` (the residual stream's), OLMo 2's fp32
        # (``return cos, sin``); Gemma 3 one table per layer type
        tables = len(set(cfg.layer_types or ())) if cfg.rope_local_theta else 1
        size = 4 if cfg.model_type == "olmo2" else p.resid
        # MLA rotates only d_r = qk_rope_head_dim (DeepSeek's config sets head_dim
        # to it); DeepSeek-V2 passes one complex64 freqs_cis, d_r/2 wide
        width = cfg.qk_rope_head_dim if cfg.is_mla else cfg.head_dim
        if cfg.model_type == "deepseek_v2":
            shared["RoPE freqs_cis (complex64)"] = 4 * width * seq_len
        else:
            shared["RoPE cos and sin tables"] = tables * 2 * size * width * seq_len
    if cfg.model_type in DROPOUT_TYPES and not recipe.lora:  # GPT2Model: self.drop
        shared["embedding dropout mask (bool)"] = H * tokens
    if checkpointing == "full":  # the checkpoints keep each layer's other arguments
        shared.update(_checkpoint_arguments(cfg, recipe, batch, seq_len, p))
    head_layer = _Layer(cfg, recipe, tokens)
    head_layer.norm("final norm", H, in_grad=True)
    if not recipe.lora and loss == "full":  # the fused loss keeps no input
        head_layer.linear_inputs("final norm: output (input of the LM head)", H,
                                 ("lm_head",), p.resid)  # fmt: skip
    head = head_layer.items
    if recipe.precision == "amp":  # autocast's bf16 copy of the LM head's weight
        head["LM head weight, bf16 copy (autocast)"] = 2 * V * H
    logits: dict[str, int] = {}
    if loss == "full":
        lb = p.act  # lm_head runs in the compute dtype
        logits["logits (held by the model's output)"] = lb * tokens * V
        if cfg.final_logit_softcapping:
            logits["soft-capped logits (tanh output)"] = lb * tokens * V
        logits["log-softmax of the fp32 logits (cross-entropy)"] = 4 * tokens * V
        loss_backward = 2 * 4 * tokens * V
        forward_extra = 4 * tokens * V if lb != 4 else 0
    else:
        logits["gradient of the last hidden state (fused loss)"] = p.resid * tokens * H
        loss_backward = 0
        forward_extra = _chunk_bytes(cfg, tokens, p)
    return SavedActivations(layers, shared, head, logits, loss_backward, forward_extra)


def _checkpoint_arguments(
    cfg: ModelConfig, recipe: Recipe, batch: int, t: int, p: Precision
) -> dict[str, int]:
    """What full checkpointing keeps besides the layers' inputs: each checkpoint
    holds its layer's arguments until its backward, the RoPE tables (counted as
    shared anyway), ``position_ids`` (int64, (1, t)) and the attention masks
    (``masking_utils``): with SDPA a bool ``(1, 1, t, t)`` expanded over the batch
    for each sliding window that needs one (none for full attention,
    ``_ignore_causal_mask_sdpa``); eager an additive ``(b, 1, t, t)`` mask in the
    residual stream's dtype for each kind of layer."""
    out = {}
    if cfg.position_embedding_type == "rope":
        out["position ids (int64, kept by the checkpoints)"] = 8 * t
    windows = {cfg.window_of(i) for i in range(cfg.num_hidden_layers)}
    if recipe.attention == "eager":
        n, size = len(windows), p.resid * batch * t * t
    else:
        n, size = len([w for w in windows if w is not None and w <= t]), t * t
    if n:
        out["attention masks (kept by the checkpoints)"] = n * size
    return out


def _chunk_bytes(cfg: ModelConfig, tokens: int, p: Precision) -> int:
    """Liger-Kernel's fused linear cross-entropy
    (``ops/fused_linear_cross_entropy.py``): chunks of ``next_power_of_2(ceil(BT /
    ceil(V / H)))`` rows (at most BT), whose logits it holds in the compute dtype and
    overwrites with their gradient in place: about BT·H elements, whatever V."""
    H, V = cfg.hidden_size, cfg.vocab_size
    inc = -(-V // H)
    rows = 1 << max(0, (-(-tokens // inc) - 1).bit_length())
    rows = min(rows, tokens)
    return rows * V * p.act

"""Training memory with the usual options: optimizer, precision, checkpointing, LoRA.

`training_memory` answers in exact bytes by item: ``"weights"``, ``"gradients"``,
``"optimizer state"`` (with the fp32 master copy of mixed precision, as ZeRO counts
it) and ``"activations"``. Each part has its own function and its source:

- optimizers (`optimizer_state_bytes`): AdamW (two moments), 8-bit Adam
  (bitsandbytes' block-wise layout), Adafactor (factored second moment, no first
  moment; Shazeer & Stern 2018), SGD with momentum (one buffer);
- precision (`PRECISIONS`): fp32; bf16 mixed with an fp32 master copy (16 bytes per
  parameter with Adam, Rajbhandari et al. 2020, ZeRO, Sec. 3.1); PyTorch AMP (fp32
  weights, gradients and state under ``torch.autocast``); pure bf16;
- activation checkpointing (`activation_bytes`): none, selective (Korthikanti et al.
  2022, Sec. 5) or full (only each layer's input kept);
- LoRA and QLoRA (`lora_params`, `nf4_bytes`): r·(in + out) trainable parameters per
  targeted matrix, a frozen base in bf16 or in 4-bit NF4 (Dettmers et al. 2023).

Left out: the logits and loss of the LM head, temporary buffers, the CUDA context and
allocator fragmentation. Explained in chapter 9 (*Memory and speed*).
"""

from __future__ import annotations

import math
from typing import NamedTuple

from llmmath.config import ConfigError, ModelConfig, check_positive_int, one_of
from llmmath.counting import count_params
from llmmath.messages import gettext as _

#: Optimizers: ``adamw`` (torch.optim.AdamW: exp_avg and exp_avg_sq, each the size of
#: the parameter), ``adam8bit`` (bitsandbytes' Adam8bit), ``adafactor``
#: (torch.optim.Adafactor / transformers' Adafactor with ``beta1=None``), ``sgd``
#: (torch.optim.SGD with momentum: one momentum_buffer).
OPTIMIZERS = ("adamw", "adam8bit", "adafactor", "sgd")
#: Precisions: bytes of (weights, gradients, fp32 master copy, optimizer state
#: element) per parameter. ``mixed``: bf16 weights and gradients, an fp32 master copy
#: the optimizer updates, fp32 state (ZeRO, Sec. 3.1: 2 + 2 + 12 with Adam). ``bf16``:
#: everything in bf16 (torch's optimizers keep state in the parameter's dtype).
#: ``amp``: PyTorch autocast over fp32 weights, so fp32 gradients and state (4 + 4 + 8
#: with AdamW), activations in bf16 (`llmmath.activations`).
PRECISIONS = {
    "bf16": (2, 2, 0, 2),
    "amp": (4, 4, 0, 4),
    "mixed": (2, 2, 4, 4),
    "fp32": (4, 4, 0, 4),
}
#: peft keeps LoRA adapters in fp32 by default (``autocast_adapter_dtype=True``); bf16
#: when asked (``autocast_adapter_dtype=False``, a bf16 model).
ADAPTER_DTYPES = ("fp32", "bf16")
#: torch.optim.AdamW's implementations: ``for-loop`` (``foreach=False``), ``foreach``
#: (torch's default on a GPU) and ``fused`` (``fused=True``, transformers Trainer's
#: ``adamw_torch_fused``).
OPTIMIZER_IMPLS = ("for-loop", "foreach", "fused")
CHECKPOINTING = ("none", "selective", "full")
METHODS = ("full", "lora", "qlora")
#: LoRA targets and the reference modules' matrices each one names (fused Phi-3
#: matrices and MLA's projections included, so every target applies to any model).
LORA_TARGETS = {
    "q": ("q_proj", "q_a_proj", "q_b_proj", "qkv_proj"),
    "k": ("k_proj", "kv_a_proj_with_mqa", "kv_b_proj", "qkv_proj"),
    "v": ("v_proj", "kv_a_proj_with_mqa", "kv_b_proj", "qkv_proj"),
    "o": ("o_proj",),
    "gate": ("gate_proj", "gate_up_proj"),
    "up": ("up_proj", "gate_up_proj"),
    "down": ("down_proj",),
}
#: bitsandbytes' 8-bit optimizers: a tensor of fewer than ``min_8bit_size`` = 4096
#: elements keeps fp32 state; larger ones keep uint8 state with one fp32 absmax per
#: block of ``ADAM8BIT_BLOCK`` elements (``Optimizer2State.init_state``: 256 since
#: bitsandbytes 0.44.0, 2048 before it and in the paper: Dettmers et al. 2022, *8-bit
#: Optimizers via Block-wise Quantization*, Sec. 2).
ADAM8BIT_MIN_SIZE = 4096
ADAM8BIT_BLOCK = 256
#: QLoRA's NF4 layout (Dettmers et al. 2023, Sec. 3, and bitsandbytes'
#: ``quantize_4bit(compress_statistics=True)``): 4-bit codes, one absmax per block of
#: 64 weights, the absmaxes minus their mean quantized to 8 bits in blocks of 256 with
#: an fp32 scale each, and the fp32 mean: 0.127 bits of statistics per weight.
NF4_BLOCK = 64
NF4_ABSMAX_BLOCK = 256


def _check(name: str, value: str, allowed) -> None:
    if value not in allowed:
        shown = value if len(value) <= 40 else f"{value[:40]}..."
        raise ConfigError(one_of(name, allowed, shown))


def parameter_tensors(cfg: ModelConfig) -> list[tuple[str, tuple[int, ...], int]]:
    """Every learnable tensor of the reference model as (name, torch shape, how many
    such tensors the model holds: layers × experts)."""
    counts = count_params(cfg)
    return [
        (t.name, t.shape, counts.total_of(t) // math.prod(t.shape))
        for t in counts.tensors
    ]


def lora_targets(targets: str | tuple[str, ...]) -> tuple[str, ...]:
    """``"q,k,v,o"`` or a tuple → the targets, each checked and given once.

    Raises:
        ConfigError: an unknown or repeated target.
    """
    items = tuple(targets.split(",")) if isinstance(targets, str) else tuple(targets)
    for t in items:
        _check(_("a LoRA target"), t, tuple(LORA_TARGETS))
    if len(set(items)) != len(items):
        raise ConfigError(
            _("LoRA targets must each be given once; got {items}").format(items=items)
        )
    return items


def lora_matrices(cfg: ModelConfig, targets) -> list[tuple[tuple[int, int], int]]:
    """The targeted matrices as ((out, in), how many): each matrix whose module's name
    a target names (`LORA_TARGETS`), counted once."""
    names = {m for t in lora_targets(targets) for m in LORA_TARGETS[t]}
    return [
        (shape, n)
        for name, shape, n in parameter_tensors(cfg)
        if len(shape) == 2 and name.endswith(".weight") and name.split(".")[-2] in names
    ]


def lora_params(cfg: ModelConfig, rank: int, targets) -> int:
    """Trainable LoRA parameters: r·(in + out) per targeted (out, in) matrix, A (r, in)
    and B (out, r) (Hu et al. 2021, Sec. 4.1).

    Raises:
        ConfigError: ``rank`` not a positive integer, or a bad target.
    """
    check_positive_int("lora_rank", rank)
    return sum(n * rank * (o + i) for (o, i), n in lora_matrices(cfg, targets))


def _trainable_tensors(
    cfg: ModelConfig, method: str, rank: int, targets
) -> list[tuple[tuple[int, ...], int]]:
    """Shapes of the trainable tensors and how many of each."""
    if method == "full":  # DeepSeek-V3's score bias is set by a rule, not trained
        return [
            (shape, n)
            for name, shape, n in parameter_tensors(cfg)
            if not name.endswith("e_score_correction_bias")
        ]
    check_positive_int("lora_rank", rank)
    out = []
    for (o, i), n in lora_matrices(cfg, targets):
        out += [((rank, i), n), ((o, rank), n)]
    return out


def trainable_params(
    cfg: ModelConfig,
    method: str = "full",
    lora_rank: int = 16,
    targets="q,k,v,o,gate,up,down",
) -> int:
    """Parameters the optimizer updates: every one but DeepSeek-V3's router score
    bias (``full``), or the adapters' (`lora_params`, ``lora`` and ``qlora``)."""
    _check("method", method, METHODS)
    return sum(
        n * math.prod(shape)
        for shape, n in _trainable_tensors(cfg, method, lora_rank, targets)
    )


def nf4_bytes(numel: int) -> int:
    """Bytes of one matrix of ``numel`` weights in QLoRA's NF4 with double quantization
    (`NF4_BLOCK`): ⌈n/2⌉ code bytes, one byte per 64-weight block, an fp32 scale per 256
    blocks and the fp32 mean of the absmaxes. The 16-entry code tables are shared and
    left out."""
    check_positive_int("numel", numel)
    blocks = -(-numel // NF4_BLOCK)
    return -(-numel // 2) + blocks + 4 * -(-blocks // NF4_ABSMAX_BLOCK) + 4


def frozen_base_bytes(cfg: ModelConfig, method: str, element: int = 2) -> int:
    """Bytes of the frozen base of LoRA (``element`` bytes a weight: bf16, or fp32 under
    AMP) or QLoRA (every 2-D matrix of the blocks in NF4, `nf4_bytes` per tensor;
    embedding, LM head, norms and biases in ``element`` bytes)."""
    total = 0
    for name, shape, n in parameter_tensors(cfg):
        if (
            method == "qlora"
            and len(shape) == 2
            and not name.startswith(("embed_", "lm_head"))
        ):
            total += n * nf4_bytes(math.prod(shape))
        else:
            total += element * n * math.prod(shape)
    return total


def trainable_bytes(
    precision: str, method: str = "full", adapter_dtype: str = "fp32"
) -> tuple[int, int, int, int]:
    """Bytes per trainable parameter of (weight, gradient, fp32 master copy, optimizer
    state element): the precision's (`PRECISIONS`) for full fine-tuning; for LoRA
    adapters kept in fp32 (peft's default) fp32 throughout, else the precision's.

    Raises:
        ConfigError: an unknown precision, method or adapter dtype.
    """
    _check("precision", precision, tuple(PRECISIONS))
    _check("method", method, METHODS)
    _check("adapter_dtype", adapter_dtype, ADAPTER_DTYPES)
    if method != "full" and adapter_dtype == "fp32":
        return PRECISIONS["fp32"]
    return PRECISIONS[precision]


def optimizer_state_bytes(
    cfg: ModelConfig,
    optimizer: str = "adamw",
    precision: str = "mixed",
    method: str = "full",
    lora_rank: int = 16,
    targets="q,k,v,o,gate,up,down",
    adapter_dtype: str = "fp32",
) -> dict[str, int]:
    """Optimizer state in bytes, item by item, for the trainable tensors.

    Per trainable tensor of n elements, s bytes per state element (`PRECISIONS`):
    AdamW 2·s·n (first and second moments); SGD with momentum s·n; Adafactor s·(rows +
    columns) for a matrix (row and column statistics of the second moment, over
    all leading dimensions as torch.optim.Adafactor keeps them: ∏shape[:-1] +
    ∏shape[:-2]·shape[-1]) and s·n for a vector, no first moment (Shazeer & Stern 2018,
    Sec. 3-4; transformers' default ``beta1=None``); 8-bit Adam 2·n bytes plus
    2·4·⌈n/256⌉ of fp32 absmax when n ≥ 4096, else 2·4·n (`ADAM8BIT_BLOCK`). Mixed
    precision adds the fp32 master copy, 4 bytes per trainable parameter. LoRA's
    adapters keep fp32 state when they are fp32 (``adapter_dtype``, `trainable_bytes`).
    Left out: torch's per-tensor ``step`` counters (AdamW, Adafactor: one fp32 scalar
    each) and bitsandbytes' shared quantization maps (2 × 256 fp32).

    Raises:
        ConfigError: an unknown optimizer, precision or method, or a bad LoRA option.
    """
    _check("optimizer", optimizer, OPTIMIZERS)
    _, _, master, s = trainable_bytes(precision, method, adapter_dtype)
    tensors = _trainable_tensors(cfg, method, lora_rank, targets)
    numel = sum(n * math.prod(shape) for shape, n in tensors)
    items = {}
    if master:
        items["master weights (fp32)"] = master * numel
    if optimizer == "adamw":
        items["first moment"] = items["second moment"] = s * numel
    elif optimizer == "sgd":
        items["momentum"] = s * numel
    elif optimizer == "adafactor":
        items["second moment, factored"] = sum(
            n * s * (_rows_cols(shape) if len(shape) > 1 else math.prod(shape))
            for shape, n in tensors
        )
    else:
        small = sum(n * math.prod(sh) for sh, n in tensors if _small(sh))
        big = [(math.prod(sh), n) for sh, n in tensors if not _small(sh)]
        items["8-bit moments (uint8)"] = 2 * sum(e * n for e, n in big)
        items["block absmax (fp32)"] = (
            2 * 4 * sum(n * -(-e // ADAM8BIT_BLOCK) for e, n in big)
        )
        items["moments of small tensors (fp32)"] = 2 * 4 * small
    return items


def _small(shape: tuple[int, ...]) -> bool:
    return math.prod(shape) < ADAM8BIT_MIN_SIZE


def _rows_cols(shape: tuple[int, ...]) -> int:
    return math.prod(shape[:-1]) + math.prod(shape[:-2]) * shape[-1]


def _recipe(
    cfg: ModelConfig,
    precision: str,
    method: str,
    lora_rank: int,
    targets,
    adapter_dtype: str,
    attention: str | None,
):
    from llmmath.activations import Recipe, default_attention

    if attention is None:
        attention = default_attention(cfg)
    _check("precision", precision, tuple(PRECISIONS))
    _check("method", method, METHODS)
    _check("adapter_dtype", adapter_dtype, ADAPTER_DTYPES)
    names: frozenset = frozenset()
    if method != "full":
        check_positive_int("lora_rank", lora_rank)
        names = frozenset(m for t in lora_targets(targets) for m in LORA_TARGETS[t])
    return Recipe(precision, method, lora_rank, names, adapter_dtype, attention)


def activation_bytes(
    cfg: ModelConfig,
    seq_len: int,
    batch: int = 1,
    checkpointing: str = "none",
    precision: str = "bf16",
    attention: str | None = None,
    method: str = "full",
    lora_rank: int = 16,
    targets="q,k,v,o,gate,up,down",
    adapter_dtype: str = "fp32",
    loss: str = "full",
) -> dict[str, int]:
    """Activation bytes a training forward pass keeps for the backward pass, by item
    summed over the layers (`llmmath.activations.saved_activations`: what autograd
    saves in transformers' modules), plus the LM head's and the loss's.

    Raises:
        ConfigError: an unknown option, or a size that is not a positive integer.
    """
    from llmmath.activations import saved_activations

    recipe = _recipe(
        cfg, precision, method, lora_rank, targets, adapter_dtype, attention
    )
    saved = saved_activations(cfg, batch, seq_len, recipe, checkpointing, loss)
    items: dict[str, int] = {}
    for layer in saved.layers:
        for k, v in layer.items():
            items[k] = items.get(k, 0) + v
    L = cfg.num_hidden_layers
    out = {f"{k}, {L} layers": v for k, v in items.items()}
    return {**out, **saved.shared, **saved.head, **saved.logits}


def training_memory(
    cfg: ModelConfig,
    optimizer: str = "adamw",
    precision: str = "bf16",
    checkpointing: str = "none",
    batch: int = 1,
    seq_len: int = 4096,
    method: str = "full",
    lora_rank: int = 16,
    targets="q,k,v,o,gate,up,down",
    attention: str | None = None,
    adapter_dtype: str = "fp32",
    loss: str = "full",
) -> dict[str, int]:
    """Bytes of one training step's memory at rest: ``"weights"``, ``"gradients"``,
    ``"optimizer state"`` (`optimizer_state_bytes`, fp32 master copy included) and
    ``"activations"`` (`activation_bytes`: the layers', the LM head's and the loss's).
    Full fine-tuning: weights and gradients of every parameter in the precision's
    dtype (`PRECISIONS`), except that DeepSeek-V3's router score bias, set by a rule
    rather than by gradient (DeepSeek-V3 report, Sec. 2.1.2), has neither gradient
    nor optimizer state. LoRA/QLoRA: the frozen base (`frozen_base_bytes`) plus the
    adapters (`trainable_bytes`); gradients and state for the adapters only. The
    peak of a step, more than this sum, is `training_peak`'s.

    Raises:
        ConfigError: an unknown option, or a size or rank that is not a positive
        integer.
    """
    state = optimizer_state_bytes(
        cfg, optimizer, precision, method, lora_rank, targets, adapter_dtype
    )
    w, g, _, _ = trainable_bytes(precision, method, adapter_dtype)
    trainable = trainable_params(cfg, method, lora_rank, targets)
    if method == "full":
        base = w * (count_params(cfg).total - trainable)  # DeepSeek-V3's score bias
    else:
        base = frozen_base_bytes(cfg, method, PRECISIONS[precision][0])
    acts = activation_bytes(
        cfg, seq_len, batch, checkpointing, precision, attention, method, lora_rank,
        targets, adapter_dtype, loss,
    )  # fmt: skip
    return {
        "weights": base + w * trainable,
        "gradients": g * trainable,
        "optimizer state": sum(state.values()),
        "activations": sum(acts.values()),
    }


class TrainingPeak(NamedTuple):
    """The peak of one training step: ``peak_bytes`` (what
    ``torch.cuda.max_memory_allocated()`` reports over the step), the ``moment`` it
    happens and ``items``, the bytes held then, by item (they sum to ``peak_bytes``);
    ``moments``: every moment considered with its total."""

    peak_bytes: int
    moment: str
    items: dict[str, int]
    moments: dict[str, int]


def _layer_grads(
    cfg: ModelConfig, method: str, lora_rank: int, targets, g: int
) -> tuple[list[int], int, int]:
    """Gradient bytes (per layer, of the LM head when untied, of the embedding and
    the rest: final norm, learned positions)."""
    counts = count_params(cfg)
    L = cfg.num_hidden_layers
    if method != "full":
        per = lora_params(cfg, lora_rank, targets) * g
        return [per // L] * L, 0, 0
    bias = (
        cfg.num_local_experts if cfg.router_score_bias else 0
    )  # DeepSeek-V3's score bias has no gradient
    layers = [
        g * (counts.layer_params(i) - (bias if i not in cfg.dense_layers else 0))
        for i in range(L)
    ]
    lm = sum(g * counts.total_of(t) for t in counts.tensors if t.group == "lm_head")
    rest = g * counts.total - sum(layers) - lm
    return layers, lm, rest


def _optimizer_temporaries(
    cfg: ModelConfig, optimizer: str, impl: str, method: str, lora_rank: int,
    targets, s: int, master: int,
) -> int:  # fmt: skip
    """Bytes the optimizer step allocates for a moment. torch.optim.AdamW, for-loop:
    ``exp_avg_sq.sqrt() / bias_correction2_sqrt``, two tensors the size of the
    largest parameter (``_single_tensor_adam``); foreach: ``_foreach_sqrt`` of every
    second moment at once, one copy of the state's second moments
    (``_multi_tensor_adam``); fused: none. With an fp32 master copy the step also
    casts the largest gradient to fp32. SGD and 8-bit Adam update in place."""
    tensors = _trainable_tensors(cfg, method, lora_rank, targets)
    largest = max(math.prod(shape) for shape, _ in tensors)
    extra = master * largest
    if optimizer in ("sgd", "adam8bit") or impl == "fused":
        return extra
    if impl == "foreach" and optimizer == "adamw":
        return s * sum(n * math.prod(shape) for shape, n in tensors) + extra
    return 2 * s * largest + extra


def _norm_backward_bytes(cfg: ModelConfig, resid: int) -> int:
    """Bytes per token that a norm's backward allocates at its peak. transformers'
    RMSNorms run their backward in fp32 (``x.to(torch.float32)``): at
    ``pow(2)``'s backward (grad·2·x, three fp32 tensors) the mean's expanded
    gradient and the gradient through ``x * rsqrt(...)`` are alive too, five fp32
    tensors of H, 20·H bytes (measured with MemTracker on the CPU for Llama, Qwen3,
    Gemma and OLMo 2, bf16 and AMP alike). LayerNorm's fused backward: the incoming
    gradient and the input's, 2·resid·H."""
    from llmmath.activations import NORM_KINDS

    if NORM_KINDS.get(cfg.model_type) == "layernorm":
        return 2 * resid * cfg.hidden_size
    return 20 * cfg.hidden_size


def _ffn_backward(
    cfg: ModelConfig, layer: dict[str, int], tokens: int, act: int, resid: int,
    g: int, method: str, layer_grads: int,
) -> tuple[int, int, int]:  # fmt: skip
    """A dense layer's backward at its largest moment, the FFN's first elementwise
    op after ``down_proj``'s backward: (bytes of saved tensors already freed,
    gradient temporaries, gradients of the layer so far). ``down_proj`` has freed
    its saved input and holds its weight's gradient (full fine-tuning; LoRA: the
    layer's adapters, counted whole); alive are the residual stream's gradient
    (resid·H) and three act·I gradients (of down's input, of the activation's
    output and of up's output; two for a plain MLP: of c_proj's input and of the
    activation's input)."""
    H, I = cfg.hidden_size, cfg.intermediate_size
    freed = sum(
        v
        for k, v in layer.items()
        if "(input of down_proj)" in k or "(input of c_proj)" in k
    )
    n = 3 if cfg.mlp_type == "gated" else 2
    temp = resid * tokens * H + n * act * tokens * I
    grads = g * H * I if method == "full" else layer_grads
    return freed, temp, grads


def training_peak(
    cfg: ModelConfig,
    optimizer: str = "adamw",
    precision: str = "bf16",
    checkpointing: str = "none",
    batch: int = 1,
    seq_len: int = 4096,
    method: str = "full",
    lora_rank: int = 16,
    targets="q,k,v,o,gate,up,down",
    attention: str | None = None,
    adapter_dtype: str = "fp32",
    loss: str = "full",
    optimizer_impl: str = "for-loop",
) -> TrainingPeak:
    """The peak of ``torch.cuda.max_memory_allocated()`` over one training step of a
    transformers causal LM in PyTorch (a step after the first, gradients set to None
    by ``zero_grad()``, the model's output kept until the step ends), item by item at
    the moment of the peak.

    Moments (the largest wins): the loss's forward (its fp32 copy of the logits),
    the loss's backward (two fp32 gradients of the logits, 8 bytes per logit, on top
    of every saved activation), the LM head's backward, the final norm's backward
    (its fp32 temporaries, `_norm_backward_bytes`, with every layer's activations
    alive), each layer's backward (the gradients so far, the activations not yet
    freed, that layer's tensors rebuilt when checkpointed, and its gradient
    temporaries at the FFN's first elementwise op, `_ffn_backward`, or at a post-FFN
    norm's backward for OLMo 2 and Gemma 2/3) and the optimizer step (every
    gradient and the optimizer's temporaries, `_optimizer_temporaries`). At every
    moment: the weights and optimizer state (`training_memory`) and the logits the
    model's output holds. Activations: `llmmath.activations.saved_activations`.

    Left out: the CUDA context, cuBLAS workspaces and allocator fragmentation (not
    in ``max_memory_allocated``), and the attention's backward temporaries (eager's
    t²-sized gradients among them). Checked within 10 % of every peak measured on
    an H200 (``tests/test_training_peak.py``) and of MemTracker's on the CPU for
    dense types (``tests/test_activations.py``).

    Raises:
        ConfigError: an unknown option, or a size or rank that is not a positive
        integer.
    """
    from llmmath.activations import saved_activations

    _check("optimizer_impl", optimizer_impl, OPTIMIZER_IMPLS)
    _check("optimizer", optimizer, OPTIMIZERS)
    recipe = _recipe(
        cfg, precision, method, lora_rank, targets, adapter_dtype, attention
    )
    rest = training_memory(
        cfg, optimizer, precision, checkpointing, batch, seq_len, method, lora_rank,
        targets, attention, adapter_dtype, loss,
    )  # fmt: skip
    w_b, g_b, master, s = trainable_bytes(precision, method, adapter_dtype)
    fixed = {"weights": rest["weights"], "optimizer state": rest["optimizer state"]}
    saved = saved_activations(cfg, batch, seq_len, recipe, checkpointing, loss)
    full = saved
    if checkpointing == "full":  # the layers' tensors as each is rebuilt
        full = saved_activations(cfg, batch, seq_len, recipe, "none", loss)
    tokens = batch * seq_len
    H, V, L = cfg.hidden_size, cfg.vocab_size, cfg.num_hidden_layers
    resid = 4 if precision in ("amp", "fp32") else 2
    act = 4 if precision == "fp32" else 2
    layers = list(saved.layer_totals)
    rebuilt = list(full.layer_totals)
    shared = sum(saved.shared.values())
    head = sum(saved.head.values())
    logits = sum(saved.logits.values())
    kept = next((v for k, v in saved.logits.items() if k.startswith("logits (held")), 0)
    g_layers, g_lm, g_rest = _layer_grads(cfg, method, lora_rank, targets, g_b)
    tied_or_lm = g_lm if g_lm else (g_rest if cfg.tie_word_embeddings else 0)
    widest = max(
        cfg.intermediate_size if not cfg.is_moe else cfg.expert_intermediate_size,
        H,
    )
    moments: dict[str, dict[str, int]] = {}
    acts = {"activations of the layers": sum(layers) + shared, "head": head}
    if loss == "full":
        moments["forward: the loss"] = {
            **fixed, **acts, "logits and loss": logits,
            "fp32 logits (the loss's copy)": saved.forward_extra,
        }  # fmt: skip
    else:  # the fused loss computes the LM head's gradient in the forward pass
        moments["forward: the loss"] = {
            **fixed, **acts, "logits and loss": logits,
            "gradients so far": tied_or_lm,
            "a chunk of logits (the fused loss)": saved.forward_extra,
        }  # fmt: skip
    if loss == "full":
        moments["backward: the loss"] = {
            **fixed, **acts, "logits and loss": logits,
            "gradients of the logits (fp32, two)": saved.loss_backward,
        }  # fmt: skip
        moments["backward: the LM head"] = {
            **fixed, **acts, "logits held by the output": kept,
            "gradient of the logits": act * tokens * V,
            "gradients so far": tied_or_lm,
            "gradient of the hidden state": resid * tokens * H,
        }  # fmt: skip
    # at the norm's peak the LM head's backward has freed its input and autocast's
    # copy of its weight, and the norm's weight its normalized copy
    freed = ("LM head", "normalized copy")
    lm_input = sum(v for k, v in saved.head.items() if any(f in k for f in freed))
    moments["backward: the final norm"] = {
        **fixed, "activations of the layers": sum(layers) + shared,
        "head": head - lm_input, "logits held by the output": kept,
        "gradients so far": tied_or_lm,
        "the norm's gradient temporaries": _norm_backward_bytes(cfg, resid) * tokens,
    }  # fmt: skip
    grads = tied_or_lm
    below = sum(layers)
    for i in reversed(range(L)):
        below -= layers[i]
        moe = cfg.is_moe and i not in cfg.dense_layers
        now = layers[i] + rebuilt[i] if checkpointing == "full" else layers[i]
        grads_now = g_layers[i]
        if moe:
            temp = 2 * act * tokens * widest + 2 * resid * tokens * H
        else:  # the FFN's backward at its first elementwise op (`_ffn_backward`)
            freed, temp, grads_now = _ffn_backward(
                cfg, full.layers[i], tokens, act, resid, g_b, method, g_layers[i]
            )
            norm_first = _norm_backward_bytes(cfg, resid) * tokens + resid * tokens * H
            if cfg.norm_layout in ("post", "sandwich") and norm_first > temp - freed:
                # the layer's backward opens with its post-FFN norm's: at its peak
                # only the norm's normalized copy is freed (as the final norm's)
                temp, grads_now = norm_first, 0
                now -= full.layers[i].get("post-FFN norm: normalized copy", 0)
            else:
                now -= freed
        name = f"backward: layer {i}"
        moments[name] = {
            **fixed,
            "activations not yet freed": below + shared + now,
            "logits held by the output": kept,
            "gradients so far": grads + grads_now,
            "the layer's gradient temporaries": temp,
        }
        grads += g_layers[i]
    all_grads = rest["gradients"]
    moments["optimizer step"] = {
        **fixed,
        "gradients": all_grads,
        "logits held by the output": kept,
        "optimizer temporaries": _optimizer_temporaries(
            cfg, optimizer, optimizer_impl, method, lora_rank, targets, s, master
        ),
    }
    totals = {k: sum(v.values()) for k, v in moments.items()}
    moment = max(totals, key=totals.get)
    items = {k: v for k, v in moments[moment].items() if v}
    return TrainingPeak(totals[moment], moment, items, totals)

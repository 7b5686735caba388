"""Training memory with the usual options: optimizer, precision, checkpointing, LoRA.

`training_memory` answers in exact bytes by item: ``"weights"``, ``"gradients"``,
``"optimizer state"`` (with the fp32 master copy of mixed precision, as ZeRO counts
it) and ``"activations"``. Each part has its own function and its source:

- optimizers (`optimizer_state_bytes`): AdamW (two moments), 8-bit Adam
  (bitsandbytes' block-wise layout), Adafactor (factored second moment, no first
  moment; Shazeer & Stern 2018), SGD with momentum (one buffer);
- precision (`PRECISIONS`): fp32; bf16 mixed with an fp32 master copy (16 bytes per
  parameter with Adam, Rajbhandari et al. 2020, ZeRO, Sec. 3.1); pure bf16;
- activation checkpointing (`activation_bytes`): none, selective (Korthikanti et al.
  2022, Sec. 5) or full (only each layer's input kept);
- LoRA and QLoRA (`lora_params`, `nf4_bytes`): r·(in + out) trainable parameters per
  targeted matrix, a frozen base in bf16 or in 4-bit NF4 (Dettmers et al. 2023).

Left out: the logits and loss of the LM head, temporary buffers, the CUDA context and
allocator fragmentation. Explained in chapter 9 (*Memory and speed*).
"""

from __future__ import annotations

import math

from llmmath.config import ConfigError, ModelConfig, check_positive_int
from llmmath.counting import count_params
from llmmath.memory import activation_bytes_per_layer

#: Optimizers: ``adamw`` (torch.optim.AdamW: exp_avg and exp_avg_sq, each the size of
#: the parameter), ``adam8bit`` (bitsandbytes' Adam8bit), ``adafactor``
#: (torch.optim.Adafactor / transformers' Adafactor with ``beta1=None``), ``sgd``
#: (torch.optim.SGD with momentum: one momentum_buffer).
OPTIMIZERS = ("adamw", "adam8bit", "adafactor", "sgd")
#: Precisions: bytes of (weights, gradients, fp32 master copy, optimizer state
#: element) per parameter. ``mixed``: bf16 weights and gradients, an fp32 master copy
#: the optimizer updates, fp32 state (ZeRO, Sec. 3.1: 2 + 2 + 12 with Adam). ``bf16``:
#: everything in bf16 (torch's optimizers keep state in the parameter's dtype).
PRECISIONS = {"fp32": (4, 4, 0, 4), "mixed": (2, 2, 4, 4), "bf16": (2, 2, 0, 2)}
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
#: block of ``ADAM8BIT_BLOCK`` elements (``Optimizer2State.init_state``: 256 in
#: bitsandbytes 0.4x's code; 2048 in the paper, Dettmers et al. 2022, Sec. 2).
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
        raise ConfigError(f"{name} must be one of {', '.join(allowed)}; got {shown!r}")


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
        _check("a LoRA target", t, tuple(LORA_TARGETS))
    if len(set(items)) != len(items):
        raise ConfigError(f"LoRA targets must each be given once; got {items}")
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


def frozen_base_bytes(cfg: ModelConfig, method: str) -> int:
    """Bytes of the frozen base of LoRA (bf16) or QLoRA (every 2-D matrix of the blocks
    in NF4, `nf4_bytes` per tensor; embedding, LM head, norms and biases in bf16)."""
    total = 0
    for name, shape, n in parameter_tensors(cfg):
        if (
            method == "qlora"
            and len(shape) == 2
            and not name.startswith(("embed_", "lm_head"))
        ):
            total += n * nf4_bytes(math.prod(shape))
        else:
            total += 2 * n * math.prod(shape)
    return total


def optimizer_state_bytes(
    cfg: ModelConfig,
    optimizer: str = "adamw",
    precision: str = "mixed",
    method: str = "full",
    lora_rank: int = 16,
    targets="q,k,v,o,gate,up,down",
) -> dict[str, int]:
    """Optimizer state in bytes, item by item, for the trainable tensors.

    Per trainable tensor of n elements, s bytes per state element (`PRECISIONS`):
    AdamW 2·s·n (first and second moments); SGD with momentum s·n; Adafactor s·(rows +
    columns) for a matrix (row and column statistics of the second moment, over
    all leading dimensions as torch.optim.Adafactor keeps them: ∏shape[:-1] +
    ∏shape[:-2]·shape[-1]) and s·n for a vector, no first moment (Shazeer & Stern 2018,
    Sec. 3-4; transformers' default ``beta1=None``); 8-bit Adam 2·n bytes plus
    2·4·⌈n/256⌉ of fp32 absmax when n ≥ 4096, else 2·4·n (`ADAM8BIT_BLOCK`). Mixed
    precision adds the fp32 master copy, 4 bytes per trainable parameter.
    Left out: torch's per-tensor ``step`` counters (AdamW, Adafactor: one fp32 scalar
    each) and bitsandbytes' shared quantization maps (2 × 256 fp32).

    Raises:
        ConfigError: an unknown optimizer, precision or method, or a bad LoRA option.
    """
    _check("optimizer", optimizer, OPTIMIZERS)
    _check("precision", precision, tuple(PRECISIONS))
    _check("method", method, METHODS)
    _, _, master, s = PRECISIONS[precision]
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


def activation_bytes(
    cfg: ModelConfig,
    seq_len: int,
    batch: int = 1,
    checkpointing: str = "none",
    precision: str = "mixed",
    flash_attention: bool = True,
) -> dict[str, int]:
    """Activation bytes of the L decoder blocks kept for the backward pass, by item.

    ``none``: L × `llmmath.memory.activation_bytes_per_layer` (Korthikanti et al. 2022,
    Sec. 4.1, sized to the config), doubled in fp32 (its fp32 softmax statistics
    excepted). ``selective``: the same without the attention's s²-sized softmax output,
    recomputed in the backward pass (Sec. 5; with FlashAttention there is none to
    drop). ``full``: each layer's input, b·t·H elements per layer (Sec. 5), plus one
    layer's activations rebuilt during its backward pass (the peak). Sized as
    `activation_bytes_per_layer` sizes a block: for MLA it counts d_h-wide heads, not
    the latent layout, and for MoE k + S experts' full activations per token.

    Raises:
        ConfigError: an unknown option, or a size that is not a positive integer.
    """
    _check("checkpointing", checkpointing, CHECKPOINTING)
    _check("precision", precision, tuple(PRECISIONS))
    scale = 2 if precision == "fp32" else 1
    layer = activation_bytes_per_layer(
        cfg, seq_len, batch, flash_attention=flash_attention
    )
    layer = {
        k: v * (1 if k.startswith("softmax statistics") else scale)
        for k, v in layer.items()
    }
    L = cfg.num_hidden_layers
    if checkpointing == "full":
        return {
            "layer inputs": L * 2 * scale * batch * seq_len * cfg.hidden_size,
            "one layer recomputed": sum(layer.values()),
        }
    if checkpointing == "selective":
        layer.pop("softmax output", None)
    return {f"{k}, {L} layers": L * v for k, v in layer.items()}


def training_memory(
    cfg: ModelConfig,
    optimizer: str = "adamw",
    precision: str = "mixed",
    checkpointing: str = "none",
    batch: int = 1,
    seq_len: int = 4096,
    method: str = "full",
    lora_rank: int = 16,
    targets="q,k,v,o,gate,up,down",
    flash_attention: bool = True,
) -> dict[str, int]:
    """Bytes of one training step's memory: ``"weights"``, ``"gradients"``,
    ``"optimizer state"`` (`optimizer_state_bytes`, fp32 master copy included) and
    ``"activations"`` (`activation_bytes`). Full fine-tuning: weights and gradients of
    every parameter in the precision's dtype (`PRECISIONS`), except that
    DeepSeek-V3's router score bias, set by a rule rather than by gradient
    (DeepSeek-V3 report, Sec. 2.1.2), has neither gradient nor optimizer state.
    LoRA/QLoRA: the frozen base (`frozen_base_bytes`) plus the adapters in the
    precision's dtype; gradients and state for the adapters only.

    Raises:
        ConfigError: an unknown option, or a size or rank that is not a positive
        integer.
    """
    state = optimizer_state_bytes(cfg, optimizer, precision, method, lora_rank, targets)
    w, g, _, _ = PRECISIONS[precision]
    trainable = trainable_params(cfg, method, lora_rank, targets)
    if method == "full":
        base = w * (count_params(cfg).total - trainable)  # DeepSeek-V3's score bias
    else:
        base = frozen_base_bytes(cfg, method)
    acts = activation_bytes(
        cfg, seq_len, batch, checkpointing, precision, flash_attention
    )
    return {
        "weights": base + w * trainable,
        "gradients": g * trainable,
        "optimizer state": sum(state.values()),
        "activations": sum(acts.values()),
    }

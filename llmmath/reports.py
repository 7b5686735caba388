"""The reports the command line, the explorers and the calculator page share.

One function per question, state in and a JSON-ready dict (or the text table) out:
`params_report` and `format_table` (``params``), `kv_cache_report` (``kv-cache``),
`flops_report` (``flops``), `memory_report` (``memory`` and the calculator) and
`train_memory_report` (``train-memory`` and the memory explorer), with `resolve`,
which turns a preset name, a ``config.json`` path or a hub id into a config.

The layer between the counting modules and their front ends: it imports the data and
counting modules (`llmmath.config`, `llmmath.presets`, `llmmath.counting`; the others
inside the report that needs them), never `llmmath.cli`, the explorers or the widgets,
so that no import circle runs through it. Standard library only, as the explorers need
on Pyodide.
"""

from __future__ import annotations

import os
import re

from llmmath import presets
from llmmath.config import ConfigError, ModelConfig
from llmmath.counting import GROUPS, NON_EMBEDDING_CONVENTION, ParamCount, count_params
from llmmath.messages import N_, current, ljust, rjust, translated, width
from llmmath.messages import gettext as _

#: Weight formats of ``memory --weights`` (`llmmath.quantization.WEIGHT_FORMATS` and
#: bf16).
WEIGHTS = ("bf16", "fp8", "int8", "int4")
#: The help of two options every command shares (`llmmath.cli`, `llmmath.cli.serving`),
#: marked for translation: shown as ``_(JSON_HELP)``.
REVISION_HELP = N_("hub id only: branch, tag or commit hash (default main)")
JSON_HELP = N_("print one JSON object")

# --- the labels of rows that other modules write, in the reader's language ---------

#: The parameter groups (`llmmath.counting.GROUPS`) as a reader reads them.
GROUP_LABELS = {
    "embedding": N_("embedding"),
    "attention": N_("attention"),
    "ffn": N_("FFN"),
    "norm": N_("norms"),
    "lm_head": N_("LM head"),
}

#: One colour per parameter group, used by the chapters' figures (`llmmath.plots`) and
#: the explorers.
GROUP_COLORS = {
    "embedding": "#4c72b0",
    "attention": "#dd8452",
    "ffn": "#55a868",
    "norm": "#c44e52",
    "lm_head": "#8172b3",
}


#: Row labels that other modules write (`llmmath.training.training_peak`'s items and
#: moments, `llmmath.training.training_memory`'s parts at rest,
#: `llmmath.parallel.Plan`'s model state and step times), translated where shown.
ITEM_LABELS = (
    N_("weights"),
    N_("gradients"),
    N_("optimizer state"),
    N_("activations"),
    N_("activations of the layers"),
    N_("head"),
    N_("logits and loss"),
    N_("fp32 logits (the loss's copy)"),
    N_("a chunk of logits (the fused loss)"),
    N_("gradients so far"),
    N_("gradients of the logits (fp32, two)"),
    N_("logits held by the output"),
    N_("gradient of the logits"),
    N_("gradient of the hidden state"),
    N_("activations not yet freed"),
    N_("the layer's gradient temporaries"),
    N_("the norm's gradient temporaries"),
    N_("optimizer temporaries"),
    N_("forward: the loss"),
    N_("backward: the loss"),
    N_("backward: the LM head"),
    N_("backward: the final norm"),
    N_("optimizer step"),
    N_("gradients (bf16)"),
    N_("optimizer (fp32 master, m, v)"),
    N_("compute"),
    N_("pipeline bubble"),
    N_("tensor parallel"),
    N_("pipeline sends"),
    N_("expert all-to-all"),
    N_("data parallel (exposed)"),
)
#: The rows of `llmmath.memory`'s and `llmmath.quantization`'s weights, item by item.
ITEM_LABELS += (
    N_("quantized weights"),
    N_("scales"),
    N_("zero points"),
    N_("embedding and LM head"),
    N_("norms and biases"),
)
#: Those with numbers in them: the English pattern and its message.
ITEM_PATTERNS = (
    (r"weights \((?P<format>[^)]+)\)", N_("weights ({format})")),
    (r"gradients \((?P<format>[^)]+)\)", N_("gradients ({format})")),
    (r"backward: layer (?P<i>\d+)", N_("backward: layer {i}")),
)


def item_label(label: str) -> str:
    """A row label written by another module, in the current language (as it is when
    the catalogue does not know it)."""
    if label in ITEM_LABELS:
        return _(label)
    for pattern, message in ITEM_PATTERNS:
        found = re.fullmatch(pattern, label)
        if found:
            return _(message).format(**found.groupdict())
    return label


def resolve(model: str, revision: str | None = None) -> tuple[str, ModelConfig]:
    """A path to a ``config.json``, a preset name or a hub id → (display name, config).

    Precedence: a file that exists wins; a name ending in ``.json`` is a file; a name
    with a ``/`` is a hub id ``org/name``, read from the local Hugging Face cache at
    ``revision`` (default main; `llmmath.hub`); any other name is a preset.

    Raises:
        ConfigError: no such file, preset or cached model; an invalid hub id; a
        ``revision`` given with anything but a hub id; or the config is invalid.
    """
    is_file = os.path.exists(model) or model.endswith(".json")
    if not is_file and ("/" in model or os.sep in model):
        from llmmath import hub

        shown = model if revision is None else f"{model}@{revision}"
        return shown, hub.load_config(model, revision)
    if revision is not None:
        raise ConfigError(
            _("--revision applies to a hub id (org/name), not to {model}").format(
                model=repr(model)
            )
        )
    if is_file:
        return model, ModelConfig.from_hf_config(model)
    return presets.get(model).title, presets.load(model)


def format_table(name: str, counts: ParamCount) -> str:
    """The human-readable breakdown: tensor, formula, exact count, share of total, in
    the reader's language (`llmmath.messages`; tensor names and formulas as they
    are), its columns aligned by the width a terminal gives each character."""
    total = counts.total
    rows = [(t.name, t.formula, counts.total_of(t)) for t in counts.tensors]
    if counts.tie_word_embeddings:
        rows.append(("lm_head.weight", _("tied to embed_tokens"), 0))

    def share(c: int) -> str:
        return (
            f"{c / total:>7.2%}"
            if c == 0 or c / total >= 1e-4
            else f"{c / total:>7.4%}"
        )

    w_name = max(width(r[0]) for r in rows) + 2
    w_form = max(width(r[1]) for r in rows) + 2
    parameters, share_head = rjust(_("parameters"), 17), rjust(_("share"), 7)

    def row(label: str, count: int, formula: str = "") -> str:
        return f"{ljust(label, w_name)}{ljust(formula, w_form)}{count:>17,}"

    tensor, formula, group = _("tensor"), _("formula"), _("group")
    lines = [
        _("{name}: {total} parameters ({billions} B, 1 B = 10^9)").format(
            name=name, total=f"{total:,}", billions=f"{total / 1e9:.3f}"
        ),
        "",
        f"{ljust(tensor, w_name)}{ljust(formula, w_form)}{parameters}  {share_head}",
    ]
    lines += [f"{row(n, c, f)}  {share(c)}" for n, f, c in rows]
    lines += ["", f"{ljust(group, w_name)}{' ' * w_form}{parameters}  {share_head}"]
    english = current() == "en"  # English keeps the groups' own keys
    lines += [
        f"{row(g if english else _(GROUP_LABELS[g]), c)}  {share(c)}"
        for g, c in counts.by_group().items()
        if g in GROUPS
    ]
    lines += [
        "",
        row(_("per layer"), counts.per_layer),
        row(_("non-embedding"), counts.non_embedding),
        *(
            [row(_("active per token (MoE)"), counts.active)]
            if counts.active != total
            else []
        ),
        row(_("total"), total),
        *([row(_("MTP module (not in total)"), counts.mtp)] if counts.mtp else []),
        "",
        translated(NON_EMBEDDING_CONVENTION),
    ]
    return "\n".join(lines)


def params_report(name: str, cfg: ModelConfig) -> dict:
    """What ``params --json`` prints: the model's name and `ParamCount.as_dict`
    (parameters; ``"total"`` is the exact count, ``"active"`` the parameters one token
    uses)."""
    return {"model": name, **count_params(cfg).as_dict()}


def kv_cache_report(
    name: str,
    cfg: ModelConfig,
    seq_len: int,
    batch: int = 1,
    dtype: str = "bf16",
    layout: str = "latent",
    between_steps: bool = False,
) -> dict:
    """What ``kv-cache --json`` prints: ``"bytes"`` for the whole batch and
    ``"bytes_per_token"`` of one sequence (`llmmath.kvcache`), with the sizes they
    follow from. ``layout`` (``"latent"`` or ``"expanded"``) matters only for
    multi-head latent attention; with it the report adds ``"latent_values"`` (d_c +
    d_r) and ``"expanded_values"`` per layer and token. ``"sliding_window_tokens"``
    says what a sliding layer counts: ``"W (during the attention call)"``, or with
    ``between_steps`` ``"W - 1 (between steps, as transformers keeps them)"``; None
    for a model without a sliding window.

    Raises:
        ConfigError: an unknown ``dtype`` or ``layout``, or a length or batch that is
        not a positive int.
    """
    from llmmath.kvcache import (
        cached_tokens,
        cached_tokens_per_layer,
        kv_cache_bytes,
        kv_cache_bytes_per_token,
        kv_values_per_token_per_layer,
    )
    from llmmath.units import dtype_bits

    dtype_bits(dtype)  # refuse an unknown dtype first
    report = {
        "model": name,
        "bytes": kv_cache_bytes(cfg, batch, seq_len, dtype, layout, between_steps),
        "bytes_per_token": kv_cache_bytes_per_token(cfg, dtype, layout),
        "batch": batch,
        "seq_len": seq_len,
        "cached_tokens": cached_tokens(cfg, seq_len, between_steps),
        "sliding_window": cfg.sliding_window,
        "sliding_window_tokens": _window_tokens(cfg, between_steps),
        "dtype": dtype,
        "num_hidden_layers": cfg.num_hidden_layers,
        "num_key_value_heads": cfg.num_key_value_heads,
        "head_dim": cfg.head_dim,
        "formula": N_("2 * L * batch * cached_tokens * n_kv * d_h * bytes_per_element"),
        "layout": layout,
    }
    if cfg.layer_types is not None:
        report["cached_tokens_per_layer"] = cached_tokens_per_layer(
            cfg, seq_len, between_steps
        )
        report["formula"] = N_(
            "2 * batch * sum over layers of cached_tokens[layer] * n_kv * d_h * "
            "bytes_per_element"
        )
    if cfg.is_mla:
        report["latent_values"] = kv_values_per_token_per_layer(cfg, "latent")
        report["expanded_values"] = kv_values_per_token_per_layer(cfg, "expanded")
        report["formula"] = (
            N_(
                "L * batch * cached_tokens * (kv_lora_rank + qk_rope_head_dim) * "
                "bytes_per_element"
            )
            if layout == "latent"
            else N_(
                "L * batch * cached_tokens * n_h * (qk_nope_head_dim + "
                "qk_rope_head_dim + v_head_dim) * bytes_per_element"
            )
        )
    return report


def _window_tokens(cfg: ModelConfig, between_steps: bool) -> str | None:
    """What a sliding layer of ``cfg`` counts (`llmmath.kvcache`, *Which W*)."""
    if cfg.sliding_window is None:
        return None
    if between_steps:
        return N_("W - 1 (between steps, as transformers keeps them)")
    return N_("W (during the attention call)")


def _number(value):
    """An exact Fraction as an int when whole, else a float (JSON has no fractions)."""
    return int(value) if value.denominator == 1 else float(value)


def _number(value):
    """An exact Fraction as an int when whole, else a float (JSON has no fractions)."""
    return int(value) if value.denominator == 1 else float(value)


def flops_report(
    name: str, cfg: ModelConfig, seq_len: int, attention: str = "causal"
) -> dict:
    """What ``flops --json`` prints: ``"forward_flops_per_token"`` (FLOPs) and its parts
    (`llmmath.flops.forward_flops_per_token`), with the literature's conventions."""
    from fractions import Fraction

    from llmmath.flops import CONVENTIONS, forward_flops_per_token

    f = forward_flops_per_token(cfg, seq_len, attention)
    averaging = (
        N_("full: every token against all T keys, 4*L*T*n_h*d_h per token")
        if attention == "full"
        else N_(
            "causal: token i (1-based) reads i keys (at most sliding_window), "
            "averaged over the T positions of the sequence: 4*L*n_h*d_h*pairs/T"
        )
    )
    return {
        "model": name,
        "seq_len": seq_len,
        "attention": attention,
        "forward_flops_per_token": _number(f.total),
        "forward_flops_per_token_exact": str(f.total),
        "parts": {
            "attention_projections": f.parts["attention"],
            "ffn": f.parts["ffn"],
            "lm_head": f.parts["lm_head"],
            "attention_qk_av": _number(f.attention),
        },
        "matmul_flops_per_token": f.matmul,
        "averaging": averaging,
        "counted": "2 x every matmul weight (LM head included, tied or not) + QK^T "
        "and AV; the embedding lookup, biases, norms, activations and softmax are not "
        "counted",
        "conventions": {
            k: _number(Fraction(fn(cfg, seq_len))) for k, fn in CONVENTIONS.items()
        },
    }


def memory_report(
    name: str,
    cfg: ModelConfig,
    weights: str = "bf16",
    group_size: int | None = None,
    kv_dtype: str = "bf16",
    batch: int = 1,
    seq_len: int = 4096,
    gpu: str | None = None,
) -> dict:
    """What ``memory --json`` prints, and what the calculator page shows:
    ``"weight_bytes"`` (`llmmath.quantization.quantized_bytes`: block matrices in
    ``weights`` with a bf16 scale per group, embedding, LM head and norms in bf16),
    ``"kv_cache_bytes"``, ``"total_bytes"``, ``"fits"`` (total ≤ ``"gpu_bytes"``, the
    GPU's capacity by the catalogue's one rule, `llmmath.gpus`), and
    `llmmath.memory.serving_fit`'s ``"max_batch"`` (of ``seq_len``-token sequences)
    and ``"max_seq_len"`` (for ``batch`` sequences, at most the model's
    ``"context_limit"``). Bytes are exact ints. ``gpu`` (any name
    `llmmath.gpus.match_gpu` reads) defaults to `llmmath.gpus.DEFAULT_GPU`;
    ``"gpu"`` is its catalogue name, and ``"gpu_note"`` says why when the family rule
    picked it among several.

    Raises:
        ConfigError: an unknown format, dtype or GPU, a group size for bf16, or a size
        that is not a positive integer.
    """
    from llmmath.gpus import DEFAULT_GPU, match_gpu
    from llmmath.memory import serving_fit
    from llmmath.quantization import quantized_bytes, weight_format

    card, note = match_gpu(DEFAULT_GPU if gpu is None else gpu)
    fmt = weight_format(weights, group_size)
    items = quantized_bytes(cfg, fmt)
    fit = serving_fit(
        cfg,
        card.memory,
        batch,
        seq_len,
        cache_dtype=kv_dtype,
        weights=sum(items.values()),
    )
    cache, total = fit.cache_bytes, fit.total_bytes
    return {
        "model": name,
        "weights": weights,
        "group_size": fmt.group_size if fmt else None,
        "weight_bytes": sum(items.values()),
        "weight_items": items,
        "kv_dtype": kv_dtype,
        "batch": batch,
        "seq_len": seq_len,
        "kv_cache_bytes": cache,
        "total_bytes": total,
        "gpu": card.name,
        "gpu_bytes": card.memory,
        "fits": card.fits(total),
        "max_batch": fit.max_batch,
        "max_seq_len": fit.max_seq_len,
        "context_limit": fit.context_limit,
        "left_out": "activations, the CUDA context and allocator fragmentation",
        **({"gpu_note": note} if note else {}),
    }


# --- train-memory: the command's and the memory explorer's report ----------

#: The LoRA targets of ``train-memory --lora-targets`` by default.
ALL_TARGETS = "q,k,v,o,gate,up,down"
#: The options of ``train-memory`` (`llmmath.cli.training`) and of the memory
#: explorer: their choices and defaults, `llmmath.training`'s (a test checks they
#: agree), spelled here so that building the parser imports no counting code.
CHOICES = {
    "--optimizer": (("adamw", "adam8bit", "adafactor", "sgd"), "adamw"),
    "--optimizer-impl": (("for-loop", "foreach", "fused"), "for-loop"),
    "--precision": (("bf16", "amp", "mixed", "fp32"), "bf16"),
    "--checkpointing": (("none", "selective", "full"), "none"),
    "--attention": (("sdpa", "eager"), "sdpa"),
    "--method": (("full", "lora", "qlora"), "full"),
    "--adapter-dtype": (("fp32", "bf16"), "fp32"),
    "--loss": (("full", "chunked"), "full"),
}
#: The largest batch `train_memory_report` looks for with ``gpu``.
MAX_BATCH = 1 << 20


def train_memory_report(
    name: str,
    cfg: ModelConfig,
    optimizer: str = "adamw",
    precision: str = "bf16",
    checkpointing: str = "none",
    attention: str | None = None,
    method: str = "full",
    lora_rank: int | None = None,
    lora_targets: str | None = None,
    batch: int = 1,
    seq_len: int = 4096,
    adapter_dtype: str | None = None,
    loss: str = "full",
    optimizer_impl: str = "for-loop",
    gpu: str | None = None,
) -> dict:
    """What ``train-memory --json`` prints: ``"peak_bytes"`` (the peak of
    ``torch.cuda.max_memory_allocated()`` over one step), ``"peak_moment"`` and
    ``"peak_items"`` (the bytes held then, by item), ``"items"`` (weights,
    gradients, optimizer state, activations at rest; exact int bytes) with their
    ``"total_bytes"``, the optimizer's and the activations' own items, and
    ``"trainable_params"``. With ``gpu`` (a name `llmmath.gpus.match_gpu` reads):
    ``"gpu"`` (its catalogue name; ``"gpu_note"`` when the family rule picked it),
    ``"gpu_bytes"``, ``"fits"`` (peak ≤ the GPU's memory) and
    ``"max_batch"``, the largest batch whose peak fits (0 if none).

    Raises:
        ConfigError: an unknown option or GPU, a LoRA option without ``method`` lora
        or qlora, or a size that is not a positive integer.
    """
    from llmmath import training
    from llmmath.activations import default_attention

    if attention is None:
        attention = default_attention(cfg)
    if method == "full" and (
        lora_rank is not None or lora_targets is not None or adapter_dtype is not None
    ):
        raise ConfigError(
            _(
                "--lora-rank, --lora-targets and --adapter-dtype apply to --method "
                "lora/qlora"
            )
        )
    rank = 16 if lora_rank is None else lora_rank
    targets = ALL_TARGETS if lora_targets is None else lora_targets
    adapters = "fp32" if adapter_dtype is None else adapter_dtype

    def peak(b: int) -> training.TrainingPeak:
        return training.training_peak(
            cfg, optimizer, precision, checkpointing, b, seq_len, method, rank,
            targets, attention, adapters, loss, optimizer_impl,
        )  # fmt: skip

    top = peak(batch)
    items = training.training_memory(
        cfg, optimizer, precision, checkpointing, batch, seq_len, method, rank,
        targets, attention, adapters, loss,
    )  # fmt: skip
    state = training.optimizer_state_bytes(
        cfg, optimizer, precision, method, rank, targets, adapters
    )
    acts = training.activation_bytes(
        cfg, seq_len, batch, checkpointing, precision, attention, method, rank,
        targets, adapters, loss,
    )  # fmt: skip
    lora = method != "full"
    report = {
        "model": name,
        "optimizer": optimizer,
        "optimizer_impl": optimizer_impl,
        "precision": precision,
        "checkpointing": checkpointing,
        "attention": attention,
        "method": method,
        "lora_rank": rank if lora else None,
        "lora_targets": targets if lora else None,
        "adapter_dtype": adapters if lora else None,
        "loss": loss,
        "batch": batch,
        "seq_len": seq_len,
        "trainable_params": training.lora_params(cfg, rank, targets)
        if lora
        else training.trainable_params(cfg),
        "peak_bytes": top.peak_bytes,
        "peak_moment": top.moment,
        "peak_items": top.items,
        "items": items,
        "total_bytes": sum(items.values()),
        "optimizer_items": state,
        "activation_items": acts,
        "left_out": "the CUDA context, cuBLAS workspaces and allocator "
        "fragmentation (not in torch.cuda.max_memory_allocated)",
    }
    if gpu is not None:
        from llmmath.gpus import match_gpu

        card, note = match_gpu(gpu)
        capacity = card.memory
        report.update(
            gpu=card.name,
            **({"gpu_note": note} if note else {}),
            gpu_bytes=capacity,
            fits=top.peak_bytes <= capacity,
            max_batch=_largest_batch(lambda b: peak(b).peak_bytes <= capacity),
        )
    return report


def _largest_batch(fits) -> int:
    """The largest b ≤ `MAX_BATCH` with ``fits(b)`` (the peak grows with b), else 0."""
    if not fits(1):
        return 0
    low, high = 1, 2
    while high <= MAX_BATCH and fits(high):
        low, high = high, 2 * high
    high = min(high, MAX_BATCH + 1)
    while high - low > 1:  # fits(low), not fits(high) (or past MAX_BATCH)
        mid = (low + high) // 2
        low, high = (mid, high) if fits(mid) else (low, mid)
    return low

"""The reports the command line, the explorers and the calculator page share.

One function per question, state in and a JSON-ready dict (or the text table) out:
`params_report` and `format_table` (``params``), `kv_cache_report` (``kv-cache``),
`flops_report` (``flops``) and `memory_report` (``memory`` and the calculator), with
`resolve`, which turns a preset name, a ``config.json`` path or a hub id into a config.

The layer between the counting modules and their front ends: it imports the data and
counting modules (`llmmath.config`, `llmmath.presets`, `llmmath.counting`; the others
inside the report that needs them), never `llmmath.cli`, the explorers or the widgets,
so that no import circle runs through it. Standard library only, as the explorers need
on Pyodide.
"""

from __future__ import annotations

import os

from llmmath import presets
from llmmath.config import ConfigError, ModelConfig
from llmmath.counting import GROUPS, NON_EMBEDDING_CONVENTION, ParamCount, count_params

#: Weight formats of ``memory --weights`` (`llmmath.quantization.WEIGHT_FORMATS` and
#: bf16).
WEIGHTS = ("bf16", "fp8", "int8", "int4")


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
            f"--revision applies to a hub id (org/name), not to {model!r}"
        )
    if is_file:
        return model, ModelConfig.from_hf_config(model)
    return presets.get(model).title, presets.load(model)


def format_table(name: str, counts: ParamCount) -> str:
    """The human-readable breakdown: tensor, formula, exact count, share of total."""
    total = counts.total
    rows = [(t.name, t.formula, counts.total_of(t)) for t in counts.tensors]
    if counts.tie_word_embeddings:
        rows.append(("lm_head.weight", "tied to embed_tokens", 0))

    def share(c: int) -> str:
        return (
            f"{c / total:>7.2%}"
            if c == 0 or c / total >= 1e-4
            else f"{c / total:>7.4%}"
        )

    w_name = max(len(r[0]) for r in rows) + 2
    w_form = max(len(r[1]) for r in rows) + 2
    lines = [
        f"{name}: {total:,} parameters ({total / 1e9:.3f} B, 1 B = 10^9)",
        "",
        f"{'tensor':<{w_name}}{'formula':<{w_form}}{'parameters':>17}  {'share':>7}",
    ]
    lines += [f"{n:<{w_name}}{f:<{w_form}}{c:>17,}  {share(c)}" for n, f, c in rows]
    lines += ["", f"{'group':<{w_name}}{'':<{w_form}}{'parameters':>17}  {'share':>7}"]
    lines += [
        f"{g:<{w_name}}{'':<{w_form}}{c:>17,}  {share(c)}"
        for g, c in counts.by_group().items()
        if g in GROUPS
    ]
    lines += [
        "",
        f"{'per layer':<{w_name}}{'':<{w_form}}{counts.per_layer:>17,}",
        f"{'non-embedding':<{w_name}}{'':<{w_form}}{counts.non_embedding:>17,}",
        *(
            [f"{'active per token (MoE)':<{w_name}}{'':<{w_form}}{counts.active:>17,}"]
            if counts.active != total
            else []
        ),
        f"{'total':<{w_name}}{'':<{w_form}}{total:>17,}",
        *(
            [f"{'MTP module (not in total)':<{w_name}}{'':<{w_form}}{counts.mtp:>17,}"]
            if counts.mtp
            else []
        ),
        "",
        NON_EMBEDDING_CONVENTION,
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
        "formula": "2 * L * batch * cached_tokens * n_kv * d_h * bytes_per_element",
        "layout": layout,
    }
    if cfg.layer_types is not None:
        report["cached_tokens_per_layer"] = cached_tokens_per_layer(
            cfg, seq_len, between_steps
        )
        report["formula"] = (
            "2 * batch * sum over layers of cached_tokens[layer] * n_kv * d_h * "
            "bytes_per_element"
        )
    if cfg.is_mla:
        report["latent_values"] = kv_values_per_token_per_layer(cfg, "latent")
        report["expanded_values"] = kv_values_per_token_per_layer(cfg, "expanded")
        report["formula"] = (
            "L * batch * cached_tokens * (kv_lora_rank + qk_rope_head_dim) * "
            "bytes_per_element"
            if layout == "latent"
            else "L * batch * cached_tokens * n_h * (qk_nope_head_dim + "
            "qk_rope_head_dim + v_head_dim) * bytes_per_element"
        )
    return report


def _window_tokens(cfg: ModelConfig, between_steps: bool) -> str | None:
    """What a sliding layer of ``cfg`` counts (`llmmath.kvcache`, *Which W*)."""
    if cfg.sliding_window is None:
        return None
    if between_steps:
        return "W - 1 (between steps, as transformers keeps them)"
    return "W (during the attention call)"


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
        "full: every token against all T keys, 4*L*T*n_h*d_h per token"
        if attention == "full"
        else "causal: token i (1-based) reads i keys (at most sliding_window), "
        "averaged over the T positions of the sequence: 4*L*n_h*d_h*pairs/T"
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

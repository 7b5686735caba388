"""Chapter 7b (*Multi-head latent attention*): the cache explorer, `mla`: values
cached per token and layer, and bytes, for MHA, GQA, MQA and MLA.
"""

from __future__ import annotations

from collections.abc import Mapping

from llmmath import presets
from llmmath.config import ConfigError
from llmmath.explorers.controls import (
    FORMATS,
    PALETTE,
    View,
    _choice,
    _error_view,
    _int,
    _number,
    _preset,
    _preset_select,
    _select,
    divisors,
    note,
    table,
)
from llmmath.messages import gettext as _


def mla(state: Mapping) -> View:
    """Chapter 7b's cache explorer: a preset's L, n_h and head widths, a GQA n_kv
    (divisors of n_h), MLA's d_c and d_r, context, batch and number format → values
    cached per token and layer and bytes for MHA, GQA, MQA and MLA
    (`llmmath.kvcache.attention_cache_values`, DeepSeek-V2 report Table 1)."""
    from llmmath.kvcache import attention_cache_values
    from llmmath.units import bytes_of, human_bytes

    state = {"preset": "deepseek-v3", "seq_len": 32768, "batch": 1, **state}
    state.setdefault("dtype", "bf16")
    try:
        cfg = presets.load(_preset(state, "deepseek-v3"))
    except ConfigError as e:
        return _error_view("mla", state, [_preset_select()], e)
    values = attention_cache_values(cfg)
    defaults = {
        "num_key_value_heads": values["GQA"] // values["MQA"],
        "kv_lora_rank": cfg.kv_lora_rank if cfg.is_mla else 4 * cfg.head_dim,
        "qk_rope_head_dim": (
            cfg.qk_rope_head_dim if cfg.is_mla else max(1, cfg.head_dim // 2)
        ),
    }
    if state.get("loaded") != state["preset"]:  # a new preset brings its own sizes
        state.update(defaults, loaded=state["preset"])
    for name, value in defaults.items():
        state.setdefault(name, value)
    controls = [
        _preset_select(),
        _number("seq_len", _("context"), 1, 10**8),
        _number("batch", _("batch"), 1, 10**6),
        _select("dtype", _("cache format"), FORMATS),
        _select("num_key_value_heads", "GQA n_kv", divisors(cfg.num_attention_heads)),
        _number("kv_lora_rank", "MLA d_c", 1, 10**6),
        _number("qk_rope_head_dim", "MLA d_r", 1, 10**5),
    ]
    try:
        seq_len = _int(state, "seq_len", 1, 10**8)
        batch = _int(state, "batch", 1, 10**6)
        dtype = _choice(state, "dtype", FORMATS, "bf16")
        values = attention_cache_values(
            cfg,
            _int(state, "num_key_value_heads", 1, cfg.num_attention_heads),
            _int(state, "kv_lora_rank", 1, 10**6),
            _int(state, "qk_rope_head_dim", 1, 10**5),
        )
    except ConfigError as e:
        return _error_view("mla", state, controls, e)
    L = cfg.num_hidden_layers
    rows, items = [], []
    for i, (name, per_layer) in enumerate(values.items()):
        per_token = bytes_of(L * per_layer, dtype)
        whole = bytes_of(L * per_layer * seq_len * batch, dtype)
        ratio = values["MHA"] / per_layer
        rows.append(
            [
                name,
                f"{per_layer:,}",
                f"{per_token:,}",
                f"{whole:,} = {human_bytes(whole)}",
                f"{ratio:,.1f}×",
            ]
        )
        items.append(
            {
                "label": name,
                "value": per_token,
                "color": PALETTE[i],
                "text": _("{n} B per token").format(n=f"{per_token:,}"),
            }
        )
    headers = [
        _("attention"),
        _("values per token and layer"),
        _("bytes per token ({n} layers, {dtype})").format(n=L, dtype=dtype),
        _("cache, {batch} × {t} tokens").format(batch=f"{batch:,}", t=f"{seq_len:,}"),
        _("smaller than MHA by"),
    ]
    text = _(
        "{heads} heads, keys {keys} and values {values} wide; no sliding window "
        "applied."
    ).format(
        heads=cfg.num_attention_heads,
        keys=cfg.head_dim,
        values=values["MQA"] - cfg.head_dim,
    )
    return {
        "kind": "mla",
        "state": state,
        "controls": controls,
        "blocks": [
            table(rows, headers),
            {"type": "bars", "title": _("bytes per token"), "items": items},
            note(text),
        ],
    }

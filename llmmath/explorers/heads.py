"""Chapter 3 (*Attention: MHA, GQA and MQA*): the attention explorer, `attention`: H,
n_h, n_kv and t beside the multi-head twin.
"""

from __future__ import annotations

from collections.abc import Mapping

from llmmath import presets
from llmmath.config import ConfigError, ModelConfig
from llmmath.counting import count_params
from llmmath.explorers.controls import (
    View,
    _error_view,
    _int,
    _number,
    _preset,
    _select,
    divisors,
    table,
)
from llmmath.messages import gettext as _


def attention_rows(cfg: ModelConfig, seq_len: int, dtype: str = "bf16") -> list:
    """(label, value) rows of the attention explorer for one configuration: d_h and g,
    attention parameters of a layer and of the model, KV cache bytes per token,
    attention FLOPs per token at ``seq_len`` (all pairs and causal), and the QKᵀ + AV
    share."""
    from llmmath.flops import attention_flops
    from llmmath.kvcache import kv_cache_bytes_per_token

    counts = count_params(cfg)
    per_layer = sum(
        t.numel for t in counts.tensors if t.group == "attention" and t.per_layer
    )
    full = attention_flops(cfg, seq_len)
    causal = attention_flops(cfg, seq_len, causal=True)
    layers = cfg.num_hidden_layers
    return [
        ("d_h, g", f"{cfg.head_dim}, {cfg.group_size}"),
        (_("attention parameters, one layer"), f"{per_layer:,}"),
        (
            _("attention parameters, {n} layers").format(n=layers),
            f"{counts.by_group()['attention']:,}",
        ),
        (
            _("KV cache bytes per token ({dtype})").format(dtype=dtype),
            f"{kv_cache_bytes_per_token(cfg, dtype):,}",
        ),
        (
            _("attention FLOPs per token at t = {t}, all pairs").format(
                t=f"{seq_len:,}"
            ),
            f"{full.total // seq_len:,}",
        ),
        (
            _("attention FLOPs per token at t = {t}, causal").format(t=f"{seq_len:,}"),
            f"{causal.total // seq_len:,}",
        ),
        (
            _("QKᵀ + AV share of them, causal"),
            f"{causal.quadratic / causal.total:.1%}",
        ),
    ]


def attention(state: Mapping) -> View:
    """Chapter 3's attention explorer: H, n_h, n_kv (divisors of n_h) and t → attention
    parameters, KV cache bytes per token and attention FLOPs per token
    (`attention_rows`), beside the MHA twin (n_kv = n_h); L and the rest from
    ``state["preset"]``."""
    state = {"preset": "llama-3-8b", "seq_len": 4096, **state}
    base = presets.load(_preset(state, "llama-3-8b"))
    for field in ("hidden_size", "num_attention_heads", "num_key_value_heads"):
        state.setdefault(field, getattr(base, field))
    heads = state["num_attention_heads"]
    offered = divisors(heads) if isinstance(heads, int) and 1 <= heads <= 4096 else []
    if offered and state["num_key_value_heads"] not in offered:
        state["num_key_value_heads"] = heads
    controls = [
        _number("hidden_size", "H", 1, 10**6),
        _number("num_attention_heads", "n_h", 1, 4096),
        _select(
            "num_key_value_heads", "n_kv", offered or [state["num_key_value_heads"]]
        ),
        _number("seq_len", "t", 1, 10**7),
    ]
    try:
        cfg = base.replace(
            hidden_size=_int(state, "hidden_size", 1, 10**6),
            num_attention_heads=_int(state, "num_attention_heads", 1, 4096),
            num_key_value_heads=_int(state, "num_key_value_heads", 1, 4096),
        )
        seq_len = _int(state, "seq_len", 1, 10**7)
        twin = cfg.replace(
            num_key_value_heads=cfg.num_attention_heads, head_dim=cfg.head_dim
        )
        ours, mha = attention_rows(cfg, seq_len), attention_rows(twin, seq_len)
    except ConfigError as e:
        return _error_view("attention", state, controls, e)
    rows = [[label, a, b] for (label, a), (_twin, b) in zip(ours, mha)]
    return {
        "kind": "attention",
        "state": state,
        "controls": controls,
        "blocks": [table(rows, ["", _("this configuration"), _("MHA (n_kv = n_h)")])],
    }

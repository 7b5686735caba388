"""Chapter 1 (*Counting parameters*): the parameter explorer, `params`: a preset and
its sizes → the exact breakdown by tensor and by group.
"""

from __future__ import annotations

from collections.abc import Mapping

from llmmath import presets
from llmmath.config import ConfigError, ModelConfig
from llmmath.counting import GROUPS, ParamCount, count_params
from llmmath.explorers.controls import (
    GROUP_PALETTE,
    View,
    _check,
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
from llmmath.reports import GROUP_LABELS

PARAM_FIELDS = (
    ("hidden_size", "H", 10**6),
    ("num_hidden_layers", "L", 10**4),
    ("num_attention_heads", "n_h", 4096),
    ("vocab_size", "V", 10**7),
    ("intermediate_size", "I", 10**7),
)


def breakdown_rows(counts: ParamCount) -> list[list[str]]:
    """Rows (group, parameters, share) of a breakdown, then per layer, non-embedding,
    the active parameters of a mixture of experts, and the total."""
    rows = [
        [_(GROUP_LABELS[g]), f"{n:,}", f"{n / counts.total:.2%}"]
        for g, n in counts.by_group().items()
        if g in GROUPS
    ]
    rows += [
        [_("per layer"), f"{counts.per_layer:,}", ""],
        [_("non-embedding"), f"{counts.non_embedding:,}", ""],
    ]
    if counts.active != counts.total:
        rows.append([_("active per token"), f"{counts.active:,}", ""])
    rows.append([_("total"), f"{counts.total:,}", "100%"])
    return rows


def group_bars(counts: ParamCount, title: str) -> dict:
    """A bars block of the groups' counts (bar length ∝ parameters)."""
    items = [
        {
            "label": _(GROUP_LABELS[g]),
            "value": n,
            "color": GROUP_PALETTE[g],
            "text": f"{n / counts.total:.1%}",
        }
        for g, n in counts.by_group().items()
        if g in GROUPS
    ]
    return {"type": "bars", "title": title, "items": items}


def param_config(state: Mapping) -> ModelConfig:
    """The configuration a `params` state describes: the preset with the edited sizes.

    Raises:
        ConfigError: a size out of range or a combination `ModelConfig` refuses.
    """
    base = presets.load(_preset(state, "llama-2-7b"))
    changes = {f: _int(state, f, 1, top) for f, _sym, top in PARAM_FIELDS}
    changes["num_key_value_heads"] = _int(state, "num_key_value_heads", 1, 4096)
    changes["tie_word_embeddings"] = bool(state.get("tie_word_embeddings"))
    same_heads = (changes["hidden_size"], changes["num_attention_heads"]) == (
        base.hidden_size,
        base.num_attention_heads,
    )
    if same_heads:
        changes["head_dim"] = base.head_dim  # keep an explicit head_dim (Qwen3)
    return base.replace(**changes)


def params(state: Mapping) -> View:
    """Chapter 1's parameter explorer: a preset, H, L, n_h, n_kv (divisors of n_h only),
    V, I and tying → the exact breakdown by group (`count_params`) and its bars.

    Choosing another preset loads its sizes (``state["loaded"]`` remembers which preset
    the sizes came from)."""
    state = {"preset": "llama-2-7b", **state}
    name = state["preset"]
    try:
        _preset(state, "llama-2-7b")
    except ConfigError as e:
        return _error_view("params", state, [_preset_select()], e)
    if state.get("loaded") != name:
        cfg = presets.load(name)
        state.update({f: getattr(cfg, f) for f, *_rest in PARAM_FIELDS})
        state.update(
            num_key_value_heads=cfg.num_key_value_heads,
            tie_word_embeddings=cfg.tie_word_embeddings,
            loaded=name,
        )
    heads = state.get("num_attention_heads")
    offered = divisors(heads) if isinstance(heads, int) and 1 <= heads <= 4096 else []
    if offered and state.get("num_key_value_heads") not in offered:
        state["num_key_value_heads"] = heads  # MHA when n_kv no longer divides n_h
    controls = [
        _preset_select(),
        *(_number(f, label, 1, top) for f, label, top in PARAM_FIELDS[:3]),
        _select(
            "num_key_value_heads", "n_kv", offered or [state["num_key_value_heads"]]
        ),
        *(_number(f, label, 1, top) for f, label, top in PARAM_FIELDS[3:]),
        _check("tie_word_embeddings", "tie_word_embeddings"),
    ]
    try:
        cfg = param_config(state)
    except ConfigError as e:
        return _error_view("params", state, controls, e)
    counts = count_params(cfg)
    edited = cfg != presets.load(state["preset"])
    title = (
        _("{model} (edited)").format(model=state["preset"])
        if edited
        else state["preset"]
    )
    return {
        "kind": "params",
        "state": state,
        "controls": controls,
        "blocks": [
            note(f"d_h = {cfg.head_dim}, g = n_h / n_kv = {cfg.group_size}"),
            table(breakdown_rows(counts), [_("group"), _("parameters"), _("share")]),
            group_bars(counts, title),
        ],
    }

"""The book's explorers as plain functions: state in, view out.

Each explorer is one function of a JSON-ready ``state`` dict (the values of its
controls) that returns a *view*: the state it settled on, the controls to draw and the
blocks to show::

    {"kind": "params", "state": {...}, "controls": [...], "blocks": [...]}

The same function runs in two places: in a Jupyter kernel, where `llmmath.widgets` calls
it on every change of a control, and on the published site, where Pyodide (CPython
compiled to WebAssembly) runs it in the reader's browser (`llmmath_book.runtime`). One
front end, ``llmmath/static/explorer.js``, draws the view in both: tables, notes and SVG
figures.

This module and everything it imports need only the standard library
(tests/test_runtime.py imports it with numpy, sympy, torch, matplotlib and ipywidgets
blocked).

Controls are dicts with ``name``, ``label``, ``type`` (``int``, ``float``, ``select``,
``check``, ``range`` or ``text``) and, by type, ``options`` (a list of
``[value, label]``), ``min``, ``max``, ``step`` and ``disabled``. Blocks are dicts with
a ``type``:

- ``note``: ``text`` and ``tone`` (``info`` or ``error``);
- ``table``: ``headers`` (or None), ``rows`` (lists of strings), ``align`` (l or r);
- ``bars``: horizontal bars, ``items`` of ``label``, ``value``, ``color`` and ``text``;
- ``stack``: one stacked bar of ``items`` against a ``limit``;
- ``plot``: ``x`` and ``y`` axes (``min``, ``max``, ``log``, ``label``) and ``series``
  of ``points`` drawn as ``line``, ``dashed``, ``dots`` or ``bars``.

Bad values never raise: the view carries a ``note`` with the `ConfigError` message (the
CLI's one-line message) and the message itself as ``"error"``. The controls always show
the state that was computed: a value no control can show (an unknown preset, GPU or
format in a link, a number out of its range, a check box that is not true or false)
falls back, field by field, to the explorer's default, and the view shows the one line
followed by the numbers of that valid state. An in-range number that does not fit the
others (n_h = 31 with H = 4096) stays in its box beside the one-line answer, and so does
a pasted config.json, so that the reader can correct what they typed. Colours are names
of the front end's palette (`PALETTE`). `explore` is the one entry point;
`explore_json` is what the browser calls.
"""

from __future__ import annotations

import copy
import functools
import json
import math
from collections.abc import Callable, Mapping
from typing import Any

from llmmath import presets
from llmmath.config import ConfigError, ModelConfig, parse_config_text
from llmmath.counting import GROUPS, ParamCount, count_params
from llmmath.messages import N_, current, join
from llmmath.messages import gettext as _
from llmmath.reports import GROUP_LABELS
from llmmath.reports import (  # the labels of other modules' rows, shared with the CLI
    ITEM_LABELS as ITEM_LABELS,
)
from llmmath.reports import (
    ITEM_PATTERNS as ITEM_PATTERNS,
)
from llmmath.reports import item_label as _item

#: One colour per parameter group, used by the figures (`llmmath.plots`) and the
# explorers.
GROUP_COLORS = {
    "embedding": "#4c72b0",
    "attention": "#dd8452",
    "ffn": "#55a868",
    "norm": "#c44e52",
    "lm_head": "#8172b3",
}
BAR_COLORS = ("#4c72b0", "#dd8452", "#55a868", "#c44e52", "#8172b3", "#937860")
#: The explorers' views name colours of the front end's palette, not hex codes:
#: ``c0`` … ``c5`` (the series, in the order of `BAR_COLORS`), ``grey`` (reference
#: lines) and ``ink`` (the text colour). ``llmmath/static/explorer.css`` sets them for
#: the light and the dark theme, each at least 3:1 against the page's background
#: (WCAG 2.1, 1.4.11; tests/test_browser_views.py measures them).
PALETTE = ("c0", "c1", "c2", "c3", "c4", "c5")
GREY, INK = "grey", "ink"
GROUP_PALETTE = dict(zip(GROUP_COLORS, PALETTE))
#: Number formats the serving and memory explorers offer.
FORMATS = ("fp32", "bf16", "fp16", "fp8", "int8", "int4")

View = dict[str, Any]

# --- state ----------------------------------------------------------------------------


def divisors(n: int) -> list[int]:
    """The positive divisors of ``n``, ascending: the valid ``num_key_value_heads`` for
    n_h = n."""
    small = [d for d in range(1, math.isqrt(n) + 1) if n % d == 0]
    return sorted({*small, *(n // d for d in small)})


def _int(state: Mapping, name: str, low: int, high: int) -> int:
    """``state[name]`` as an int in [low, high]. Raises ConfigError naming the field."""
    value = state.get(name)
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, str) and value.strip().lstrip("-").isdigit():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int):
        raise ConfigError(
            _("{name} must be a whole number, got {value}").format(
                name=name, value=repr(value)
            )
        )
    if not low <= value <= high:
        # a link's 1e308 is a whole number of 309 digits: say it in a few characters
        shown = f"{value:,}" if abs(value) < 10**18 else f"{float(value):.3g}"
        raise ConfigError(
            _("{name} must be between {low} and {high}, got {value}").format(
                name=name, low=f"{low:,}", high=f"{high:,}", value=shown
            )
        )
    return value


def _float(state: Mapping, name: str, low: float, high: float) -> float:
    """``state[name]`` as a finite float in [low, high]. Raises ConfigError naming
    it."""
    value = state.get(name)
    try:
        value = float(value)
    except (TypeError, ValueError):
        raise ConfigError(
            _("{name} must be a number, got {value}").format(
                name=name, value=repr(value)
            )
        ) from None
    if not (math.isfinite(value) and low <= value <= high):
        raise ConfigError(
            _("{name} must be between {low} and {high}, got {value}").format(
                name=name, low=f"{low:,}", high=f"{high:,}", value=value
            )
        )
    return value


def _is_int(value) -> bool:
    """Whether ``value`` is an int (not a bool)."""
    return isinstance(value, int) and not isinstance(value, bool)


def _choice(state: Mapping, name: str, allowed, default):
    value = state.get(name, default)
    if value not in allowed:
        raise ConfigError(
            _("{name} must be one of {allowed}; got {value}").format(
                name=name, allowed=join(map(str, allowed)), value=repr(value)
            )
        )
    return value


def _preset(state: Mapping, default: str) -> str:
    return _choice(state, "preset", presets.names(), default)


# --- controls and blocks --------------------------------------------------------------


#: What the controls labelled by a bare symbol are: their accessible name is this and
#: the symbol ("hidden size (H)"), which a screen reader says in place of "H".
SYMBOL_NAMES = {
    "H": N_("hidden size"),
    "L": N_("layers"),
    "V": N_("vocabulary size"),
    "I": N_("feed-forward size"),
    "n_h": N_("attention heads"),
    "n_kv": N_("key-value heads"),
    "GQA n_kv": N_("key-value heads"),
    "d_h": N_("head dimension"),
    "t": N_("sequence length in tokens"),
    "tp": N_("tensor-parallel degree"),
    "pp": N_("pipeline-parallel degree"),
    "MLA d_c": N_("compressed key-value dimension"),
    "MLA d_r": N_("rotary key dimension"),
}


def _described(control: dict) -> dict:
    what = SYMBOL_NAMES.get(control["label"])
    if what:
        control["description"] = _(what)
    return control


def _number(name, label, low, high, kind="int", step=None, disabled=False) -> dict:
    control = {"name": name, "label": label, "type": kind, "min": low, "max": high}
    _described(control)
    if step is not None:
        control["step"] = step
    if disabled:
        control["disabled"] = True
    return control


def _select(name, label, options, disabled=False) -> dict:
    pairs = [list(o) if isinstance(o, (tuple, list)) else [o, str(o)] for o in options]
    return _described(
        {
            "name": name,
            "label": label,
            "type": "select",
            "options": pairs,
            "disabled": disabled,
        }
    )


def _check(name, label, disabled=False) -> dict:
    return {"name": name, "label": label, "type": "check", "disabled": disabled}


def _preset_select(label=None) -> dict:
    return _select("preset", _("model") if label is None else label, presets.names())


def note(text: str, tone: str = "info") -> dict:
    return {"type": "note", "text": text, "tone": tone}


def table(rows, headers=None, align=None) -> dict:
    """A table block; every cell is a string (numbers formatted here, not in the
    browser)."""
    rows = [[str(c) for c in row] for row in rows]
    width = len(headers) if headers else max((len(r) for r in rows), default=1)
    return {
        "type": "table",
        "headers": headers,
        "rows": rows,
        "align": align or "l" + "r" * (width - 1),
    }


def _error_view(kind: str, state: Mapping, controls: list, error: Exception) -> View:
    return {
        "kind": kind,
        "state": dict(state),
        "controls": controls,
        "blocks": [
            note(_("Invalid configuration: {error}").format(error=error), "error")
        ],
        "error": str(error),
    }


def _legal(control: Mapping, value: Any) -> bool:
    """Whether ``control`` can show ``value``: one of a select's options (a bool only
    where the option is one), a bool for a check box, a finite number in [min, max]
    (whole for ``int`` and ``range``) or a string for a text box."""
    kind = control["type"]
    if kind == "select":
        return any(
            len(pair) == 2
            and value == pair[0]
            and isinstance(value, bool) == isinstance(pair[0], bool)
            for pair in control["options"]
        )
    if kind == "check":
        return isinstance(value, bool)
    if kind == "text":
        return isinstance(value, str)
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return False
    if not (math.isfinite(value) and control["min"] <= value <= control["max"]):
        return False
    return kind == "float" or float(value).is_integer()


def _domain(control: Mapping) -> str:
    """What ``control`` accepts, in words (for the one-line answer to a bad link)."""
    kind = control["type"]
    if kind == "select":
        return _("one of {values}").format(
            values=join(str(pair[0]) for pair in control["options"])
        )
    if kind == "check":
        return _("true or false")
    if kind == "text":
        return _("text")
    whole = (
        _("a number from {low} to {high}")
        if kind == "float"
        else _("a whole number from {low} to {high}")
    )
    return whole.format(low=f"{control['min']:,}", high=f"{control['max']:,}")


def _illegal(view: View) -> list[str]:
    """Names of the controls of ``view`` whose value in its state they cannot show (and
    ``"preset"`` when an explorer without a model select holds an unknown one)."""
    state = view["state"]
    bad = [c["name"] for c in view["controls"] if not _legal(c, state.get(c["name"]))]
    named = any(c["name"] == "preset" for c in view["controls"])
    if not named and "preset" in state and state["preset"] not in presets.names():
        bad.append("preset")
    return bad


# --- chapter 1: parameters ------------------------------------------------------------

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


# --- chapter 3: attention -------------------------------------------------------------


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


# --- chapter 6: RoPE ------------------------------------------------------------------

ROPE_BASES = (
    (10000.0, "10⁴ (LLaMA 1/2)"),
    (500000.0, "5·10⁵ (Llama 3)"),
    (1000000.0, "10⁶ (Qwen, MiniMind)"),
)


def rotary_numbers(position: int, pair: int, base: float, head_dim: int) -> dict:
    """θ_i = base^(−2i/d_h) (radians per token), λ_i = 2π/θ_i (tokens), the angle m·θ_i,
    its cos and sin, turns, and how many pairs have λ ≤ m (Su et al. 2021, RoFormer,
    Sec. 3.4; the torch version is `llmmath.rope.rope_inv_freq`)."""
    thetas = [base ** (-2 * i / head_dim) for i in range(head_dim // 2)]
    wavelengths = [2 * math.pi / t for t in thetas]
    angle = position * thetas[pair]
    return {
        "theta": thetas[pair],
        "wavelength": wavelengths[pair],
        "cos": math.cos(angle),
        "sin": math.sin(angle),
        "angle": angle,
        "turns": angle / (2 * math.pi),
        "done": sum(w <= position for w in wavelengths),
        "wavelengths": wavelengths,
    }


def rotary(state: Mapping) -> View:
    """Chapter 6's RoPE explorer: position m, pair i, base and d_h → θ_i, λ_i, the
    rotated pair on the unit circle and every pair's wavelength (`rotary_numbers`)."""
    state = {"position": 100, "pair": 8, "base": 10000.0, "head_dim": 128, **state}
    if state["head_dim"] in (64, 128):
        state["pair"] = min(state["pair"], state["head_dim"] // 2 - 1)
    top = state["head_dim"] // 2 - 1 if state["head_dim"] in (64, 128) else 63
    controls = [
        {**_number("position", _("position m"), 0, 32768), "type": "range"},
        {**_number("pair", _("pair i"), 0, top), "type": "range"},
        _select("base", _("base"), ROPE_BASES),
        _select("head_dim", "d_h", (64, 128)),
    ]
    try:
        d = _choice(state, "head_dim", (64, 128), 128)
        base = _choice(state, "base", [b for b, _label in ROPE_BASES], 10000.0)
        m = _int(state, "position", 0, 32768)
        i = _int(state, "pair", 0, d // 2 - 1)
    except ConfigError as e:
        return _error_view("rotary", state, controls, e)
    v = rotary_numbers(m, i, float(base), d)
    rows = [
        [_("θ_i, radians per token"), f"{v['theta']:.6g}"],
        [
            _("wavelength λ_i = 2π/θ_i"),
            _("{n} tokens").format(n=f"{v['wavelength']:,.1f}"),
        ],
        [
            _("angle m·θ_i"),
            _("{angle} rad = {turns} turns").format(
                angle=f"{v['angle']:,.3f}", turns=f"{v['turns']:,.3f}"
            ),
        ],
        [_("(cos, sin) of the angle"), f"({v['cos']:.4f}, {v['sin']:.4f})"],
        [_("pairs with λ ≤ m"), _("{n} of {total}").format(n=v["done"], total=d // 2)],
    ]
    circle = [
        [math.cos(2 * math.pi * k / 96), math.sin(2 * math.pi * k / 96)]
        for k in range(97)
    ]
    pair_plot = {
        "type": "plot",
        "width": 180,
        "height": 180,
        "x": {"min": -1.15, "max": 1.15},
        "y": {"min": -1.15, "max": 1.15},
        "series": [
            {"points": circle, "mode": "line", "color": GREY},
            {"points": [[0, 0], [1, 0]], "mode": "line", "color": GREY},
            {
                "points": [[0, 0], [v["cos"], v["sin"]]],
                "mode": "line",
                "color": PALETTE[1],
                "label": _("pair {i} at m = {m}").format(i=i, m=f"{m:,}"),
            },
        ],
    }
    bars = [[k, w] for k, w in enumerate(v["wavelengths"])]
    wave_plot = {
        "type": "plot",
        "width": 340,
        "height": 180,
        "x": {"min": -0.5, "max": d // 2 - 0.5, "label": _("pair i")},
        "y": {"min": 1, "max": 1e7, "log": True, "label": _("λ_i (tokens)")},
        "series": [
            {"points": bars, "mode": "bars", "color": PALETTE[0]},
            {"points": [bars[i]], "mode": "bars", "color": PALETTE[1]},
            {
                "points": [[-0.5, max(m, 1)], [d // 2 - 0.5, max(m, 1)]],
                "mode": "dashed",
                "color": INK,
                "label": f"m = {m:,}",
            },
        ],
    }
    return {
        "kind": "rotary",
        "state": state,
        "controls": controls,
        "blocks": [pair_plot, wave_plot, table(rows)],
    }


# --- chapter 7: serving ---------------------------------------------------------------


def serving(state: Mapping) -> View:
    """Chapter 7's serving explorer: preset, number formats, batch, context and GPU
    memory (GB = 10⁹ bytes) → weights + KV cache, whether they fit, the largest batch
    and the longest context (`llmmath.memory.serving_fit`)."""
    from llmmath.memory import GPU_80GB, serving_fit
    from llmmath.units import human_bytes

    state = {
        "preset": "llama-3-8b",
        "weight_dtype": "bf16",
        "cache_dtype": "bf16",
        "batch": 16,
        "seq_len": 8192,
        "gpu_gb": GPU_80GB / 10**9,  # the default GPU by the capacity rule
        **state,
    }
    controls = [
        _preset_select(),
        _select("weight_dtype", _("weights"), FORMATS),
        _select("cache_dtype", _("KV cache"), FORMATS),
        _number("batch", _("batch"), 1, 10**6),
        _number("seq_len", _("context"), 1, 10**8),
        _number("gpu_gb", _("GPU (GB)"), 0.001, 10**6, "float", 1),
    ]
    try:
        cfg = presets.load(_preset(state, "llama-3-8b"))
        batch = _int(state, "batch", 1, 10**6)
        seq_len = _int(state, "seq_len", 1, 10**8)
        gpu = round(_float(state, "gpu_gb", 0.001, 10**6) * 10**9)
        fit = serving_fit(
            cfg, gpu, batch, seq_len, state["weight_dtype"], state["cache_dtype"]
        )
    except ConfigError as e:
        return _error_view("serving", state, controls, e)
    verdict = _("fit") if fit.fits else _("do not fit")
    rows = [
        [_("weights"), _bytes_text(fit.weight_bytes, human_bytes)],
        [
            _("KV cache, {batch} × {t} tokens").format(
                batch=f"{batch:,}", t=f"{seq_len:,}"
            ),
            _bytes_text(fit.cache_bytes, human_bytes),
        ],
        [_("weights + KV cache"), _bytes_text(fit.total_bytes, human_bytes)],
        [_("in {gb} GB they").format(gb=f"{gpu / 10**9:,.3f}"), verdict],
        [
            _("largest batch of {t}-token sequences").format(t=f"{seq_len:,}"),
            f"{fit.max_batch:,}",
        ],
        [
            _("longest context for a batch of {batch}").format(batch=f"{batch:,}"),
            _("{n} tokens (the model is built for {limit})").format(
                n=f"{fit.max_seq_len:,}", limit=f"{fit.context_limit:,}"
            ),
        ],
    ]
    items = {_("weights"): fit.weight_bytes, _("KV cache"): fit.cache_bytes}
    return {
        "kind": "serving",
        "state": state,
        "controls": controls,
        "blocks": [table(rows), stack(items, gpu)],
    }


def _bytes_text(n: int, human: Callable[[int], str]) -> str:
    """``n`` bytes in full and in GB: ``16,060,522,496 bytes = 16.06 GB``."""
    return _("{n} bytes = {human}").format(n=f"{n:,}", human=human(n))


def stack(items: Mapping[str, int], limit: int, gpu: str | None = None) -> dict:
    """A stacked bar of ``items`` (bytes) against ``limit`` bytes (``gpu`` names it,
    "the GPU" when None)."""
    gpu = _("the GPU") if gpu is None else gpu
    block = {
        "type": "stack",
        "items": [
            {"label": k, "value": v, "color": PALETTE[i % len(PALETTE)]}
            for i, (k, v) in enumerate(items.items())
        ],
        "limit": limit,
        "limit_label": f"{gpu}, {limit / 10**9:,.2f} GB",
    }
    if current() != "en":  # the legend's words (explorer.js says them in English)
        block["legend"] = _("dashed line: {limit}").format(limit=block["limit_label"])
    return block


# --- chapter 9: memory and the roofline -----------------------------------------------


#: The training options of the memory explorer and the calculator: the state's name
#: and the option of ``python -m llmmath train-memory`` whose choices and default it
#: takes (`llmmath.reports.CHOICES`).
TRAINING_OPTIONS = (
    ("optimizer", "--optimizer"),
    ("precision", "--precision"),
    ("checkpointing", "--checkpointing"),
    ("method", "--method"),
    ("adapter_dtype", "--adapter-dtype"),
    ("loss", "--loss"),
)
#: How a training option's select shows a value that is a word (the others show the
#: value itself, as the command line spells it).
OPTION_LABELS = {
    "optimizer": {"adam8bit": N_("8-bit Adam")},
    "precision": {"mixed": N_("mixed (fp32 master)")},
    "checkpointing": {
        "none": N_("none"),
        "selective": N_("selective"),
        "full": N_("full"),
    },
    "method": {"full": N_("full fine-tuning")},
    "loss": {"full": N_("full logits"), "chunked": N_("chunked")},
}
#: LoRA ranks a control offers: the command line's bound on a count.
MAX_LORA_RANK = 10**8
#: The training options' own defaults beside the choices': LoRA's rank
#: (``train-memory --lora-rank``, 16).
TRAINING_DEFAULTS = {"lora_rank": 16}


def training_defaults() -> dict:
    """The training options' defaults, as ``train-memory`` has them."""
    from llmmath.reports import CHOICES

    out = {name: CHOICES[flag][1] for name, flag in TRAINING_OPTIONS}
    return {**out, **TRAINING_DEFAULTS}


def _training_controls(state: Mapping, disabled: bool = False) -> list:
    """The selects of `TRAINING_OPTIONS` and LoRA's rank; the rank and the adapters'
    dtype only for LoRA and QLoRA."""
    from llmmath.reports import CHOICES

    lora = state.get("method") in ("lora", "qlora")
    labels = {
        "optimizer": _("optimizer"),
        "precision": _("precision"),
        "checkpointing": _("checkpointing"),
        "method": _("method"),
        "adapter_dtype": _("adapters"),
        "loss": _("loss"),
    }
    out = []
    for name, flag in TRAINING_OPTIONS:
        words = OPTION_LABELS.get(name, {})
        options = [[v, _(words[v]) if v in words else v] for v in CHOICES[flag][0]]
        off = disabled or (name == "adapter_dtype" and not lora)
        out.append(_select(name, labels[name], options, off))
        if name == "method":
            out.append(
                _number(
                    "lora_rank",
                    _("LoRA rank"),
                    1,
                    MAX_LORA_RANK,
                    disabled=disabled or not lora,
                )
            )
    return out


def training_report(
    title: str, cfg: ModelConfig, state: Mapping, batch: int, seq_len: int, gpu: str
) -> dict:
    """What ``python -m llmmath train-memory MODEL ... --batch B --seq-len T --gpu G
    --json`` prints for the training options of ``state`` (`TRAINING_OPTIONS`, LoRA's
    rank and adapters' dtype only with LoRA or QLoRA): the one function behind the
    command, the memory explorer and the calculator
    (`llmmath.reports.train_memory_report`).

    Raises:
        ConfigError: an option that is not one of its choices, a rank out of range,
        or what `train_memory_report` refuses.
    """
    from llmmath.reports import CHOICES

    got = {
        name: _choice(state, name, CHOICES[flag][0], CHOICES[flag][1])
        for name, flag in TRAINING_OPTIONS
    }
    rank = _int(state, "lora_rank", 1, MAX_LORA_RANK)
    lora = got["method"] != "full"
    options = (
        ("optimizer", got["optimizer"]),
        ("precision", got["precision"]),
        ("checkpointing", got["checkpointing"]),
        ("method", got["method"]),
        ("lora_rank", rank if lora else None),
        ("adapter_dtype", got["adapter_dtype"] if lora else None),
        ("loss", got["loss"]),
    )
    return copy.deepcopy(_train_memory(title, cfg, options, batch, seq_len, gpu))


@functools.lru_cache(maxsize=64)
def _train_memory(
    title: str, cfg: ModelConfig, options: tuple, batch: int, seq_len: int, gpu: str
) -> dict:
    """`train_memory_report`, kept for the last answers: a change of a control that
    is not a training option (the calculator's formats) does not count them again."""
    from llmmath.reports import train_memory_report

    return train_memory_report(
        title, cfg, batch=batch, seq_len=seq_len, gpu=gpu, **dict(options)
    )


def _gb(n: int) -> str:
    return f"{n / 10**9:,.2f}"


def _item_rows(items: Mapping[str, int], total: int, label: str) -> list:
    """Rows (item, bytes, GB, share of ``total``) and the ``label`` row of the total."""
    rows = [[_item(k), f"{v:,}", _gb(v), f"{v / total:.1%}"] for k, v in items.items()]
    return rows + [[label, f"{total:,}", _gb(total), ""]]


def training_blocks(r: Mapping) -> list:
    """The blocks of a `training_report` ``r``: the moment of the peak, the bytes held
    then item by item (``peak_items``, summing to ``peak_bytes``), the parts at rest
    (``items``, ``total_bytes``), whether the peak fits the GPU and the largest batch
    that does (``fits``, ``max_batch``), and the peak's items stacked against the
    GPU's memory."""
    peak, rest = r["peak_bytes"], r["total_bytes"]
    fits = _("the peak fits") if r["fits"] else _("the peak does not fit")
    return [
        note(
            _("Peak of a training step ({moment}): {bytes}.").format(
                moment=_item(r["peak_moment"]), bytes=_bytes_text(peak, _human)
            )
        ),
        table(
            _item_rows(r["peak_items"], peak, _("peak")),
            [_("at the peak"), _("bytes"), "GB", _("share")],
        ),
        table(
            _item_rows(r["items"], rest, _("sum at rest")),
            [_("at rest"), _("bytes"), "GB", _("share")],
        ),
        note(
            _("{gpu} ({gb} GB): {verdict}; largest batch that fits: {n}").format(
                gpu=r["gpu"],
                gb=_gb(r["gpu_bytes"]),
                verdict=fits,
                n=f"{r['max_batch']:,}",
            )
        ),
        stack(
            {_item(k): v for k, v in r["peak_items"].items()},
            r["gpu_bytes"],
            r["gpu"],
        ),
    ]


def _human(n: int) -> str:
    from llmmath.units import human_bytes

    return human_bytes(n)


#: The memory explorer's two modes.
MODES = (("training", N_("training")), ("inference", N_("inference")))


def memory_state(state: Mapping) -> dict:
    """The memory explorer's state: its defaults, then ``state``."""
    from llmmath.gpus import DEFAULT_GPU

    return {
        "preset": "llama-3-8b",
        "mode": "training",
        **training_defaults(),
        "weights": "bf16",
        "batch": 1,
        "seq_len": 4096,
        "gpu": DEFAULT_GPU,
        **state,
    }


def memory_numbers(state: Mapping) -> dict:
    """What the command line prints for the memory explorer's ``state``: in training
    `training_report` (``train-memory --json``), in inference
    `llmmath.reports.memory_report` (``memory --json``: weights in ``weights`` and a
    bf16 KV cache), each with ``--gpu``.

    Raises:
        ConfigError: a value of the state its command refuses.
    """
    from llmmath.gpus import DEFAULT_GPU, GPUS
    from llmmath.reports import WEIGHTS
    from llmmath.reports import memory_report as serving_report

    state = memory_state(state)
    name = _preset(state, "llama-3-8b")
    cfg, title = presets.load(name), presets.get(name).title
    mode = _choice(state, "mode", [m for m, _label in MODES], "training")
    batch = _int(state, "batch", 1, 10**6)
    seq_len = _int(state, "seq_len", 1, 10**7)
    gpu = _choice(state, "gpu", list(GPUS), DEFAULT_GPU)
    weights = _choice(state, "weights", WEIGHTS, "bf16")
    if mode == "training":
        return training_report(title, cfg, state, batch, seq_len, gpu)
    return serving_report(title, cfg, weights, None, "bf16", batch, seq_len, gpu)


def memory(state: Mapping) -> View:
    """Chapter 9's memory explorer: a preset, training or inference, batch, sequence
    and a GPU of the catalogue (`llmmath.gpus`). Training (the options of
    ``train-memory``: optimizer, precision, checkpointing, full fine-tuning, LoRA or
    QLoRA with its rank and adapters' dtype, the loss): the peak of a step item by
    item at its moment, the parts at rest, whether the peak fits and the largest batch
    that does (`training_report`, `training_blocks`). Inference: the weights in a
    format and a bf16 KV cache against the GPU, the largest batch that fits
    (`llmmath.reports.memory_report`). The numbers are the command line's
    (`memory_numbers`)."""
    from llmmath.gpus import GPUS
    from llmmath.reports import WEIGHTS

    state = memory_state(state)
    training = state["mode"] != "inference"
    controls = [
        _preset_select(),
        _select("mode", _("mode"), [[m, _(label)] for m, label in MODES]),
        *_training_controls(state, not training),
        _select("weights", _("weights"), WEIGHTS, training),
        _number("batch", _("batch"), 1, 10**6),
        _number("seq_len", _("sequence"), 1, 10**7),
        _select("gpu", _("GPU"), list(GPUS)),
    ]
    try:
        r = memory_numbers(state)
    except ConfigError as e:
        return _error_view("memory", state, controls, e)
    cfg = presets.load(state["preset"])
    blocks = []
    if r["seq_len"] > cfg.max_position_embeddings:
        blocks.append(
            note(
                _("The model is built for {n} tokens.").format(
                    n=f"{cfg.max_position_embeddings:,}"
                ),
                "error",
            )
        )
    if training:
        blocks += training_blocks(r)
    else:
        group = (
            _(", groups of {n}").format(n=r["group_size"]) if r["group_size"] else ""
        )
        weights = _("weights ({format}{groups})").format(
            format=r["weights"], groups=group
        )
        items = {
            weights: r["weight_bytes"],
            _("KV cache (bf16), {batch} × {t} tokens").format(
                batch=f"{r['batch']:,}", t=f"{r['seq_len']:,}"
            ): r["kv_cache_bytes"],
        }
        verdict = _("they fit") if r["fits"] else _("they do not fit")
        blocks += [
            table(
                _item_rows(items, r["total_bytes"], _("total")),
                [_("item"), _("bytes"), "GB", _("share")],
            ),
            note(
                _("{gpu} ({gb} GB): {verdict}; largest batch that fits: {n}").format(
                    gpu=r["gpu"],
                    gb=_gb(r["gpu_bytes"]),
                    verdict=verdict,
                    n=f"{r['max_batch']:,}",
                )
            ),
            stack(items, r["gpu_bytes"], r["gpu"]),
        ]
    return {"kind": "memory", "state": state, "controls": controls, "blocks": blocks}


ROOFLINE_BATCHES = [2**k for k in range(11)]  # the decode curve: batch 1 ... 1024


def roofline(state: Mapping) -> View:
    """Chapter 9's roofline: preset, GPU, formats, batch and context → the decode step
    on the roofline and its numbers (`llmmath.roofline`: `decode_step`, `prefill_step`,
    `compute_bound_batch`) and whether weights + cache fit in the GPU's memory
    (`serving_fit`; any GPU of the catalogue `llmmath.gpus`, by its capacity rule)."""
    from llmmath.gpus import DEFAULT_GPU, GPUS
    from llmmath.memory import serving_fit
    from llmmath.roofline import GPUS as COMPARED
    from llmmath.roofline import compute_bound_batch, decode_step, prefill_step

    state = {
        "preset": "llama-3-8b",
        "gpu": "H100-SXM5-80GB",
        "weight_dtype": "bf16",
        "cache_dtype": "bf16",
        "batch": 16,
        "context": 4096,
        **state,
    }
    formats = ("fp32", "bf16", "fp8", "int8", "int4")
    controls = [
        _preset_select(),
        _select("gpu", _("GPU"), list(GPUS)),
        _select("weight_dtype", _("weights"), formats),
        _select("cache_dtype", _("KV cache"), formats),
        _number("batch", _("batch"), 1, 10**6),
        _number("context", _("context"), 1, 10**7),
    ]
    try:
        cfg = presets.load(_preset(state, "llama-3-8b"))
        gpu = GPUS[_choice(state, "gpu", list(GPUS), DEFAULT_GPU)]
        fmt = (
            _choice(state, "weight_dtype", formats, "bf16"),
            _choice(state, "cache_dtype", formats, "bf16"),
        )
        b = _int(state, "batch", 1, 10**6)
        c = _int(state, "context", 1, 10**7)
        step = decode_step(cfg, gpu, b, c, *fmt)
        curve = [decode_step(cfg, gpu, bb, c, *fmt) for bb in ROOFLINE_BATCHES]
        prefill = prefill_step(cfg, gpu, c, 1, *fmt)
        found = compute_bound_batch(cfg, gpu, c, *fmt)
        fit = serving_fit(cfg, gpu.memory, b, c, *fmt)
    except ConfigError as e:
        return _error_view("roofline", state, controls, e)
    rows = [
        [_("FLOPs of the step"), f"{step.flops:,}"],
        [_("bytes read"), f"{step.bytes:,}"],
        [_("intensity"), _("{n} FLOPs/byte").format(n=f"{step.intensity:,.2f}")],
        [
            _("ridge of the GPU"),
            _("{n} FLOPs/byte").format(n=f"{gpu.ridge_point:,.1f}"),
        ],
        [_("compute time"), f"{step.compute_seconds * 1e3:,.3f} ms"],
        [_("memory time"), f"{step.memory_seconds * 1e3:,.3f} ms"],
        [_("bound"), _("memory") if step.memory_bound else _("compute")],
        [_("tokens/s, all sequences"), f"{step.tokens_per_second:,.0f}"],
        [_("tokens/s, per sequence"), f"{step.tokens_per_second / b:,.1f}"],
        [_("compute-bound from batch"), _("never") if found is None else f"{found:,}"],
        [
            _("prefill intensity"),
            _("{n} FLOPs/byte").format(n=f"{prefill.intensity:,.0f}"),
        ],
        [
            _("weights + cache in {gb} GB").format(gb=f"{gpu.memory / 10**9:,.0f}"),
            _("fit") if fit.fits else _("do not fit"),
        ],
    ]

    def roof(g):
        xs = [0.1, g.ridge_point, 1e5]
        return [[x, min(g.peak_flops, x * g.bandwidth)] for x in xs]

    def point(s):
        return [s.intensity, s.flops / s.seconds]

    others = [n for n in COMPARED if n != gpu.name]
    series = [
        {"points": roof(g), "mode": "dashed", "color": GREY}
        for name, g in COMPARED.items()
        if name != gpu.name
    ]
    series += [
        {
            "points": roof(gpu),
            "mode": "line",
            "color": INK,
            "label": _("{gpu} (dashed: {others})").format(
                gpu=gpu.name, others=join(others)
            ),
        },
        {"points": [point(s) for s in curve], "mode": "line", "color": PALETTE[0]},
        {
            "points": [point(s) for s in curve],
            "mode": "dots",
            "color": PALETTE[0],
            "label": _("decode, batch {first} … {last}").format(
                first=f"{ROOFLINE_BATCHES[0]:,}", last=f"{ROOFLINE_BATCHES[-1]:,}"
            ),
        },
        {
            "points": [point(prefill)],
            "mode": "dots",
            "radius": 5.5,
            "color": PALETTE[2],
            "label": _("prefill of one prompt"),
        },
        {
            "points": [point(step)],
            "mode": "dots",
            "radius": 5.5,
            "color": PALETTE[1],
            "label": _("decode, batch {batch}").format(batch=f"{b:,}"),
        },
    ]
    plot = {
        "type": "plot",
        "width": 440,
        "height": 280,
        "x": {"min": 0.1, "max": 1e5, "log": True, "label": _("FLOPs per byte")},
        "y": {"min": 1e11, "max": 1e16, "log": True, "label": "FLOP/s"},
        "series": series,
    }
    return {
        "kind": "roofline",
        "state": state,
        "controls": controls,
        "blocks": [plot, table(rows)],
    }


# --- the calculator page --------------------------------------------------------------

PASTED = N_("(pasted config.json)")


def calculator(state: Mapping) -> View:
    """The calculator page: a preset or a pasted Hugging Face ``config.json``, and a
    batch, a length, the weights' format, the KV cache's format, a GPU of the
    catalogue (`llmmath.gpus`) and the training options of ``train-memory``
    (`TRAINING_OPTIONS`, LoRA's rank) → parameters by group (total and active), the KV
    cache, forward FLOPs per token, weights + cache against the GPU, and the peak of a
    training step item by item with whether it fits and the largest batch that does,
    computed by the CLI's own functions: `params_report`, `kv_cache_report`,
    `flops_report` and `memory_report` of `llmmath.reports` (what ``python -m llmmath
    memory MODEL --weights W --kv-dtype D --batch B --seq-len T --gpu G --json``
    prints) and `training_report` (``train-memory ... --json``). A bad config shows
    the CLI's one-line message."""
    from llmmath.gpus import DEFAULT_GPU, GPUS
    from llmmath.reports import (
        WEIGHTS,
        flops_report,
        kv_cache_report,
        memory_report,
        params_report,
    )
    from llmmath.units import human_bytes

    state = {
        "preset": "llama-3-8b",
        "config": "",
        "batch": 1,
        "seq_len": 4096,
        "weights": "bf16",
        "kv_dtype": "bf16",
        "gpu": DEFAULT_GPU,
        **training_defaults(),
        **state,
    }
    name = state["preset"]
    if name in presets.names() and state.get("loaded") != name:
        state["config"] = json.dumps(presets.get(name).hf_config, indent=2)
        state["loaded"] = name
    elif name in presets.names() and state["config"] != json.dumps(
        presets.get(name).hf_config, indent=2
    ):
        state["preset"] = state["loaded"] = PASTED  # the reader edited the text
    controls = [
        _select("preset", _("model"), [*presets.names(), [PASTED, _(PASTED)]]),
        _number("batch", _("batch"), 1, 10**6),
        _number("seq_len", _("tokens"), 1, 10**8),
        _select("weights", _("weights"), WEIGHTS),
        _select("kv_dtype", _("KV cache"), FORMATS),
        _select("gpu", _("GPU"), list(GPUS)),
        *_training_controls(state),
        {"name": "config", "label": "config.json", "type": "text"},
    ]
    try:
        if state["preset"] == PASTED:
            title = _("the pasted config.json")
            cfg = ModelConfig.from_hf_config(
                parse_config_text(str(state["config"]), title)
            )
        else:
            title = presets.get(_preset(state, "llama-3-8b")).title
            cfg = presets.load(state["preset"])
        batch = _int(state, "batch", 1, 10**6)
        seq_len = _int(state, "seq_len", 1, 10**8)
        weights = _choice(state, "weights", WEIGHTS, "bf16")
        kv_dtype = _choice(state, "kv_dtype", FORMATS, "bf16")
        gpu = GPUS[_choice(state, "gpu", list(GPUS), DEFAULT_GPU)]
        p = params_report(title, cfg)
        kv = kv_cache_report(title, cfg, seq_len, batch, kv_dtype)
        fl = flops_report(title, cfg, seq_len)
        mem = memory_report(
            title, cfg, weights, None, kv_dtype, batch, seq_len, gpu.name
        )
        train = training_report(title, cfg, state, batch, seq_len, gpu.name)
    except ConfigError as e:
        view = _error_view("calculator", state, controls, e)
        view["blocks"] = [note(_("llmmath: error: {error}").format(error=e), "error")]
        return view
    total = p["total"]
    groups = [
        [_(GROUP_LABELS[g]), f"{n:,}", f"{n / total:.2%}"]
        for g, n in p["groups"].items()
        if g in GROUPS
    ]
    groups += [
        [_("non-embedding"), f"{p['non_embedding']:,}", ""],
        [_("active per token"), f"{p['active']:,}", f"{p['active'] / total:.2%}"],
        [_("total"), f"{total:,}", "100%"],
    ]
    parts = fl["parts"]
    flops_rows = [
        [_("attention projection matmuls"), f"{parts['attention_projections']:,}"],
        [_("FFN matmuls"), f"{parts['ffn']:,}"],
        [_("LM head matmul"), f"{parts['lm_head']:,}"],
        [_("QKᵀ and AV (causal)"), _flops_text(parts["attention_qk_av"])],
        [_("forward FLOPs per token"), _flops_text(fl["forward_flops_per_token"])],
    ]
    group = (
        _(", groups of {n}").format(n=mem["group_size"]) if mem["group_size"] else ""
    )
    verdict = _("fit") if mem["fits"] else _("do not fit")
    cache_rows = [
        [
            _("KV cache per token ({dtype})").format(dtype=kv_dtype),
            _("{n} bytes").format(n=f"{kv['bytes_per_token']:,}"),
        ],
        [
            _("KV cache, batch {batch} × {t} tokens").format(
                batch=f"{batch:,}", t=f"{seq_len:,}"
            ),
            _bytes_text(mem["kv_cache_bytes"], human_bytes),
        ],
        [
            _("weights ({format}{groups})").format(format=weights, groups=group),
            _bytes_text(mem["weight_bytes"], human_bytes),
        ],
        [_("weights + KV cache"), _bytes_text(mem["total_bytes"], human_bytes)],
        [
            _("in {gpu} ({n} bytes) they").format(
                gpu=gpu.name, n=f"{mem['gpu_bytes']:,}"
            ),
            _("{verdict}: largest batch {batch}, longest context {t}").format(
                verdict=verdict,
                batch=f"{mem['max_batch']:,}",
                t=f"{mem['max_seq_len']:,}",
            ),
        ],
    ]
    if kv["cached_tokens"] < seq_len:
        cache_rows.insert(
            1, [_("tokens kept (sliding window)"), f"{kv['cached_tokens']:,}"]
        )
    items = {
        _("weights ({format})").format(format=weights): mem["weight_bytes"],
        _("KV cache"): kv["bytes"],
    }
    past = []
    if seq_len > mem["context_limit"]:  # memory is not the only limit (the CLI's too)
        past = [
            note(
                _(
                    "{t} tokens is past the {limit}-token context the model is built "
                    "for (max_position_embeddings): what fits in memory is not what "
                    "the model can read."
                ).format(t=f"{seq_len:,}", limit=f"{mem['context_limit']:,}")
            )
        ]
    return {
        "kind": "calculator",
        "state": state,
        "controls": controls,
        "blocks": [
            note(_("{title}: {n} parameters").format(title=title, n=f"{total:,}")),
            *past,
            table(groups, [_("group"), _("parameters"), _("share")]),
            table(cache_rows, [_("memory"), _("bytes")]),
            table(
                flops_rows,
                [_("FLOPs per token"), _("at t = {t}").format(t=f"{seq_len:,}")],
            ),
            stack(items, gpu.memory, gpu.name),
            *training_blocks(train),
        ],
    }


def _flops_text(value: int | float) -> str:
    return f"{value:,}" if isinstance(value, int) else f"{value:,.1f}"


# --- the entry points -----------------------------------------------------------------

# --- chapter 7b: multi-head latent attention ------------------------------------------


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


EXPLORERS: dict[str, Callable[[Mapping], View]] = {
    "params": params,
    "attention": attention,
    "rotary": rotary,
    "serving": serving,
    "memory": memory,
    "roofline": roofline,
    "calculator": calculator,
    "mla": mla,
}


def explore(kind: str, state: Mapping) -> View:
    """The view of explorer ``kind`` (a key of `EXPLORERS`) for ``state``.

    Raises:
        ConfigError: an unknown ``kind`` or a state that is not a dict; bad values
        inside the state are shown in the view, not raised.
    """
    if kind not in EXPLORERS:
        raise ConfigError(
            _("unknown explorer {kind}; explorers: {names}").format(
                kind=repr(kind), names=join(EXPLORERS)
            )
        )
    if not isinstance(state, Mapping):
        raise ConfigError(
            _("an explorer's state must be a dict, got {type}").format(
                type=type(state).__name__
            )
        )
    view = _run(kind, state)
    if "error" not in view and not _illegal(view):
        return view
    # The controls must show the state that was computed: values no control can show
    # (a link's unknown preset, a bad gpu or dtype, a number out of range) fall back,
    # field by field, to the explorer's default, and the one-line answer stays.
    defaults = _run(kind, {})
    fixed = dict(view["state"])
    bad = _illegal(view if view["controls"] else {**defaults, "state": fixed})
    if not bad:
        return view  # an in-range number that does not fit the others stays shown
    if "error" not in view:  # a value the explorer took but no control can show
        (control,) = [c for c in view["controls"] if c["name"] == bad[0]]
        text = _("{name} cannot be {value}: {domain}").format(
            name=bad[0], value=repr(fixed.get(bad[0])), domain=_domain(control)
        )
        view = _error_view(kind, fixed, view["controls"], ConfigError(text))
    for _attempt in range(4):  # a new preset can change another select's options
        fixed.update({name: defaults["state"].get(name) for name in bad})
        if "preset" in bad:
            fixed.pop("loaded", None)  # load the default preset's own sizes
        again = _run(kind, fixed)
        fixed, bad = dict(again["state"]), _illegal(again)
        if not bad:
            break
    else:
        again = defaults
    return {
        **again,
        "blocks": [view["blocks"][0], *again["blocks"]],
        "error": view["error"],
    }


def _run(kind: str, state: Mapping) -> View:
    try:
        return EXPLORERS[kind](state)
    except (
        TypeError,
        ValueError,
        KeyError,
    ) as e:  # ill-typed values from a hand-made state
        return _error_view(kind, state, [], ConfigError(str(e)))


def explore_json(kind: str, state_json: str) -> str:
    """`explore` from and to JSON text: what the browser calls through Pyodide."""
    return json.dumps(explore(kind, json.loads(state_json)))


def view_text(view: View) -> str:
    """The view's notes and tables as plain text, one row a line (for tests and for
    nbval)."""
    lines = []
    for block in view["blocks"]:
        if block["type"] == "note":
            lines.append(block["text"])
        elif block["type"] == "table":
            if block["headers"]:
                lines.append(" | ".join(block["headers"]))
            lines += [" | ".join(row) for row in block["rows"]]
    return "\n".join(lines)


def _control_value(control: Mapping, value: Any) -> str:
    if control["type"] == "select":
        for option, label in control.get("options", []):
            if option == value:
                return str(label)
    if control["type"] == "check":
        return _("yes") if value else _("no")
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return f"{value:,}"
    return str(value)


def view_controls_text(view: View) -> str:
    """The controls of a view and their values, one line: ``model: Llama-3-8B · …``
    (a long text control, such as a pasted config, is left out)."""
    return " · ".join(
        f"{c['label']}: {_control_value(c, view['state'].get(c['name']))}"
        for c in view["controls"]
        if c["type"] != "text"
    )


def view_snapshot_text(view: View) -> str:
    """A stored output's plain-text snapshot of the explorer: controls, then
    `view_text`, then what to do for the live explorer."""
    return "\n".join(
        [view_controls_text(view), view_text(view), _(SNAPSHOT_NOTE).replace("*", "")]
    )


#: Said under every static snapshot of an explorer.
SNAPSHOT_NOTE = N_(
    "*A snapshot: run this cell (or open the page on the site) for the live explorer "
    "and its figures.*"
)


def view_html(view: View) -> str:
    """A static HTML snapshot of a view, for a stored output seen without a kernel
    (JupyterLab, Colab or VS Code before the cell runs): the controls' values, the
    notes and tables, and each figure's title. Everything is escaped; the HTML uses
    only tags that Jupyter's sanitizer keeps."""
    from html import escape as esc

    parts = [f"<p><b>{esc(view_controls_text(view))}</b></p>"]
    for block in view["blocks"]:
        if block["type"] == "note":
            parts.append(f"<p>{esc(block['text'])}</p>")
        elif block["type"] == "table":
            rows = []
            if block["headers"]:
                cells = "".join(f"<th>{esc(h)}</th>" for h in block["headers"])
                rows.append(f"<thead><tr>{cells}</tr></thead>")
            body = []
            for row in block["rows"]:
                cells = "".join(
                    f'<td style="text-align:{"right" if a == "r" else "left"}">'
                    f"{esc(c)}</td>"
                    for c, a in zip(row, block["align"])
                )
                body.append(f"<tr>{cells}</tr>")
            rows.append(f"<tbody>{''.join(body)}</tbody>")
            parts.append(f"<table>{''.join(rows)}</table>")
        else:
            title = block.get("title") or block.get("limit_label")
            what = (
                _("The figure of {title} is drawn when the cell runs.").format(
                    title=esc(str(title))
                )
                if title
                else _("A figure is drawn when the cell runs.")
            )
            parts.append(f"<p><i>{what}</i></p>")
    note_text = esc(_(SNAPSHOT_NOTE).strip("*"))
    parts.append(f"<p><i>{note_text}</i></p>")
    return f'<div class="llmmath-snapshot">{"".join(parts)}</div>'


# --- chapter 9c: many GPUs ------------------------------------------------------------


def _seconds(x: float) -> str:
    if x == 0:
        return "0 s"
    return f"{x:,.3f} s" if x >= 0.001 else f"{x * 1000:,.3f} ms"


def _settle(state: dict, name: str, offered: list[int]) -> None:
    """Keep ``state[name]`` among ``offered`` (tp or pp of the layout explorer): the
    reader's choice, kept as ``name_asked``, or the nearest offered value below it when
    a new model or GPU count rules it out, so that going back restores it. A value
    that is not an int is left for the explorer to refuse."""
    value, asked = state[name], state.get(f"{name}_asked")
    if not _is_int(value):
        return
    if value != state.get(f"{name}_shown") or not _is_int(asked):
        asked = value  # the reader chose it (or the state is new)
    shown = (
        asked
        if asked in offered
        else max([o for o in offered if o <= asked] or offered[:1])
    )
    state.update({name: shown, f"{name}_asked": asked, f"{name}_shown": shown})


def layout(state: Mapping) -> View:
    """Chapter 9c's layout explorer: a preset, GPUs, tp, pp, ZeRO stage, micro-batches,
    sequence length, sequence parallelism, recomputation and cluster → what each GPU
    holds (parameters, model state, activations against the GPU's capacity by
    `llmmath.gpus`' rule: 80 GB on every cluster), the bytes it sends by
    collective, and the step time and MFU estimate of `llmmath.parallel.plan` (dp =
    gpus ÷ (tp·pp))."""
    from llmmath.parallel import CLUSTERS, plan

    state = {
        "preset": "llama-3-70b",
        "gpus": 1024,
        "tp": 8,
        "pp": 4,
        "zero": 1,
        "micro_batches": 8,
        "seq_len": 8192,
        "sequence_parallel": False,
        "recompute": False,
        "cluster": "h100",
        **state,
    }
    name = state.get("preset")
    cfg = presets.load(name) if name in presets.names() else None
    heads = cfg.num_key_value_heads if cfg else 8
    layers = cfg.num_hidden_layers if cfg else 80
    tps = [t for t in (1, 2, 4, 8) if heads % t == 0]
    _settle(state, "tp", tps)
    pps = [p for p in divisors(layers) if p <= 64]
    if _is_int(state["gpus"]) and _is_int(state["tp"]) and state["gpus"] > 0:
        pps = [p for p in pps if state["gpus"] % (state["tp"] * p) == 0] or [1]
    _settle(state, "pp", pps)
    controls = [
        _preset_select(),
        _number("gpus", _("GPUs"), 1, 10**6),
        _select("tp", "tp", tps),
        _select("pp", "pp", pps),
        _select("zero", "ZeRO", [[0, "0 (DP)"], [1, "1"], [2, "2"], [3, "3 (FSDP)"]]),
        _number("micro_batches", _("micro-batches"), 1, 4096),
        _number("seq_len", _("sequence"), 1, 10**6),
        _check("sequence_parallel", _("sequence parallel")),
        _check("recompute", _("recompute activations")),
        _select("cluster", _("GPUs and links"), list(CLUSTERS)),
    ]
    try:
        cfg = presets.load(_preset(state, "llama-3-70b"))
        gpus = _int(state, "gpus", 1, 10**6)
        tp = _int(state, "tp", 1, 4096)
        pp = _int(state, "pp", 1, 4096)
        zero = _choice(state, "zero", (0, 1, 2, 3), 1)
        p = plan(
            cfg,
            gpus,
            tp=tp,
            pp=pp,
            zero=zero,
            micro_batches=_int(state, "micro_batches", 1, 4096),
            seq_len=_int(state, "seq_len", 1, 10**6),
            sequence_parallel=bool(state["sequence_parallel"]),
            recompute=bool(state["recompute"]),
            gpu=_choice(state, "cluster", tuple(CLUSTERS), "h100"),
        )
    except ConfigError as e:
        return _error_view("layout", state, controls, e)
    items = {**p.model_state, "activations": p.activation_bytes_per_gpu}
    items = {_item(k): v for k, v in items.items()}
    total = p.memory_bytes_per_gpu
    memory_rows = [[k, f"{v:,}", f"{v / 10**9:,.2f}"] for k, v in items.items()]
    memory_rows.append([_("total"), f"{total:,}", f"{total / 10**9:,.2f}"])
    sent = [
        [op.replace("_", "-"), f"{b:,}", f"{b / 10**9:,.2f}"]
        for op, b in p.communication_bytes().items()
        if b
    ] or [[_("none"), "0", "0.00"]]
    times = [[_item(k), _seconds(v)] for k, v in p.times().items()]
    times.append([_("step"), _seconds(p.step_seconds)])
    verdict = _("fits") if p.fits else _("does not fit")
    return {
        "kind": "layout",
        "state": state,
        "controls": controls,
        "blocks": [
            note(
                _(
                    "dp {dp} × tp {tp} × pp {pp} on {gpus} GPUs, ZeRO-{zero}: "
                    "{params} parameters per GPU; {verdict} in {gb} GB"
                ).format(
                    dp=f"{p.dp:,}",
                    tp=p.tp,
                    pp=p.pp,
                    gpus=f"{p.gpus:,}",
                    zero=zero,
                    params=f"{p.params_per_gpu:,}",
                    verdict=verdict,
                    gb=f"{p.cluster.memory / 10**9:,.0f}",
                )
            ),
            table(memory_rows, [_("per GPU"), _("bytes"), "GB"]),
            stack(items, p.cluster.memory),
            table(sent, [_("bytes sent per GPU per step"), _("bytes"), "GB"]),
            table(times, [_("step time (estimate)"), _("seconds")]),
            note(
                _(
                    "{tokens} tokens per step; pipeline bubble {bubble} = {share}; "
                    "MFU ≈ {mfu} with ideal kernels"
                ).format(
                    tokens=f"{p.tokens_per_step:,}",
                    bubble=p.bubble,
                    share=f"{float(p.bubble):.1%}",
                    mfu=f"{p.mfu:.1%}",
                )
            ),
            note(
                _(
                    "pp offers the divisors of the {layers} layers that also divide "
                    "the {gpus} GPUs of a tp group, so that pipeline stages are "
                    "equal; a tp or pp that does not fit a new model or GPU count "
                    "moves to the nearest that does. (Megatron-LM can also split "
                    "layers unevenly: {model} ran pp {model_pp} over its "
                    "{model_layers} layers with one layer fewer on the first and "
                    "last stages, {source}.)"
                ).format(
                    layers=cfg.num_hidden_layers,
                    gpus=f"{p.gpus // p.tp:,}",
                    model="Llama 3 405B",
                    model_pp=16,
                    model_layers=126,
                    source=_("Llama 3 report, Sec. 3.3.2"),
                )
            ),
        ],
    }


EXPLORERS["layout"] = layout


# --- chapter 9b: serving --------------------------------------------------------------


def speculative(state: Mapping) -> View:
    """Chapter 9b's speculative decoding explorer: acceptance rate α, draft tokens γ and
    a draft pass's cost c (in target passes) → expected tokens per target pass, the
    speed-up and the best γ (`llmmath.speculative`, Leviathan et al. 2023, Eq. 1 and
    Theorem 3.8), with the speed-up against γ."""
    from llmmath.speculative import best_gamma, expected_tokens_per_pass, speedup

    state = {"alpha": 0.8, "gamma": 4, "cost_ratio": 0.05, **state}
    controls = [
        _number("alpha", _("acceptance α"), 0, 0.99, "float", 0.01),
        _number("gamma", _("draft tokens γ"), 1, 64),
        _number("cost_ratio", _("draft cost c"), 0, 10, "float", 0.01),
    ]
    try:
        alpha = _float(state, "alpha", 0, 0.99)
        gamma = _int(state, "gamma", 1, 64)
        cost = _float(state, "cost_ratio", 0, 10)
    except ConfigError as e:
        return _error_view("speculative", state, controls, e)
    tokens = expected_tokens_per_pass(alpha, gamma)
    gain = speedup(alpha, gamma, cost)
    best = best_gamma(alpha, cost)
    rows = [
        [_("expected tokens per target pass"), f"{tokens:.3f}"],
        [_("cost of one iteration (target passes)"), f"{gamma * cost + 1:.3f}"],
        [_("speed-up over plain decoding"), f"{gain:.3f}×"],
        [_("best γ ({low} … {high})").format(low=1, high=64), f"{best}"],
        [_("speed-up at the best γ"), f"{speedup(alpha, best, cost):.3f}×"],
        [_("tokens per pass, γ → ∞"), f"{1 / (1 - alpha):.3f}"],
    ]
    gammas = range(1, 33)
    curve = [[g, speedup(alpha, g, cost)] for g in gammas]
    top = max([p[1] for p in curve] + [gain, 1.0])
    plot = {
        "type": "plot",
        "width": 440,
        "height": 260,
        "x": {
            "min": 1,
            "max": 32,
            "log": False,
            "label": _("draft tokens γ ({low} … {high})").format(low=1, high=32),
        },
        "y": {"min": 0, "max": 1.1 * top, "log": False, "label": _("speed-up")},
        "series": [
            {"points": [[1, 1.0], [32, 1.0]], "mode": "dashed", "color": GREY},
            {
                "points": curve,
                "mode": "line",
                "color": PALETTE[0],
                "label": f"α = {alpha:g}, c = {cost:g}",
            },
            {
                "points": [[gamma, gain]],
                "mode": "dots",
                "color": PALETTE[1],
                "radius": 5.5,
                "label": f"γ = {gamma}",
            },
        ],
    }
    return {
        "kind": "speculative",
        "state": state,
        "controls": controls,
        "blocks": [plot, table(rows)],
    }


EXPLORERS["speculative"] = speculative


#: The site runtime's own words (``llmmath/static/runtime.js`` and ``explorer.js``):
#: `llmmath_book.runtime` inlines them, in the build's language, into
#: llmmath-runtime.js, whose ``t(message, fields)`` looks them up (English when absent).
RUNTIME_MESSAGES = (
    N_("Could not run Python in this browser: {error}. Reload the page to try again."),
    N_(
        "Nothing was run: {error}. This site's files were changed or damaged on the "
        "way to this page; reloading will not help until the site is fixed."
    ),
    N_(
        "Live in your browser: changing a control runs llmmath here, on Python "
        "compiled to WebAssembly (Pyodide, loaded once on first use: {size})."
    ),
    N_("Live: computed in your browser by llmmath on Pyodide."),
    N_("Skip to the first explorer's controls"),
    N_(
        "Opened from disk: the numbers shown are those stored in this page. To change "
        "them, Python must run in your browser, which it does only for a served site: "
        "run make serve and open this page at http://localhost:8000."
    ),
    N_("Loading the answer in this page's link:"),
    N_("reading it…"),
    N_("downloading Python for this page: {received} of {total} ({percent} %)…"),
    N_("starting Python…"),
    N_("loading llmmath…"),
    N_("{path} did not start"),
    N_("its state is not JSON"),
    N_("its state is not a JSON object"),
    N_("its config is not base64url text"),
    N_("its config is not deflate data"),
    N_("its config is larger than {limit} bytes, the most llmmath reads"),
    N_("its config is not UTF-8 text"),
    N_("its config-too-long is not a size in bytes"),
    N_("This page's link cannot be read: {error}."),
    N_(
        "This page's link has no config.json: the one pasted ({size} bytes) was too "
        "long to keep in a link (limit {limit} KB). Paste it again."
    ),
    N_(
        "This answer is not kept in the page's link: the pasted config.json would "
        "make it {size} KB long, over the {limit} KB limit."
    ),
    N_("dashed line: {limit}"),
    N_("{a} against {b}"),
)

"""Chapter 6 (*RoPE: rotary position embedding*): the rotary explorer, `rotary`:
position m, pair i, base and d_h → the pair's angle θ_i and wavelength λ_i, the
rotated pair on the unit circle and every pair's wavelength.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

from llmmath.config import ConfigError
from llmmath.explorers.controls import (
    GREY,
    INK,
    PALETTE,
    View,
    _choice,
    _error_view,
    _int,
    _number,
    _select,
    table,
)
from llmmath.messages import gettext as _

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

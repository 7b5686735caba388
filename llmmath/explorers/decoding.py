"""Chapter 9b (*Serving*): the speculative decoding explorer, `speculative`: acceptance
rate α, draft tokens γ and the draft's cost → expected tokens per target pass and
the speed-up.
"""

from __future__ import annotations

from collections.abc import Mapping

from llmmath.config import ConfigError
from llmmath.explorers.controls import (
    GREY,
    PALETTE,
    View,
    _error_view,
    _float,
    _int,
    _number,
    table,
)
from llmmath.messages import gettext as _


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

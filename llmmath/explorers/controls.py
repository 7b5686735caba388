"""What every explorer shares: reading the state (`divisors`, the checked numbers and
choices), the controls (numbers, selects, check boxes, the preset select, each with
its accessible name), the blocks (`note`, `table`, `stack`), the error view and the
legality of a value (what `llmmath.explorers.explore` falls back from), and the
palette the views name (`PALETTE`). Standard library only.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import Any

from llmmath import presets
from llmmath.config import ConfigError
from llmmath.messages import N_, current, join
from llmmath.messages import gettext as _
from llmmath.reports import GROUP_COLORS

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

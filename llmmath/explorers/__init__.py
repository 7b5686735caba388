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

The package is laid out by the chapter each explorer serves (each module's docstring
names it): `llmmath.explorers.parameters` (chapter 1, ``params``), `heads` (chapter 3,
``attention``), `rope` (chapter 6, ``rotary``), `kv_cache` (chapter 7, ``serving``),
`latent` (chapter 7b, ``mla``), `memory_speed` (chapter 9, ``memory`` and
``roofline``), `decoding` (chapter 9b, ``speculative``), `many_gpus` (chapter 9c,
``layout``) and `any_model` (the calculator page, ``calculator``), over `controls`
(state, controls, blocks and the legality of a value, which they all share). This
module is the one entry point: the table `EXPLORERS`, `explore`, `explore_json`, the
views as text and HTML, and the runtime's own words (`RUNTIME_MESSAGES`); it
re-exports every explorer and the names the widgets, the figures and the tests use.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any

from llmmath.config import ConfigError
from llmmath.explorers.any_model import PASTED, calculator
from llmmath.explorers.controls import (
    BAR_COLORS,
    FORMATS,
    GREY,
    GROUP_COLORS,
    GROUP_PALETTE,
    INK,
    PALETTE,
    SYMBOL_NAMES,
    View,
    _domain,
    _error_view,
    _illegal,
    divisors,
    note,
    stack,
    table,
)
from llmmath.explorers.decoding import speculative
from llmmath.explorers.heads import attention, attention_rows
from llmmath.explorers.kv_cache import serving
from llmmath.explorers.latent import mla
from llmmath.explorers.many_gpus import layout
from llmmath.explorers.memory_speed import (
    MAX_LORA_RANK,
    MODES,
    OPTION_LABELS,
    ROOFLINE_BATCHES,
    TRAINING_DEFAULTS,
    TRAINING_OPTIONS,
    memory,
    memory_numbers,
    memory_state,
    roofline,
    training_blocks,
    training_defaults,
    training_report,
)
from llmmath.explorers.parameters import (
    PARAM_FIELDS,
    breakdown_rows,
    group_bars,
    param_config,
    params,
)
from llmmath.explorers.rope import ROPE_BASES, rotary, rotary_numbers
from llmmath.messages import N_, join
from llmmath.messages import gettext as _
from llmmath.reports import GROUP_LABELS, ITEM_LABELS, ITEM_PATTERNS
from llmmath.reports import item_label as _item

#: What ``from llmmath.explorers import …`` offers: the entry points, every explorer,
#: and the helpers and tables the widgets, the figures (`llmmath.plots`) and the tests
#: use (each defined in the module of the chapter it serves, or in `controls`).
__all__ = [
    "BAR_COLORS",
    "EXPLORERS",
    "FORMATS",
    "GREY",
    "GROUP_COLORS",
    "GROUP_LABELS",
    "GROUP_PALETTE",
    "INK",
    "ITEM_LABELS",
    "ITEM_PATTERNS",
    "MAX_LORA_RANK",
    "MODES",
    "OPTION_LABELS",
    "PALETTE",
    "PARAM_FIELDS",
    "PASTED",
    "ROOFLINE_BATCHES",
    "ROPE_BASES",
    "RUNTIME_MESSAGES",
    "SNAPSHOT_NOTE",
    "SYMBOL_NAMES",
    "TRAINING_DEFAULTS",
    "TRAINING_OPTIONS",
    "View",
    "_illegal",
    "_item",
    "attention",
    "attention_rows",
    "breakdown_rows",
    "calculator",
    "divisors",
    "explore",
    "explore_json",
    "group_bars",
    "layout",
    "memory",
    "memory_numbers",
    "memory_state",
    "mla",
    "note",
    "param_config",
    "params",
    "roofline",
    "rotary",
    "rotary_numbers",
    "serving",
    "speculative",
    "stack",
    "table",
    "training_blocks",
    "training_defaults",
    "training_report",
    "view_controls_text",
    "view_html",
    "view_snapshot_text",
    "view_text",
]

EXPLORERS: dict[str, Callable[[Mapping], View]] = {
    "params": params,
    "attention": attention,
    "rotary": rotary,
    "serving": serving,
    "memory": memory,
    "roofline": roofline,
    "calculator": calculator,
    "mla": mla,
    "layout": layout,
    "speculative": speculative,
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

"""The chapters' shared plumbing: glue for the prose, one table helper, measured FLOPs.

Every helper here is plumbing, not a formula: the numbers come from the rest of
``llmmath``. Each docstring names the chapters that use it. IPython, tabulate and
``torch`` are imported inside the functions that need them, so ``import llmmath.book``
stays light; myst-nb is never imported (`glue` writes its output format). A value
whose words depend on the page's language (a count in words, a list, a date) is glued
with `glue_count`, `glue_list` or `glue_date`, which store its spec for the Chinese
edition (`llmmath.localize`); numbers and percentages read the same in both.
"""

from __future__ import annotations

import html
import numbers
import re
from collections.abc import Iterable, Sequence
from fractions import Fraction
from typing import Any

__all__ = [
    "CHAPTER_MODEL_TYPES",
    "GLUE_PREFIX",
    "TERMS",
    "Table",
    "glue",
    "glue_count",
    "glue_date",
    "glue_float",
    "glue_int",
    "glue_list",
    "glue_pct",
    "glue_spec",
    "glue_str",
    "measured_terms",
    "preset_names",
    "table",
]

CHAPTER_MODEL_TYPES = (
    "llama",
    "mistral",
    "qwen2",
    "qwen3",
    "gpt2",
    "mixtral",
    "minimind",
)
"""The model types whose architecture chapters 1–13 derive their formulas for: every
layer alike, multi-head-family attention, pre-norm. Newer types (MLA, sandwich norms,
dense-then-MoE stacks) are counted by the package, not by these chapters' formulas."""


def preset_names() -> tuple[str, ...]:
    """The presets whose ``model_type`` is in `CHAPTER_MODEL_TYPES`, sorted by name.

    Used by chapters 1–6 wherever a table or a check runs over "every preset".
    """
    from llmmath import presets

    return tuple(
        name
        for name in presets.names()
        if presets.load(name).model_type in CHAPTER_MODEL_TYPES
    )


GLUE_PREFIX = "application/papermill.record/"
"""The MIME-type prefix of a glued value that is stored but not shown (myst-nb's)."""


def glue(name: str, variable: Any, display: bool = True) -> None:
    """Store ``variable``'s display for ``{glue}`name``` roles: myst-nb's ``glue``.

    The same output as ``myst_nb.glue`` (IPython's display formats with ``metadata
    {"scrapbook": {"name", "mime_prefix"}}``, and the ``GLUE_PREFIX`` on every MIME
    type when ``display`` is false), so the book builds from it, but without myst-nb:
    a reader's kernel (Binder, Colab) needs only IPython. Used by chapter 3.
    """
    from IPython.core.formatters import format_display_data
    from IPython.display import display as ipy_display

    bundle, metadata = format_display_data(variable)
    prefix = "" if display else GLUE_PREFIX
    metadata["scrapbook"] = dict(name=name, mime_prefix=prefix)
    ipy_display({prefix + k: v for k, v in bundle.items()}, raw=True, metadata=metadata)


def glue_str(key: str, text: str) -> None:
    """Glue a string formatted in the cell for ``{glue:text}`key``` in the prose.

    Floats are rounded by the caller, so the page shows only digits that do not depend
    on the CPU. Used by every chapter and the errata appendix.
    """
    glue(key, text, display=False)


def glue_int(key: str, n: int) -> None:
    """Glue an exact integer with thousands separators, e.g. ``6,738,415,616``.

    Raises ``TypeError`` for anything that is not an integer (a float would hide a
    rounding). Used by chapters 1–12 and the errata appendix.
    """
    if isinstance(n, bool) or not isinstance(n, numbers.Integral):
        raise TypeError(f"glue_int({key!r}, ...) needs an int, got {type(n).__name__}")
    glue_str(key, f"{int(n):,}")


def glue_float(key: str, x: float, spec: str) -> None:
    """Glue a number formatted with the format spec ``spec`` (``".2f"``, ``".1%"``).

    Used by chapters 4, 8 and 12 wherever a share or a ratio goes into the prose.
    """
    glue_str(key, format(x, spec))


def glue_pct(key: str, x: float, digits: int = 2) -> None:
    """Glue a fraction as a percentage with ``digits`` decimals (0.1234 → 12.34%).

    Used by chapter 2 (the vocabulary's share of the parameters).
    """
    glue_str(key, f"{x:.{digits}%}")


def glue_spec(key: str, spec: dict[str, Any]) -> None:
    """Glue a value whose words depend on the page's language, for ``{glue:text}`key```.

    ``spec`` says what the value is (`llmmath.localize.render`); the glued
    ``text/plain`` is its English text, and the spec itself is stored beside it under
    `llmmath.localize.MIME`, from which the Chinese build writes the Chinese text. Used
    by `glue_count`, `glue_list` and `glue_date`.
    """
    from IPython.display import display as ipy_display

    from llmmath.localize import MIME, render

    bundle = {"text/plain": repr(render(spec, "en")), MIME: spec}
    ipy_display(
        {GLUE_PREFIX + mime: value for mime, value in bundle.items()},
        raw=True,
        metadata={"scrapbook": dict(name=key, mime_prefix=GLUE_PREFIX)},
    )


def glue_count(key: str, n: int, capital: bool = False) -> None:
    """Glue a count that English writes as a word ("four models"; ``capital`` for the
    start of a sentence, "Four") and Chinese in digits (4 个模型). Used by chapter 1."""
    if isinstance(n, bool) or not isinstance(n, numbers.Integral):
        raise TypeError(
            f"glue_count({key!r}, ...) needs an int, got {type(n).__name__}"
        )
    glue_spec(key, {"count": int(n), "capital": capital})


def glue_list(key: str, items: Iterable[Any], conj: str = "and") -> None:
    """Glue a list of names or numbers: "A, B and C" in English, "A、B 和 C" in
    Chinese (``conj="or"``: "A, B or C", "A、B 或 C"; ``""``: "32, 64, 4, 0" and
    "32、64、4、0"). Items are written with ``str``. Used by chapters 1, 4, 7b and 13
    and the errata appendix."""
    glue_spec(key, {"list": [str(item) for item in items], "conj": conj})


def glue_date(key: str, date: Any) -> None:
    """Glue a date (a ``datetime.date``, or ``"YYYY-MM"`` for a month): "18 April
    2024" or "July 2024" in English, "2024 年 4 月 18 日" or "2024 年 7 月" in
    Chinese. Used by the errata appendix."""
    glue_spec(key, {"date": date if isinstance(date, str) else date.isoformat()})


_NONZERO = re.compile(r"[1-9]|inf|nan")
_PADDED_CELL = re.compile(r"(<t[dh][^>]*>) *(.*?) *(</t[dh]>)")


def _is_number(x: Any) -> bool:
    return not isinstance(x, bool) and isinstance(x, numbers.Number | Fraction)


def _cell_text(x: Any, floatfmt: str) -> str:
    if x is None:
        return ""
    if isinstance(x, bool):
        return str(x)
    if isinstance(x, numbers.Integral):
        return f"{int(x):,}"
    if isinstance(x, numbers.Real):
        text = format(float(x), floatfmt)
        # a value that rounds to zero shows as 0, never as -0.000 (its sign is noise)
        return text[1:] if text.startswith("-") and not _NONZERO.search(text) else text
    return str(x)


class Table:
    """A table that displays as one HTML table, with a plain-text fallback.

    Build it with :func:`table`. Jupyter and the book show ``_repr_html_``; nbval
    compares ``__repr__`` (the plain text), which holds the same cells.
    """

    def __init__(
        self,
        rows: Sequence[Sequence[Any]],
        headers: Sequence[str],
        *,
        caption: str | None = None,
        align: Sequence[str] | str | None = None,
        fold: bool = False,
        floatfmt: str | Sequence[str] = ",.4g",
    ) -> None:
        self.headers = [str(h) for h in headers]
        self.rows = [list(r) for r in rows]
        n = len(self.headers)
        for i, row in enumerate(self.rows):
            if len(row) != n:
                raise ValueError(
                    f"row {i} has {len(row)} cells, but there are {n} headers"
                )
        if align is None:
            numeric = [
                bool(self.rows)
                and all(_is_number(r[j]) or r[j] is None for r in self.rows)
                for j in range(n)
            ]
            align = ["right" if num else "left" for num in numeric]
        elif isinstance(align, str):
            align = [{"l": "left", "r": "right", "c": "center"}[a] for a in align]
        align = list(align)
        if len(align) != n or not set(align) <= {"left", "right", "center"}:
            raise ValueError(
                f"align must give left, right or center for each of the {n} columns"
            )
        self.align = align
        self.caption = caption
        self.fold = fold
        fmts = [floatfmt] * n if isinstance(floatfmt, str) else list(floatfmt)
        if len(fmts) != n:
            raise ValueError(
                f"floatfmt must give one format for each of the {n} columns"
            )
        self.cells = [
            [_cell_text(x, fmt) for x, fmt in zip(row, fmts)] for row in self.rows
        ]

    def _tabulate(self, tablefmt: str, cells: list[list[str]], headers: list[str]):
        from tabulate import tabulate

        return tabulate(
            cells,
            headers,
            tablefmt=tablefmt,
            colalign=self.align,
            disable_numparse=True,
        )

    def __repr__(self) -> str:
        body = self._tabulate("simple", self.cells, self.headers)
        return body if self.caption is None else f"{self.caption}\n\n{body}"

    def _repr_html_(self) -> str:
        esc = [[html.escape(c) for c in row] for row in self.cells]
        heads = [html.escape(h) for h in self.headers]
        out = self._tabulate("unsafehtml", esc, heads)
        out = _PADDED_CELL.sub(r"\1\2\3", out)  # tabulate pads cells for plain text
        out = out.replace("<table>", '<table class="llmmath-table">', 1)
        if self.caption is not None and not self.fold:
            cap = html.escape(self.caption)
            out = out.replace(">", f">\n<caption>{cap}</caption>", 1)
        if self.fold:
            from llmmath.messages import gettext as _

            summary = html.escape(self.caption or _("Table"))
            n = len(self.rows)
            rows = (_("{n} row") if n == 1 else _("{n} rows")).format(n=f"{n:,}")
            summary = _("{summary} ({rows})").format(summary=summary, rows=rows)
            out = f"<details>\n<summary>{summary}</summary>\n{out}\n</details>"
        return out


def table(
    rows: Iterable[Sequence[Any]],
    headers: Sequence[str],
    *,
    caption: str | None = None,
    align: Sequence[str] | str | None = None,
    fold: bool = False,
    floatfmt: str | Sequence[str] = ",.4g",
) -> Table:
    """One table for the page: rows of cells under ``headers`` (put units in them).

    Integers get thousands separators (``6,738,415,616``), floats ``floatfmt`` (one
    spec, or one per column; never ``-0.000``), ``None`` an empty cell, other cells
    ``str``. Columns of numbers align right, others left, unless ``align`` says
    (``"lrr"``, or a list of ``"left"``/``"right"``/``"center"``). ``fold=True`` wraps
    the HTML in a ``<details>`` element whose summary is the caption, for long tables of
    presets. Raises ``ValueError`` when a row's length differs from the headers'. Used
    by every chapter and the errata appendix for every table they show.
    """
    return Table(
        list(rows), headers, caption=caption, align=align, fold=fold, floatfmt=floatfmt
    )


TERMS = ("attention", "ffn", "lm_head", "QKᵀ + AV")
"""The groups of :func:`measured_terms`, in the order chapters 8 and 12 print them."""


def measured_terms(model: Any, input_ids: Any) -> dict[str, int]:
    """Forward FLOPs of ``model(input_ids)`` as torch's ``FlopCounterMode`` counts them.

    Grouped as :data:`TERMS`: the q/k/v/o projections (``attention``); the FFN matrices,
    with an MoE's router and experts (``ffn``); the LM head (``lm_head``); and QKᵀ + AV
    (``aten.bmm`` inside the attention module). ``input_ids`` has shape
    ``(batch, seq)``; meta-device models work. Raises ``AssertionError`` if the counter
    records a FLOP outside these groups. Used by chapter 8 (dense models, against
    ``forward_flops_per_token``) and chapter 12 (mixtures of experts).
    """
    import torch
    from torch.utils.flop_counter import FlopCounterMode

    with FlopCounterMode(display=False) as counter, torch.no_grad():
        model(input_ids)
    out = dict.fromkeys(TERMS, 0)
    for module, ops in counter.get_flop_counts().items():
        leaf = module.rsplit(".", 1)[-1]
        for op, n in ops.items():
            if str(op) == "aten.bmm" and leaf == "self_attn":
                out["QKᵀ + AV"] += n
            elif leaf.endswith("_proj") or leaf == "router":
                out["attention" if ".self_attn." in module else "ffn"] += n
            elif leaf == "lm_head":
                out["lm_head"] += n
    assert sum(out.values()) == counter.get_total_flops()
    return out

"""Matplotlib figures of the book: parameter breakdowns by group.

Every figure takes `llmmath.counting.ParamCount` objects; nothing here computes a count.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

try:  # an extra of the core install (llmmath.errors.EXTRAS)
    import matplotlib.pyplot as plt
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure
except ModuleNotFoundError as error:
    from llmmath.errors import needs_extra

    raise needs_extra(error, __name__) from error

from llmmath.counting import GROUPS, ParamCount
from llmmath.reports import GROUP_COLORS, GROUP_LABELS  # shared with the explorers


def _new_axes(ax: Axes | None, size: tuple[float, float]) -> tuple[Figure, Axes]:
    if ax is not None:
        return ax.figure, ax
    fig, ax = plt.subplots(figsize=size, layout="constrained")
    return fig, ax


def group_bars(counts: ParamCount, ax: Axes | None = None, title: str = "") -> Figure:
    """Horizontal bars: parameters of each group, labelled with the exact count and
    share."""
    fig, ax = _new_axes(ax, (6.4, 2.6))
    groups = counts.by_group()
    labels = [GROUP_LABELS[g] for g in GROUPS][::-1]
    values = [groups[g] for g in GROUPS][::-1]
    bars = ax.barh(labels, values, color=[GROUP_COLORS[g] for g in GROUPS][::-1])
    for bar, value in zip(bars, values):
        ax.annotate(
            f" {value:,} ({value / counts.total:.1%})",
            (bar.get_width(), bar.get_y() + bar.get_height() / 2),
            va="center",
            fontsize=8,
        )
    ax.set_xlim(0, max(values) * 1.6)
    ax.set_xlabel("parameters")
    ax.set_title(title or f"total {counts.total:,} parameters", fontsize=10)
    ax.spines[["top", "right"]].set_visible(False)
    return fig


def pie(
    slices: Mapping[str, float],
    ax: Axes | None = None,
    title: str = "",
    colors: Sequence[str] | None = None,
    decimals: int = 2,
) -> Figure:
    """A pie of ``slices`` (label → value). Slices under 5 % get no label on the pie,
    where they would overlap; a legend below lists every slice with its share."""
    fig, ax = _new_axes(ax, (4.2, 4.6))
    values, total = list(slices.values()), sum(slices.values())
    wedges, *_ = ax.pie(
        values,
        colors=colors,
        startangle=90,
        counterclock=False,
        labels=[k if v / total >= 0.05 else "" for k, v in slices.items()],
        autopct=lambda pct: f"{pct:.{decimals}f}%" if pct >= 5 else "",
        pctdistance=0.7,
        textprops={"fontsize": 8},
    )

    def share(v: float) -> str:
        s = v / total
        return (
            f"{s:.{decimals}%}"
            if s == 0 or s >= 10 ** -(decimals + 2)
            else f"{s:.{decimals + 2}%}"
        )

    ax.legend(
        wedges,
        [f"{k}: {share(v)}" for k, v in slices.items()],
        loc="upper center",
        bbox_to_anchor=(0.5, 0.02),
        ncols=2,
        fontsize=8,
        frameon=False,
    )
    ax.set_title(title, fontsize=10)
    return fig


def share_pie(counts: ParamCount, ax: Axes | None = None, title: str = "") -> Figure:
    """A pie of the group shares of ``counts`` (groups with no parameters left out)."""
    groups = {g: n for g, n in counts.by_group().items() if n}
    return pie(
        {GROUP_LABELS[g]: n for g, n in groups.items()},
        ax=ax,
        title=title,
        colors=[GROUP_COLORS[g] for g in groups],
    )


def stacked_shares(models: Mapping[str, ParamCount], ax: Axes | None = None) -> Figure:
    """One horizontal bar per model, split into group shares (each bar sums to 100%)."""
    fig, ax = _new_axes(ax, (7.0, 0.45 * len(models) + 1.2))
    names = list(models)[::-1]
    left = [0.0] * len(names)
    for g in GROUPS:
        shares = [models[n].shares()[g] * 100 for n in names]
        ax.barh(names, shares, left=left, color=GROUP_COLORS[g], label=GROUP_LABELS[g])
        left = [a + b for a, b in zip(left, shares)]
    ax.set_xlim(0, 100)
    ax.set_xlabel("share of parameters (%)")
    ax.legend(
        ncols=len(GROUPS),
        loc="lower center",
        bbox_to_anchor=(0.5, 1.0),
        fontsize=8,
        frameon=False,
    )
    ax.spines[["top", "right"]].set_visible(False)
    return fig

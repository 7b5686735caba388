"""ipywidgets explorers. Thin: every number comes from a tested `llmmath` function.

`ParamExplorer` lets a reader pick a preset, change H, L, n_h, n_kv (only divisors of n_h are
offered), V, I and tying, and see the exact breakdown and a bar chart. An invalid combination
shows the `ConfigError` message instead of a traceback. On the static site the saved initial
state is shown.

The explorer's bar chart is drawn as HTML, not with matplotlib: one matplotlib redraw costs about
45 ms on a 2-core laptop CPU before any PNG is encoded, over the 50 ms budget for a control change,
while the HTML bars redraw in well under a millisecond and keep working in the static page. The
chapters' figures use matplotlib (`llmmath.plots`) with the same colours.
"""

from __future__ import annotations

import html

import ipywidgets as W
from IPython.display import display

from llmmath import presets
from llmmath.config import ConfigError, ModelConfig
from llmmath.counting import GROUPS, ParamCount, count_params
from llmmath.plots import GROUP_COLORS, GROUP_LABELS


def divisors(n: int) -> list[int]:
    """The positive divisors of ``n``, ascending: the valid ``num_key_value_heads`` for n_h = n."""
    return [d for d in range(1, n + 1) if n % d == 0]


def breakdown_html(counts: ParamCount) -> str:
    """An HTML table of the group counts, shares, per-layer and non-embedding counts."""
    rows = "".join(
        f"<tr><td>{GROUP_LABELS[g]}</td><td style='text-align:right'>{n:,}</td>"
        f"<td style='text-align:right'>{n / counts.total:.2%}</td></tr>"
        for g, n in counts.by_group().items() if g in GROUPS)
    extra = "".join(f"<tr><td>{html.escape(k)}</td><td style='text-align:right'>{v:,}</td><td></td></tr>"
                    for k, v in (("per layer", counts.per_layer),
                                 ("non-embedding", counts.non_embedding)))
    return ("<table><thead><tr><th>group</th><th>parameters</th><th>share</th></tr></thead>"
            f"<tbody>{rows}{extra}<tr><td><b>total</b></td>"
            f"<td style='text-align:right'><b>{counts.total:,}</b></td><td>100%</td></tr>"
            "</tbody></table>")


def bars_html(counts: ParamCount, title: str = "") -> str:
    """A horizontal bar chart of the group counts as HTML (bar length ∝ parameters)."""
    groups = counts.by_group()
    largest = max(groups.values())
    rows = "".join(
        f"<div style='display:flex;align-items:center;margin:2px 0'>"
        f"<span style='width:80px;font-size:12px'>{GROUP_LABELS[g]}</span>"
        f"<span style='display:inline-block;height:14px;width:{220 * n / largest:.1f}px;"
        f"background:{GROUP_COLORS[g]}'></span>"
        f"<span style='font-size:11px;margin-left:4px'>{n / counts.total:.1%}</span></div>"
        for g, n in groups.items())
    return f"<div><div style='font-size:12px;font-weight:bold'>{html.escape(title)}</div>{rows}</div>"


class ParamExplorer:
    """Preset picker plus H, L, n_h, n_kv, V, I and tying → exact breakdown and bar chart.

    ``ParamExplorer(preset)`` builds the widgets; display ``.widget`` (or the explorer itself).
    `update` recomputes and redraws; `config` is the configuration now shown (None if invalid).
    """

    FIELDS = (("hidden_size", "H"), ("num_hidden_layers", "L"), ("num_attention_heads", "n_h"),
              ("vocab_size", "V"), ("intermediate_size", "I"))

    def __init__(self, preset: str = "llama-2-7b"):
        style = {"description_width": "40px"}
        layout = W.Layout(width="170px")
        self.preset = W.Dropdown(options=presets.names(), value=preset, description="model",
                                 layout=W.Layout(width="260px"), style=style)
        self.sizes = {f: W.BoundedIntText(min=1, max=10**7, description=letter, style=style,
                                          layout=layout) for f, letter in self.FIELDS}
        self.n_kv = W.Dropdown(description="n_kv", style=style, layout=layout)
        self.tie = W.Checkbox(description="tie_word_embeddings", indent=False)
        self.table = W.HTML()
        self.message = W.HTML()
        self.plot = W.HTML()
        self.config: ModelConfig | None = None
        self._base: ModelConfig = presets.load(preset)
        self._loading = False
        self._load_preset()
        self.preset.observe(lambda _: self._load_preset(), names="value")
        for w in (*self.sizes.values(), self.n_kv, self.tie):
            w.observe(lambda _: self.update(), names="value")
        self.sizes["num_attention_heads"].observe(lambda _: self._offer_n_kv(), names="value")
        controls = W.VBox([self.preset, W.HBox(list(self.sizes.values())[:3] + [self.n_kv]),
                           W.HBox(list(self.sizes.values())[3:] + [self.tie])])
        self.widget = W.VBox([controls, self.message, W.HBox([self.table, self.plot])])

    def _ipython_display_(self) -> None:
        display(self.widget)

    def _offer_n_kv(self) -> None:
        n_h = self.sizes["num_attention_heads"].value
        keep = self.n_kv.value if self.n_kv.value and n_h % self.n_kv.value == 0 else n_h
        self._loading, was = True, self._loading
        self.n_kv.options = divisors(n_h)
        self.n_kv.value = keep
        self._loading = was
        self.update()

    def _load_preset(self) -> None:
        self._base = presets.load(self.preset.value)
        self._loading = True
        for field, _ in self.FIELDS:
            self.sizes[field].value = getattr(self._base, field)
        self.n_kv.options = divisors(self._base.num_attention_heads)
        self.n_kv.value = self._base.num_key_value_heads
        self.tie.value = self._base.tie_word_embeddings
        self._loading = False
        self.update()

    def current(self) -> ModelConfig:
        """The configuration the controls describe. Raises `ConfigError` if it is invalid."""
        changes = {f: w.value for f, w in self.sizes.items()}
        changes.update(num_key_value_heads=self.n_kv.value, tie_word_embeddings=self.tie.value)
        base = self._base
        if (changes["hidden_size"], changes["num_attention_heads"]) == (
                base.hidden_size, base.num_attention_heads):
            changes["head_dim"] = base.head_dim  # keep an explicit head_dim (Qwen3)
        return base.replace(**changes)

    def update(self) -> None:
        """Recompute the breakdown and redraw the chart (or show why the config is invalid)."""
        if self._loading:
            return
        try:
            self.config = self.current()
        except ConfigError as e:
            self.config = None
            self.message.value = f"<span style='color:#b00'>Invalid configuration: {html.escape(str(e))}</span>"
            return
        counts = count_params(self.config)
        self.message.value = (f"d_h = {self.config.head_dim}, g = n_h / n_kv = "
                              f"{self.config.group_size}")
        self.table.value = breakdown_html(counts)
        title = f"{self.preset.value} (edited)" if self._edited() else self.preset.value
        self.plot.value = bars_html(counts, title)

    def _edited(self) -> bool:
        return self.config != presets.load(self.preset.value)

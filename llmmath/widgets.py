"""ipywidgets explorers. Thin: every number comes from a tested `llmmath` function.

- `ParamExplorer` (chapter 1): a preset, H, L, n_h, n_kv (only divisors of n_h are offered), V,
  I and tying → the exact breakdown and a bar chart.
- `AttentionExplorer` (chapter 3): H, n_h, n_kv, t → attention parameters, KV bytes per token,
  FLOPs per token, beside the MHA twin.
- `RotaryExplorer` (chapter 6): a RoPE pair rotating with position, and the wavelengths.
- `ServingExplorer` (chapter 7): a preset, dtypes, batch, context, GPU memory → what fits.
- `MemoryBudget` and `RooflineExplorer` (chapter 9): training and serving memory item by item;
  a decode step on the roofline.

An invalid combination shows the `ConfigError` message instead of a traceback. On the static
site the saved initial state is shown.

The charts are drawn as HTML and SVG, not with matplotlib: one matplotlib redraw costs about
45 ms on a 2-core laptop CPU before any PNG is encoded, over the 50 ms budget for a control change,
while the HTML bars redraw in well under a millisecond and keep working in the static page. The
chapters' figures use matplotlib (`llmmath.plots`) with the same colours.
"""

from __future__ import annotations

import html
import math
from typing import TYPE_CHECKING

import ipywidgets as W
from IPython.display import display

from llmmath import presets
from llmmath.config import ConfigError, ModelConfig
from llmmath.counting import GROUPS, ParamCount, count_params
from llmmath.plots import GROUP_COLORS, GROUP_LABELS

if TYPE_CHECKING:
    import torch


def divisors(n: int) -> list[int]:
    """The positive divisors of ``n``, ascending: the valid ``num_key_value_heads`` for n_h = n."""
    return [d for d in range(1, n + 1) if n % d == 0]


def offer_divisors(dropdown: W.Dropdown, n: int) -> None:
    """Offer the divisors of ``n`` in ``dropdown``, keeping its value if it still divides n
    (otherwise n itself: MHA when the dropdown holds n_kv)."""
    keep = dropdown.value if dropdown.value and n % dropdown.value == 0 else n
    dropdown.options = divisors(n)
    dropdown.value = keep


def breakdown_html(counts: ParamCount) -> str:
    """An HTML table of the group counts, shares, per-layer and non-embedding counts."""
    rows = "".join(
        f"<tr><td>{GROUP_LABELS[g]}</td><td style='text-align:right'>{n:,}</td>"
        f"<td style='text-align:right'>{n / counts.total:.2%}</td></tr>"
        for g, n in counts.by_group().items()
        if g in GROUPS
    )
    extra = "".join(
        f"<tr><td>{html.escape(k)}</td><td style='text-align:right'>{v:,}</td><td></td></tr>"
        for k, v in (
            ("per layer", counts.per_layer),
            ("non-embedding", counts.non_embedding),
        )
    )
    return (
        "<table><thead><tr><th>group</th><th>parameters</th><th>share</th></tr></thead>"
        f"<tbody>{rows}{extra}<tr><td><b>total</b></td>"
        f"<td style='text-align:right'><b>{counts.total:,}</b></td><td>100%</td></tr>"
        "</tbody></table>"
    )


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
        for g, n in groups.items()
    )
    return f"<div><div style='font-size:12px;font-weight:bold'>{html.escape(title)}</div>{rows}</div>"


class ParamExplorer:
    """Preset picker plus H, L, n_h, n_kv, V, I and tying → exact breakdown and bar chart.

    ``ParamExplorer(preset)`` builds the widgets; display ``.widget`` (or the explorer itself).
    `update` recomputes and redraws; `config` is the configuration now shown (None if invalid).
    """

    FIELDS = (
        ("hidden_size", "H"),
        ("num_hidden_layers", "L"),
        ("num_attention_heads", "n_h"),
        ("vocab_size", "V"),
        ("intermediate_size", "I"),
    )

    def __init__(self, preset: str = "llama-2-7b"):
        style = {"description_width": "40px"}
        layout = W.Layout(width="170px")
        self.preset = W.Dropdown(
            options=presets.names(),
            value=preset,
            description="model",
            layout=W.Layout(width="280px"),
            style={"description_width": "60px"},
        )
        self.sizes = {
            f: W.BoundedIntText(
                min=1, max=10**7, description=letter, style=style, layout=layout
            )
            for f, letter in self.FIELDS
        }
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
        self.sizes["num_attention_heads"].observe(
            lambda _: self._offer_n_kv(), names="value"
        )
        controls = W.VBox(
            [
                self.preset,
                W.HBox(list(self.sizes.values())[:3] + [self.n_kv]),
                W.HBox(list(self.sizes.values())[3:] + [self.tie]),
            ]
        )
        self.widget = W.VBox([controls, self.message, W.HBox([self.table, self.plot])])

    def _ipython_display_(self) -> None:
        display(self.widget)

    def _offer_n_kv(self) -> None:
        self._loading, was = True, self._loading
        offer_divisors(self.n_kv, self.sizes["num_attention_heads"].value)
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
        changes.update(
            num_key_value_heads=self.n_kv.value, tie_word_embeddings=self.tie.value
        )
        base = self._base
        if (changes["hidden_size"], changes["num_attention_heads"]) == (
            base.hidden_size,
            base.num_attention_heads,
        ):
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
        self.message.value = (
            f"d_h = {self.config.head_dim}, g = n_h / n_kv = {self.config.group_size}"
        )
        self.table.value = breakdown_html(counts)
        title = f"{self.preset.value} (edited)" if self._edited() else self.preset.value
        self.plot.value = bars_html(counts, title)

    def _edited(self) -> bool:
        return self.config != presets.load(self.preset.value)


def _wire(explorer, controls: tuple, *below: W.Widget) -> W.VBox:
    """Observe every control with ``explorer.update`` and lay the controls out in two rows,
    the first three above the rest, with ``below`` under them."""
    for control in controls:
        control.observe(lambda _: explorer.update(), names="value")
    return W.VBox([W.HBox(list(controls[:3])), W.HBox(list(controls[3:])), *below])


def _table(rows: list[tuple[str, str]]) -> str:
    body = "".join(
        f"<tr><td>{html.escape(k)}</td><td style='text-align:right'>{v}</td></tr>"
        for k, v in rows
    )
    return f"<table><tbody>{body}</tbody></table>"


def _error(e: Exception) -> str:
    return (
        f"<span style='color:#b00'>Invalid configuration: {html.escape(str(e))}</span>"
    )


def attention_rows(
    cfg: ModelConfig, seq_len: int, dtype: str = "bf16"
) -> list[tuple[str, str]]:
    """(label, value) rows of `AttentionExplorer` for one configuration; numbers from llmmath."""
    from llmmath.flops import attention_flops
    from llmmath.kvcache import kv_cache_bytes_per_token

    counts = count_params(cfg)
    per_layer = sum(
        t.numel for t in counts.tensors if t.group == "attention" and t.per_layer
    )
    full, causal = (
        attention_flops(cfg, seq_len),
        attention_flops(cfg, seq_len, causal=True),
    )
    return [
        ("d_h, g", f"{cfg.head_dim}, {cfg.group_size}"),
        ("attention parameters, one layer", f"{per_layer:,}"),
        (
            f"attention parameters, {cfg.num_hidden_layers} layers",
            f"{counts.by_group()['attention']:,}",
        ),
        (
            f"KV cache bytes per token ({dtype})",
            f"{kv_cache_bytes_per_token(cfg, dtype):,}",
        ),
        (
            f"attention FLOPs per token at t = {seq_len:,}, all pairs",
            f"{full.total // seq_len:,}",
        ),
        (
            f"attention FLOPs per token at t = {seq_len:,}, causal",
            f"{causal.total // seq_len:,}",
        ),
        ("QKᵀ + AV share of them, causal", f"{causal.quadratic / causal.total:.1%}"),
    ]


def attention_html(cfg: ModelConfig, seq_len: int) -> str:
    """An HTML table of `attention_rows` for ``cfg`` next to its MHA twin (n_kv = n_h)."""
    twin = cfg.replace(
        num_key_value_heads=cfg.num_attention_heads, head_dim=cfg.head_dim
    )
    rows = "".join(
        f"<tr><td>{html.escape(label)}</td><td style='text-align:right'>{ours}</td>"
        f"<td style='text-align:right'>{theirs}</td></tr>"
        for (label, ours), (_, theirs) in zip(
            attention_rows(cfg, seq_len), attention_rows(twin, seq_len)
        )
    )
    return (
        "<table><thead><tr><th></th><th>this configuration</th><th>MHA (n_kv = n_h)</th>"
        f"</tr></thead><tbody>{rows}</tbody></table>"
    )


class AttentionExplorer:
    """H, n_h, n_kv (divisors of n_h only) and t → attention parameters, KV cache bytes per
    token and attention FLOPs per token, next to the MHA twin; L and the rest from ``preset``.

    Display ``.widget``; `update` recomputes; `config` is the configuration shown (None if
    invalid, when the message replaces the table).
    """

    def __init__(self, preset: str = "llama-3-8b", seq_len: int = 4096):
        self.base = presets.load(preset)
        style, layout = {"description_width": "36px"}, W.Layout(width="170px")

        def box(value: int, label: str, top: int) -> W.BoundedIntText:
            return W.BoundedIntText(
                value=value,
                min=1,
                max=top,
                description=label,
                style=style,
                layout=layout,
            )

        self.hidden = box(self.base.hidden_size, "H", 10**6)
        self.heads = box(self.base.num_attention_heads, "n_h", 4096)
        self.n_kv = W.Dropdown(
            options=divisors(self.base.num_attention_heads),
            value=self.base.num_key_value_heads,
            description="n_kv",
            style=style,
            layout=layout,
        )
        self.seq_len = box(seq_len, "t", 10**7)
        self.output = W.HTML()
        self.config: ModelConfig | None = None
        self._busy = False
        self.heads.observe(lambda _: self._offer_n_kv(), names="value")
        for control in (self.hidden, self.n_kv, self.seq_len):
            control.observe(lambda _: self.update(), names="value")
        self.widget = W.VBox(
            [W.HBox([self.hidden, self.heads, self.n_kv, self.seq_len]), self.output]
        )
        self.update()

    def _ipython_display_(self) -> None:
        display(self.widget)

    def _offer_n_kv(self) -> None:
        self._busy = True
        offer_divisors(self.n_kv, self.heads.value)
        self._busy = False
        self.update()

    def update(self) -> None:
        """Recompute the table (or show why the sizes are invalid)."""
        if self._busy:
            return
        try:
            self.config = self.base.replace(
                hidden_size=self.hidden.value,
                num_attention_heads=self.heads.value,
                num_key_value_heads=self.n_kv.value,
            )
        except ConfigError as e:
            self.config, self.output.value = None, _error(e)
            return
        self.output.value = attention_html(self.config, self.seq_len.value)


class ServingExplorer:
    """Preset, dtypes, batch, context and GPU memory (GB = 10⁹ bytes) → weights + KV cache,
    whether they fit, the largest batch and the longest context (`llmmath.memory.serving_fit`)."""

    def __init__(
        self,
        preset: str = "llama-3-8b",
        batch: int = 16,
        seq_len: int = 8192,
        gpu_gb: float = 80.0,
    ):
        from llmmath.units import DTYPE_BITS

        style, layout = {"description_width": "80px"}, W.Layout(width="230px")
        dtypes = [
            d
            for d in DTYPE_BITS
            if d in ("fp32", "bf16", "fp16", "fp8", "int8", "int4")
        ]
        self.preset = W.Dropdown(
            options=presets.names(),
            value=preset,
            description="model",
            style=style,
            layout=layout,
        )
        self.weight_dtype = W.Dropdown(
            options=dtypes,
            value="bf16",
            description="weights",
            style=style,
            layout=layout,
        )
        self.cache_dtype = W.Dropdown(
            options=dtypes,
            value="bf16",
            description="KV cache",
            style=style,
            layout=layout,
        )
        self.batch = W.BoundedIntText(
            value=batch,
            min=1,
            max=10**6,
            description="batch",
            style=style,
            layout=layout,
        )
        self.seq_len = W.BoundedIntText(
            value=seq_len,
            min=1,
            max=10**8,
            description="context",
            style=style,
            layout=layout,
        )
        self.gpu_gb = W.BoundedFloatText(
            value=gpu_gb,
            min=0.001,
            max=10**6,
            description="GPU (GB)",
            style=style,
            layout=layout,
        )
        self.output = W.HTML()
        self.fit = None
        self.widget = _wire(
            self,
            (
                self.preset,
                self.weight_dtype,
                self.cache_dtype,
                self.batch,
                self.seq_len,
                self.gpu_gb,
            ),
            self.output,
        )
        self.update()

    def _ipython_display_(self) -> None:
        display(self.widget)

    def update(self) -> None:
        """Recompute the fit."""
        from llmmath.memory import serving_fit
        from llmmath.units import human_bytes

        gpu = round(self.gpu_gb.value * 10**9)
        fit = serving_fit(
            presets.load(self.preset.value),
            gpu,
            self.batch.value,
            self.seq_len.value,
            self.weight_dtype.value,
            self.cache_dtype.value,
        )
        self.fit = fit
        verdict = (
            "<b style='color:#080'>fits</b>"
            if fit.fits
            else "<b style='color:#b00'>does not fit</b>"
        )
        batch, seq_len = self.batch.value, self.seq_len.value
        built_for = f"the model is built for {fit.context_limit:,} tokens"
        self.output.value = _table(
            [
                (
                    "weights",
                    f"{fit.weight_bytes:,} bytes = {human_bytes(fit.weight_bytes)}",
                ),
                (
                    f"KV cache, {batch:,} × {seq_len:,} tokens",
                    f"{fit.cache_bytes:,} bytes = {human_bytes(fit.cache_bytes)}",
                ),
                (
                    "weights + KV cache",
                    f"{fit.total_bytes:,} bytes = {human_bytes(fit.total_bytes)}: {verdict}",
                ),
                (f"largest batch of {seq_len:,}-token sequences", f"{fit.max_batch:,}"),
                (
                    f"longest context for a batch of {batch:,}",
                    f"{fit.max_seq_len:,} tokens ({built_for})",
                ),
            ]
        )


def pair_svg(cos_a: float, sin_a: float, size: int = 170) -> str:
    """A circle with the pair at position 0 (grey) and at position m (orange)."""
    c, rad = size / 2, size / 2 - 12
    x, y = c + rad * cos_a, c - rad * sin_a
    return (
        f"<svg width='{size}' height='{size}' viewBox='0 0 {size} {size}'>"
        f"<circle cx='{c}' cy='{c}' r='{rad}' fill='none' stroke='#bbbbbb'/>"
        f"<line x1='{c - rad}' y1='{c}' x2='{c + rad}' y2='{c}' stroke='#eeeeee'/>"
        f"<line x1='{c}' y1='{c - rad}' x2='{c}' y2='{c + rad}' stroke='#eeeeee'/>"
        f"<line x1='{c}' y1='{c}' x2='{c + rad}' y2='{c}' stroke='#999999' stroke-width='2'/>"
        f"<line x1='{c}' y1='{c}' x2='{x:.1f}' y2='{y:.1f}' stroke='#dd8452' stroke-width='3'/>"
        f"<circle cx='{x:.1f}' cy='{y:.1f}' r='4' fill='#dd8452'/></svg>"
    )


def wavelength_svg(
    wavelengths: torch.Tensor,
    pair: int,
    position: int,
    width: int = 330,
    height: int = 170,
    top: float = 7.0,
) -> str:
    """Bars of log10 λ_i (1 to 10^top tokens), the selected pair orange, a line at position m."""
    floor = height - 14
    y = lambda v: floor - (floor - 6) * math.log10(v) / top
    bw = width / len(wavelengths)
    bars = "".join(
        f"<rect x='{i * bw:.1f}' y='{y(v):.1f}' width='{max(bw - 1, 1):.1f}' "
        f"height='{floor - y(v):.1f}' fill='{'#dd8452' if i == pair else '#4c72b0'}'/>"
        for i, v in enumerate(wavelengths.tolist())
    )
    line = (
        f"<line x1='0' y1='{y(position):.1f}' x2='{width}' y2='{y(position):.1f}' stroke='#333333' "
        f"stroke-dasharray='4 3'/><text x='4' y='{y(position) - 3:.1f}' font-size='10'>"
        f"m = {position:,}</text>"
        if position >= 1
        else ""
    )
    return (
        f"<svg width='{width}' height='{height}' viewBox='0 0 {width} {height}'>{bars}{line}"
        f"<text x='0' y='{height - 2}' font-size='10'>pair 0</text>"
        f"<text x='{width}' y='{height - 2}' font-size='10' text-anchor='end'>pair {len(wavelengths) - 1}</text>"
        f"<text x='2' y='10' font-size='10'>λ_i, log scale, 1 to 10^{top:g} tokens</text></svg>"
    )


class RotaryExplorer:
    """Position m, pair i, base and d_h → the rotated pair and the wavelengths (HTML/SVG).

    Every number comes from `llmmath.rope` (`rope_inv_freq`, `rope_wavelengths`,
    `rope_cos_sin`); the pictures are SVG so a redraw takes well under a millisecond.
    """

    BASES = [
        ("10⁴ (LLaMA 1/2)", 1e4),
        ("5·10⁵ (Llama 3)", 5e5),
        ("10⁶ (Qwen, MiniMind)", 1e6),
    ]

    def __init__(
        self, position: int = 100, pair: int = 8, base: float = 1e4, head_dim: int = 128
    ):
        style = {"description_width": "70px"}
        self.position = W.IntSlider(
            value=position,
            min=0,
            max=32768,
            description="position m",
            style=style,
            layout=W.Layout(width="460px"),
        )
        self.pair = W.IntSlider(
            value=pair,
            min=0,
            max=head_dim // 2 - 1,
            description="pair i",
            style=style,
            layout=W.Layout(width="300px"),
        )
        self.base = W.Dropdown(
            options=self.BASES, value=base, description="base", style=style
        )
        self.head_dim = W.Dropdown(
            options=[64, 128], value=head_dim, description="d_h", style=style
        )
        self.output = W.HTML()
        self._busy = False
        for control in (self.position, self.pair, self.base, self.head_dim):
            control.observe(lambda _: self.update(), names="value")
        self.widget = W.VBox(
            [
                W.HBox([self.position, self.pair]),
                W.HBox([self.base, self.head_dim]),
                self.output,
            ]
        )
        self.update()

    def _ipython_display_(self) -> None:
        display(self.widget)

    def numbers(self) -> dict:
        """The numbers shown, from llmmath.rope: θ_i, λ_i, cos and sin of m·θ_i, angle, turns."""
        from llmmath.rope import rope_cos_sin, rope_inv_freq, rope_wavelengths

        d, i, m, base = (
            self.head_dim.value,
            self.pair.value,
            self.position.value,
            self.base.value,
        )
        cos, sin = rope_cos_sin(d, 1, base, offset=m)
        wavelengths = rope_wavelengths(d, base)
        theta_i = float(rope_inv_freq(d, base)[i])
        return dict(
            theta=theta_i,
            wavelength=float(wavelengths[i]),
            cos=float(cos[0, i]),
            sin=float(sin[0, i]),
            angle=m * theta_i,
            turns=m * theta_i / (2 * math.pi),
            done=int((wavelengths <= m).sum()),
            wavelengths=wavelengths,
        )

    def update(self) -> None:
        """Recompute and redraw."""
        if self._busy:
            return
        self._busy = True
        self.pair.max = self.head_dim.value // 2 - 1  # clamps the pair when d_h shrinks
        self._busy = False
        v = self.numbers()
        rows = [
            ("θ_i, radians per token", f"{v['theta']:.6g}"),
            ("wavelength λ_i = 2π/θ_i", f"{v['wavelength']:,.1f} tokens"),
            ("angle m·θ_i", f"{v['angle']:,.3f} rad = {v['turns']:,.3f} turns"),
            ("(cos, sin) of the angle", f"({v['cos']:.4f}, {v['sin']:.4f})"),
            ("pairs with λ ≤ m", f"{v['done']} of {self.head_dim.value // 2}"),
        ]
        table = "".join(
            f"<tr><td>{html.escape(k)}</td><td style='text-align:right'>{val}</td></tr>"
            for k, val in rows
        )
        self.output.value = (
            f"<div style='display:flex;gap:18px;align-items:center'>{pair_svg(v['cos'], v['sin'])}"
            f"{wavelength_svg(v['wavelengths'], self.pair.value, self.position.value)}</div>"
            f"<table><tbody>{table}</tbody></table>"
        )


MEMORY_DTYPES = ("fp32", "bf16", "fp8", "int8", "int4")


BAR_COLORS = (
    "#4c72b0",
    "#dd8452",
    "#55a868",
    "#c44e52",
    "#8172b3",
    "#937860",
    "#da8bc3",
)


def budget_html(items: dict[str, int], gpu_bytes: int) -> str:
    """A table of the items and a stacked bar against the GPU's size."""
    total = sum(items.values())
    rows = "".join(
        f"<tr><td>{html.escape(k)}</td><td style='text-align:right'>{v:,}</td>"
        f"<td style='text-align:right'>{v / 10**9:,.2f}</td>"
        f"<td style='text-align:right'>{v / total:.1%}</td></tr>"
        for k, v in items.items()
    )
    verdict = (
        "<b style='color:#080'>fits</b>"
        if total <= gpu_bytes
        else f"<b style='color:#b00'>does not fit</b>: at least {-(-total // gpu_bytes):,} such GPUs"
    )
    scale = 420 / max(total, gpu_bytes)
    bar = "".join(
        f"<span title='{html.escape(k)}' style='display:inline-block;height:16px;"
        f"width:{v * scale:.1f}px;background:{BAR_COLORS[i % len(BAR_COLORS)]}'></span>"
        for i, (k, v) in enumerate(items.items())
    )
    legend = " ".join(
        f"<span style='color:{BAR_COLORS[i % len(BAR_COLORS)]}'>■</span> "
        f"{html.escape(k)}"
        for i, k in enumerate(items)
    )
    marker = (
        f"<div style='position:absolute;left:{gpu_bytes * scale:.1f}px;top:-3px;height:22px;"
        f"border-left:2px dashed #333'></div>"
    )
    return (
        f"<table><thead><tr><th>item</th><th>bytes</th><th>GB</th><th>share</th></tr></thead>"
        f"<tbody>{rows}<tr><td><b>total</b></td><td style='text-align:right'><b>{total:,}</b></td>"
        f"<td style='text-align:right'><b>{total / 10**9:,.2f}</b></td><td></td></tr></tbody></table>"
        f"<div>against {gpu_bytes / 10**9:,.2f} GB: {verdict}</div>"
        f"<div style='position:relative;width:430px;margin:8px 0 2px 0;white-space:nowrap'>{bar}{marker}</div>"
        f"<div style='font-size:11px'>{legend}; dashed line: the GPU</div>"
    )


class MemoryBudget:
    """Preset, number format, optimizer, batch, sequence, flash attention and GPU size (GB =
    10⁹ bytes) → the bytes item by item (`llmmath.memory.memory_budget`) against the GPU."""

    def __init__(
        self,
        preset: str = "llama-3-8b",
        dtype: str = "bf16",
        optimizer: str = "Adam, mixed precision",
        batch: int = 1,
        seq_len: int = 4096,
        flash: bool = True,
        gpu_gb: float = 80.0,
    ):
        from llmmath.memory import OPTIMIZERS

        style, layout = {"description_width": "75px"}, W.Layout(width="250px")
        self.preset = W.Dropdown(
            options=presets.names(),
            value=preset,
            description="model",
            style=style,
            layout=layout,
        )
        self.dtype = W.Dropdown(
            options=MEMORY_DTYPES,
            value=dtype,
            description="weights",
            style=style,
            layout=layout,
        )
        self.optimizer = W.Dropdown(
            options=list(OPTIMIZERS),
            value=optimizer,
            description="optimizer",
            style=style,
            layout=layout,
        )
        self.batch = W.BoundedIntText(
            value=batch,
            min=1,
            max=10**6,
            description="batch",
            style=style,
            layout=layout,
        )
        self.seq_len = W.BoundedIntText(
            value=seq_len,
            min=1,
            max=10**7,
            description="sequence",
            style=style,
            layout=layout,
        )
        self.flash = W.Checkbox(
            value=flash, description="flash attention", indent=False
        )
        self.gpu_gb = W.BoundedFloatText(
            value=gpu_gb,
            min=0.001,
            max=10**6,
            description="GPU (GB)",
            style=style,
            layout=layout,
        )
        self.output = W.HTML()
        self.widget = _wire(
            self,
            (
                self.preset,
                self.dtype,
                self.optimizer,
                self.batch,
                self.seq_len,
                self.flash,
                self.gpu_gb,
            ),
            self.output,
        )
        self.update()

    def _ipython_display_(self) -> None:
        display(self.widget)

    def update(self) -> None:
        """Recompute and redraw."""
        from llmmath.memory import OPTIMIZERS, memory_budget

        cfg = presets.load(self.preset.value)
        training = OPTIMIZERS[self.optimizer.value] is not None
        self.dtype.disabled, self.flash.disabled = training, not training
        self.items = memory_budget(
            cfg,
            self.dtype.value,
            self.optimizer.value,
            self.batch.value,
            self.seq_len.value,
            self.flash.value,
        )
        note = ""
        if self.seq_len.value > cfg.max_position_embeddings:
            note = (
                f"<div style='color:#b00'>The model is built for "
                f"{cfg.max_position_embeddings:,} tokens.</div>"
            )
        self.output.value = note + budget_html(
            self.items, round(self.gpu_gb.value * 10**9)
        )


X_RANGE, Y_RANGE = (-1.0, 5.0), (11.0, 16.0)  # log10 of FLOPs/byte and of FLOP/s


def roofline_svg(
    gpu, others, curve, point, prefill, width: int = 440, height: int = 280
) -> str:
    """An SVG roofline on log axes: ``gpu`` solid, ``others`` dashed, the decode ``curve`` (blue
    dots), the chosen ``point`` (orange) and the ``prefill`` (green); all `llmmath.roofline.Step`."""
    left, bottom, top, right = 46, height - 30, 10, width - 10

    def px(i):
        v = min(max(math.log10(i), X_RANGE[0]), X_RANGE[1])
        return left + (right - left) * (v - X_RANGE[0]) / (X_RANGE[1] - X_RANGE[0])

    def py(f):
        v = min(max(math.log10(f), Y_RANGE[0]), Y_RANGE[1])
        return bottom - (bottom - top) * (v - Y_RANGE[0]) / (Y_RANGE[1] - Y_RANGE[0])

    def roof(g, style):
        xs = [10 ** X_RANGE[0], g.ridge_point, 10 ** X_RANGE[1]]
        pts = " ".join(
            f"{px(i):.1f},{py(min(g.peak_flops, i * g.bandwidth)):.1f}" for i in xs
        )
        return f"<polyline points='{pts}' fill='none' {style}/>"

    parts = [
        f"<rect x='{left}' y='{top}' width='{right - left}' height='{bottom - top}' "
        f"fill='none' stroke='#ccc'/>"
    ]
    for k in range(int(X_RANGE[0]), int(X_RANGE[1]) + 1):
        parts.append(
            f"<text x='{px(10**k):.1f}' y='{bottom + 13}' font-size='9' "
            f"text-anchor='middle'>10^{k}</text>"
        )
    for k in range(int(Y_RANGE[0]), int(Y_RANGE[1]) + 1):
        parts.append(
            f"<text x='{left - 4}' y='{py(10**k) + 3:.1f}' font-size='9' "
            f"text-anchor='end'>10^{k}</text>"
        )
    parts.append(
        f"<text x='{(left + right) / 2}' y='{height - 3}' font-size='10' "
        f"text-anchor='middle'>FLOPs per byte</text>"
    )
    parts.append(
        f"<text x='10' y='{(top + bottom) / 2}' font-size='10' text-anchor='middle' "
        f"transform='rotate(-90 10 {(top + bottom) / 2})'>FLOP/s</text>"
    )
    for g in others:
        parts.append(roof(g, "stroke='#999' stroke-dasharray='5 3'"))
    parts.append(roof(gpu, "stroke='#000' stroke-width='2'"))
    parts.append(
        f"<line x1='{px(gpu.ridge_point):.1f}' y1='{top}' x2='{px(gpu.ridge_point):.1f}' "
        f"y2='{bottom}' stroke='#000' stroke-dasharray='2 3' stroke-width='0.7'/>"
    )
    pts = " ".join(
        f"{px(s.intensity):.1f},{py(s.flops / s.seconds):.1f}" for s in curve
    )
    parts.append(f"<polyline points='{pts}' fill='none' stroke='#4c72b0'/>")
    parts += [
        f"<circle cx='{px(s.intensity):.1f}' cy='{py(s.flops / s.seconds):.1f}' r='2.5' "
        f"fill='#4c72b0'/>"
        for s in curve
    ]
    for s, color in ((prefill, "#55a868"), (point, "#dd8452")):
        parts.append(
            f"<circle cx='{px(s.intensity):.1f}' cy='{py(s.flops / s.seconds):.1f}' "
            f"r='5.5' fill='{color}' stroke='#333'/>"
        )
    legend = (
        ("#4c72b0", "decode, batch 1 … 1024"),
        ("#dd8452", f"decode, batch {point.batch:,}"),
        ("#55a868", "prefill of one prompt"),
        ("#000", f"{gpu.name} (dashed: other GPUs)"),
    )
    for i, (color, label) in enumerate(legend):
        parts.append(
            f"<circle cx='{left + 10}' cy='{top + 12 + 13 * i}' r='4' fill='{color}'/>"
            f"<text x='{left + 18}' y='{top + 15 + 13 * i}' font-size='9'>"
            f"{html.escape(label)}</text>"
        )
    return f"<svg width='{width}' height='{height}' viewBox='0 0 {width} {height}'>{''.join(parts)}</svg>"


class RooflineExplorer:
    """Preset, GPU, formats, batch and context → the decode step on the roofline (SVG) and its
    numbers, all from `llmmath.roofline` (`decode_step`, `prefill_step`, `compute_bound_batch`)
    and `llmmath.memory.serving_fit` (against 80·10⁹ bytes). Display ``.widget``."""

    BATCHES = [2**k for k in range(11)]  # the blue curve: 1 ... 1024
    FORMATS = ("fp32", "bf16", "fp8", "int8", "int4")

    def __init__(
        self,
        preset: str = "llama-3-8b",
        gpu: str = "H100-SXM5-80GB",
        batch: int = 16,
        context: int = 4096,
    ):
        from llmmath.roofline import GPUS

        style, layout = {"description_width": "70px"}, W.Layout(width="240px")
        self.preset = W.Dropdown(
            options=presets.names(),
            value=preset,
            description="model",
            style=style,
            layout=layout,
        )
        self.gpu = W.Dropdown(
            options=list(GPUS), value=gpu, description="GPU", style=style, layout=layout
        )
        self.weight_dtype = W.Dropdown(
            options=self.FORMATS,
            value="bf16",
            description="weights",
            style=style,
            layout=layout,
        )
        self.cache_dtype = W.Dropdown(
            options=self.FORMATS,
            value="bf16",
            description="KV cache",
            style=style,
            layout=layout,
        )
        self.batch = W.BoundedIntText(
            value=batch,
            min=1,
            max=10**6,
            description="batch",
            style=style,
            layout=layout,
        )
        self.context = W.BoundedIntText(
            value=context,
            min=1,
            max=10**7,
            description="context",
            style=style,
            layout=layout,
        )
        self.picture, self.table = W.HTML(), W.HTML()
        self.widget = _wire(
            self,
            (
                self.preset,
                self.gpu,
                self.weight_dtype,
                self.cache_dtype,
                self.batch,
                self.context,
            ),
            W.HBox([self.picture, self.table]),
        )
        self.update()

    def _ipython_display_(self) -> None:
        display(self.widget)

    def update(self) -> None:
        """Recompute and redraw."""
        from llmmath.memory import serving_fit
        from llmmath.roofline import (
            GPUS,
            compute_bound_batch,
            decode_step,
            prefill_step,
        )

        cfg, gpu = presets.load(self.preset.value), GPUS[self.gpu.value]
        fmt = (self.weight_dtype.value, self.cache_dtype.value)
        b, c = self.batch.value, self.context.value
        self.step = step = decode_step(cfg, gpu, b, c, *fmt)
        curve = [decode_step(cfg, gpu, bb, c, *fmt) for bb in self.BATCHES]
        prefill = prefill_step(cfg, gpu, c, 1, *fmt)
        found = compute_bound_batch(cfg, gpu, c, *fmt)
        fit = serving_fit(cfg, 80 * 10**9, b, c, *fmt)
        others = [g for name, g in GPUS.items() if name != gpu.name]
        self.picture.value = roofline_svg(gpu, others, curve, step, prefill)
        rows = [
            ("FLOPs of the step", f"{step.flops:,}"),
            ("bytes read", f"{step.bytes:,}"),
            ("intensity", f"{step.intensity:,.2f} FLOPs/byte"),
            ("ridge of the GPU", f"{gpu.ridge_point:,.1f} FLOPs/byte"),
            ("compute time", f"{step.compute_seconds * 1e3:,.3f} ms"),
            ("memory time", f"{step.memory_seconds * 1e3:,.3f} ms"),
            ("bound", "memory" if step.memory_bound else "compute"),
            ("tokens/s, all sequences", f"{step.tokens_per_second:,.0f}"),
            ("tokens/s, per sequence", f"{step.tokens_per_second / b:,.1f}"),
            ("compute-bound from batch", "never" if found is None else f"{found:,}"),
            ("prefill intensity", f"{prefill.intensity:,.0f} FLOPs/byte"),
            ("weights + cache in 80 GB", "fit" if fit.fits else "do not fit"),
        ]
        body = "".join(
            f"<tr><td>{html.escape(k)}</td><td style='text-align:right'>{v}</td></tr>"
            for k, v in rows
        )
        self.table.value = f"<table><tbody>{body}</tbody></table>"

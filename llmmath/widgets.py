"""The book's explorers as widgets: one anywidget front end over `llmmath.explorers`.

Every explorer is an `Explorer` (an ``anywidget.AnyWidget``, hence an ipywidget) holding
two synced traits: ``inputs``, the state the reader set, and ``view``, what
`llmmath.explorers.explore` returns for it. The front end
(``llmmath/static/explorer.js``) draws ``view``; in a kernel, a change of a control
sends new ``inputs`` and the kernel answers with a new ``view`` (well under 50 ms). On
the published site the same front end calls the same function in the reader's browser,
on Pyodide (`llmmath_book.runtime`).

- `ParamExplorer` (chapter 1): a preset, H, L, n_h, n_kv, V, I, tying → the breakdown.
- `AttentionExplorer` (chapter 3): H, n_h, n_kv and t beside the MHA twin.
- `RotaryExplorer` (chapter 6): a RoPE pair rotating with position, and the wavelengths.
- `ServingExplorer` (chapter 7): a preset, formats, batch, context, GPU → what fits.
- `LatentAttentionExplorer` (chapter 7b): cached bytes per token of MHA, GQA, MQA, MLA.
- `MemoryBudget` and `RooflineExplorer` (chapter 9): the peak of a training step (or
  weights + KV cache) against a GPU, item by item; the roofline.
- `SpeculativeExplorer` (chapter 9b): α, γ and the draft's cost → the speed-up.
- `LayoutExplorer` (chapter 9c): a cluster layout → memory per GPU, traffic, step time.
- `Calculator` (the calculator page): any ``config.json`` → parameters, cache, FLOPs,
  training memory.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

try:  # an extra of the core install (llmmath.errors.EXTRAS)
    import anywidget
    import traitlets
except ModuleNotFoundError as error:
    from llmmath.errors import needs_extra

    raise needs_extra(error, __name__) from error

from llmmath import explorers
from llmmath.explorers import (
    attention_rows,
    divisors,
    explore,
    view_html,
    view_snapshot_text,
    view_text,
)

__all__ = [
    "AttentionExplorer",
    "Calculator",
    "Explorer",
    "LatentAttentionExplorer",
    "MemoryBudget",
    "ParamExplorer",
    "RooflineExplorer",
    "RotaryExplorer",
    "ServingExplorer",
    "attention_rows",
    "divisors",
]

STATIC = Path(__file__).with_name("static")


class Explorer(anywidget.AnyWidget):
    """One explorer: ``kind`` names its function in `llmmath.explorers.EXPLORERS`.

    ``explorer.set(name=value, ...)`` changes controls from Python as the reader would;
    ``explorer.view`` is the view shown and ``explorer.text`` its notes and tables as
    text.
    """

    _esm = STATIC / "explorer.js"
    _css = STATIC / "explorer.css"
    kind = traitlets.Unicode().tag(sync=True)
    inputs = traitlets.Dict().tag(sync=True)
    view = traitlets.Dict().tag(sync=True)

    def __init__(self, kind: str, **state: Any):
        super().__init__(kind=kind)
        self.view = explore(kind, state)
        self.inputs = self.view["state"]
        self.observe(self._recompute, names="inputs")

    def _recompute(self, change) -> None:
        if change["new"] == self.view.get("state"):
            return  # the state the view settled on, sent back below: already shown
        view = explore(self.kind, change["new"])
        self.view = view
        if view["state"] != change["new"]:
            self.inputs = view["state"]  # e.g. a preset's sizes loaded

    def set(self, **changes: Any) -> None:
        """Change controls by name (the keys of ``view["state"]``) and recompute."""
        self.inputs = {**self.inputs, **changes}

    @property
    def state(self) -> dict:
        """The state now shown."""
        return self.view["state"]

    @property
    def text(self) -> str:
        """The notes and tables shown, as plain text (`llmmath.explorers.view_text`)."""
        return view_text(self.view)

    def _repr_mimebundle_(self, **kwargs: Any) -> dict:
        """The live widget, plus a static snapshot for where no kernel runs it:
        ``text/html`` (`llmmath.explorers.view_html`) and ``text/plain``
        (`llmmath.explorers.view_snapshot_text`) instead of an object repr."""
        bundle = super()._repr_mimebundle_(**kwargs)
        data = bundle[0] if isinstance(bundle, tuple) else bundle
        data["text/plain"] = view_snapshot_text(self.view)
        data["text/html"] = view_html(self.view)
        return bundle

    @property
    def error(self) -> str | None:
        """The message shown instead of numbers, or None."""
        notes = [b["text"] for b in self.view["blocks"] if b.get("tone") == "error"]
        return notes[0] if notes else None


class ParamExplorer(Explorer):
    """Chapter 1: a preset and its sizes → the exact breakdown (`explorers.params`)."""

    def __init__(self, preset: str = "llama-2-7b"):
        super().__init__("params", preset=preset)

    @property
    def config(self):
        """The configuration shown, or None when the sizes are invalid."""
        return None if self.error else explorers.param_config(self.state)


class AttentionExplorer(Explorer):
    """Chapter 3: H, n_h, n_kv and t beside the MHA twin (`explorers.attention`)."""

    def __init__(self, preset: str = "llama-3-8b", seq_len: int = 4096):
        super().__init__("attention", preset=preset, seq_len=seq_len)


class RotaryExplorer(Explorer):
    """Chapter 6: position m, pair i, base and d_h (`explorers.rotary`)."""

    def __init__(
        self,
        position: int = 100,
        pair: int = 8,
        base: float = 1e4,
        head_dim: int = 128,
    ):
        super().__init__(
            "rotary", position=position, pair=pair, base=float(base), head_dim=head_dim
        )

    def numbers(self) -> dict:
        """θ_i, λ_i, cos, sin, angle, turns and pairs done
        (`explorers.rotary_numbers`)."""
        s = self.state
        return explorers.rotary_numbers(
            s["position"], s["pair"], s["base"], s["head_dim"]
        )


class ServingExplorer(Explorer):
    """Chapter 7: weights + KV cache against a GPU (`explorers.serving`)."""

    def __init__(
        self,
        preset: str = "llama-3-8b",
        batch: int = 16,
        seq_len: int = 8192,
        gpu_gb: float = 80.0,
    ):
        super().__init__(
            "serving", preset=preset, batch=batch, seq_len=seq_len, gpu_gb=float(gpu_gb)
        )


class MemoryBudget(Explorer):
    """Chapter 9: the peak of a training step item by item, or weights + KV cache when
    serving, against a GPU of the catalogue (`explorers.memory`). The options are
    ``python -m llmmath train-memory``'s (training) and ``memory``'s (inference)."""

    def __init__(
        self,
        preset: str = "llama-3-8b",
        mode: str = "training",
        optimizer: str = "adamw",
        precision: str = "bf16",
        checkpointing: str = "none",
        method: str = "full",
        lora_rank: int = 16,
        adapter_dtype: str = "fp32",
        loss: str = "full",
        weights: str = "bf16",
        batch: int = 1,
        seq_len: int = 4096,
        gpu: str = "H100-SXM5-80GB",
    ):
        super().__init__(
            "memory",
            preset=preset,
            mode=mode,
            optimizer=optimizer,
            precision=precision,
            checkpointing=checkpointing,
            method=method,
            lora_rank=lora_rank,
            adapter_dtype=adapter_dtype,
            loss=loss,
            weights=weights,
            batch=batch,
            seq_len=seq_len,
            gpu=gpu,
        )

    @property
    def report(self) -> dict:
        """What the command line prints for the state shown
        (`explorers.memory_numbers`): ``train-memory --json`` in training
        (``peak_bytes``, ``peak_moment``, ``peak_items``, ``items``, ``fits``,
        ``max_batch``, …), ``memory --json`` in inference."""
        return explorers.memory_numbers(self.state)

    @property
    def items(self) -> dict[str, int]:
        """The bytes stacked against the GPU: the peak's items in training, the weights
        and the KV cache in inference."""
        r = self.report
        if self.state["mode"] == "training":
            return dict(r["peak_items"])
        return {"weights": r["weight_bytes"], "KV cache": r["kv_cache_bytes"]}


class RooflineExplorer(Explorer):
    """Chapter 9: the decode step on the roofline (`explorers.roofline`)."""

    def __init__(
        self,
        preset: str = "llama-3-8b",
        gpu: str = "H100-SXM5-80GB",
        batch: int = 16,
        context: int = 4096,
    ):
        super().__init__(
            "roofline", preset=preset, gpu=gpu, batch=batch, context=context
        )

    @property
    def step(self):
        """The decode step shown (`llmmath.roofline.decode_step`)."""
        from llmmath import presets
        from llmmath.roofline import decode_step

        s = self.state
        return decode_step(
            presets.load(s["preset"]),
            s["gpu"],
            s["batch"],
            s["context"],
            s["weight_dtype"],
            s["cache_dtype"],
        )


class Calculator(Explorer):
    """The calculator page: a preset or a pasted ``config.json``
    (`explorers.calculator`)."""

    def __init__(self, preset: str = "llama-3-8b", **state: Any):
        super().__init__("calculator", preset=preset, **state)


class LatentAttentionExplorer(Explorer):
    """Chapter 7b: cached bytes per token of MHA, GQA, MQA and MLA for a preset and a
    context (`explorers.mla`)."""

    def __init__(
        self,
        preset: str = "deepseek-v3",
        seq_len: int = 32768,
        batch: int = 1,
        dtype: str = "bf16",
    ):
        super().__init__(
            "mla", preset=preset, seq_len=seq_len, batch=batch, dtype=dtype
        )

    @property
    def values(self) -> dict[str, int]:
        """Values cached per token and layer for each variant, as shown."""
        rows = self.view["blocks"][0]["rows"] if not self.error else []
        return {r[0]: int(r[1].replace(",", "")) for r in rows}


class LayoutExplorer(Explorer):
    """Chapter 9c: a training layout on many GPUs, dp × tp × pp with ZeRO → memory per
    GPU, bytes sent and step time (`explorers.layout`, `llmmath.parallel.plan`)."""

    def __init__(
        self,
        preset: str = "llama-3-70b",
        gpus: int = 1024,
        tp: int = 8,
        pp: int = 4,
        zero: int = 1,
        micro_batches: int = 8,
        seq_len: int = 8192,
        sequence_parallel: bool = False,
        recompute: bool = False,
        cluster: str = "h100",
    ):
        super().__init__(
            "layout",
            preset=preset,
            gpus=gpus,
            tp=tp,
            pp=pp,
            zero=zero,
            micro_batches=micro_batches,
            seq_len=seq_len,
            sequence_parallel=sequence_parallel,
            recompute=recompute,
            cluster=cluster,
        )

    @property
    def plan(self):
        """The `llmmath.parallel.Plan` shown."""
        from llmmath import presets
        from llmmath.parallel import plan

        s = self.state
        return plan(
            presets.load(s["preset"]),
            s["gpus"],
            tp=s["tp"],
            pp=s["pp"],
            zero=s["zero"],
            micro_batches=s["micro_batches"],
            seq_len=s["seq_len"],
            sequence_parallel=bool(s["sequence_parallel"]),
            recompute=bool(s["recompute"]),
            gpu=s["cluster"],
        )


__all__.append("LayoutExplorer")


class SpeculativeExplorer(Explorer):
    """Chapter 9b: speculative decoding, α, γ and the draft's cost → tokens per target
    pass and speed-up (`explorers.speculative`)."""

    def __init__(self, alpha: float = 0.8, gamma: int = 4, cost_ratio: float = 0.05):
        super().__init__(
            "speculative",
            alpha=float(alpha),
            gamma=gamma,
            cost_ratio=float(cost_ratio),
        )


__all__.append("SpeculativeExplorer")

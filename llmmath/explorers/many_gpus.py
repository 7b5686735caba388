"""Chapter 9c (*Many GPUs*): the layout explorer, `layout`: a training layout's memory
per GPU, bytes sent and step time (`llmmath.parallel.plan`).
"""

from __future__ import annotations

from collections.abc import Mapping

from llmmath import presets
from llmmath.config import ConfigError
from llmmath.explorers.controls import (
    View,
    _check,
    _choice,
    _error_view,
    _int,
    _is_int,
    _number,
    _preset,
    _preset_select,
    _select,
    divisors,
    note,
    stack,
    table,
)
from llmmath.messages import gettext as _
from llmmath.reports import item_label as _item


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

"""Chapter 9 (*Memory and speed*): the memory explorer, `memory` (the peak of a
training step, or weights and cache in inference, against a GPU; the training
options are ``python -m llmmath train-memory``'s, `llmmath.reports.CHOICES`), and
the roofline explorer, `roofline` (the decode step's time by batch). The calculator
page shares the training controls and blocks.
"""

from __future__ import annotations

import copy
import functools
from collections.abc import Mapping

from llmmath import presets
from llmmath.config import ConfigError, ModelConfig
from llmmath.explorers.controls import (
    GREY,
    INK,
    PALETTE,
    View,
    _bytes_text,
    _choice,
    _error_view,
    _int,
    _number,
    _preset,
    _preset_select,
    _select,
    note,
    stack,
    table,
)
from llmmath.messages import N_, join
from llmmath.messages import gettext as _
from llmmath.reports import item_label as _item

#: The training options of the memory explorer and the calculator: the state's name
#: and the option of ``python -m llmmath train-memory`` whose choices and default it
#: takes (`llmmath.reports.CHOICES`).
TRAINING_OPTIONS = (
    ("optimizer", "--optimizer"),
    ("precision", "--precision"),
    ("checkpointing", "--checkpointing"),
    ("method", "--method"),
    ("adapter_dtype", "--adapter-dtype"),
    ("loss", "--loss"),
)

#: How a training option's select shows a value that is a word (the others show the
#: value itself, as the command line spells it).
OPTION_LABELS = {
    "optimizer": {"adam8bit": N_("8-bit Adam")},
    "precision": {"mixed": N_("mixed (fp32 master)")},
    "checkpointing": {
        "none": N_("none"),
        "selective": N_("selective"),
        "full": N_("full"),
    },
    "method": {"full": N_("full fine-tuning")},
    "loss": {"full": N_("full logits"), "chunked": N_("chunked")},
}

#: LoRA ranks a control offers: the command line's bound on a count.
MAX_LORA_RANK = 10**8

#: The training options' own defaults beside the choices': LoRA's rank
#: (``train-memory --lora-rank``, 16).
TRAINING_DEFAULTS = {"lora_rank": 16}


def training_defaults() -> dict:
    """The training options' defaults, as ``train-memory`` has them."""
    from llmmath.reports import CHOICES

    out = {name: CHOICES[flag][1] for name, flag in TRAINING_OPTIONS}
    return {**out, **TRAINING_DEFAULTS}


def _training_controls(state: Mapping, disabled: bool = False) -> list:
    """The selects of `TRAINING_OPTIONS` and LoRA's rank; the rank and the adapters'
    dtype only for LoRA and QLoRA."""
    from llmmath.reports import CHOICES

    lora = state.get("method") in ("lora", "qlora")
    labels = {
        "optimizer": _("optimizer"),
        "precision": _("precision"),
        "checkpointing": _("checkpointing"),
        "method": _("method"),
        "adapter_dtype": _("adapters"),
        "loss": _("loss"),
    }
    out = []
    for name, flag in TRAINING_OPTIONS:
        words = OPTION_LABELS.get(name, {})
        options = [[v, _(words[v]) if v in words else v] for v in CHOICES[flag][0]]
        off = disabled or (name == "adapter_dtype" and not lora)
        out.append(_select(name, labels[name], options, off))
        if name == "method":
            out.append(
                _number(
                    "lora_rank",
                    _("LoRA rank"),
                    1,
                    MAX_LORA_RANK,
                    disabled=disabled or not lora,
                )
            )
    return out


def training_report(
    title: str, cfg: ModelConfig, state: Mapping, batch: int, seq_len: int, gpu: str
) -> dict:
    """What ``python -m llmmath train-memory MODEL ... --batch B --seq-len T --gpu G
    --json`` prints for the training options of ``state`` (`TRAINING_OPTIONS`, LoRA's
    rank and adapters' dtype only with LoRA or QLoRA): the one function behind the
    command, the memory explorer and the calculator
    (`llmmath.reports.train_memory_report`).

    Raises:
        ConfigError: an option that is not one of its choices, a rank out of range,
        or what `train_memory_report` refuses.
    """
    from llmmath.reports import CHOICES

    got = {
        name: _choice(state, name, CHOICES[flag][0], CHOICES[flag][1])
        for name, flag in TRAINING_OPTIONS
    }
    rank = _int(state, "lora_rank", 1, MAX_LORA_RANK)
    lora = got["method"] != "full"
    options = (
        ("optimizer", got["optimizer"]),
        ("precision", got["precision"]),
        ("checkpointing", got["checkpointing"]),
        ("method", got["method"]),
        ("lora_rank", rank if lora else None),
        ("adapter_dtype", got["adapter_dtype"] if lora else None),
        ("loss", got["loss"]),
    )
    return copy.deepcopy(_train_memory(title, cfg, options, batch, seq_len, gpu))


@functools.lru_cache(maxsize=64)
def _train_memory(
    title: str, cfg: ModelConfig, options: tuple, batch: int, seq_len: int, gpu: str
) -> dict:
    """`train_memory_report`, kept for the last answers: a change of a control that
    is not a training option (the calculator's formats) does not count them again."""
    from llmmath.reports import train_memory_report

    return train_memory_report(
        title, cfg, batch=batch, seq_len=seq_len, gpu=gpu, **dict(options)
    )


def _gb(n: int) -> str:
    return f"{n / 10**9:,.2f}"


def _item_rows(items: Mapping[str, int], total: int, label: str) -> list:
    """Rows (item, bytes, GB, share of ``total``) and the ``label`` row of the total."""
    rows = [[_item(k), f"{v:,}", _gb(v), f"{v / total:.1%}"] for k, v in items.items()]
    return rows + [[label, f"{total:,}", _gb(total), ""]]


def training_blocks(r: Mapping) -> list:
    """The blocks of a `training_report` ``r``: the moment of the peak, the bytes held
    then item by item (``peak_items``, summing to ``peak_bytes``), the parts at rest
    (``items``, ``total_bytes``), whether the peak fits the GPU and the largest batch
    that does (``fits``, ``max_batch``), and the peak's items stacked against the
    GPU's memory."""
    peak, rest = r["peak_bytes"], r["total_bytes"]
    fits = _("the peak fits") if r["fits"] else _("the peak does not fit")
    return [
        note(
            _("Peak of a training step ({moment}): {bytes}.").format(
                moment=_item(r["peak_moment"]), bytes=_bytes_text(peak, _human)
            )
        ),
        table(
            _item_rows(r["peak_items"], peak, _("peak")),
            [_("at the peak"), _("bytes"), "GB", _("share")],
        ),
        table(
            _item_rows(r["items"], rest, _("sum at rest")),
            [_("at rest"), _("bytes"), "GB", _("share")],
        ),
        note(
            _("{gpu} ({gb} GB): {verdict}; largest batch that fits: {n}").format(
                gpu=r["gpu"],
                gb=_gb(r["gpu_bytes"]),
                verdict=fits,
                n=f"{r['max_batch']:,}",
            )
        ),
        stack(
            {_item(k): v for k, v in r["peak_items"].items()},
            r["gpu_bytes"],
            r["gpu"],
        ),
    ]


def _human(n: int) -> str:
    from llmmath.units import human_bytes

    return human_bytes(n)


#: The memory explorer's two modes.
MODES = (("training", N_("training")), ("inference", N_("inference")))


def memory_state(state: Mapping) -> dict:
    """The memory explorer's state: its defaults, then ``state``."""
    from llmmath.gpus import DEFAULT_GPU

    return {
        "preset": "llama-3-8b",
        "mode": "training",
        **training_defaults(),
        "weights": "bf16",
        "batch": 1,
        "seq_len": 4096,
        "gpu": DEFAULT_GPU,
        **state,
    }


def memory_numbers(state: Mapping) -> dict:
    """What the command line prints for the memory explorer's ``state``: in training
    `training_report` (``train-memory --json``), in inference
    `llmmath.reports.memory_report` (``memory --json``: weights in ``weights`` and a
    bf16 KV cache), each with ``--gpu``.

    Raises:
        ConfigError: a value of the state its command refuses.
    """
    from llmmath.gpus import DEFAULT_GPU, GPUS
    from llmmath.reports import WEIGHTS
    from llmmath.reports import memory_report as serving_report

    state = memory_state(state)
    name = _preset(state, "llama-3-8b")
    cfg, title = presets.load(name), presets.get(name).title
    mode = _choice(state, "mode", [m for m, _label in MODES], "training")
    batch = _int(state, "batch", 1, 10**6)
    seq_len = _int(state, "seq_len", 1, 10**7)
    gpu = _choice(state, "gpu", list(GPUS), DEFAULT_GPU)
    weights = _choice(state, "weights", WEIGHTS, "bf16")
    if mode == "training":
        return training_report(title, cfg, state, batch, seq_len, gpu)
    return serving_report(title, cfg, weights, None, "bf16", batch, seq_len, gpu)


def memory(state: Mapping) -> View:
    """Chapter 9's memory explorer: a preset, training or inference, batch, sequence
    and a GPU of the catalogue (`llmmath.gpus`). Training (the options of
    ``train-memory``: optimizer, precision, checkpointing, full fine-tuning, LoRA or
    QLoRA with its rank and adapters' dtype, the loss): the peak of a step item by
    item at its moment, the parts at rest, whether the peak fits and the largest batch
    that does (`training_report`, `training_blocks`). Inference: the weights in a
    format and a bf16 KV cache against the GPU, the largest batch that fits
    (`llmmath.reports.memory_report`). The numbers are the command line's
    (`memory_numbers`)."""
    from llmmath.gpus import GPUS
    from llmmath.reports import WEIGHTS

    state = memory_state(state)
    training = state["mode"] != "inference"
    controls = [
        _preset_select(),
        _select("mode", _("mode"), [[m, _(label)] for m, label in MODES]),
        *_training_controls(state, not training),
        _select("weights", _("weights"), WEIGHTS, training),
        _number("batch", _("batch"), 1, 10**6),
        _number("seq_len", _("sequence"), 1, 10**7),
        _select("gpu", _("GPU"), list(GPUS)),
    ]
    try:
        r = memory_numbers(state)
    except ConfigError as e:
        return _error_view("memory", state, controls, e)
    cfg = presets.load(state["preset"])
    blocks = []
    if r["seq_len"] > cfg.max_position_embeddings:
        blocks.append(
            note(
                _("The model is built for {n} tokens.").format(
                    n=f"{cfg.max_position_embeddings:,}"
                ),
                "error",
            )
        )
    if training:
        blocks += training_blocks(r)
    else:
        group = (
            _(", groups of {n}").format(n=r["group_size"]) if r["group_size"] else ""
        )
        weights = _("weights ({format}{groups})").format(
            format=r["weights"], groups=group
        )
        items = {
            weights: r["weight_bytes"],
            _("KV cache (bf16), {batch} × {t} tokens").format(
                batch=f"{r['batch']:,}", t=f"{r['seq_len']:,}"
            ): r["kv_cache_bytes"],
        }
        verdict = _("they fit") if r["fits"] else _("they do not fit")
        blocks += [
            table(
                _item_rows(items, r["total_bytes"], _("total")),
                [_("item"), _("bytes"), "GB", _("share")],
            ),
            note(
                _("{gpu} ({gb} GB): {verdict}; largest batch that fits: {n}").format(
                    gpu=r["gpu"],
                    gb=_gb(r["gpu_bytes"]),
                    verdict=verdict,
                    n=f"{r['max_batch']:,}",
                )
            ),
            stack(items, r["gpu_bytes"], r["gpu"]),
        ]
    return {"kind": "memory", "state": state, "controls": controls, "blocks": blocks}


ROOFLINE_BATCHES = [2**k for k in range(11)]  # the decode curve: batch 1 ... 1024


def roofline(state: Mapping) -> View:
    """Chapter 9's roofline: preset, GPU, formats, batch and context → the decode step
    on the roofline and its numbers (`llmmath.roofline`: `decode_step`, `prefill_step`,
    `compute_bound_batch`) and whether weights + cache fit in the GPU's memory
    (`serving_fit`; any GPU of the catalogue `llmmath.gpus`, by its capacity rule)."""
    from llmmath.gpus import DEFAULT_GPU, GPUS
    from llmmath.memory import serving_fit
    from llmmath.roofline import GPUS as COMPARED
    from llmmath.roofline import compute_bound_batch, decode_step, prefill_step

    state = {
        "preset": "llama-3-8b",
        "gpu": "H100-SXM5-80GB",
        "weight_dtype": "bf16",
        "cache_dtype": "bf16",
        "batch": 16,
        "context": 4096,
        **state,
    }
    formats = ("fp32", "bf16", "fp8", "int8", "int4")
    controls = [
        _preset_select(),
        _select("gpu", _("GPU"), list(GPUS)),
        _select("weight_dtype", _("weights"), formats),
        _select("cache_dtype", _("KV cache"), formats),
        _number("batch", _("batch"), 1, 10**6),
        _number("context", _("context"), 1, 10**7),
    ]
    try:
        cfg = presets.load(_preset(state, "llama-3-8b"))
        gpu = GPUS[_choice(state, "gpu", list(GPUS), DEFAULT_GPU)]
        fmt = (
            _choice(state, "weight_dtype", formats, "bf16"),
            _choice(state, "cache_dtype", formats, "bf16"),
        )
        b = _int(state, "batch", 1, 10**6)
        c = _int(state, "context", 1, 10**7)
        step = decode_step(cfg, gpu, b, c, *fmt)
        curve = [decode_step(cfg, gpu, bb, c, *fmt) for bb in ROOFLINE_BATCHES]
        prefill = prefill_step(cfg, gpu, c, 1, *fmt)
        found = compute_bound_batch(cfg, gpu, c, *fmt)
        fit = serving_fit(cfg, gpu.memory, b, c, *fmt)
    except ConfigError as e:
        return _error_view("roofline", state, controls, e)
    rows = [
        [_("FLOPs of the step"), f"{step.flops:,}"],
        [_("bytes read"), f"{step.bytes:,}"],
        [_("intensity"), _("{n} FLOPs/byte").format(n=f"{step.intensity:,.2f}")],
        [
            _("ridge of the GPU"),
            _("{n} FLOPs/byte").format(n=f"{gpu.ridge_point:,.1f}"),
        ],
        [_("compute time"), f"{step.compute_seconds * 1e3:,.3f} ms"],
        [_("memory time"), f"{step.memory_seconds * 1e3:,.3f} ms"],
        [_("bound"), _("memory") if step.memory_bound else _("compute")],
        [_("tokens/s, all sequences"), f"{step.tokens_per_second:,.0f}"],
        [_("tokens/s, per sequence"), f"{step.tokens_per_second / b:,.1f}"],
        [_("compute-bound from batch"), _("never") if found is None else f"{found:,}"],
        [
            _("prefill intensity"),
            _("{n} FLOPs/byte").format(n=f"{prefill.intensity:,.0f}"),
        ],
        [
            _("weights + cache in {gb} GB").format(gb=f"{gpu.memory / 10**9:,.0f}"),
            _("fit") if fit.fits else _("do not fit"),
        ],
    ]

    def roof(g):
        xs = [0.1, g.ridge_point, 1e5]
        return [[x, min(g.peak_flops, x * g.bandwidth)] for x in xs]

    def point(s):
        return [s.intensity, s.flops / s.seconds]

    others = [n for n in COMPARED if n != gpu.name]
    series = [
        {"points": roof(g), "mode": "dashed", "color": GREY}
        for name, g in COMPARED.items()
        if name != gpu.name
    ]
    series += [
        {
            "points": roof(gpu),
            "mode": "line",
            "color": INK,
            "label": _("{gpu} (dashed: {others})").format(
                gpu=gpu.name, others=join(others)
            ),
        },
        {"points": [point(s) for s in curve], "mode": "line", "color": PALETTE[0]},
        {
            "points": [point(s) for s in curve],
            "mode": "dots",
            "color": PALETTE[0],
            "label": _("decode, batch {first} … {last}").format(
                first=f"{ROOFLINE_BATCHES[0]:,}", last=f"{ROOFLINE_BATCHES[-1]:,}"
            ),
        },
        {
            "points": [point(prefill)],
            "mode": "dots",
            "radius": 5.5,
            "color": PALETTE[2],
            "label": _("prefill of one prompt"),
        },
        {
            "points": [point(step)],
            "mode": "dots",
            "radius": 5.5,
            "color": PALETTE[1],
            "label": _("decode, batch {batch}").format(batch=f"{b:,}"),
        },
    ]
    plot = {
        "type": "plot",
        "width": 440,
        "height": 280,
        "x": {"min": 0.1, "max": 1e5, "log": True, "label": _("FLOPs per byte")},
        "y": {"min": 1e11, "max": 1e16, "log": True, "label": "FLOP/s"},
        "series": series,
    }
    return {
        "kind": "roofline",
        "state": state,
        "controls": controls,
        "blocks": [plot, table(rows)],
    }

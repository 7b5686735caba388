"""The calculator page (*Any model: paste its config.json*): the calculator,
`calculator`: a preset or a pasted ``config.json`` → parameters, FLOPs, inference
memory and training memory, with the command line's numbers.
"""

from __future__ import annotations

import json
from collections.abc import Mapping

from llmmath import presets
from llmmath.config import ConfigError, ModelConfig, parse_config_text
from llmmath.counting import GROUPS
from llmmath.explorers.controls import (
    FORMATS,
    View,
    _bytes_text,
    _choice,
    _error_view,
    _int,
    _number,
    _preset,
    _select,
    note,
    stack,
    table,
)
from llmmath.explorers.memory_speed import (
    _training_controls,
    training_blocks,
    training_defaults,
    training_report,
)
from llmmath.messages import N_
from llmmath.messages import gettext as _
from llmmath.reports import GROUP_LABELS

PASTED = N_("(pasted config.json)")


def calculator(state: Mapping) -> View:
    """The calculator page: a preset or a pasted Hugging Face ``config.json``, and a
    batch, a length, the weights' format, the KV cache's format, a GPU of the
    catalogue (`llmmath.gpus`) and the training options of ``train-memory``
    (`TRAINING_OPTIONS`, LoRA's rank) → parameters by group (total and active), the KV
    cache, forward FLOPs per token, weights + cache against the GPU, and the peak of a
    training step item by item with whether it fits and the largest batch that does,
    computed by the CLI's own functions: `params_report`, `kv_cache_report`,
    `flops_report` and `memory_report` of `llmmath.reports` (what ``python -m llmmath
    memory MODEL --weights W --kv-dtype D --batch B --seq-len T --gpu G --json``
    prints) and `training_report` (``train-memory ... --json``). A bad config shows
    the CLI's one-line message."""
    from llmmath.gpus import DEFAULT_GPU, GPUS
    from llmmath.reports import (
        WEIGHTS,
        flops_report,
        kv_cache_report,
        memory_report,
        params_report,
    )
    from llmmath.units import human_bytes

    state = {
        "preset": "llama-3-8b",
        "config": "",
        "batch": 1,
        "seq_len": 4096,
        "weights": "bf16",
        "kv_dtype": "bf16",
        "gpu": DEFAULT_GPU,
        **training_defaults(),
        **state,
    }
    name = state["preset"]
    if name in presets.names() and state.get("loaded") != name:
        state["config"] = json.dumps(presets.get(name).hf_config, indent=2)
        state["loaded"] = name
    elif name in presets.names() and state["config"] != json.dumps(
        presets.get(name).hf_config, indent=2
    ):
        state["preset"] = state["loaded"] = PASTED  # the reader edited the text
    controls = [
        _select("preset", _("model"), [*presets.names(), [PASTED, _(PASTED)]]),
        _number("batch", _("batch"), 1, 10**6),
        _number("seq_len", _("tokens"), 1, 10**8),
        _select("weights", _("weights"), WEIGHTS),
        _select("kv_dtype", _("KV cache"), FORMATS),
        _select("gpu", _("GPU"), list(GPUS)),
        *_training_controls(state),
        {"name": "config", "label": "config.json", "type": "text"},
    ]
    try:
        if state["preset"] == PASTED:
            title = _("the pasted config.json")
            cfg = ModelConfig.from_hf_config(
                parse_config_text(str(state["config"]), title)
            )
        else:
            title = presets.get(_preset(state, "llama-3-8b")).title
            cfg = presets.load(state["preset"])
        batch = _int(state, "batch", 1, 10**6)
        seq_len = _int(state, "seq_len", 1, 10**8)
        weights = _choice(state, "weights", WEIGHTS, "bf16")
        kv_dtype = _choice(state, "kv_dtype", FORMATS, "bf16")
        gpu = GPUS[_choice(state, "gpu", list(GPUS), DEFAULT_GPU)]
        p = params_report(title, cfg)
        kv = kv_cache_report(title, cfg, seq_len, batch, kv_dtype)
        fl = flops_report(title, cfg, seq_len)
        mem = memory_report(
            title, cfg, weights, None, kv_dtype, batch, seq_len, gpu.name
        )
        train = training_report(title, cfg, state, batch, seq_len, gpu.name)
    except ConfigError as e:
        view = _error_view("calculator", state, controls, e)
        view["blocks"] = [note(_("llmmath: error: {error}").format(error=e), "error")]
        return view
    total = p["total"]
    groups = [
        [_(GROUP_LABELS[g]), f"{n:,}", f"{n / total:.2%}"]
        for g, n in p["groups"].items()
        if g in GROUPS
    ]
    groups += [
        [_("non-embedding"), f"{p['non_embedding']:,}", ""],
        [_("active per token"), f"{p['active']:,}", f"{p['active'] / total:.2%}"],
        [_("total"), f"{total:,}", "100%"],
    ]
    parts = fl["parts"]
    flops_rows = [
        [_("attention projection matmuls"), f"{parts['attention_projections']:,}"],
        [_("FFN matmuls"), f"{parts['ffn']:,}"],
        [_("LM head matmul"), f"{parts['lm_head']:,}"],
        [_("QKᵀ and AV (causal)"), _flops_text(parts["attention_qk_av"])],
        [_("forward FLOPs per token"), _flops_text(fl["forward_flops_per_token"])],
    ]
    group = (
        _(", groups of {n}").format(n=mem["group_size"]) if mem["group_size"] else ""
    )
    verdict = _("fit") if mem["fits"] else _("do not fit")
    cache_rows = [
        [
            _("KV cache per token ({dtype})").format(dtype=kv_dtype),
            _("{n} bytes").format(n=f"{kv['bytes_per_token']:,}"),
        ],
        [
            _("KV cache, batch {batch} × {t} tokens").format(
                batch=f"{batch:,}", t=f"{seq_len:,}"
            ),
            _bytes_text(mem["kv_cache_bytes"], human_bytes),
        ],
        [
            _("weights ({format}{groups})").format(format=weights, groups=group),
            _bytes_text(mem["weight_bytes"], human_bytes),
        ],
        [_("weights + KV cache"), _bytes_text(mem["total_bytes"], human_bytes)],
        [
            _("in {gpu} ({n} bytes) they").format(
                gpu=gpu.name, n=f"{mem['gpu_bytes']:,}"
            ),
            _("{verdict}: largest batch {batch}, longest context {t}").format(
                verdict=verdict,
                batch=f"{mem['max_batch']:,}",
                t=f"{mem['max_seq_len']:,}",
            ),
        ],
    ]
    if kv["cached_tokens"] < seq_len:
        cache_rows.insert(
            1, [_("tokens kept (sliding window)"), f"{kv['cached_tokens']:,}"]
        )
    items = {
        _("weights ({format})").format(format=weights): mem["weight_bytes"],
        _("KV cache"): kv["bytes"],
    }
    past = []
    if seq_len > mem["context_limit"]:  # memory is not the only limit (the CLI's too)
        past = [
            note(
                _(
                    "{t} tokens is past the {limit}-token context the model is built "
                    "for (max_position_embeddings): what fits in memory is not what "
                    "the model can read."
                ).format(t=f"{seq_len:,}", limit=f"{mem['context_limit']:,}")
            )
        ]
    return {
        "kind": "calculator",
        "state": state,
        "controls": controls,
        "blocks": [
            note(_("{title}: {n} parameters").format(title=title, n=f"{total:,}")),
            *past,
            table(groups, [_("group"), _("parameters"), _("share")]),
            table(cache_rows, [_("memory"), _("bytes")]),
            table(
                flops_rows,
                [_("FLOPs per token"), _("at t = {t}").format(t=f"{seq_len:,}")],
            ),
            stack(items, gpu.memory, gpu.name),
            *training_blocks(train),
        ],
    }


def _flops_text(value: int | float) -> str:
    return f"{value:,}" if isinstance(value, int) else f"{value:,.1f}"

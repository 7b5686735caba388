"""Chapter 7 (*The KV cache*): the serving explorer, `serving`: weights and the KV
cache against a GPU.
"""

from __future__ import annotations

from collections.abc import Mapping

from llmmath import presets
from llmmath.config import ConfigError
from llmmath.explorers.controls import (
    FORMATS,
    View,
    _bytes_text,
    _error_view,
    _float,
    _int,
    _number,
    _preset,
    _preset_select,
    _select,
    stack,
    table,
)
from llmmath.messages import gettext as _


def serving(state: Mapping) -> View:
    """Chapter 7's serving explorer: preset, number formats, batch, context and GPU
    memory (GB = 10⁹ bytes) → weights + KV cache, whether they fit, the largest batch
    and the longest context (`llmmath.memory.serving_fit`)."""
    from llmmath.memory import GPU_80GB, serving_fit
    from llmmath.units import human_bytes

    state = {
        "preset": "llama-3-8b",
        "weight_dtype": "bf16",
        "cache_dtype": "bf16",
        "batch": 16,
        "seq_len": 8192,
        "gpu_gb": GPU_80GB / 10**9,  # the default GPU by the capacity rule
        **state,
    }
    controls = [
        _preset_select(),
        _select("weight_dtype", _("weights"), FORMATS),
        _select("cache_dtype", _("KV cache"), FORMATS),
        _number("batch", _("batch"), 1, 10**6),
        _number("seq_len", _("context"), 1, 10**8),
        _number("gpu_gb", _("GPU (GB)"), 0.001, 10**6, "float", 1),
    ]
    try:
        cfg = presets.load(_preset(state, "llama-3-8b"))
        batch = _int(state, "batch", 1, 10**6)
        seq_len = _int(state, "seq_len", 1, 10**8)
        gpu = round(_float(state, "gpu_gb", 0.001, 10**6) * 10**9)
        fit = serving_fit(
            cfg, gpu, batch, seq_len, state["weight_dtype"], state["cache_dtype"]
        )
    except ConfigError as e:
        return _error_view("serving", state, controls, e)
    verdict = _("fit") if fit.fits else _("do not fit")
    rows = [
        [_("weights"), _bytes_text(fit.weight_bytes, human_bytes)],
        [
            _("KV cache, {batch} × {t} tokens").format(
                batch=f"{batch:,}", t=f"{seq_len:,}"
            ),
            _bytes_text(fit.cache_bytes, human_bytes),
        ],
        [_("weights + KV cache"), _bytes_text(fit.total_bytes, human_bytes)],
        [_("in {gb} GB they").format(gb=f"{gpu / 10**9:,.3f}"), verdict],
        [
            _("largest batch of {t}-token sequences").format(t=f"{seq_len:,}"),
            f"{fit.max_batch:,}",
        ],
        [
            _("longest context for a batch of {batch}").format(batch=f"{batch:,}"),
            _("{n} tokens (the model is built for {limit})").format(
                n=f"{fit.max_seq_len:,}", limit=f"{fit.context_limit:,}"
            ),
        ],
    ]
    items = {_("weights"): fit.weight_bytes, _("KV cache"): fit.cache_bytes}
    return {
        "kind": "serving",
        "state": state,
        "controls": controls,
        "blocks": [table(rows), stack(items, gpu)],
    }

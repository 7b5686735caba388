"""FLOPs per module: forward, backward and a whole training step, module by module and
layer by layer, for ``batch`` sequences of ``seq_len`` tokens (exact ints).

Rows are named after the reference modules (`llmmath.modules`, Hugging Face's
names): ``embed_tokens``, ``layers.{i}.self_attn.q_proj`` … ``o_proj`` (MLA:
``q_a_proj``/``q_b_proj`` or ``q_proj``, ``kv_a_proj_with_mqa``, ``kv_b_proj``),
``layers.{i}.self_attn.scores`` (QKᵀ) and ``layers.{i}.self_attn.weighted_sum`` (AV),
the FFN matrices ``layers.{i}.mlp.gate_proj``/``up_proj``/``down_proj`` (or, for a
mixture of experts, ``router``, ``experts`` for the k routed experts a token uses and
``shared_experts``), and ``lm_head``. The counting is `llmmath.flops`': 2·m·k·n per
matmul; the embedding lookup costs no FLOPs (it copies rows); norms, biases,
activations, softmax and RoPE are elementwise and left out, as in
`forward_flops_per_token`, whose total these rows add up to.

- **Forward**: 2 × weights × tokens for a projection; QKᵀ and AV over the query–key
  pairs of `llmmath.flops.attention_pairs` (``attention="causal"``: those a causal
  kernel computes, within each layer's sliding window; ``"full"``: all t², what
  explicit masked matmuls such as `llmmath.modules.Attention` compute).
- **Backward**: 2 × forward for every matmul: one matmul for the input gradient, one
  for the weight gradient (Kaplan et al. 2020, Sec. 2.1; for QKᵀ and AV both operands'
  gradients).
- **Recomputation** in the backward pass: ``"none"``; ``"selective"`` runs the
  attention core (QKᵀ, softmax, AV) forward again (Korthikanti et al. 2022,
  "Reducing Activation Recomputation in Large Transformer Models", Sec. 5); ``"full"``
  runs every layer's forward again, the embedding and LM head not (Chen et al. 2016;
  Narayanan et al. 2021, Sec. 5.1: 4 × forward for the layers, 3 × for the logits).
- **Training** step = forward + backward + recomputation.

How other tools differ (checked on tiny models in ``tests/test_flops_by_module.py``):

- torch's ``FlopCounterMode`` counts matmuls as these rows do and agrees exactly with
  ``attention="full"`` on the reference modules, forward and backward, and with
  every layer under ``torch.utils.checkpoint`` on the whole step with
  ``recompute="full"``. Its backward attribution by module
  (``torch.utils.module_tracker``) keeps a module open until its input's gradient is
  complete, so leaves that share an input (q/k/v, gate/up) also collect their
  siblings' backward matmuls; its counts are exact for each
  ``self_attn``, ``mlp``, layer and the LM head. In the reference MLA the ``kv_b_proj``
  expansion is an einsum on its weight and is counted under ``self_attn``.
- Under ``scaled_dot_product_attention`` FlopCounterMode counts the fused kernels it
  has a formula for (flash, memory-efficient, cuDNN; on the ``meta`` device) as all t²
  pairs, ``is_causal`` or not, and torch 2.13's CPU kernel
  (``_scaled_dot_product_flash_attention_for_cpu``) as 0; calflops counts no attention
  scores there at all (it patches ``torch.nn.functional`` calls, and sdpa is not among
  them).
- transformers' grouped experts (``grouped_mm``/the fused MoE kernels) are ops
  FlopCounterMode has no formula for, so it counts the experts as 0; the eager experts
  of `llmmath.modules.MoE` (one ``nn.Linear`` per expert) are counted.
- Multi-token-prediction layers (DeepSeek-V3's ``num_nextn_predict_layers``) are not
  part of the forward pass counted here.

Explained in the chapter *FLOPs* (``chapters/08_flops.ipynb``).
"""

from __future__ import annotations

from dataclasses import dataclass

from llmmath.config import ConfigError, ModelConfig, check_positive_int, one_of
from llmmath.flops import ATTENTION_MODES, _query_weights, _value_dim, attention_pairs

RECOMPUTE_MODES = ("none", "selective", "full")
ATTENTION_CORE = ("scores", "weighted_sum")
"""The rows selective recomputation runs again (Korthikanti et al. 2022, Sec. 5)."""


@dataclass(frozen=True)
class ModuleFlops:
    """FLOPs of one module over the whole batch: ``forward``, ``backward`` (2 ×
    forward), ``recompute`` (forward again in the backward pass, or 0) and
    ``training`` (their sum). ``layer`` is None for the embedding and the LM head."""

    name: str
    layer: int | None
    forward: int
    backward: int
    recompute: int

    @property
    def training(self) -> int:
        return self.forward + self.backward + self.recompute

    def as_dict(self) -> dict:
        return {
            "name": self.name,
            "layer": self.layer,
            "forward": self.forward,
            "backward": self.backward,
            "recompute": self.recompute,
            "training": self.training,
        }


def _layer_weights(
    cfg: ModelConfig, layer: int
) -> tuple[list[tuple[str, int]], list[tuple[str, int]]]:
    """``(name, weights one token multiplies by)`` of one layer's matmul modules: those
    before the attention core (q, k, v) and those after it (o_proj, the FFN)."""
    H, n_h, d_h = cfg.hidden_size, cfg.num_attention_heads, cfg.head_dim
    if cfg.is_mla:
        d_c, d_r = cfg.kv_lora_rank, cfg.qk_rope_head_dim
        if cfg.q_lora_rank is None:
            query = [("q_proj", _query_weights(cfg))]
        else:
            d_q = cfg.q_lora_rank
            query = [("q_a_proj", H * d_q), ("q_b_proj", d_q * n_h * d_h)]
        attn = query + [
            ("kv_a_proj_with_mqa", H * (d_c + d_r)),
            ("kv_b_proj", d_c * n_h * (cfg.qk_nope_head_dim + cfg.v_head_dim)),
        ]
    else:
        kv = cfg.num_key_value_heads * d_h
        attn = (
            [("qkv_proj", H * (n_h * d_h + 2 * kv))]
            if cfg.fused_qkv
            else [("q_proj", H * n_h * d_h), ("k_proj", H * kv), ("v_proj", H * kv)]
        )
    before = [(f"self_attn.{n}", w) for n, w in attn]
    after = [("self_attn.o_proj", n_h * _value_dim(cfg) * H)]
    if cfg.is_moe and layer not in cfg.dense_layers:
        one = (3 if cfg.mlp_type == "gated" else 2) * H * cfg.expert_intermediate_size
        ffn = [("router", cfg.num_local_experts * H)]
        ffn.append(("experts", cfg.num_experts_per_tok * one))
        if cfg.n_shared_experts:
            ffn.append(("shared_experts", cfg.n_shared_experts * one))
    else:
        I = cfg.intermediate_size
        if cfg.fused_gate_up:
            ffn = [("gate_up_proj", 2 * H * I)]
        elif cfg.mlp_type == "gated":
            ffn = [("gate_proj", H * I), ("up_proj", H * I)]
        else:
            ffn = [("up_proj", H * I)]
        ffn.append(("down_proj", I * H))
    return before, after + [(f"mlp.{n}", w) for n, w in ffn]


def module_flops(
    cfg: ModelConfig,
    seq_len: int,
    batch: int = 1,
    attention: str = "causal",
    recompute: str = "none",
) -> list[ModuleFlops]:
    """FLOPs of every module for ``batch`` sequences of ``seq_len`` tokens, in forward
    order: the embedding(s), each layer's modules, the LM head (see the module
    docstring for the names and the counting).

    Raises:
        ConfigError: ``seq_len`` or ``batch`` not a positive int, or ``attention``
        (causal, full) or ``recompute`` (none, selective, full) unknown.
    """
    check_positive_int("seq_len", seq_len)
    check_positive_int("batch", batch)
    if attention not in ATTENTION_MODES:
        raise ConfigError(one_of("attention", ATTENTION_MODES, attention))
    if recompute not in RECOMPUTE_MODES:
        raise ConfigError(one_of("recompute", RECOMPUTE_MODES, recompute))
    tokens = batch * seq_len
    causal = attention == "causal"

    def row(name: str, layer: int | None, forward: int) -> ModuleFlops:
        again = (
            layer is not None
            and (recompute == "full" or name.rsplit(".", 1)[-1] in ATTENTION_CORE)
            and recompute != "none"
        )
        return ModuleFlops(name, layer, forward, 2 * forward, forward if again else 0)

    rows = [row("embed_tokens", None, 0)]
    if cfg.position_embedding_type == "learned":
        rows.append(row("embed_positions", None, 0))
    n_h = cfg.num_attention_heads
    for i in range(cfg.num_hidden_layers):
        pairs = attention_pairs(seq_len, causal, cfg.window_of(i) if causal else None)
        before, after = _layer_weights(cfg, i)
        rows += [row(f"layers.{i}.{n}", i, 2 * tokens * w) for n, w in before]
        core = {"scores": cfg.head_dim, "weighted_sum": _value_dim(cfg)}
        rows += [
            row(f"layers.{i}.self_attn.{n}", i, 2 * batch * n_h * d * pairs)
            for n, d in core.items()
        ]
        rows += [row(f"layers.{i}.{n}", i, 2 * tokens * w) for n, w in after]
    rows.append(row("lm_head", None, 2 * tokens * cfg.hidden_size * cfg.vocab_size))
    return rows


def layer_totals(rows: list[ModuleFlops]) -> list[ModuleFlops]:
    """`module_flops`' rows summed per layer, named ``layers.{i}``, in layer order."""
    out: dict[int, list[int]] = {}
    for r in rows:
        if r.layer is not None:
            acc = out.setdefault(r.layer, [0, 0, 0])
            acc[0] += r.forward
            acc[1] += r.backward
            acc[2] += r.recompute
    return [ModuleFlops(f"layers.{i}", i, *acc) for i, acc in out.items()]


def by_module_report(
    name: str,
    cfg: ModelConfig,
    seq_len: int,
    batch: int = 1,
    attention: str = "causal",
    recompute: str = "none",
) -> dict:
    """What ``flops MODEL --by-module --json`` prints: every module's and every
    layer's FLOPs (`module_flops`, `layer_totals`) and their totals, for ``batch``
    sequences of ``seq_len`` tokens."""
    rows = module_flops(cfg, seq_len, batch, attention, recompute)
    total = {
        k: sum(getattr(r, k) for r in rows)
        for k in ("forward", "backward", "recompute", "training")
    }
    return {
        "model": name,
        "seq_len": seq_len,
        "batch": batch,
        "attention": attention,
        "recompute": recompute,
        "modules": [r.as_dict() for r in rows],
        "layers": [r.as_dict() for r in layer_totals(rows)],
        "total": total,
        "counted": "FLOPs of the whole batch: 2 x every matmul (LM head included, tied "
        "or not) and QK^T, AV; backward 2 x forward; recompute: the attention core "
        "(selective) or every layer's forward (full) again; the embedding lookup, "
        "biases, norms, activations, softmax and RoPE are not counted",
    }


def format_by_module(report: dict) -> str:
    """`by_module_report` as a plain-text table: the modules of each run of alike
    layers once (per layer), then the totals."""
    from llmmath.messages import N_, ljust, rjust
    from llmmath.messages import gettext as _

    cols = ("forward", "backward", "recompute", "training")
    names = (N_("forward"), N_("backward"), N_("recompute"), N_("training"))
    head = "  " + ljust(_("module"), 34) + "".join(rjust(_(c), 22) for c in names)

    def line(label: str, r: dict) -> str:
        return f"  {ljust(label, 34)}" + "".join(f"{r[c]:>22,}" for c in cols)

    out = [
        _(
            "{model}: FLOPs of {batch} x {t} tokens ({attention} attention, "
            "recompute {recompute})"
        ).format(
            model=report["model"],
            batch=f"{report['batch']:,}",
            t=f"{report['seq_len']:,}",
            attention=report["attention"],
            recompute=report["recompute"],
        ),
        head,
    ]
    by_layer: dict[int, list[dict]] = {}
    for r in report["modules"]:
        if r["layer"] is None:
            if r["name"] == "lm_head":
                continue
            out.append(line(r["name"], r))
        else:
            by_layer.setdefault(r["layer"], []).append(r)

    def shape(i: int) -> list[tuple]:
        return [
            (r["name"].split(".", 2)[2],) + tuple(r[c] for c in cols)
            for r in by_layer[i]
        ]

    layers = sorted(by_layer)
    start = 0
    while start < len(layers):
        end = start
        while end + 1 < len(layers) and shape(layers[end + 1]) == shape(layers[start]):
            end += 1
        span = (
            _("layer {i}:").format(i=layers[start])
            if end == start
            else _("layers {first}-{last}, each:").format(
                first=layers[start], last=layers[end]
            )
        )
        out.append(f"  {span}")
        for r in by_layer[layers[start]]:
            out.append(line("  " + r["name"].split(".", 2)[2], r))
        start = end + 1
    out.append(line("lm_head", report["modules"][-1]))
    out.append(line(_("total"), report["total"]))
    return "\n".join(out)

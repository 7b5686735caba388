"""FLOP counts. A matmul of (m, k) by (k, n) costs 2·m·k·n FLOPs (one multiply and one
add per term); elementwise work (softmax, norms, activations, biases) is left out here.

Attention over a sequence of t tokens, per layer:

- projections: 2·t·(H·n_h·d_h + 2·H·n_kv·d_h + n_h·d_h·H), linear in t;
- scores QKᵀ and the weighted sum AV: 2·n_h·d_h·t² each, quadratic in t. With the causal
  mask only the t(t+1)/2 pairs (i, j ≤ i) are needed, which is what a causal kernel
  computes; a plain matmul followed by a mask (as in `llmmath.modules.Attention`)
  computes all t².

Kaplan et al. 2020, Table 1 (2·n_layer·n_ctx·d_attn per token for the context term);
Megatron-LM's FLOP count (``num_floating_point_operations``) halves the t² term for the
causal mask.

Explained in the chapter *Attention: MHA, GQA and MQA*
(``chapters/03_attention.ipynb``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from fractions import Fraction

from llmmath.config import ConfigError, ModelConfig, check_positive_int, one_of
from llmmath.messages import gettext as _


@dataclass(frozen=True)
class AttentionFlops:
    """Forward FLOPs of the attention blocks (all L layers) for one sequence.

    ``projections`` (q, k, v, o), ``scores`` (QKᵀ) and ``weighted_sum`` (AV), all exact
    ints.
    """

    projections: int
    scores: int
    weighted_sum: int

    @property
    def total(self) -> int:
        return self.projections + self.scores + self.weighted_sum

    @property
    def quadratic(self) -> int:
        """The two t² matmuls together."""
        return self.scores + self.weighted_sum


def attention_pairs(seq_len: int, causal: bool, window: int | None = None) -> int:
    """Query–key pairs a length-t sequence computes: t² (full) or, causal, Σᵢ min(i, W)
    over positions i = 1 … t, which is t(t+1)/2 without a window W."""
    check_positive_int("seq_len", seq_len)
    if not causal:
        return seq_len * seq_len
    if window is None or seq_len <= window:
        return seq_len * (seq_len + 1) // 2
    return window * (window + 1) // 2 + (seq_len - window) * window


def attention_flops(
    cfg: ModelConfig, seq_len: int, causal: bool = False, batch: int = 1
) -> AttentionFlops:
    """Forward FLOPs of all attention blocks for ``batch`` sequences of ``seq_len``
    tokens.

    ``causal=False`` counts every query–key pair, as the explicit matmuls of the
    reference module do (and as `torch.utils.flop_counter.FlopCounterMode` measures
    them); ``causal=True`` counts only the pairs a causal kernel needs, within each
    layer's sliding window if it has one (`ModelConfig.window_of`). Scores cost
    2·n_h·d_h per pair and the weighted sum 2·n_h·d_v (d_v = d_h except with MLA,
    whose queries and keys are d_n + d_r wide and values d_v). Divide by ``batch ·
    seq_len`` for FLOPs per token.

    Raises:
        ConfigError: ``seq_len`` or ``batch`` is not a positive integer.
    """
    check_positive_int("batch", batch)
    pairs = _pairs_over_layers(cfg, seq_len, causal)
    return AttentionFlops(
        projections=cfg.num_hidden_layers
        * batch
        * 2
        * seq_len
        * _projection_weights(cfg),
        scores=batch * 2 * cfg.num_attention_heads * cfg.head_dim * pairs,
        weighted_sum=batch * 2 * cfg.num_attention_heads * _value_dim(cfg) * pairs,
    )


def _value_dim(cfg: ModelConfig) -> int:
    """d_v: a value head's width (``v_head_dim`` with MLA, else d_h)."""
    return cfg.v_head_dim if cfg.is_mla else cfg.head_dim


def _pairs_over_layers(cfg: ModelConfig, seq_len: int, causal: bool) -> int:
    """Query–key pairs summed over the L layers, each within its own window."""
    check_positive_int("seq_len", seq_len)
    return sum(
        attention_pairs(seq_len, causal, cfg.window_of(i) if causal else None)
        for i in range(cfg.num_hidden_layers)
    )


def decode_attention_flops(
    cfg: ModelConfig, context: int, batch: int = 1
) -> AttentionFlops:
    """Attention FLOPs of one decode step with a KV cache: one new query per sequence
    against the ``context`` keys up to and including its own (at most each layer's
    sliding window), all L layers. Equals ``causal(context) − causal(context − 1)``
    of `attention_flops`. With MLA this is the expanded form (keys and values cached
    per head; `mla_decode_flops` compares the others)."""
    check_positive_int("context", context)
    check_positive_int("batch", batch)
    keys = sum(
        min(context, cfg.window_of(i)) if cfg.window_of(i) else context
        for i in range(cfg.num_hidden_layers)
    )
    return AttentionFlops(
        cfg.num_hidden_layers * batch * 2 * _projection_weights(cfg),
        batch * 2 * cfg.num_attention_heads * cfg.head_dim * keys,
        batch * 2 * cfg.num_attention_heads * _value_dim(cfg) * keys,
    )


MLA_FORMS = ("expanded", "recompute", "absorbed")


def mla_decode_flops(cfg: ModelConfig, context: int, form: str = "absorbed") -> int:
    """Attention FLOPs of one MLA decode step of one sequence at ``context`` tokens,
    all L layers, in one of three forms (DeepSeek-V2 report, Sec. 2.1.2, "absorb"):

    - ``"expanded"``: per-head keys and values cached; the naive projections
      (`_projection_weights`) plus scores 2·n_h·(d_n + d_r)·t and AV 2·n_h·d_v·t.
    - ``"recompute"``: the latent cached and up-projected again for all t cached
      tokens each step (``DeepseekV3Attention`` since transformers 5.15.0,
      `llmmath.kvcache.LATENT_CACHE_SINCE`): the expanded form
      plus 2·d_c·n_h·(d_n + d_v)·(t − 1) for ``kv_b_proj`` over the cache.
    - ``"absorbed"``: W_UK folded into the query and W_UV into the output; attention
      runs over the latent itself, n_h heads of width d_c + d_r for scores and d_c
      for values, with no per-token up-projection: q path, the folds
      2·n_h·d_n·d_c (query) and 2·n_h·d_c·d_v (output), kv_a, o_proj, scores
      2·n_h·(d_c + d_r)·t, AV 2·n_h·d_c·t.

    Raises:
        ConfigError: ``cfg`` is not MLA, ``context`` not a positive int, or ``form``
        unknown.
    """
    check_positive_int("context", context)
    if not cfg.is_mla:
        raise ConfigError(_("mla_decode_flops needs multi-head latent attention"))
    if form not in MLA_FORMS:
        raise ConfigError(one_of("form", MLA_FORMS, form))
    n_h, d_n, d_r, d_v, d_c, H = (
        cfg.num_attention_heads,
        cfg.qk_nope_head_dim,
        cfg.qk_rope_head_dim,
        cfg.v_head_dim,
        cfg.kv_lora_rank,
        cfg.hidden_size,
    )
    t = context
    if form == "absorbed":
        q_path = _query_weights(cfg)
        per_layer = 2 * (
            q_path
            + H * (d_c + d_r)  # kv_a_proj_with_mqa for the new token
            + n_h * d_n * d_c  # q_nope · W_UK: the query in latent space
            + n_h * (d_c + d_r) * t  # scores against latent and rope key
            + n_h * d_c * t  # weights · latent
            + n_h * d_c * d_v  # · W_UV
            + n_h * d_v * H  # o_proj
        )
        return cfg.num_hidden_layers * per_layer
    expanded = decode_attention_flops(cfg, t).total
    if form == "expanded":
        return expanded
    return expanded + cfg.num_hidden_layers * 2 * d_c * n_h * (d_n + d_v) * (t - 1)


def _query_weights(cfg: ModelConfig) -> int:
    """MLA's query path: H·n_h·(d_n + d_r), or through the rank-d_q bottleneck."""
    q_out = cfg.num_attention_heads * cfg.head_dim
    if cfg.q_lora_rank is None:
        return cfg.hidden_size * q_out
    return cfg.q_lora_rank * (cfg.hidden_size + q_out)


def _projection_weights(cfg: ModelConfig) -> int:
    """Weights of q, k, v and o in one layer: H·n_h·d_h + 2·H·n_kv·d_h + n_h·d_h·H;
    with MLA the query path, kv_a_proj_with_mqa H·(d_c + d_r), kv_b_proj
    d_c·n_h·(d_n + d_v) and o_proj n_h·d_v·H."""
    H, q, kv = (
        cfg.hidden_size,
        cfg.num_attention_heads * cfg.head_dim,
        cfg.num_key_value_heads * cfg.head_dim,
    )
    if cfg.is_mla:
        n_h, d_c = cfg.num_attention_heads, cfg.kv_lora_rank
        return (
            _query_weights(cfg)
            + H * (d_c + cfg.qk_rope_head_dim)
            + d_c * n_h * (cfg.qk_nope_head_dim + cfg.v_head_dim)
            + n_h * cfg.v_head_dim * H
        )
    return H * q + 2 * H * kv + q * H


def rope_flops(cfg: ModelConfig, seq_len: int, batch: int = 1) -> int:
    """FLOPs RoPE adds in a forward pass: ``x·cos + rotate_half(x)·sin`` on every query
    and key element, 3 FLOPs each (two multiplies, one add; the sign flip and the
    cos/sin table, computed once, are not counted): 3·(n_h + n_kv)·d_h per token per
    layer. Zero for learned positions."""
    check_positive_int("seq_len", seq_len)
    check_positive_int("batch", batch)
    if cfg.position_embedding_type != "rope":
        return 0
    if cfg.is_mla:  # only the d_r rotary part of each query and the one shared key
        per_token = 3 * (cfg.num_attention_heads + 1) * cfg.qk_rope_head_dim
        return cfg.num_hidden_layers * batch * seq_len * per_token
    per_token = 3 * (cfg.num_attention_heads + cfg.num_key_value_heads) * cfg.head_dim
    return cfg.num_hidden_layers * batch * seq_len * per_token


def lm_head_flops(cfg: ModelConfig, tokens: int = 1) -> int:
    """FLOPs of the LM head for ``tokens`` tokens: 2·H·V each (tied or not: the matmul
    runs either way). The embedding lookup before the first layer costs no FLOPs: it
    copies rows."""
    check_positive_int("tokens", tokens)
    return 2 * cfg.hidden_size * cfg.vocab_size * tokens


def ffn_flops(cfg: ModelConfig, tokens: int = 1) -> int:
    """Matmul FLOPs of the FFN blocks for ``tokens`` tokens: 2 × the FFN weights ×
    tokens, all L layers (gated: 2·3·H·I per layer and token; plain: 2·2·H·I). The
    activation and the gating product (about I FLOPs each) are left out."""
    check_positive_int("tokens", tokens)
    return tokens * 2 * _ffn_weights_all_layers(cfg)


def matmul_weights(cfg: ModelConfig) -> dict[str, int]:
    """Weights one token multiplies by, by block: ``attention`` (q, k, v, o in all
    layers), ``ffn`` (all layers; for a mixture of experts only the router and the k + S
    experts a token uses) and ``lm_head`` (V·H, counted whether or not it is tied: the
    matmul runs either way). The embedding lookup, biases and norms are not matmul
    weights."""
    return {
        "attention": cfg.num_hidden_layers * _projection_weights(cfg),
        "ffn": _ffn_weights_all_layers(cfg),
        "lm_head": cfg.vocab_size * cfg.hidden_size,
    }


def _ffn_weights_per_token(cfg: ModelConfig) -> int:
    """FFN weights one token multiplies by in one layer: the FFN, or for a mixture of
    experts the router (E·H) and its k routed plus S shared experts (3·H·I_e each)."""
    matrices = 3 if cfg.mlp_type == "gated" else 2
    if not cfg.is_moe:
        return matrices * cfg.hidden_size * cfg.intermediate_size
    one = matrices * cfg.hidden_size * cfg.expert_intermediate_size
    return (
        cfg.num_experts_per_tok + cfg.n_shared_experts
    ) * one + cfg.num_local_experts * cfg.hidden_size


def _ffn_weights_all_layers(cfg: ModelConfig) -> int:
    """FFN weights one token multiplies by in all L layers: the MoE layers' share
    (`_ffn_weights_per_token`) plus 3·H·I in each dense layer of a mixture of experts
    (DeepSeek's first layers, Qwen3-MoE's ``mlp_only_layers``)."""
    if not cfg.is_moe:
        return cfg.num_hidden_layers * _ffn_weights_per_token(cfg)
    dense = 3 * cfg.hidden_size * cfg.intermediate_size
    return (
        cfg.num_moe_layers * _ffn_weights_per_token(cfg) + cfg.num_dense_layers * dense
    )


@dataclass(frozen=True)
class ForwardFlops:
    """Forward FLOPs per token: ``matmul`` parts (2 × weights, exact ints) and
    ``attention`` (QKᵀ and AV, an exact `Fraction` because causal attention averages
    over positions)."""

    parts: dict[str, int] = field(default_factory=dict)
    attention: Fraction = Fraction(0)

    @property
    def matmul(self) -> int:
        return sum(self.parts.values())

    @property
    def total(self) -> Fraction:
        return self.matmul + self.attention


ATTENTION_MODES = ("causal", "full")


def forward_flops_per_token(
    cfg: ModelConfig, seq_len: int, attention: str = "causal"
) -> ForwardFlops:
    """Forward FLOPs per token of a length-``seq_len`` sequence.

    2 × the weights of every matmul (`matmul_weights`: attention projections, FFN, LM
    head tied or not; the embedding lookup is free; biases, norms, activations and
    softmax are not counted) plus QKᵀ and AV. ``attention="full"``: every token against
    all T keys, 4·L·T·n_h·d_h per token. ``"causal"``: token i (1-based) reads i keys
    (at most W with a sliding window), and the count is averaged over the T positions:
    4·L·n_h·d_h·pairs/T, which is 2·L·n_h·d_h·(T + 1) without a window (pairs counted
    layer by layer, each in its own window; with MLA 2·n_h·(d_h + d_v) per pair, d_h =
    d_n + d_r). Its matmul part ≈ 2N (Kaplan et al. 2020, Sec. 2.1), closest for tied
    models: an untied model's N also counts the embedding table, which does no FLOPs.

    Raises:
        ConfigError: ``seq_len`` not a positive integer, or ``attention`` not causal or
        full.
    """
    if attention not in ATTENTION_MODES:
        raise ConfigError(one_of("attention", ATTENTION_MODES, attention))
    pairs = _pairs_over_layers(cfg, seq_len, attention == "causal")
    per_pair = 2 * cfg.num_attention_heads * (cfg.head_dim + _value_dim(cfg))
    return ForwardFlops(
        {k: 2 * v for k, v in matmul_weights(cfg).items()},
        Fraction(per_pair * pairs, seq_len),
    )


# --- Conventions in the literature, per token of a length-T sequence (forward pass)
# ----------


def kaplan_forward_flops(cfg: ModelConfig, seq_len: int) -> int:
    """Kaplan et al. 2020, Table 1: C_forward = 2N + 2·n_layer·n_ctx·d_attn, with N the
    non-embedding matmul weights (attention and FFN; no LM head, no biases or norms) and
    d_attn = n_h·d_h. The table does not say which pairs its context term counts: it
    equals QKᵀ alone over all pairs, or QKᵀ + AV over the causal half (up to the
    diagonal)."""
    w = matmul_weights(cfg)
    d_attn = cfg.num_attention_heads * cfg.head_dim
    return (
        2 * (w["attention"] + w["ffn"]) + 2 * cfg.num_hidden_layers * seq_len * d_attn
    )


def chinchilla_forward_flops(cfg: ModelConfig, seq_len: int) -> int:
    """Hoffmann et al. 2022, Appendix F: embeddings (2·V·H), per layer the QKV and
    output projections, QKᵀ (2·T·n_h·d_h), softmax (3·n_h·T), AV (2·T·n_h·d_h), the
    dense block, and the final logits (2·H·V); full attention. Per token (the paper's
    totals divided by T). Generalised: K and V are n_kv·d_h wide (GQA) and a gated FFN
    has three matrices, where the appendix assumes MHA and two."""
    w = matmul_weights(cfg)
    d_attn = cfg.num_attention_heads * cfg.head_dim
    per_layer_context = (
        2 * seq_len * d_attn
        + 3 * cfg.num_attention_heads * seq_len
        + 2 * seq_len * d_attn
    )
    return (
        2 * cfg.vocab_size * cfg.hidden_size
        + 2 * (w["attention"] + w["ffn"])
        + cfg.num_hidden_layers * per_layer_context
        + 2 * w["lm_head"]
    )


def palm_forward_flops(cfg: ModelConfig, seq_len: int) -> int:
    """Chowdhery et al. 2022 (PaLM), Appendix B: 6N + 12·L·H·Q·T training FLOPs per
    token (H heads, Q head dim), so one third, 2N + 4·L·n_h·d_h·T, forward. N here is
    every matmul weight including the LM head (PaLM ties its embedding, so its N is the
    same; an untied embedding table is not charged)."""
    return (
        2 * sum(matmul_weights(cfg).values())
        + 4 * cfg.num_hidden_layers * cfg.num_attention_heads * cfg.head_dim * seq_len
    )


def megatron_forward_flops(cfg: ModelConfig, seq_len: int) -> int:
    """Megatron-LM's ``num_floating_point_operations`` (NVIDIA/Megatron-LM, training
    code, "causal mask (only half of the mask is non-zero)"), per token of the forward
    pass: 2 × all matmul weights plus the QKᵀ and AV term 4·L·n_h·d_h·T halved, T/2 keys
    per token on average where the exact causal count is (T + 1)/2. Narayanan et al.
    2021, Sec. 5.1, counted all pairs (24·B·s·h² + 4·B·s²·h per layer), as PaLM does."""
    return (
        2 * sum(matmul_weights(cfg).values())
        + 2 * cfg.num_hidden_layers * cfg.num_attention_heads * cfg.head_dim * seq_len
    )


CONVENTIONS = {
    "llmmath (causal, exact)": lambda cfg, t: (
        forward_flops_per_token(cfg, t, "causal").total
    ),
    "llmmath (full)": lambda cfg, t: forward_flops_per_token(cfg, t, "full").total,
    "Kaplan et al. 2020": kaplan_forward_flops,
    "Chinchilla (Hoffmann et al. 2022)": chinchilla_forward_flops,
    "PaLM (Chowdhery et al. 2022)": palm_forward_flops,
    "Megatron-LM (causal half)": megatron_forward_flops,
}


def training_flops(
    cfg: ModelConfig, tokens: int, seq_len: int, attention: str = "causal"
) -> Fraction:
    """FLOPs to train on ``tokens`` tokens: forward + backward, the backward pass
    costing twice the forward (one matmul for the input gradient, one for the weight
    gradient), so 3 × forward ≈ 6·N·D (Kaplan et al. 2020, Sec. 2.1; Hoffmann et al.
    2022, Appendix F)."""
    check_positive_int("tokens", tokens)
    return 3 * tokens * forward_flops_per_token(cfg, seq_len, attention).total


def training_days(
    total_flops: float, gpus: int, peak_flops: float, mfu: float
) -> float:
    """Wall-clock days for ``total_flops`` on ``gpus`` GPUs of ``peak_flops`` FLOP/s
    each at model FLOPs utilization ``mfu`` (0 < mfu ≤ 1)."""
    check_positive_int("gpus", gpus)
    if not 0 < mfu <= 1:
        raise ConfigError(
            _("{name} must be in (0, 1], got {value}").format(
                name="mfu", value=repr(mfu)
            )
        )
    return float(total_flops) / (gpus * peak_flops * mfu) / 86400

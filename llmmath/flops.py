"""FLOP counts. A matmul of (m, k) by (k, n) costs 2·m·k·n FLOPs (one multiply and one add per
term); elementwise work (softmax, norms, activations, biases) is left out here.

Attention over a sequence of t tokens, per layer:

- projections: 2·t·(H·n_h·d_h + 2·H·n_kv·d_h + n_h·d_h·H), linear in t;
- scores QKᵀ and the weighted sum AV: 2·n_h·d_h·t² each, quadratic in t. With the causal mask
  only the t(t+1)/2 pairs (i, j ≤ i) are needed, which is what a causal kernel computes; a plain
  matmul followed by a mask (as in `llmmath.modules.Attention`) computes all t².

Kaplan et al. 2020, Table 1 (2·n_layer·n_ctx·d_attn per token for the scores, full attention);
Korthikanti et al. 2022 (Megatron) count the causal half.

Explained in the chapter *Attention: MHA, GQA and MQA* (``chapters/03_attention.ipynb``).
"""

from __future__ import annotations

from dataclasses import dataclass

from llmmath.config import ConfigError, ModelConfig


@dataclass(frozen=True)
class AttentionFlops:
    """Forward FLOPs of the attention blocks (all L layers) for one sequence.

    ``projections`` (q, k, v, o), ``scores`` (QKᵀ) and ``weighted_sum`` (AV), all exact ints.
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


def _positive(name: str, value: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise ConfigError(f"{name} must be a positive integer, got {value!r}")


def attention_pairs(seq_len: int, causal: bool, window: int | None = None) -> int:
    """Query–key pairs a length-t sequence computes: t² (full) or, causal, Σᵢ min(i, W) over
    positions i = 1 … t, which is t(t+1)/2 without a window W."""
    _positive("seq_len", seq_len)
    if not causal:
        return seq_len * seq_len
    if window is None or seq_len <= window:
        return seq_len * (seq_len + 1) // 2
    return window * (window + 1) // 2 + (seq_len - window) * window


def attention_flops(cfg: ModelConfig, seq_len: int, causal: bool = False,
                    batch: int = 1) -> AttentionFlops:
    """Forward FLOPs of all attention blocks for ``batch`` sequences of ``seq_len`` tokens.

    ``causal=False`` counts every query–key pair, as the explicit matmuls of the reference module
    do (and as `torch.utils.flop_counter.FlopCounterMode` measures them); ``causal=True`` counts
    only the pairs a causal kernel needs, within ``cfg.sliding_window`` if the model has one.
    Divide by ``batch · seq_len`` for FLOPs per token.

    Raises:
        ConfigError: ``seq_len`` or ``batch`` is not a positive integer.
    """
    _positive("batch", batch)
    pairs = attention_pairs(seq_len, causal, cfg.sliding_window)
    return AttentionFlops(
        projections=cfg.num_hidden_layers * batch * 2 * seq_len * _projection_weights(cfg),
        scores=cfg.num_hidden_layers * batch * 2 * cfg.num_attention_heads * cfg.head_dim * pairs,
        weighted_sum=cfg.num_hidden_layers * batch * 2 * cfg.num_attention_heads * cfg.head_dim * pairs,
    )


def decode_attention_flops(cfg: ModelConfig, context: int, batch: int = 1) -> AttentionFlops:
    """Attention FLOPs of one decode step with a KV cache: one new query per sequence against
    the ``context`` keys up to and including its own (at most ``cfg.sliding_window``), all L
    layers. Equals ``causal(context) − causal(context − 1)`` of `attention_flops`."""
    _positive("context", context)
    _positive("batch", batch)
    keys = min(context, cfg.sliding_window) if cfg.sliding_window else context
    quadratic = cfg.num_hidden_layers * batch * 2 * cfg.num_attention_heads * cfg.head_dim * keys
    return AttentionFlops(cfg.num_hidden_layers * batch * 2 * _projection_weights(cfg),
                          quadratic, quadratic)


def _projection_weights(cfg: ModelConfig) -> int:
    """Weights of q, k, v and o in one layer: H·n_h·d_h + 2·H·n_kv·d_h + n_h·d_h·H."""
    H, q, kv = cfg.hidden_size, cfg.num_attention_heads * cfg.head_dim, cfg.num_key_value_heads * cfg.head_dim
    return H * q + 2 * H * kv + q * H


def rope_flops(cfg: ModelConfig, seq_len: int, batch: int = 1) -> int:
    """FLOPs RoPE adds in a forward pass: ``x·cos + rotate_half(x)·sin`` on every query and key
    element, 3 FLOPs each (two multiplies, one add; the sign flip and the cos/sin table, computed
    once, are not counted): 3·(n_h + n_kv)·d_h per token per layer. Zero for learned positions."""
    _positive("seq_len", seq_len)
    _positive("batch", batch)
    if cfg.position_embedding_type != "rope":
        return 0
    per_token = 3 * (cfg.num_attention_heads + cfg.num_key_value_heads) * cfg.head_dim
    return cfg.num_hidden_layers * batch * seq_len * per_token


def lm_head_flops(cfg: ModelConfig, tokens: int = 1) -> int:
    """FLOPs of the LM head for ``tokens`` tokens: 2·H·V each (tied or not: the matmul runs
    either way). The embedding lookup before the first layer costs no FLOPs: it copies rows."""
    _positive("tokens", tokens)
    return 2 * cfg.hidden_size * cfg.vocab_size * tokens


def ffn_flops(cfg: ModelConfig, tokens: int = 1) -> int:
    """Matmul FLOPs of the FFN blocks for ``tokens`` tokens: 2 × the FFN weights × tokens, all L
    layers (gated: 2·3·H·I per layer and token; plain: 2·2·H·I). The activation and the gating
    product (about I FLOPs each) are left out."""
    _positive("tokens", tokens)
    matrices = 3 if cfg.mlp_type == "gated" else 2
    return cfg.num_hidden_layers * tokens * 2 * matrices * cfg.hidden_size * cfg.intermediate_size

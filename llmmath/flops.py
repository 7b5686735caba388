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


def attention_pairs(seq_len: int, causal: bool) -> int:
    """Query–key pairs a length-t sequence computes: t² (full) or t(t+1)/2 (causal half)."""
    if isinstance(seq_len, bool) or not isinstance(seq_len, int) or seq_len <= 0:
        raise ConfigError(f"seq_len must be a positive integer, got {seq_len!r}")
    return seq_len * (seq_len + 1) // 2 if causal else seq_len * seq_len


def attention_flops(cfg: ModelConfig, seq_len: int, causal: bool = False,
                    batch: int = 1) -> AttentionFlops:
    """Forward FLOPs of all attention blocks for ``batch`` sequences of ``seq_len`` tokens.

    ``causal=False`` counts every query–key pair, as the explicit matmuls of the reference module
    do (and as `torch.utils.flop_counter.FlopCounterMode` measures them); ``causal=True`` counts
    only the pairs a causal kernel needs. Divide by ``batch · seq_len`` for FLOPs per token.
    """
    n_h, n_kv, d_h, H, L = (cfg.num_attention_heads, cfg.num_key_value_heads, cfg.head_dim,
                            cfg.hidden_size, cfg.num_hidden_layers)
    projection_weights = H * n_h * d_h + 2 * H * n_kv * d_h + n_h * d_h * H
    pairs = attention_pairs(seq_len, causal)
    return AttentionFlops(
        projections=L * batch * 2 * seq_len * projection_weights,
        scores=L * batch * 2 * n_h * d_h * pairs,
        weighted_sum=L * batch * 2 * n_h * d_h * pairs,
    )


def decode_attention_flops(cfg: ModelConfig, context: int, batch: int = 1) -> AttentionFlops:
    """Attention FLOPs of one decode step with a KV cache: one new query per sequence against
    ``context`` cached keys (including its own), all L layers."""
    n_h, n_kv, d_h, H, L = (cfg.num_attention_heads, cfg.num_key_value_heads, cfg.head_dim,
                            cfg.hidden_size, cfg.num_hidden_layers)
    keys = attention_pairs(context, causal=False) // context  # validates; = context
    if cfg.sliding_window:
        keys = min(keys, cfg.sliding_window)
    projection_weights = H * n_h * d_h + 2 * H * n_kv * d_h + n_h * d_h * H
    return AttentionFlops(L * batch * 2 * projection_weights, L * batch * 2 * n_h * d_h * keys,
                          L * batch * 2 * n_h * d_h * keys)

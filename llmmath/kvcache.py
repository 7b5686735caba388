"""KV cache size: the keys and values a decoder keeps for every token it has seen.

Per layer and per token the cache holds one key and one value vector for each of the
n_kv key/value heads, d_h numbers each. For a batch of b sequences of t tokens:

    bytes = 2 · L · b · t · n_kv · d_h · (bytes per element)

(Pope et al. 2022, *Efficiently Scaling Transformer Inference*, Sec. 2; Kwon et al.
2023, vLLM, Sec. 3). Queries are not cached: with a causal mask no later step reads an
earlier query. With a sliding window of W tokens (Mistral-7B-v0.1) only the last min(t,
W) tokens are kept (Jiang et al. 2023, Sec. 2, rolling buffer cache).

Explained in the chapter *The KV cache* (``chapters/07_kv_cache.ipynb``).
"""

from __future__ import annotations

from llmmath.config import ModelConfig, check_positive_int
from llmmath.units import bytes_of


def cached_tokens(cfg: ModelConfig, seq_len: int) -> int:
    """Tokens per sequence the cache holds after ``seq_len`` tokens: min(t,
    sliding_window)."""
    check_positive_int("seq_len", seq_len)
    return min(seq_len, cfg.sliding_window) if cfg.sliding_window else seq_len


def kv_cache_elements(cfg: ModelConfig, batch: int = 1, seq_len: int = 1) -> int:
    """Numbers in the cache: 2 · L · b · min(t, W) · n_kv · d_h (keys and values)."""
    check_positive_int("batch", batch)
    return (
        2
        * cfg.num_hidden_layers
        * batch
        * cached_tokens(cfg, seq_len)
        * cfg.num_key_value_heads
        * cfg.head_dim
    )


def kv_cache_bytes(
    cfg: ModelConfig, batch: int = 1, seq_len: int = 1, dtype: str = "bf16"
) -> int:
    """Bytes of the KV cache of ``batch`` sequences of ``seq_len`` tokens, as an exact
    ``int``.

    ``dtype`` is the cache's number format (``"fp32"``, ``"bf16"``, ``"fp16"``,
    ``"fp8"``, ``"int8"``, ``"int4"``); quantisation scales, if any, are not counted. A
    ``sliding_window`` in ``cfg`` caps the cached length.

    Raises:
        ConfigError: ``batch`` or ``seq_len`` is not a positive integer, or ``dtype`` is
        unknown.
    """
    return bytes_of(kv_cache_elements(cfg, batch, seq_len), dtype)


def kv_cache_bytes_per_token(cfg: ModelConfig, dtype: str = "bf16") -> int:
    """Bytes one more token adds to the cache of one sequence: 2 · L · n_kv · d_h ·
    bytes per element (before a sliding window is full)."""
    return bytes_of(
        2 * cfg.num_hidden_layers * cfg.num_key_value_heads * cfg.head_dim, dtype
    )

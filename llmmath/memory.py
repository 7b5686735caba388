"""Serving memory: weights plus KV cache against a GPU's memory.

Weights take N · (bytes per parameter); the KV cache takes `llmmath.kvcache.kv_cache_bytes`.
Activations, the CUDA context and allocator fragmentation are left out: the answers are upper
bounds on what fits (vLLM reserves such overheads before sizing its cache, Kwon et al. 2023, Sec. 4).

Explained in the chapter *The KV cache* (``chapters/07_kv_cache.ipynb``).
"""

from __future__ import annotations

from dataclasses import dataclass

from llmmath.config import ConfigError, ModelConfig
from llmmath.counting import count_params
from llmmath.kvcache import kv_cache_bytes, kv_cache_bytes_per_token
from llmmath.units import bytes_of


def weight_bytes(cfg: ModelConfig, dtype: str = "bf16") -> int:
    """Bytes of the weights stored in ``dtype``: ``count_params(cfg).total`` × bytes per element."""
    return bytes_of(count_params(cfg).total, dtype)


@dataclass(frozen=True)
class ServingFit:
    """Whether a model and its cache fit in ``gpu_bytes``, and the largest batch and context.

    ``max_batch``: the largest batch of ``seq_len``-token sequences that fits (0 if none).
    ``max_seq_len``: the longest context for ``batch`` sequences that fits and that the model
    supports, at most ``context_limit`` (its ``max_position_embeddings``); 0 if none fits.
    """

    weight_bytes: int
    cache_bytes: int
    gpu_bytes: int
    max_batch: int
    max_seq_len: int
    context_limit: int

    @property
    def total_bytes(self) -> int:
        return self.weight_bytes + self.cache_bytes

    @property
    def fits(self) -> bool:
        return self.total_bytes <= self.gpu_bytes


def serving_fit(cfg: ModelConfig, gpu_bytes: int, batch: int = 1, seq_len: int = 4096,
                weight_dtype: str = "bf16", cache_dtype: str = "bf16") -> ServingFit:
    """Weights in ``weight_dtype`` plus the cache of ``batch`` × ``seq_len`` tokens in
    ``cache_dtype`` against ``gpu_bytes`` of memory. Exact integers throughout.

    The longest context is capped at ``cfg.max_position_embeddings``: memory is not the only
    limit (GPT-2 has 1024 learned positions). A sliding window caps the cache, not the context.

    Raises:
        ConfigError: a size is not a positive integer, or a dtype is unknown.
    """
    if isinstance(gpu_bytes, bool) or not isinstance(gpu_bytes, int) or gpu_bytes <= 0:
        raise ConfigError(f"gpu_bytes must be a positive integer, got {gpu_bytes!r}")
    weights = weight_bytes(cfg, weight_dtype)
    cache = kv_cache_bytes(cfg, batch, seq_len, cache_dtype)
    free = gpu_bytes - weights
    max_batch = max(free, 0) // kv_cache_bytes(cfg, 1, seq_len, cache_dtype)
    limit = cfg.max_position_embeddings
    if free < 0:
        max_seq_len = 0
    elif kv_cache_bytes(cfg, batch, limit, cache_dtype) <= free:
        max_seq_len = limit
    else:  # the cache grows by one token's bytes per step until it no longer fits
        max_seq_len = free // (kv_cache_bytes_per_token(cfg, cache_dtype) * batch)
    return ServingFit(weights, cache, gpu_bytes, max_batch, max_seq_len, limit)

"""KV cache size: the keys and values a decoder keeps for every token it has seen.

Per layer and per token the cache holds one key and one value vector for each of the
n_kv key/value heads, d_h numbers each. For a batch of b sequences of t tokens:

    bytes = 2 · L · b · t · n_kv · d_h · (bytes per element)

(Pope et al. 2022, *Efficiently Scaling Transformer Inference*, Sec. 2; Kwon et al.
2023, vLLM, Sec. 3). Queries are not cached: with a causal mask no later step reads an
earlier query. With a sliding window of W tokens (Mistral-7B-v0.1) only the last min(t,
W) tokens are kept (Jiang et al. 2023, Sec. 2, rolling buffer cache); where only some
layers slide (Gemma 2/3's ``layer_types``) each layer is capped on its own.

**Which W.** A sliding layer counts W tokens here: what exists during the attention
call of a new token, its own key and value and the W − 1 before it (Mistral's rolling
buffer of W, Jiang et al. 2023, Sec. 2). transformers keeps W − 1 between two forward
calls and concatenates the new token's key and value inside the call
(``transformers.cache_utils.DynamicSlidingWindowLayer.update``: "Only cache the last
``sliding_window - 1`` tokens"), so a cache measured between steps is one token per
sliding layer smaller. ``between_steps=True`` counts that: min(t, W − 1) per sliding
layer. Checked against transformers in ``tests/test_sliding_window_convention.py``.

Multi-head latent attention (DeepSeek-V2 report, Sec. 2.1.4, Table 1) caches, per layer
and token, the compressed latent c_KV (d_c = ``kv_lora_rank`` values) and the one
decoupled RoPE key shared by all heads (d_r = ``qk_rope_head_dim``): (d_c + d_r) values,
the ``"latent"`` layout, which serving engines store and transformers caches since
release 5.15.0 (`LATENT_CACHE_SINCE`; 5.14 and earlier cache the expanded one). The
``"expanded"`` layout is what a naive implementation keeps after up-projecting: per head
a key of d_n + d_r and a value of d_v values, n_h·(d_n + d_r + d_v) per layer and token.
For every other model the two layouts are the same.

Explained in the chapters *The KV cache* (``chapters/07_kv_cache.ipynb``) and
*Multi-head latent attention* (``chapters/07b_latent_attention.ipynb``).
"""

from __future__ import annotations

from llmmath.config import ConfigError, ModelConfig, check_positive_int, one_of
from llmmath.messages import gettext as _
from llmmath.units import bytes_of

LAYOUTS = ("latent", "expanded")

#: The first transformers release whose ``DeepseekV3Attention`` (and DeepSeek-V2's)
#: caches the latent: ``past_key_values.update`` on the compressed ``kv_nope`` and
#: ``k_rot``, re-expanded by ``expand_kv`` at every step. Merged in pull request
#: huggingface/transformers#47761 ("Fix multi-head latent attention (MLA)", August
#: 2026); in the published wheels 5.14.1 still updates the cache with the expanded keys
#: and values, 5.15.0 with the latent. Chapter 7b names it.
LATENT_CACHE_SINCE = "5.15.0"


def _check_layout(layout: str) -> None:
    if layout not in LAYOUTS:
        raise ConfigError(one_of("layout", LAYOUTS, layout))


def cached_tokens_per_layer(
    cfg: ModelConfig, seq_len: int, between_steps: bool = False
) -> list[int]:
    """Tokens each layer's cache holds after ``seq_len`` tokens: min(t, W) in a layer
    with a sliding window W (`ModelConfig.window_of`), t otherwise. W is what exists
    during the attention call; with ``between_steps`` a sliding layer holds min(t, W −
    1), what transformers keeps between two calls (module docstring, *Which W*).

    Raises:
        ConfigError: ``seq_len`` is not a positive integer.
    """
    check_positive_int("seq_len", seq_len)
    out = []
    for i in range(cfg.num_hidden_layers):
        window = cfg.window_of(i)
        if window is None:
            out.append(seq_len)
        else:
            out.append(min(seq_len, window - 1 if between_steps else window))
    return out


def cached_tokens(cfg: ModelConfig, seq_len: int, between_steps: bool = False) -> int:
    """Tokens per sequence the cache holds after ``seq_len`` tokens: min(t,
    sliding_window) (min(t, W − 1) with ``between_steps``), or, where only some layers
    slide, t (the most any layer holds; `cached_tokens_per_layer` gives each layer's).
    """
    return max(cached_tokens_per_layer(cfg, seq_len, between_steps))


def kv_values_per_token_per_layer(cfg: ModelConfig, layout: str = "latent") -> int:
    """Numbers one token adds to one layer's cache: 2·n_kv·d_h (keys and values);
    with MLA d_c + d_r (``"latent"``) or n_h·(d_n + d_r + d_v) (``"expanded"``).

    Raises:
        ConfigError: ``layout`` is not one of `LAYOUTS`.
    """
    _check_layout(layout)
    if cfg.is_mla:
        if layout == "latent":
            return cfg.kv_lora_rank + cfg.qk_rope_head_dim
        return cfg.num_attention_heads * (
            cfg.qk_nope_head_dim + cfg.qk_rope_head_dim + cfg.v_head_dim
        )
    return 2 * cfg.num_key_value_heads * cfg.head_dim


def kv_cache_elements(
    cfg: ModelConfig,
    batch: int = 1,
    seq_len: int = 1,
    layout: str = "latent",
    between_steps: bool = False,
) -> int:
    """Numbers in the cache: b · Σ over layers of min(t, W_layer) · (values per token
    per layer), which is 2 · L · b · min(t, W) · n_kv · d_h when every layer is alike
    (W − 1 for W with ``between_steps``).
    """
    check_positive_int("batch", batch)
    per = kv_values_per_token_per_layer(cfg, layout)
    return batch * per * sum(cached_tokens_per_layer(cfg, seq_len, between_steps))


def kv_cache_bytes(
    cfg: ModelConfig,
    batch: int = 1,
    seq_len: int = 1,
    dtype: str = "bf16",
    layout: str = "latent",
    between_steps: bool = False,
) -> int:
    """Bytes of the KV cache of ``batch`` sequences of ``seq_len`` tokens, as an exact
    ``int``.

    ``dtype`` is the cache's number format (``"fp32"``, ``"bf16"``, ``"fp16"``,
    ``"fp8"``, ``"int8"``, ``"int4"``); quantisation scales, if any, are not counted. A
    ``sliding_window`` in ``cfg`` caps the cached length (layer by layer with
    ``layer_types``) at W, what exists during the attention call, or at W − 1 with
    ``between_steps`` (what transformers keeps between calls; module docstring).
    ``layout`` matters only for multi-head latent attention.

    Raises:
        ConfigError: ``batch`` or ``seq_len`` is not a positive integer, or ``dtype`` or
        ``layout`` is unknown.
    """
    elements = kv_cache_elements(cfg, batch, seq_len, layout, between_steps)
    return bytes_of(elements, dtype)


def kv_cache_bytes_per_token(
    cfg: ModelConfig, dtype: str = "bf16", layout: str = "latent"
) -> int:
    """Bytes one more token adds to the cache of one sequence: 2 · L · n_kv · d_h ·
    bytes per element (before a sliding window is full); with MLA L · (d_c + d_r) ·
    bytes in the latent layout (70,272 B for DeepSeek-V3 in bf16)."""
    return bytes_of(
        cfg.num_hidden_layers * kv_values_per_token_per_layer(cfg, layout), dtype
    )


def attention_cache_values(
    cfg: ModelConfig,
    num_key_value_heads: int | None = None,
    kv_lora_rank: int | None = None,
    qk_rope_head_dim: int | None = None,
) -> dict[str, int]:
    """Values one token adds to one layer's cache under each attention variant, with
    ``cfg``'s n_h heads whose keys are d_k = d_h wide and values d_v (d_v = d_h except
    with MLA) (DeepSeek-V2 report, Sec. 2.1.4, Table 1):

    - ``"MHA"``: n_h·(d_k + d_v), every head its own key and value (2·n_h·d_h);
    - ``"GQA"``: n_kv·(d_k + d_v), with ``num_key_value_heads`` (default ``cfg``'s, or
      n_h / 8 rounded to a divisor when ``cfg`` has MHA or MLA);
    - ``"MQA"``: d_k + d_v, one key and value for all heads;
    - ``"MLA"``: d_c + d_r, the latent and the shared RoPE key (default ``cfg``'s, or
      DeepSeek-V2's choice for a model without MLA: d_c = 4·d_h, d_r = d_h / 2).

    Raises:
        ConfigError: ``num_key_value_heads`` does not divide n_h, or a size is not a
        positive integer.
    """
    n_h = cfg.num_attention_heads
    d_k = cfg.head_dim
    d_v = cfg.v_head_dim if cfg.is_mla else cfg.head_dim
    if num_key_value_heads is None:
        num_key_value_heads = cfg.num_key_value_heads
        if num_key_value_heads == n_h:
            num_key_value_heads = max(
                d for d in range(1, n_h + 1) if n_h % d == 0 and d <= max(1, n_h // 8)
            )
    check_positive_int("num_key_value_heads", num_key_value_heads)
    if n_h % num_key_value_heads:
        raise ConfigError(
            _("{name} ({n}) must be divisible by {other} ({m})").format(
                name="num_attention_heads",
                n=n_h,
                other="num_key_value_heads",
                m=num_key_value_heads,
            )
        )
    if kv_lora_rank is None:
        kv_lora_rank = cfg.kv_lora_rank if cfg.is_mla else 4 * cfg.head_dim
    if qk_rope_head_dim is None:
        qk_rope_head_dim = (
            cfg.qk_rope_head_dim if cfg.is_mla else max(1, cfg.head_dim // 2)
        )
    check_positive_int("kv_lora_rank", kv_lora_rank)
    check_positive_int("qk_rope_head_dim", qk_rope_head_dim)
    return {
        "MHA": n_h * (d_k + d_v),
        "GQA": num_key_value_heads * (d_k + d_v),
        "MQA": d_k + d_v,
        "MLA": kv_lora_rank + qk_rope_head_dim,
    }

"""Absolute position encodings: the sinusoidal table of the original Transformer.

Vaswani et al. 2017, Sec. 3.5: PE(pos, 2i) = sin(pos / base^(2i/d)), PE(pos, 2i+1) =
cos(pos / base^(2i/d)). It has no parameters; GPT-2 learns its table instead
(``embed_positions``, P × H parameters), and RoPE models add no position vector at all
(`llmmath.rope`).

Explained in the chapter *Token embeddings and positions*
(``chapters/02_embeddings.ipynb``).
"""

from __future__ import annotations

try:  # an extra of the core install (llmmath.errors.EXTRAS)
    import torch
except ModuleNotFoundError as error:
    from llmmath.errors import needs_extra

    raise needs_extra(error, __name__) from error


def sinusoidal_positions(max_len: int, dim: int, base: float = 10000.0) -> torch.Tensor:
    """The ``(max_len, dim)`` sinusoidal table (float64); ``dim`` must be even."""
    if dim % 2:
        raise ValueError(
            f"dim ({dim}) must be even: sin and cos fill alternate columns"
        )
    position = torch.arange(max_len, dtype=torch.float64)[:, None]
    div_term = base ** (torch.arange(0, dim, 2, dtype=torch.float64) / dim)
    table = torch.zeros(max_len, dim, dtype=torch.float64)
    table[:, 0::2] = torch.sin(position / div_term)
    table[:, 1::2] = torch.cos(position / div_term)
    return table

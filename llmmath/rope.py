"""Rotary position embedding (RoPE) in the ``rotate_half`` layout of Hugging Face and MiniMind.

Su et al. 2021, *RoFormer*, Sec. 3.4: dimension pair i of a head rotates by angle m·θ_i at
position m, with θ_i = base^(−2i/d_h). RoPE has no parameters; it is applied to queries and keys
inside attention (`llmmath.modules.Attention`).
"""

from __future__ import annotations

import torch


def rope_cos_sin(head_dim: int, seq_len: int, theta: float = 10000.0,
                 offset: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """cos and sin of the rotation angles, each of shape ``(seq_len, head_dim)``.

    Positions ``offset … offset + seq_len − 1``; frequencies θ_i = theta^(−2i/head_dim) for
    i < head_dim/2, repeated for both halves (the ``rotate_half`` layout).
    """
    inv_freq = 1.0 / theta ** (torch.arange(0, head_dim, 2, dtype=torch.float64) / head_dim)
    positions = torch.arange(offset, offset + seq_len, dtype=torch.float64)
    angles = torch.outer(positions, inv_freq)
    angles = torch.cat([angles, angles], dim=-1)
    return angles.cos().float(), angles.sin().float()


def rotate_half(x: torch.Tensor) -> torch.Tensor:
    """(x1, x2) → (−x2, x1) on the two halves of the last dimension."""
    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat([-x2, x1], dim=-1)


def apply_rope(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """Rotate ``x`` of shape ``(batch, heads, seq, head_dim)`` by the angles in ``cos``/``sin``
    of shape ``(seq, head_dim)``."""
    return x * cos + rotate_half(x) * sin

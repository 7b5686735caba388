"""Rotary position embedding (RoPE): frequencies, the two layouts, and context
extension.

Su et al. 2021, *RoFormer*, Sec. 3.4: dimension pair i of a head rotates by angle m·θ_i
at position m, with θ_i = base^(−2i/d_h), i = 0 … d_h/2 − 1. RoPE has no parameters; it
is applied to queries and keys inside attention (`llmmath.modules.Attention`, which uses
the ``rotate_half`` layout).

Two layouts pair the dimensions differently:

- *interleaved* (Meta's ``llama/model.py``, note 002): pairs (x₀, x₁), (x₂, x₃), …,
  rotated as complex numbers (`rope_freqs_cis`, `apply_rope_interleaved`);
- *rotate_half* (Hugging Face, MiniMind, notes 001 and 003): pairs (xᵢ, x_{i+d/2})
  (`rope_cos_sin`, `rotate_half`, `apply_rope`).

They agree up to the fixed permutation `half_layout_permutation` of each head's
dimensions, which is why Hugging Face's conversion script permutes the rows of W_q and
W_k (`permute_for_rotate_half`).

Explained in the chapter *RoPE* (``chapters/06_rope.ipynb``).
"""

from __future__ import annotations

import math

try:  # an extra of the core install (llmmath.errors.EXTRAS)
    import torch
except ModuleNotFoundError as error:
    from llmmath.errors import needs_extra

    raise needs_extra(error, __name__) from error

from llmmath.config import ConfigError, ModelConfig
from llmmath.messages import gettext as _


def rope_inv_freq(head_dim: int, theta: float = 10000.0) -> torch.Tensor:
    """θ_i = theta^(−2i/head_dim) for i = 0 … head_dim/2 − 1, in radians per position
    (float64)."""
    if head_dim % 2:
        raise ValueError(
            f"head_dim ({head_dim}) must be even: RoPE rotates pairs of dimensions"
        )
    return 1.0 / theta ** (torch.arange(0, head_dim, 2, dtype=torch.float64) / head_dim)


def rope_wavelengths(head_dim: int, theta: float = 10000.0) -> torch.Tensor:
    """Wavelength 2π/θ_i of each pair, in positions (tokens)."""
    return 2 * math.pi / rope_inv_freq(head_dim, theta)


def rope_cos_sin(
    head_dim: int,
    seq_len: int,
    theta: float = 10000.0,
    offset: int = 0,
    inv_freq: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """cos and sin of the rotation angles, each of shape ``(seq_len, head_dim)``,
    float64 (callers cast them to their tensors' dtype).

    Positions ``offset … offset + seq_len − 1``; frequencies `rope_inv_freq` (or
    ``inv_freq``, e.g. scaled by `llama3_inv_freq`), repeated for both halves (the
    ``rotate_half`` layout).
    """
    if inv_freq is None:
        inv_freq = rope_inv_freq(head_dim, theta)
    positions = torch.arange(offset, offset + seq_len, dtype=torch.float64)
    angles = torch.outer(positions, inv_freq.to(torch.float64))
    angles = torch.cat([angles, angles], dim=-1)
    return angles.cos(), angles.sin()


def rotate_half(x: torch.Tensor) -> torch.Tensor:
    """(x1, x2) → (−x2, x1) on the two halves of the last dimension."""
    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat([-x2, x1], dim=-1)


def apply_rope(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """Rotate ``x`` of shape ``(..., seq, head_dim)`` by the angles in ``cos``/``sin``
    of shape ``(seq, head_dim)`` (the ``rotate_half`` layout: pair i is (xᵢ,
    x_{i+d/2}))."""
    return x * cos + rotate_half(x) * sin


def rope_freqs_cis(head_dim: int, seq_len: int, theta: float = 10000.0) -> torch.Tensor:
    """e^{i·m·θ_k} of shape ``(seq_len, head_dim/2)``, complex128 (Meta's
    ``precompute_freqs_cis``)."""
    angles = torch.outer(
        torch.arange(seq_len, dtype=torch.float64), rope_inv_freq(head_dim, theta)
    )
    return torch.polar(torch.ones_like(angles), angles)


def apply_rope_interleaved(x: torch.Tensor, freqs_cis: torch.Tensor) -> torch.Tensor:
    """Rotate ``x`` of shape ``(batch, seq, heads, head_dim)`` in the interleaved
    layout: pair k is (x_{2k}, x_{2k+1}), multiplied as a complex number by
    ``freqs_cis`` ``(seq, head_dim/2)`` (Meta's ``apply_rotary_emb``)."""
    pairs = torch.view_as_complex(
        x.to(torch.float64).reshape(*x.shape[:-1], -1, 2).contiguous()
    )
    rotated = pairs * freqs_cis[None, :, None, :]
    return torch.view_as_real(rotated).flatten(-2).to(x.dtype)


def half_layout_permutation(head_dim: int) -> torch.Tensor:
    """Indices p with ``x_half = x_interleaved[..., p]``: (0, 2, 4, …, 1, 3, 5, …).

    Then ``apply_rope(x[..., p]) == apply_rope_interleaved(x)[..., p]``: the two layouts
    rotate the same pairs once the dimensions are reordered.
    """
    return torch.cat([torch.arange(0, head_dim, 2), torch.arange(1, head_dim, 2)])


def permute_for_rotate_half(weight: torch.Tensor, num_heads: int) -> torch.Tensor:
    """Reorder the rows of a q or k projection weight ``(num_heads·head_dim, H)`` from
    the interleaved layout to the ``rotate_half`` layout, head by head (Hugging Face's
    ``convert_llama_weights_to_hf.py``, ``permute``)."""
    out_features, hidden = weight.shape
    if out_features % num_heads or (out_features // num_heads) % 2:
        raise ValueError(
            f"weight rows ({out_features}) must split into {num_heads} heads of an "
            f"even head_dim"
        )
    head_dim = out_features // num_heads
    return (
        weight.view(num_heads, head_dim // 2, 2, hidden)
        .transpose(1, 2)
        .reshape(out_features, hidden)
    )


def position_interpolation_inv_freq(
    inv_freq: torch.Tensor, factor: float
) -> torch.Tensor:
    """Position interpolation (Chen et al. 2023): positions divided by ``factor``, i.e.
    every frequency divided by it (Hugging Face's ``rope_type="linear"``)."""
    return inv_freq / factor


def ntk_scaled_theta(theta: float, factor: float, head_dim: int) -> float:
    """ "NTK-aware" base scaling (bloc97, 2023): base · factor^(d/(d−2)), so the lowest
    frequency
    is divided by ``factor``, the highest (θ₀ = 1) is unchanged and the fast pairs
    barely move.

    Raises:
        ValueError: ``head_dim`` is not an even number above 2, or ``factor`` is not
        positive.
    """
    if head_dim % 2 or head_dim <= 2:
        raise ValueError(f"head_dim ({head_dim}) must be an even number above 2")
    if factor <= 0:
        raise ValueError(f"factor ({factor}) must be positive")
    return theta * factor ** (head_dim / (head_dim - 2))


def llama3_inv_freq(
    inv_freq: torch.Tensor,
    factor: float = 8.0,
    low_freq_factor: float = 1.0,
    high_freq_factor: float = 4.0,
    original_max_position_embeddings: int = 8192,
) -> torch.Tensor:
    """Llama 3.1's ``rope_scaling`` (``rope_type="llama3"``): wavelengths shorter than
    original/high_freq_factor keep their frequency, those longer than
    original/low_freq_factor are divided by ``factor``, and those between are
    interpolated smoothly (Hugging Face's ``_compute_llama3_parameters``; Meta's
    ``apply_scaling``)."""
    low_wavelen = original_max_position_embeddings / low_freq_factor
    high_wavelen = original_max_position_embeddings / high_freq_factor
    wavelen = 2 * math.pi / inv_freq
    scaled = torch.where(wavelen > low_wavelen, inv_freq / factor, inv_freq)
    smooth = (original_max_position_embeddings / wavelen - low_freq_factor) / (
        high_freq_factor - low_freq_factor
    )
    smoothed = (1 - smooth) * scaled / factor + smooth * scaled
    medium = (wavelen >= high_wavelen) & (wavelen <= low_wavelen)
    return torch.where(medium, smoothed, scaled)


def scaled_inv_freq(cfg: ModelConfig) -> torch.Tensor:
    """The frequencies the model rotates with: `rope_inv_freq` at ``cfg.rope_theta``
    over d_h (over d_r = ``qk_rope_head_dim`` with multi-head latent attention),
    scaled by ``cfg.rope_scaling`` when it is ``"linear"`` or ``"llama3"``.

    Raises:
        ConfigError: another ``rope_type`` (YaRN, dynamic NTK, ...), which llmmath does
        not model.
    """
    rotated = cfg.qk_rope_head_dim if cfg.is_mla else cfg.head_dim  # MLA: d_r only
    inv_freq = rope_inv_freq(rotated, cfg.rope_theta)
    scaling = cfg.rope_scaling
    if scaling is None:
        return inv_freq
    if scaling.rope_type == "linear":
        return position_interpolation_inv_freq(inv_freq, scaling.factor)
    if scaling.rope_type == "llama3":
        return llama3_inv_freq(
            inv_freq,
            scaling.factor,
            scaling.low_freq_factor,
            scaling.high_freq_factor,
            scaling.original_max_position_embeddings,
        )
    raise ConfigError(
        _(
            "rope_scaling type {type} is not modelled by llmmath's reference attention "
            "(it applies linear and llama3); counts are unaffected"
        ).format(type=repr(scaling.rope_type))
    )

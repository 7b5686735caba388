"""The cost of a norm: FLOPs and bytes moved per token, and why norms are memory-bound.

Per token of H features (Zhang & Sennrich 2019 for RMSNorm; Ba et al. 2016 for
LayerNorm):

- RMSNorm y = x / sqrt(mean(x²) + ε) · w: square, sum, scale, weight: 4 FLOPs per
  feature;
- LayerNorm y = (x − μ) / sqrt(σ² + ε) · w + b: sum for μ, subtract, square, sum for σ²,
  scale, weight, bias: 7 FLOPs per feature.

The O(1) work per token (a division, a square root) is left out. Bytes: the input is
read and the output written once (2·H elements) and the parameters read once (H for
RMSNorm, 2H for LayerNorm), in the activation dtype. FLOPs per byte then stay between 1
and 2 in bf16 (RMSNorm → 1, LayerNorm → 1.75), far below a GPU's ridge point (about
150–300 FLOPs per byte for bf16 tensor cores, 10–20 for fp32 CUDA cores), so a norm's
time is set by memory traffic.

Explained in the chapter *Normalization* (``chapters/05_norms.ipynb``).
"""

from __future__ import annotations

from dataclasses import dataclass

from llmmath.config import NORM_TYPES, ConfigError, check_positive_int, one_of
from llmmath.units import bytes_of

FLOPS_PER_FEATURE = {"rmsnorm": 4, "layernorm": 7}
PARAMS_PER_FEATURE = {"rmsnorm": 1, "layernorm": 2}


@dataclass(frozen=True)
class NormCost:
    """FLOPs and bytes of one norm over ``tokens`` tokens of ``hidden_size`` each."""

    flops: int
    bytes: int

    @property
    def intensity(self) -> float:
        """Arithmetic intensity, FLOPs per byte."""
        return self.flops / self.bytes


def norm_cost(
    norm_type: str, hidden_size: int, tokens: int = 1, dtype: str = "bf16"
) -> NormCost:
    """FLOPs and bytes moved by one ``norm_type`` norm over ``tokens`` tokens (see
    module doc).

    Raises:
        ConfigError: an unknown norm type, a size that is not a positive integer, a bad
        dtype.
    """
    if norm_type not in NORM_TYPES:
        raise ConfigError(one_of("norm_type", NORM_TYPES, norm_type))
    check_positive_int("hidden_size", hidden_size)
    check_positive_int("tokens", tokens)
    flops = FLOPS_PER_FEATURE[norm_type] * hidden_size * tokens
    moved = 2 * hidden_size * tokens + PARAMS_PER_FEATURE[norm_type] * hidden_size
    return NormCost(flops, bytes_of(moved, dtype))

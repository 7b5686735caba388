"""Feed-forward sizing: how real models choose the intermediate size I.

A plain GELU MLP has two H × I matrices with I = 4H (Vaswani et al. 2017; GPT-2). A
gated (SwiGLU) FFN has three, so I = 8H/3 keeps the parameter count equal: 2·H·4H =
3·H·(8H/3) (Shazeer 2020, Sec. 2). Real models then round I to a hardware-friendly
multiple, each in its own way: `llama_intermediate_size` (Meta's ``llama/model.py``,
``FeedForward``) and `minimind_intermediate_size` (MiniMind's ``FeedForward``, note
003).

Explained in the chapter *The feed-forward network* (``chapters/04_ffn.ipynb``).
"""

from __future__ import annotations

from llmmath.errors import check_positive_int

TYPE_CHECKING = False  # typing.TYPE_CHECKING, without importing typing
if TYPE_CHECKING:
    from fractions import Fraction  # loaded by the functions that use it
    from typing import Protocol

    class FFNShape(Protocol):
        """What the ratios read of a config (a `llmmath.config.ModelConfig`): not
        imported here, since config imports this module for MiniMind's sizing rule
        (no import circle, even for a type checker: tests/test_layers.py)."""

        hidden_size: int
        intermediate_size: int
        mlp_type: str


def round_up(value: int, multiple: int) -> int:
    """The smallest multiple of ``multiple`` that is ≥ ``value``."""
    check_positive_int("multiple", multiple)
    return multiple * ((value + multiple - 1) // multiple)


def llama_intermediate_size(
    dim: int, multiple_of: int = 256, ffn_dim_multiplier: float | None = None
) -> int:
    """Meta's rule: hidden = int(2·4·dim/3), times ``ffn_dim_multiplier`` (then int),
    rounded up to a multiple of ``multiple_of``.

    ``llama_intermediate_size(4096, 256)`` → 11008 (Llama-2-7B);
    ``llama_intermediate_size(4096, 1024, 1.3)`` → 14336 (Llama-3-8B);
    ``llama_intermediate_size(8192, 4096, 1.3)`` → 28672 (Llama-3-70B);
    ``llama_intermediate_size(16384, 4096, 1.2)`` → 53248 (Llama-3.1-405B)
    (the ``params.json`` of each release gives these inputs).
    """
    check_positive_int("dim", dim)
    hidden = int(2 * (4 * dim) / 3)
    if ffn_dim_multiplier is not None:
        hidden = int(ffn_dim_multiplier * hidden)
    return round_up(hidden, multiple_of)


def minimind_intermediate_size(hidden_size: int, multiple_of: int = 64) -> int:
    """MiniMind's rule (note 003): int(hidden_size·8/3) rounded up to a multiple of 64.
    hidden 512 → 1408."""
    check_positive_int("hidden_size", hidden_size)
    return round_up(int(hidden_size * 8 / 3), multiple_of)


def ffn_ratio(cfg: FFNShape) -> Fraction:
    """M = I / H exactly (note 000's ``ffn_mult``) of ``cfg``, a
    `llmmath.config.ModelConfig`."""
    from fractions import Fraction

    return Fraction(cfg.intermediate_size, cfg.hidden_size)


def equivalent_plain_ratio(cfg: FFNShape) -> Fraction:
    """The ratio a plain two-matrix MLP would need for the same FFN weights (biases
    aside): 1.5·I/H for a gated FFN (3·H·I = 2·H·(1.5·I)), I/H for a plain one."""
    from fractions import Fraction

    return ffn_ratio(cfg) * (Fraction(3, 2) if cfg.mlp_type == "gated" else 1)

"""Speculative decoding: a cheap draft model proposes γ tokens, the target checks them
all in one forward pass.

If each proposed token is accepted with probability α, independently (Leviathan et al.
2023, *Fast Inference from Transformers via Speculative Decoding*, Sec. 3.1), one
target pass yields

    E[tokens] = 1 + α + α² + … + α^γ = (1 − α^(γ+1)) / (1 − α)

(Leviathan et al., Eq. 1): the accepted prefix, plus the target's own token at the
first rejection (or after all γ). A draft pass costs c target passes, so an iteration
costs γ·c + 1 and the speed-up over plain decoding is E / (γ·c + 1) (Theorem 3.8).
Chen et al. 2023 (*Accelerating Large Language Model Decoding with Speculative
Sampling*, Sec. 2) give the same scheme with a modified rejection sampling that keeps
the target's distribution exactly; with greedy decoding a proposal is accepted when it
is the target's argmax, so the output is the target's own tokens
(`speculative_generate`).

`simulate` samples acceptances to check E; `speculative_generate` runs a torch draft and
target (imported only there). Explained in the chapter *Serving*
(``chapters/09b_serving.ipynb``).
"""

from __future__ import annotations

import math
import random
from fractions import Fraction

from llmmath.config import ConfigError, check_positive_int
from llmmath.messages import gettext as _


def _check(alpha, gamma: int) -> None:
    if isinstance(alpha, bool) or not isinstance(alpha, (int, float, Fraction)):
        raise ConfigError(
            _("{name} must be a number in [0, 1), got {value}").format(
                name="alpha", value=repr(alpha)
            )
        )
    if not (math.isfinite(alpha) and 0 <= alpha < 1):
        raise ConfigError(
            _("{name} must be in [0, 1), got {value}").format(name="alpha", value=alpha)
        )
    check_positive_int("gamma", gamma)


def _check_cost(cost_ratio) -> None:
    if isinstance(cost_ratio, bool) or not isinstance(
        cost_ratio, (int, float, Fraction)
    ):
        raise ConfigError(
            _("{name} must be a number ≥ 0, got {value}").format(
                name="cost_ratio", value=repr(cost_ratio)
            )
        )
    if not (math.isfinite(cost_ratio) and cost_ratio >= 0):
        raise ConfigError(
            _("{name} must be finite and ≥ 0, got {value}").format(
                name="cost_ratio", value=cost_ratio
            )
        )


def expected_tokens_per_pass(alpha, gamma: int):
    """Expected tokens per target pass, (1 − α^(γ+1)) / (1 − α) (Leviathan et al. 2023,
    Eq. 1); exact for a Fraction ``alpha``.

    Raises:
        ConfigError: ``alpha`` outside [0, 1) or ``gamma`` not a positive integer.
    """
    _check(alpha, gamma)
    return (1 - alpha ** (gamma + 1)) / (1 - alpha)


def speedup(alpha, gamma: int, cost_ratio=0):
    """Wall-time speed-up over plain decoding when a draft pass costs ``cost_ratio``
    target passes: E[tokens] / (γ·c + 1) (Leviathan et al. 2023, Theorem 3.8).

    Raises:
        ConfigError: ``alpha`` outside [0, 1), ``gamma`` < 1 or ``cost_ratio`` < 0.
    """
    _check_cost(cost_ratio)
    return expected_tokens_per_pass(alpha, gamma) / (gamma * cost_ratio + 1)


def best_gamma(alpha, cost_ratio, max_gamma: int = 64) -> int:
    """The γ in 1 … ``max_gamma`` with the largest `speedup` (the smallest on a tie).
    With c = 0 more is always better, so the answer is ``max_gamma``.

    Raises:
        ConfigError: as `speedup`.
    """
    check_positive_int("max_gamma", max_gamma)
    return max(
        range(1, max_gamma + 1), key=lambda g: (speedup(alpha, g, cost_ratio), -g)
    )


def simulate(
    alpha: float, gamma: int, passes: int = 10_000, seed: int = 0
) -> tuple[float, float]:
    """Mean tokens per target pass over ``passes`` sampled passes, and its standard
    error: each of the γ proposals is accepted with probability α until the first
    rejection; the pass then adds the target's token. Standard library only.

    Raises:
        ConfigError: as `expected_tokens_per_pass`, or ``passes`` < 2.
    """
    _check(alpha, gamma)
    check_positive_int("passes", passes)
    if passes < 2:
        raise ConfigError(
            _("{name} must be at least {low}, got {value}").format(
                name="passes", low=2, value=passes
            )
        )
    rng = random.Random(seed)
    counts = []
    for _pass in range(passes):
        accepted = 0
        while accepted < gamma and rng.random() < alpha:
            accepted += 1
        counts.append(accepted + 1)
    mean = sum(counts) / passes
    var = sum((x - mean) ** 2 for x in counts) / (passes - 1)
    return mean, math.sqrt(var / passes)


def report(alpha: float, gamma: int, cost_ratio: float = 0.0) -> dict:
    """What ``speculative --json`` prints: ``"expected_tokens_per_target_pass"``,
    ``"speedup"`` and the best γ for this α and c (up to 64)."""
    return {
        "alpha": alpha,
        "gamma": gamma,
        "cost_ratio": cost_ratio,
        "expected_tokens_per_target_pass": expected_tokens_per_pass(alpha, gamma),
        "speedup": speedup(alpha, gamma, cost_ratio),
        "best_gamma": best_gamma(alpha, cost_ratio),
        "formula": "E = (1 - alpha^(gamma+1)) / (1 - alpha); "
        "speedup = E / (gamma * cost_ratio + 1)",
        "source": "Leviathan et al. 2023, Eq. 1 and Theorem 3.8",
    }


def speculative_generate(target, draft, input_ids, max_new_tokens: int, gamma: int):
    """Greedy speculative decoding with two `llmmath.modules.DecoderLM` (batch 1):
    ``draft`` proposes ``gamma`` tokens greedily, ``target`` scores them all in one
    forward pass; the proposals that match the target's argmax are kept, then the
    target's own next token. Returns ``(tokens, target_passes, accepted)``: the tokens
    equal ``generate(target, input_ids, max_new_tokens)``'s.

    Raises:
        ConfigError: a batch other than 1, or ``gamma``/``max_new_tokens`` not
            positive.
    """
    import torch

    from llmmath.modules import generate

    check_positive_int("gamma", gamma)
    check_positive_int("max_new_tokens", max_new_tokens)
    if input_ids.shape[0] != 1:
        raise ConfigError(
            _("{name} must be 1, got {value}").format(
                name="batch", value=input_ids.shape[0]
            )
        )
    tokens, start = input_ids, input_ids.shape[1]
    passes = accepted = 0
    with torch.no_grad():
        while tokens.shape[1] - start < max_new_tokens:
            proposed, _logits = generate(draft, tokens, gamma)
            logits = target(proposed)  # one pass over the context and the γ proposals
            passes += 1
            n = tokens.shape[1]
            best = logits[0, n - 1 :].argmax(-1)  # the target's choice at each slot
            guess = proposed[0, n:]
            k = 0
            while k < gamma and guess[k] == best[k]:
                k += 1
            accepted += k
            tokens = torch.cat([tokens, guess[None, :k], best[None, k : k + 1]], 1)
    return tokens[:, : start + max_new_tokens], passes, accepted

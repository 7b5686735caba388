"""Speculative decoding (`llmmath.speculative`): the closed form written here, a seeded
simulation within its confidence interval, and a torch draft/target pair whose greedy
speculative output equals the target's own."""

import math
from fractions import Fraction

import pytest

from llmmath.config import ConfigError
from llmmath.speculative import (
    best_gamma,
    expected_tokens_per_pass,
    simulate,
    speedup,
)


def test_closed_form():
    # 1 + a + a^2 + ... + a^gamma, summed term by term
    for alpha in (Fraction(0), Fraction(1, 2), Fraction(4, 5), Fraction(99, 100)):
        for gamma in (1, 2, 3, 5, 8):
            series = sum(alpha**i for i in range(gamma + 1))
            assert expected_tokens_per_pass(alpha, gamma) == series
    assert expected_tokens_per_pass(Fraction(4, 5), 4) == Fraction(2101, 625)
    assert speedup(Fraction(4, 5), 4, Fraction(1, 20)) == Fraction(2101, 625) / (
        Fraction(6, 5)
    )


def test_best_gamma():
    # alpha = 0.8, c = 0.05: speed-ups for gamma = 1..10, computed here
    def s(g):
        return (1 - 0.8 ** (g + 1)) / (0.2 * (g * 0.05 + 1))

    assert best_gamma(0.8, 0.05) == max(range(1, 65), key=s)
    assert best_gamma(0.8, 0) == 64  # a free draft: longer is always better
    assert best_gamma(0.1, 0.5) == 1


@pytest.mark.parametrize("alpha,gamma", [(0.5, 3), (0.8, 4), (0.95, 8), (0.0, 2)])
def test_simulation_within_its_confidence_interval(alpha, gamma):
    mean, se = simulate(alpha, gamma, 20_000, seed=7)
    expected = (1 - alpha ** (gamma + 1)) / (1 - alpha)
    assert abs(mean - expected) <= 4 * se + 1e-12  # 4 standard errors: p < 1e-4


@pytest.mark.parametrize(
    "alpha,gamma,match",
    [(1.0, 3, "alpha"), (-0.1, 3, "alpha"), (math.nan, 3, "alpha"), (0.5, 0, "gamma")],
)
def test_bad_arguments(alpha, gamma, match):
    with pytest.raises(ConfigError, match=match):
        expected_tokens_per_pass(alpha, gamma)
    with pytest.raises(ConfigError, match="cost_ratio"):
        speedup(0.5, 3, -1)


def test_greedy_speculative_decoding_gives_the_targets_tokens():
    torch = pytest.importorskip("torch")
    from llmmath import presets
    from llmmath.modules import build_model, generate
    from llmmath.speculative import speculative_generate

    small = presets.load("llama-3-8b").replace(
        hidden_size=64,
        intermediate_size=128,
        num_attention_heads=4,
        num_key_value_heads=2,
        num_hidden_layers=4,
        vocab_size=50,
    )
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # tiny tensors: one thread is fastest, and steady
    try:
        target = build_model(small, device="cpu", seed=0).eval()
        draft = build_model(small.replace(num_hidden_layers=1), device="cpu", seed=1)
        draft.eval()
        prompt = torch.tensor([[3, 14, 15, 9, 2]])
        plain, _ = generate(target, prompt, 24)
        for gamma in (1, 3):
            fast, passes, _ = speculative_generate(target, draft, prompt, 24, gamma)
            assert torch.equal(fast, plain)
            assert passes <= 24
        # a draft identical to the target: every proposal accepted, ceil(24 / (g + 1))
        for gamma in (2, 4):
            same, passes, accepted = speculative_generate(
                target, target, prompt, 24, gamma
            )
            assert torch.equal(same, plain)
            assert passes == -(-24 // (gamma + 1)) and accepted == passes * gamma
    finally:
        torch.set_num_threads(threads)

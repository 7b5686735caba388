"""Static against continuous batching (`llmmath.batching`): hand-checked schedules, and
the properties a simulation must have."""

import pytest

from llmmath import presets
from llmmath.batching import (
    Request,
    continuous_batching,
    requests,
    static_batching,
)
from llmmath.config import ConfigError
from llmmath.roofline import GPU, decode_step, prefill_step

CFG = presets.load("llama-3-8b")
H100 = "H100-SXM5-80GB"


def test_static_counts_steps_of_the_longest_request():
    reqs = [Request(10, 3), Request(10, 1), Request(10, 5), Request(10, 5)]
    r = static_batching(CFG, H100, reqs, 2)
    assert r.steps == 3 + 5  # each batch runs to its longest output
    first = prefill_step(CFG, H100, 10, 2).seconds + sum(
        decode_step(CFG, H100, 2, 10 + t).seconds for t in (1, 2, 3)
    )
    assert r.latencies[0] == pytest.approx(first, rel=1e-12)
    assert r.latencies[1] < r.latencies[0] < r.latencies[2] == r.latencies[3]
    assert r.tokens == 14


def test_continuous_refills_free_slots():
    reqs = [Request(10, 3), Request(10, 1), Request(10, 5), Request(10, 5)]
    r = continuous_batching(CFG, H100, reqs, 2)
    # slots: A(3) and B(1); B leaves after step 1, C joins; A leaves after step 3,
    # D joins; C finishes at step 1 + 5 = 6, D at 3 + 5 = 8
    assert r.steps == 8
    assert r.tokens == 14


def test_continuous_beats_static_on_varied_outputs():
    reqs = requests(64, (100, 400), (10, 500), seed=3)
    static = static_batching(CFG, H100, reqs, 16)
    cont = continuous_batching(CFG, H100, reqs, 16)
    assert cont.tokens == static.tokens == sum(q.output for q in reqs)
    assert cont.throughput > static.throughput
    assert cont.mean_latency < static.mean_latency
    assert cont.steps < static.steps


def test_equal_outputs_make_them_alike():
    reqs = [Request(64, 32)] * 8
    machine = GPU("flat", 1e12, 1e12, 0, "test")
    s = static_batching(CFG, machine, reqs, 4)
    c = continuous_batching(CFG, machine, reqs, 4)
    assert s.steps == c.steps == 64
    # continuous prefills one by one, static four at once: same FLOPs, more weight reads
    assert c.seconds >= s.seconds


def test_seeded_requests_and_bad_ranges():
    assert requests(5, (1, 9), (1, 9), seed=1) == requests(5, (1, 9), (1, 9), seed=1)
    with pytest.raises(ConfigError, match="empty"):
        requests(3, (5, 4), (1, 2))

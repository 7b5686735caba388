"""``python -m llmmath measure``: the report's shape and the roofline's prediction
recomputed here; measured numbers are only checked to be positive and finite (they
change from run to run)."""

import json
import math
import time

import pytest

from llmmath import presets
from llmmath.cli import main


def test_prediction_is_the_roofline_of_the_measured_machine():
    from llmmath.counting import count_params
    from llmmath.kvcache import kv_cache_bytes
    from llmmath.measure import predict

    cfg = presets.load("minimind2-small")
    flops, bw = 50e9, 10e9  # a made-up machine
    p = predict(cfg, flops, bw, prompt=64, new_tokens=16)
    n = count_params(cfg)
    H, V = cfg.hidden_size, cfg.vocab_size
    # decode at 72 tokens of context: every weight but the embedding once, the LM
    # head (tied here, read as a matrix), one embedding row, and the fp32 cache
    read = 4 * (n.non_embedding + V * H + H) + kv_cache_bytes(cfg, 1, 72, "fp32")
    assert p["decode_memory_bound"]
    assert p["decode"] == pytest.approx(bw / read, rel=1e-12)
    assert 0 < p["prefill"] and p["prefill"] > p["decode"]


def test_measure_small_model_in_seconds(capsys):
    pytest.importorskip("torch")
    start = time.perf_counter()
    assert main(["measure", "minimind2-small", "--json"]) == 0
    assert time.perf_counter() - start < 30
    r = json.loads(capsys.readouterr().out)
    for step in ("prefill_tokens_per_s", "decode_tokens_per_s"):
        for key in ("predicted", "measured"):
            assert math.isfinite(r[step][key]) and r[step][key] > 0
    assert r["cpu"]["matmul_flops_per_s"] > 0 and r["cpu"]["bandwidth_bytes_per_s"] > 0
    assert r["left_out"] and r["threads"] == 1


def test_measure_refuses_a_large_model(capsys):
    assert main(["measure", "llama-3-8b"]) == 2
    out, err = capsys.readouterr()
    assert out == "" and err.count("\n") == 1 and "parameters" in err

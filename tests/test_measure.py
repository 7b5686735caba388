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
    assert main(["measure", "llama-3-8b", "--device", "cpu"]) == 2
    out, err = capsys.readouterr()
    assert out == "" and err.count("\n") == 1 and "parameters" in err


# --- the CUDA path (issue 32), run on the CPU -----------------------------------------
#
# `measure` on CUDA runs a static-cache decode step eager and as a CUDA graph. Every
# function of that path takes a device; here it runs on the CPU, with `cpu_probe` in
# place of the four calls that need CUDA (its "graph" is the step itself). What only a
# GPU can show (the graph's speed-up, the bandwidth attained) is not asserted.

SHRUNK = dict(
    hidden_size=64,
    intermediate_size=96,
    num_attention_heads=4,
    num_key_value_heads=2,
    head_dim=16,
    num_hidden_layers=2,
    vocab_size=50,
)


def _shrunk(name, **changes):
    return presets.load(name).replace(**{**SHRUNK, **changes})


@pytest.mark.parametrize(
    "cfg",
    [
        _shrunk("llama-3.2-1b"),  # tied head, Llama 3's RoPE scaling, GQA
        _shrunk("qwen2.5-0.5b"),  # q, k, v biases
        _shrunk("qwen3-0.6b"),  # q and k norms per head
        _shrunk("phi-3-mini-4k", sliding_window=None),  # fused qkv and gate-up
        _shrunk("llama-2-7b", num_key_value_heads=4),  # MHA
    ],
    ids=["llama-3.2", "qwen2.5", "qwen3", "phi-3", "mha"],
)
def test_static_step_gives_the_models_logits(cfg):
    """`static_forward` over a `StaticCache` (SDPA over the whole padded cache, keys
    written in place) equals `DecoderLM` with its growing `KVCache`: a prefill of 7
    tokens for 2 sequences, then three greedy steps of `decode_step_fn`."""
    torch = pytest.importorskip("torch")
    from llmmath.measure import StaticCache, decode_step_fn, static_forward
    from llmmath.modules import build_model

    model = build_model(cfg, device="cpu", seed=0).eval()
    ids = torch.randint(
        0, cfg.vocab_size, (2, 7), generator=torch.Generator().manual_seed(1)
    )
    with torch.no_grad():
        ref_cache = model.new_cache()
        ref = model(ids, ref_cache)
        cache = StaticCache(cfg, 2, 12, "cpu", torch.float32)
        torch.testing.assert_close(
            static_forward(model, cache, ids, torch.arange(7)), ref[:, -1:]
        )
        token = ref[:, -1:].argmax(-1)
        position = torch.full((1,), 7)
        step = decode_step_fn(model, cache, token.clone(), position)
        for n in range(3):
            ref = model(token, ref_cache)
            torch.testing.assert_close(step(), ref)
            token = ref.argmax(-1)
            assert position.item() == 8 + n
    n_kv = cfg.num_key_value_heads  # L·(K, V)·b·n_kv·12 tokens·d_h, fp32:
    assert cache.nbytes() == 2 * 2 * 2 * n_kv * 12 * 16 * 4


@pytest.mark.parametrize(
    "name, reason",
    [
        ("mixtral-8x7b", "mixture of experts"),
        ("deepseek-v3", "latent attention"),
        ("mistral-7b-v0.1", "sliding-window"),
        ("gpt2", "learned positions"),
    ],
)
def test_static_step_refuses_what_a_graph_cannot_replay(name, reason):
    from llmmath.measure import static_step_refusal

    assert reason in static_step_refusal(presets.load(name))
    assert static_step_refusal(presets.load("llama-3-8b")) is None


def test_dominant_cost_from_the_h200_figures():
    """Llama-3-8B on the H200 (`llmmath.measured`): eager 59 ms, graph 10.2 ms, the
    roofline 3.24 ms at 4.8 TB/s: launch overhead dominates; with the launches gone,
    the graph's 3.2 times the roofline names the kernels."""
    from llmmath import measured
    from llmmath.gpus import GPUS
    from llmmath.measure import KERNEL_RATIO, LAUNCH_RATIO, dominant_cost
    from llmmath.roofline import decode_step

    m = measured.inference_h200()["llama-3-8b_bf16"]
    eager = m["decode_eager_batch1_ctx4096_seconds_median"]
    graph = m["decode_cuda_graph_static_cache_batch1_ctx4096_seconds_median"]
    roof = decode_step(presets.load("llama-3-8b"), GPUS["H200-SXM-141GB"], 1, 4096)
    assert round(roof.seconds * 1e3, 2) == 3.24
    name, why = dominant_cost(eager, graph, roof.seconds)
    assert name == "launch overhead" and f"{eager / graph:.1f} times" in why
    assert eager >= LAUNCH_RATIO * graph
    name, why = dominant_cost(graph, graph, roof.seconds)
    assert name == "the kernels" and f"{graph / roof.seconds:.1f} times" in why
    assert dominant_cost(1.2, 1.0, 1.0 / KERNEL_RATIO * 1.01)[0] == "none"


def _fake_gpu(monkeypatch, free_bytes):
    """``measure --device cuda`` on the CPU: CUDA reported present, `cpu_probe` with
    ``free_bytes`` in place of the GPU's calls."""
    from llmmath import measure

    monkeypatch.setattr(measure, "cuda_available", lambda: True)
    monkeypatch.setattr(measure, "cuda_probe", lambda: measure.cpu_probe(free_bytes))


def test_cuda_refuses_what_does_not_fit_in_free_memory(monkeypatch, capsys):
    """The default CUDA model, Llama-3.2-1B in bf16, with 1 GB free: one line with
    what it needs, by hand: 2 bytes per parameter, the cache of 4096 + 32 tokens, and
    the prefill workspace (fp32 scores and probabilities, three FFN activations, the
    last logits)."""
    pytest.importorskip("torch")
    from llmmath.measure import CUDA_CONTEXT, CUDA_STEPS, needed_bytes

    _fake_gpu(monkeypatch, 10**9)
    assert main(["measure", "--device", "cuda"]) == 2
    out, err = capsys.readouterr()
    assert out == "" and err.count("\n") == 1
    T, n = CUDA_CONTEXT + CUDA_STEPS, 1_235_814_400
    need = 2 * n + 2 * 16 * 8 * 64 * 2 * T
    need += 2 * 4 * 32 * CUDA_CONTEXT * T + 3 * 2 * CUDA_CONTEXT * 8192 + 4 * 128256
    cfg = presets.load("llama-3.2-1b")
    assert sum(needed_bytes(cfg, "bf16", 1, T, CUDA_CONTEXT).values()) == need
    assert f"needs {need / 1e9:,.2f} GB on cpu" in err and "1.00 GB is free" in err


def test_cuda_without_a_gpu_is_one_line(monkeypatch, capsys):
    from llmmath import measure

    pytest.importorskip("torch")
    monkeypatch.setattr(measure, "cuda_available", lambda: False)
    assert main(["measure", "--device", "cuda"]) == 2
    out, err = capsys.readouterr()
    assert out == "" and err.count("\n") == 1 and "no CUDA GPU" in err


def test_cuda_refuses_a_mixture_of_experts_in_one_line(monkeypatch, capsys):
    pytest.importorskip("torch")
    _fake_gpu(monkeypatch, 2**40)
    assert main(["measure", "mixtral-8x7b", "--device", "cuda"]) == 2
    out, err = capsys.readouterr()
    assert out == "" and err.count("\n") == 1 and "mixture of experts" in err


def test_cuda_report_fields(monkeypatch, capsys, write_config):
    """The whole CUDA report of a tiny model, run on the CPU: every field, the
    roofline's bytes and seconds recomputed from the measured rates, and the shares
    from the timings."""
    pytest.importorskip("torch")
    from llmmath import measure
    from llmmath.config import ModelConfig
    from llmmath.roofline import GPU, decode_step, prefill_step

    _fake_gpu(monkeypatch, 2**40)
    monkeypatch.setattr(measure, "CUDA_CONTEXT", 24)
    monkeypatch.setattr(measure, "CUDA_STEPS", 4)
    raw = {
        "model_type": "llama",
        "vocab_size": 64,
        "hidden_size": 32,
        "intermediate_size": 48,
        "num_hidden_layers": 2,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
    }
    path = write_config(raw)
    assert main(["measure", str(path), "--device", "cuda", "--json"]) == 0
    r = json.loads(capsys.readouterr().out)
    d = r["cuda"]
    assert (r["prompt_tokens"], r["new_tokens"], d["batch"]) == (24, 4, 1)
    assert d["device_name"] == "cpu" and d["dtype"] == "bf16"
    assert r["decode_tokens_per_s"] == d["decode_tokens_per_s"]
    assert r["left_out"] == list(measure.LEFT_OUT_CUDA)
    cfg = ModelConfig.from_hf_config(raw)
    machine = GPU("m", d["matmul_flops_per_s"], d["bandwidth_bytes_per_s"], 0, "")
    dec = decode_step(cfg, machine, 1, 24, "bf16", "bf16")
    pre = prefill_step(cfg, machine, 24, 1, "bf16", "bf16")
    s = d["decode_step_seconds"]
    assert d["decode_bytes_read"] == dec.bytes
    # bf16: the blocks (q, o: H·H; k, v: H·n_kv·d_h; three FFN matrices; two norms),
    # the final norm, the LM head, one embedding row; and the cache of 24 tokens
    blocks = 2 * (2 * 32 * 32 + 2 * 32 * 16 + 3 * 32 * 48 + 2 * 32)
    assert dec.bytes == 2 * (blocks + 32 + 64 * 32 + 32) + 2 * 2 * 16 * 24 * 2
    assert s["roofline"] == pytest.approx(dec.seconds, rel=1e-12)
    assert d["decode_tokens_per_s"]["predicted"] == pytest.approx(1 / dec.seconds)
    assert d["prefill_tokens_per_s"]["predicted"] == pytest.approx(24 / pre.seconds)
    for way in ("eager", "graph"):
        share = dec.bytes / s[way] / d["bandwidth_bytes_per_s"]
        assert d["bandwidth_share"][way] == pytest.approx(share, rel=1e-12)
        assert math.isfinite(s[way]) and s[way] > 0
    assert d["decode_tokens_per_s"]["measured"] == pytest.approx(1 / s["graph"])
    assert d["decode_tokens_per_s"]["eager"] == pytest.approx(1 / s["eager"])
    assert 0 < d["prefill_flops_share"] and d["dominant_cost"] in (
        "launch overhead",
        "the kernels",
        "none",
    )
    assert set(d["needed_bytes"]) == {"weights", "kv_cache", "workspace"}
    assert d["needed_bytes"]["weights"] == 2 * (blocks + 32 + 2 * 64 * 32)
    text = measure.format_report(r)
    assert "graph" in text and "eager" in text and "dominant left-out cost" in text


def _cuda() -> bool:
    try:
        import torch
    except ImportError:
        return False
    return torch.cuda.is_available()


@pytest.mark.skipif(
    not _cuda(), reason="needs a CUDA GPU (the CPU tests above run the rest)"
)
def test_measure_on_a_real_gpu(capsys):
    """On a GPU: the whole Llama-3.2-1B, eager and graph; the graph is faster than the
    eager step and no faster than the roofline allows (a little slack for a measured
    bandwidth below what a step's kernels reach), and the share of the bandwidth is
    below 1."""
    assert main(["measure", "--device", "cuda", "--json"]) == 0
    r = json.loads(capsys.readouterr().out)
    d, s = r["cuda"], r["cuda"]["decode_step_seconds"]
    assert r["model"] == "llama-3.2-1b" and r["parameters"] == 1_235_814_400
    assert s["graph"] < s["eager"] and s["graph"] > 0.8 * s["roofline"]
    assert 0 < d["bandwidth_share"]["graph"] < 1.25
    assert 0 < d["prefill_flops_share"] < 1.25
    assert d["dominant_cost"] in ("launch overhead", "the kernels", "none")


def test_the_capture_warm_up_stays_inside_the_cache():
    """`cuda_graph` runs three steps before it captures; `cpu_probe` does the same on
    the CPU, so a series of one timed step must still write inside the static cache
    (`index_copy_` past its end raises on the CPU, and corrupts memory on a GPU)."""
    pytest.importorskip("torch")
    from llmmath.measure import WARMUP_STEPS, cache_length, cpu_probe, device_report

    assert cache_length(24, 1) == 24 + WARMUP_STEPS and cache_length(24, 32) == 56
    cfg = _shrunk("llama-3.2-1b")
    r = device_report("tiny", cfg, cpu_probe(), dtype="fp32", context=8, steps=1)
    assert r["decode_step_seconds"]["graph"] > 0


def _report(cuda: bool) -> dict:
    from llmmath import measure

    r = {
        "model": "Llama-3.2-1B-2L",
        "parameters": 187_181_056,
        "prompt_tokens": 4096,
        "new_tokens": 16,
        "threads": 2,
        "left_out": list(measure.LEFT_OUT_CUDA if cuda else measure.LEFT_OUT),
    }
    if cuda:
        cost, why = measure.dominant_cost(0.009, 0.003, 0.002)
        r["cuda"] = {
            "dtype": "bf16",
            "batch": 1,
            "device_name": "NVIDIA H100",
            "matmul_flops_per_s": 7.5e14,
            "bandwidth_bytes_per_s": 2.9e12,
            "prefill_tokens_per_s": {"predicted": 81234.0, "measured": 40617.0},
            "prefill_flops_share": 0.41,
            "decode_step_seconds": {"roofline": 0.002, "eager": 0.009, "graph": 0.003},
            "bandwidth_share": {"eager": 0.22, "graph": 0.67},
            "dominant_cost": cost,
            "dominant_cost_reason": why,
        }
    else:
        r["cpu"] = {
            "matmul_flops_per_s": 5.2e10,
            "bandwidth_bytes_per_s": 1.2e10,
            "prefill_tokens_per_s": {"predicted": 300.0, "measured": 150.0},
            "decode_tokens_per_s": {"predicted": 20.0, "measured": 10.0},
        }
    return r


@pytest.mark.parametrize("cuda", [False, True])
def test_the_report_in_chinese_has_the_english_numbers_and_no_english_words(cuda):
    """LLMMATH_LANG=zh (issue 33): every line of measure's report translated, its
    numbers those of the English report, in the same order."""
    import re

    from llmmath import measure
    from llmmath.messages import speaking

    r = _report(cuda)
    english = measure.format_report(r)
    with speaking("zh_CN"):
        chinese = measure.format_report(r)
    numbers = re.compile(r"(?<![a-z])\d+(?:,\d{3})*(?:\.\d+)?")
    for en, zh in zip(english.splitlines(), chinese.splitlines(), strict=True):
        assert sorted(numbers.findall(en)) == sorted(numbers.findall(zh)), (en, zh)
        assert re.search(r"[\u4e00-\u9fff]", zh), zh
        words = set(re.findall(r"\b[a-z]{4,}\b", zh)) - {"eager", "softmax", "token"}
        assert not words, (zh, words)
    if cuda:  # the dominant cost, a Message, in Chinese too
        assert "launch overhead" in english and "启动开销" in chinese
    assert "屋顶线未计入" in chinese.splitlines()[-1]


def test_measure_command_speaks_chinese(monkeypatch, capsys):
    """The command's text report under LLMMATH_LANG=zh (the report itself stubbed:
    what is tested is the language the command prints in)."""
    from llmmath import measure, messages

    monkeypatch.setattr(measure, "measure_report", lambda *a, **k: _report(False))
    with messages.speaking("zh_CN"):  # what LLMMATH_LANG=zh chooses
        main(["measure"])
    out = capsys.readouterr().out
    assert "屋顶线未计入" in out and "left out" not in out

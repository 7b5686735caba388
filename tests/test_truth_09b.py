"""Issue 24, chapter 9b (Serving): the claims fixed by the truth pass, computed again
from the configs and checked against figures from outside the code under test.

- Item 3: llama.cpp's Q4_K_M recipe gives Llama-3-8B 4.91 GB, 4.89 bits per weight:
  llama.cpp prints ``model size = 4.58 GiB (4.89 BPW)`` for published Q4_K_M files of
  Llama-3.1-8B (tests/test_quantization_recipe.py checks the recipe itself).
- Item 7: vLLM's fp8 KV cache keeps per-tensor scales (docs, *Quantized KV Cache*:
  "A single scale is applied for each Q, K, and V tensor", ``k/v_scale = [1]``): one
  float32 k_scale and v_scale per attention layer, 2 × 32 × 4 = 256 bytes for
  Llama-3-8B; a scale per head and token would be 4 bytes per 128 values.
- Item 15: the paged-cache cells take the H100 as 80 GB = 80·10⁹ bytes (the capacity
  rule of `llmmath.gpus`), not the 81,559 MiB nvidia-smi reports.
"""

import json
from pathlib import Path

import pytest

from llmmath import count_params, presets
from llmmath.config import ConfigError
from llmmath.kvcache import kv_cache_bytes
from llmmath.paged_cache import blocks_per_gpu, sequences_that_fit
from llmmath.quantization import (
    gguf_tensor_bytes,
    kv_cache_quantized_bytes,
    q4_k_m_types,
    quantized_decode_step,
    weight_format,
)
from llmmath.roofline import GPUS
from tests.notebook_outputs import glued

ROOT = Path(__file__).resolve().parents[1]
CHAPTER = ROOT / "chapters" / "09b_serving.ipynb"
H, L, KV, FF, V = 4096, 32, 8 * 128, 14336, 128256  # Llama-3-8B's config.json


def test_item3_q4_k_m_in_the_chapter():
    cfg = presets.load("llama-3-8b")
    total = sum(gguf_tensor_bytes(cfg, q4_k_m_types(cfg)).values())
    # by hand from the block sizes (Q4_K 144 B, Q6_K 210 B per 256 weights)
    q6 = V * H + 16 * KV * H + 16 * FF * H  # output, 16 attn_v, 16 ffn_down
    q4 = V * H + L * (2 * H * H + KV * H + 2 * FF * H) + 16 * KV * H + 16 * FF * H
    assert total == q4 // 256 * 144 + q6 // 256 * 210 + 4 * (2 * L + 1) * H
    g = glued(CHAPTER)
    assert g["q4km_GB"] == "4.91 GB" and g["q4km_GiB"] == "4.58 GiB"  # llama.cpp's log
    assert g["q4km_bpw"] == "4.89"  # llama.cpp's log: 4.89 BPW
    assert g["q4km_more_layers"] == "16" and g["q4km_layers"] == "32"
    assert round(8 * total / count_params(cfg).total, 2) == 4.89


def test_item7_fp8_cache_scales():
    cfg = presets.load("llama-3-8b")
    values = kv_cache_bytes(cfg, 64, 4096, "fp8")
    assert values == 2 * L * KV * 64 * 4096  # one byte per value
    assert kv_cache_quantized_bytes(cfg, 64, 4096, "fp8", None)["scales"] == 0
    per_token = kv_cache_quantized_bytes(cfg, 64, 4096, "fp8", "fp32")["scales"]
    assert per_token == values * 4 // 128
    g = glued(CHAPTER)
    assert g["kv_scale_bytes"] == str(2 * L * 4)
    assert g["kv_token_scales_GB"] == f"{per_token / 1e9:.2f} GB" == "0.54 GB"
    # the speeds count the values only, as per-tensor scales (256 B) allow
    h100 = GPUS["H100-SXM5-80GB"]
    int4 = weight_format("int4")
    fp8 = quantized_decode_step(cfg, h100, int4, 64, 4096, "fp8").tokens_per_second
    bf16 = quantized_decode_step(cfg, h100, int4, 64, 4096, "bf16").tokens_per_second
    assert round(fp8) == 9821 and g["fp8_gain_64"] == f"{fp8 / bf16:.1f}" == "1.8"


def test_item15_h100_capacity_rule():
    cfg = presets.load("llama-3-8b")
    h100 = GPUS["H100-SXM5-80GB"]
    assert h100.memory == 80 * 10**9  # the vendor's 80 GB, decimal
    assert h100.reported_memory == 81_559 * 2**20  # nvidia-smi's figure, not used
    free = h100.memory - 2 * count_params(cfg).total
    g = glued(CHAPTER)
    assert g["h100_GB"] == "80" and g["h100_reported_MiB"] == "81,559"
    assert g["blocks_h100"] == f"{free // (16 * 2 * L * KV * 2):,}"
    assert g["blocks_h100"] == f"{blocks_per_gpu(cfg, free, 16):,}"
    assert g["paged_seqs"] == str(sequences_that_fit(cfg, free, 1000, 16))
    # with the full reported memory the chapter would have said more
    full = h100.reported_memory - 2 * count_params(cfg).total
    assert sequences_that_fit(cfg, full, 1000, 16) > int(g["paged_seqs"])


def test_item3_errata_entry():
    """The errata's book-3 says what the book said (4.69 GB, 4.67 bits, every attn_v in
    Q6_K) and what is true (llama.cpp's log: 4.58 GiB, 4.89 bits per weight)."""
    errata = ROOT / "book" / "errata.ipynb"
    text = "".join(
        "".join(c["source"])
        for c in json.loads(errata.read_text(encoding="utf-8"))["cells"]
    )
    assert text.index("(errata-book-2)=") < text.index("(errata-book-3)=")
    assert text.index("(errata-book-3)=") < text.index("(errata-approximations)=")
    g = glued(errata)
    assert (g["b_q4km_old_GB"], g["b_q4km_old_bpw"]) == ("4.69 GB", "4.67")  # the old
    assert (g["b_q4km_GiB"], g["b_q4km_bpw"]) == ("4.58 GiB", "4.89")
    assert g["b_q4km_more_layers"] == "16"
    assert g["b_q4km_short"] == "0.22 GB"  # the issue: 4.91 GB against the book's 4.69


def test_awq_llama3_70b_and_its_cache_fit_80GB():
    """The exercise's answer: Llama-3-70B in AWQ's int4 (groups of 128, an fp16 scale
    and a 4-bit zero point each) and a bf16 cache of 8 sequences of 8192 tokens fit in
    80·10⁹ bytes, by hand from config.json (the prose states it, the cell asserts it).
    """
    H, L, n_kv, d_h, I_, V = 8192, 80, 8, 128, 28672, 128256
    linear = L * (2 * H * H + 2 * H * n_kv * d_h + 3 * H * I_)
    per_weight_bits = 4 + (16 + 4) / 128
    unquantized = 2 * V * H + (2 * L + 1) * H  # embedding, LM head, norms in 16 bits
    file_bytes = linear * per_weight_bits / 8 + 2 * unquantized
    cache_bytes = 2 * L * n_kv * d_h * 2 * 8 * 8192
    assert file_bytes + cache_bytes <= 80e9
    shown = glued(CHAPTER)
    assert shown["awq_GB"] == f"{file_bytes / 1e9:.2f} GB"
    assert shown["awq_cache_GB"] == f"{cache_bytes / 1e9:.2f} GB"
    assert "awq_fits" not in shown  # a claim in the prose, not a word glued in


def test_issue32_h200_measured_beside_the_roofline():
    """Issue 32: the chapter's H200 figures recomputed from `llmmath.measured` (the
    file with its provenance) and the roofline by hand: a decode step of Llama-3-8B at
    batch b over 4096 cached tokens reads every weight but the embedding, the LM head
    and b embedding rows, and each sequence's cache, at the catalogue's 4.8 TB/s; the
    prefill's FLOPs at 989.4 TFLOP/s."""
    from llmmath import measured
    from llmmath.flops import forward_flops_per_token

    run = measured.inference_h200()
    env, got, att = run["environment"], run["llama-3-8b_bf16"], run["attained"]
    g = glued(CHAPTER)
    assert (g["h200_name"], g["h200_driver"]) == ("NVIDIA H200", env["driver"])
    assert (g["h200_torch"], g["h200_transformers"]) == ("2.11.0+cu130", "5.17.0")
    assert g["h200_date"] == run["measured_on"] == "2026-11-27"
    assert (g["h200_peak"], g["h200_bw"]) == ("989 TFLOP/s", "4.8 TB/s")
    cfg = presets.load("llama-3-8b")
    n = count_params(cfg)
    assert got["weights_bytes_allocated"] - 2 * n.total == 1536
    assert g["h200_extra"] == "1,536" and got["kv_cache_bytes_batch8_4096"] == 2**32
    roof, graph, eager = {}, {}, {}
    for b in (1, 8):
        read = 2 * (n.non_embedding + V * H + b * H) + b * 2 * L * KV * 4096 * 2
        roof[b] = read / 4.8e12
        eager[b] = got[f"decode_eager_batch{b}_ctx4096_seconds_median"]
        graph[b] = got[
            f"decode_cuda_graph_static_cache_batch{b}_ctx4096_seconds_median"
        ]
        assert g[f"h200_roof{b}"] == f"{1e3 * roof[b]:.2f} ms"
        assert g[f"h200_eager{b}"] == f"{1e3 * eager[b]:.1f} ms"
        assert g[f"h200_graph{b}"] == f"{1e3 * graph[b]:.1f} ms"
        assert g[f"h200_eager_x{b}"] == f"{eager[b] / roof[b]:.0f}"
        assert g[f"h200_graph_x{b}"] == f"{graph[b] / roof[b]:.1f}"
    # the issue's figures: 59 ms eager, 18 times the roofline's 3.24 ms; 10.2 ms as a
    # graph, 3.2 times; 1.52 TB/s, 32 % of 4.8; batch 8: 88 ms, 29.5 ms, 4.0 ms
    assert (g["h200_roof1"], g["h200_eager_x1"], g["h200_graph_x1"]) == (
        "3.24 ms",
        "18",
        "3.2",
    )
    assert (g["h200_eager8"], g["h200_graph8"], g["h200_roof8"]) == (
        "88.0 ms",
        "29.5 ms",
        "4.02 ms",
    )
    assert g["h200_launch_x"] == f"{eager[1] / graph[1]:.1f}" == "5.8"
    assert g["h200_grow8"] == f"{1e3 * (graph[8] - graph[1]):.1f}"
    read1 = roof[1] * 4.8e12
    assert g["h200_read_GB"] == f"{read1 / 1e9:.1f} GB"
    assert g["h200_attained"] == f"{read1 / graph[1] / 1e12:.2f} TB/s" == "1.52 TB/s"
    assert g["h200_attained_share"] == f"{read1 / graph[1] / 4.8e12:.0%}" == "32%"
    copy = att["device_copy_bytes_per_s_read_plus_write"]
    assert g["h200_copy"] == "4.2 TB/s" and g["h200_copy_share"] == "88%"
    assert g["h200_attained_copy"] == f"{read1 / graph[1] / copy:.0%}"
    # prefill: 4096 causal tokens, every FLOP at the peak, against 125 ms measured
    flops = forward_flops_per_token(cfg, 4096, "causal").total * 4096
    took, matmul = got["prefill_1x4096_seconds"], att["bf16_matmul_8192_flops_per_s"]
    assert g["h200_pre_roof"] == f"{1e3 * flops / 989.4e12:.1f} ms" == "66.6 ms"
    assert g["h200_pre_ms"] == "125 ms"
    assert g["h200_pre_share"] == f"{flops / took / 989.4e12:.0%}" == "53%"
    assert g["h200_matmul"] == "799 TFLOP/s" and g["h200_matmul_share"] == "81%"
    assert g["h200_at_matmul"] == f"{1e3 * flops / matmul:.0f} ms"
    assert g["h200_rest_share"] == f"{1 - flops / matmul / took:.0%}"
    # the first measure on CUDA: 336 tokens/s against 3,261 predicted
    old = run["measure_command_cuda_report"]["decode_tokens_per_s"]
    assert g["h200_old_ratio"] == f"{old['measured'] / old['predicted']:.2f}" == "0.10"


def test_issue32_measure_on_cuda_as_the_chapter_describes_it():
    """The chapter's account of ``measure`` on CUDA: the context it prefills and the
    two thresholds of `dominant_cost`, glued from `llmmath.measure`."""
    from llmmath.measure import CUDA_CONTEXT, CUDA_MODEL, KERNEL_RATIO, LAUNCH_RATIO

    g = glued(CHAPTER)
    assert g["measure_ctx"] == f"{CUDA_CONTEXT:,}" == "4,096"
    assert (g["measure_launch"], g["measure_kernel"]) == ("2", "1.5")
    assert (LAUNCH_RATIO, KERNEL_RATIO, CUDA_MODEL) == (2.0, 1.5, "llama-3.2-1b")


def test_issue32_serving_engine_beside_the_roofline():
    """Issue 32: what a serving engine reaches, from `llmmath.measured` (the published
    figure with its source and setup) and the roofline by hand. vLLM's maintainer timed
    one request of Meta-Llama-3-8B on an H100 at batch 1 (benchmark_latency.py's
    defaults: 32 prompt tokens, 128 generated, bf16 by dtype "auto"): 0.9704 s, and
    0.8950 s compiled for batch 1. The roofline of that request on the SXM's 3.35 TB/s:
    a prefill of 32 tokens and 127 decode steps over 33..159 cached tokens, each
    reading every weight but the unused embedding rows, memory-bound throughout."""
    from llmmath import measured
    from llmmath.roofline import request_seconds

    data = measured.serving_engines()
    (vllm,) = data["figures"]
    assert vllm["engine"] == "vLLM" and vllm["model"] == "llama-3-8b"
    assert (vllm["gpu_stated"], vllm["precision"], vllm["batch"]) == ("H100", "bf16", 1)
    assert (vllm["prompt_tokens"], vllm["new_tokens"]) == (32, 128)
    assert vllm["source"]["url"] == "https://github.com/vllm-project/vllm/pull/11078"
    assert "H100 with batch size 1" in vllm["source"]["title"]
    took = {r["setting"]: r["request_seconds"] for r in vllm["runs"]}
    assert took == {
        "default": 0.9704469823899369,
        "torch.compile for batch 1": 0.8950413154981409,
    }
    assert {e["engine"] for e in data["not_used"]} == {"SGLang", "TensorRT-LLM"}
    assert all(e["why"] and e["sources"] for e in data["not_used"])
    # the roofline by hand
    n = count_params(presets.load("llama-3-8b"))
    m_kv = 2 * L * KV * 2  # bytes per cached token

    def by_hand(bandwidth: float) -> float:
        prefill = 2 * (n.non_embedding + V * H + 32 * H) + 32 * m_kv
        steps = sum(
            2 * (n.non_embedding + V * H + H) + (32 + k) * m_kv for k in range(1, 128)
        )
        return (prefill + steps) / bandwidth

    sxm, pcie = by_hand(3.35e12), by_hand(2.0e12)
    cfg = presets.load("llama-3-8b")
    assert abs(request_seconds(cfg, "H100-SXM5-80GB", 32, 128) - sxm) < 1e-12
    assert abs(request_seconds(cfg, "H100-PCIE-80GB", 32, 128) - pcie) < 1e-12
    # the compiled run beats an H100 PCIe's roofline: the card was an SXM or NVL H100
    assert took["torch.compile for batch 1"] < pcie < took["default"]
    g = glued(CHAPTER)
    assert (g["eng_batch"], g["eng_prompt"], g["eng_new"]) == ("1", "32", "128")
    assert g["eng_date"] == "December 2024"
    assert g["eng_pcie_roof"] == f"{pcie:.2f} s" == "0.96 s"
    assert (g["eng_pcie_bw"], g["eng_sxm_bw"], g["eng_nvl_bw"]) == (
        "2.00 TB/s",
        "3.35 TB/s",
        "3.90 TB/s",
    )
    default, compiled = sxm / took["default"], sxm / took["torch.compile for batch 1"]
    assert g["eng_share_default"] == f"{default:.0%}" == "59%"
    assert g["eng_share_compiled"] == f"{compiled:.0%}" == "64%"
    assert g["eng_ms_compiled"] == f"{1e3 * 0.8950413154981409 / 128:.2f} ms"
    assert g["eng_ms_roof"] == f"{1e3 * sxm / 128:.2f} ms" == "4.48 ms"
    assert g["eng_compile_gain"] == f"{1 - 0.8950413154981409 / 0.9704469823899369:.0%}"
    # closer to the roofline than the plain CUDA graph on the H200 (32 %)
    assert int(g["h200_attained_share"].rstrip("%")) < 59


def test_issue32_request_seconds_counts_a_prefill_and_the_other_tokens():
    """`request_seconds` of one new token is the prefill alone; each further token adds
    one decode step over a cache one token longer."""
    from llmmath.roofline import decode_step, prefill_step, request_seconds

    cfg = presets.load("llama-3-8b")
    h100 = GPUS["H100-SXM5-80GB"]
    first = prefill_step(cfg, h100, 100).seconds
    assert request_seconds(cfg, h100, 100, 1) == first
    steps = [decode_step(cfg, h100, 1, t).seconds for t in (101, 102)]
    assert request_seconds(cfg, h100, 100, 3) == pytest.approx(first + sum(steps))
    for bad in (0, -1):
        with pytest.raises(ConfigError):
            request_seconds(cfg, h100, bad, 4)
        with pytest.raises(ConfigError):
            request_seconds(cfg, h100, 4, bad)

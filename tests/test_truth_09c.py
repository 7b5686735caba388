"""Chapter 9c says only what its sources say (issue 24, items 4-6 and 11-15).

Each expected number is a closed form or a figure printed in the source (Narayanan et
al. 2021, Sec. 2.2 and Table 1; the Llama 3 report, Sec. 3.2.1, 3.3.2 and Table 4; the
DeepSeek-V3 report, Sec. 3.2.2 and 3.3.3), compared with `llmmath.parallel` and with
what the chapter's stored outputs glue into its prose.
"""

import json
from fractions import Fraction
from pathlib import Path

import pytest

from llmmath import presets
from llmmath.config import ConfigError
from llmmath.gpus import GPUS
from llmmath.memory import GPU_80GB
from llmmath.parallel import (
    CLUSTERS,
    expert_all_to_all_payload,
    pipeline_bubble,
    plan,
    ring_attention_bytes,
)
from tests.notebook_outputs import glued

ROOT = Path(__file__).resolve().parents[1]
CHAPTER = ROOT / "chapters" / "09c_many_gpus.ipynb"


def _cells() -> list[dict]:
    return json.loads(CHAPTER.read_text(encoding="utf-8"))["cells"]


def prose() -> str:
    """The chapter's Markdown, whitespace collapsed."""
    text = " ".join(
        "".join(c["source"]) for c in _cells() if c["cell_type"] == "markdown"
    )
    return " ".join(text.split())


# --- item 4: the bubble, two definitions ----------------------------------------------


@pytest.mark.parametrize("p, m, v", [(4, 4, 1), (8, 16, 1), (16, 64, 2), (16, 16, 4)])
def test_bubble_of_the_ideal_time_is_narayanans(p, m, v):
    """Narayanan et al. 2021, Sec. 2.2.1: bubble time fraction (p−1)/m; Sec. 2.2.2:
    (1/v)·(p−1)/m. As a share of the step, f/(1 + f) = (p−1)/(vm + p−1)."""
    ideal = pipeline_bubble(p, m, v, of="ideal")
    assert ideal == Fraction(1, v) * Fraction(p - 1, m)
    assert (
        pipeline_bubble(p, m, v)
        == ideal / (1 + ideal)
        == Fraction(p - 1, v * m + p - 1)
    )


def test_bubble_rejects_an_unknown_definition():
    with pytest.raises(ConfigError, match="of must be 'step' or 'ideal'"):
        pipeline_bubble(4, 4, of="total")


def test_plan_adds_the_papers_bubble_to_compute():
    r = plan(presets.load("llama-3-70b"), 1024, tp=8, pp=4, micro_batches=8, chunks=2)
    times = r.times()
    assert times["pipeline bubble"] == pytest.approx(times["compute"] * 3 / 16)
    assert r.bubble == Fraction(3, 19)


def test_exercise_answers_both_definitions():
    """p = 16, bubble ≤ 1/20: m ≥ 19·15 = 285 of the step, m ≥ 20·15 = 300 of the ideal
    time; with v = 4, ⌈285/4⌉ = 72 and 300/4 = 75."""
    g = glued(CHAPTER)
    assert (g["exb_step_1"], g["exb_ideal_1"]) == ("285", "300")
    assert (g["exb_step_4"], g["exb_ideal_4"]) == ("72", "75")
    assert pipeline_bubble(16, 300, of="ideal") == Fraction(1, 20)
    assert pipeline_bubble(16, 299, of="ideal") > Fraction(1, 20)
    assert pipeline_bubble(16, 285) == Fraction(1, 20) < pipeline_bubble(16, 284)
    text = prose()
    assert "narayanan2021efficient{Sec. 2.2.1}" in text
    assert "\\frac{t_{pb}}{t_{id}} = \\frac{p-1}{m}" in text
    assert g["bubble_16_16"] == "48%" and g["bubble_16_16_ideal"] == "94%"


# --- item 5: what is checked against torch --------------------------------------------


def test_intro_names_exactly_what_torch_checks():
    text = prose()
    assert "each is checked against PyTorch's own distributed engine" not in text
    assert "checked against the formulas of the papers that define them" in text
    tests = (ROOT / "tests" / "test_distributed.py").read_text(encoding="utf-8")
    for name in (
        "test_fsdp2_shards_psi_over_n",
        "test_fsdp2_traffic_is_zero3",
        "test_tensor_parallel_params_per_rank",
        "test_tensor_parallel_forward_collectives",
        "test_tensor_parallel_backward_collectives",
    ):
        assert f"def {name}(" in tests
    for unchecked in ("pipeline_bubble", "ring_attention_bytes", "expert_all_to_all"):
        assert unchecked not in tests  # the prose says these are not checked by torch


# --- item 6: Llama 3's context parallelism all-gathers --------------------------------


def test_context_parallel_all_gather_sends_the_ring_bytes():
    """Llama 3.1 405B, 131,072 tokens over c = 16: an all-gather sends (c−1)/c of the
    whole K and V (2·8·128 values a token, bf16) from each GPU, as the ring does."""
    l405 = presets.load("llama-3.1-405b")
    whole = 131072 * 2 * 8 * 128 * 2
    assert ring_attention_bytes(l405, 131072, 16) == 15 * whole // 16 == 503_316_480
    text = prose()
    assert "all-gathers the K and V" in text and "dubey2024llama3{Sec. 3.3.2}" in text
    assert "exposed on the critical path" in text
    assert glued(CHAPTER)["cp_q_over_kv"] == str((128 * 128) // (2 * 8 * 128))


# --- item 11: Megatron-LM's throughput runs -------------------------------------------


def test_megatron_runs_and_the_share_lost():
    """0.44 to 0.65 of the bound means 35 % to 56 % lost (1 − 0.65, 1 − 0.44)."""
    g = glued(CHAPTER)
    assert (g["mega_lo"], g["mega_hi"]) == ("0.44", "0.65")
    assert (g["mega_lost_lo"], g["mega_lost_hi"]) == ("35%", "56%")
    text = prose()
    assert "a third to a half" not in text and "trained GPT models" not in text
    assert "not models trained to convergence" in text


# --- item 12: DeepSeek-V3's all-to-all is an upper bound ------------------------------


def test_deepseek_v3_all_to_all_upper_bound():
    """4096 tokens × k = 8 × H = 7168: 469,762,048 B in bf16; the FP8 dispatch (Sec.
    3.3.3) half that; at most 4 nodes a token (Sec. 3.2.2) half again."""
    v3 = presets.load("deepseek-v3")
    assert expert_all_to_all_payload(v3, 4096) == 4096 * 8 * 7168 * 2 == 469_762_048
    assert expert_all_to_all_payload(v3, 4096, dtype_bytes=1) == 234_881_024
    g = glued(CHAPTER)
    assert (g["a2a_ds_MB"], g["a2a_ds_fp8_MB"], g["a2a_ds_ib_MB"]) == (
        "470 MB",
        "235 MB",
        "117 MB",
    )
    text = prose()
    assert "The count is an upper bound" in text
    assert "deepseekai2024v3{Sec. 3.3.3}" in text and "at most 4 nodes" in text


# --- item 13: Llama 3's Table 4, like with like ---------------------------------------


def test_llama3_table4_41_percent_lies_between_the_bounds():
    """Table 4: 16,384 GPUs, TP 8, PP 16, DP 128, 8192 tokens: 41 % BF16 MFU (43 % is
    8,192 GPUs with DP 64; 38 % the 131,072-token row). The chapter's two bounds for
    this layout bracket 41 %."""
    g = glued(CHAPTER)
    assert (g["l3_mfu_same"], g["l3_mfu_8k"], g["l3_mfu_128k"]) == ("41%", "43%", "38%")
    assert int(g["l405_mfu_1f1b"].rstrip("%")) < 41 < int(g["l405_mfu_int"].rstrip("%"))
    twin = presets.load("llama-3.1-405b").replace(num_hidden_layers=128)
    r = plan(twin, 16384, tp=8, pp=16, micro_batches=16, seq_len=8192)
    assert (r.tp, r.pp, r.dp) == (8, 16, 128)
    text = prose()
    assert "38 % to 43 %" not in text and "38–43 %" not in text
    assert "not the report's" in text


# --- item 14: 3.8e25 and the 6N rule --------------------------------------------------


def test_llama3_flops_consistent_with_6n():
    six_n = 6 * 405 * 10**9 * 15_600 * 10**9
    assert six_n == 37_908 * 10**21 and round(six_n / 10**25, 1) == 3.8
    assert glued(CHAPTER)["l405_6n"] == "3.79e+25"
    text = prose()
    assert "uses the $6N$ rule" not in text
    assert "does not say how it computed" in text


# --- item 15: one capacity rule -------------------------------------------------------


def test_one_capacity_rule_in_9c_and_its_layouts():
    """An "80 GB" GPU is 80·10⁹ bytes everywhere in the chapter: `GPU_80GB`, every
    cluster of `plan`, and no 81,559 MiB (the H100's nvidia-smi figure) in its code."""
    assert GPU_80GB == 80 * 10**9
    for name in ("h100", "a100", "h800"):
        assert CLUSTERS[name].gpu.memory == 80 * 10**9
    assert GPUS["H100-SXM5-80GB"].reported_memory == 81559 * 2**20 > GPU_80GB
    code = " ".join("".join(c["source"]) for c in _cells() if c["cell_type"] == "code")
    assert "81559" not in code and "81_559" not in code and "2**30" not in code
    assert "80 \\cdot 10^9$ bytes: the capacity rule of `llmmath.gpus`" in prose()


def test_parallel_json_gives_both_bubbles():
    """``parallel --json``: the share of the step and the paper's fraction of the
    ideal time, p = 4 and m = 8: 3/11 and 3/8."""
    r = plan(presets.load("llama-3-70b"), 1024, tp=8, pp=4, micro_batches=8).report()
    assert r["pipeline_bubble_fraction_exact"] == "3/11"
    assert r["pipeline_bubble_of_ideal_exact"] == "3/8"

"""The catalogue's int8 rates and links (`llmmath.gpus`), and time and cost from a
price (`llmmath.cost`, ``parallel --price-per-gpu-hour --tokens``). Expected values
are written here from the datasheets and by hand, not from the code under test."""

import json
import math
from pathlib import Path

import pytest

from llmmath import presets
from llmmath.cli import main
from llmmath.config import ConfigError
from llmmath.cost import (
    check_price,
    cost,
    gpu_hours,
    step_and_run,
    steps_for,
    training_gpu_hours,
)
from llmmath.gpus import GPUS
from llmmath.parallel import CLUSTERS, plan
from tests.notebook_outputs import glued

#: The parts issue 25 names: each must have both an int8 rate and a link.
NAMED = (
    "H100-SXM5-80GB",
    "H100-PCIE-80GB",
    "H200-SXM-141GB",
    "B200-SXM-180GB",
    "A100-SXM4-40GB",
    "A100-SXM4-80GB",
    "L40S-48GB",
    "RTX-4090-24GB",
    "MI300X-192GB",
)

#: int8 ÷ bf16 where the vendor's ratio is not 2: the RTX 4090's bf16 row is the rate
#: with FP32 accumulate (half the FP16-accumulate one), the MI250X's int8 is its bf16.
INT8_RATIO = {"RTX-4090-24GB": 4, "MI250X-128GB": 1}


@pytest.mark.parametrize("name", NAMED)
def test_the_named_parts_have_int8_and_a_link(name):
    g = GPUS[name]
    assert g.int8_ops and g.int8_source
    assert g.link and g.link_bandwidth and g.link_source


@pytest.mark.parametrize("name", sorted(GPUS))
def test_int8_and_link_are_consistent(name):
    g = GPUS[name]
    if g.int8_ops is not None:
        ratio = INT8_RATIO.get(name, 2)
        assert g.int8_ops == pytest.approx(ratio * g.peak_flops, rel=0.03)
        if g.fp8_flops is not None and name != "L40S-48GB":
            assert g.int8_ops == pytest.approx(g.fp8_flops, rel=1e-3)
        assert "TOPS" in g.int8_source or "POPS" in g.int8_source
    else:
        assert name in ("V100-SXM2-32GB",)  # no int8 tensor rate in its datasheet
    if g.link_bandwidth is not None:
        assert g.link_bandwidth_one_way * 2 == g.link_bandwidth
        assert 1e10 < g.link_bandwidth < 1e13
        assert "both directions" in g.link_source
        pcie = g.link.startswith("PCIe")
        assert pcie == (g.link_bandwidth <= 128e9)
    else:
        assert g.link is None and name == "MI250X-128GB"


def test_published_int8_and_link_figures():
    assert GPUS["H100-SXM5-80GB"].int8_ops == 3958e12 / 2  # 3,958 TOPS with sparsity
    assert GPUS["H100-PCIE-80GB"].int8_ops == 3026e12 / 2
    assert GPUS["A100-SXM4-80GB"].int8_ops == 624e12
    assert GPUS["L40S-48GB"].int8_ops == 733e12
    assert GPUS["T4-16GB"].int8_ops == 130e12
    assert GPUS["MI300X-192GB"].int8_ops == 2614.9e12
    assert GPUS["B200-SXM-180GB"].int8_ops == 72e15 / 8 / 2  # HGX: 8 GPUs, sparse
    assert GPUS["H100-SXM5-80GB"].link_bandwidth == 900e9
    assert GPUS["A100-SXM4-40GB"].link_bandwidth == 600e9
    assert GPUS["H100-PCIE-80GB"].link_bandwidth == 128e9
    assert GPUS["B200-SXM-180GB"].link_bandwidth == 1.8e12
    assert GPUS["MI300X-192GB"].link_bandwidth == 7 * 128e9 == 896e9
    assert GPUS["V100-SXM2-32GB"].link_bandwidth == 300e9


def test_the_clusters_nvlink_is_the_catalogues_one_way_link():
    for c in CLUSTERS.values():
        assert c.nvlink == c.gpu.link_bandwidth_one_way


def test_costs_by_hand():
    assert gpu_hours(8, 4.5) == 0.01  # 8 · 4.5 s = 36 GPU-seconds
    assert cost(8, 4.5, 2.5) == pytest.approx(0.025)
    assert cost(16_384, 3600, 2) == 32_768.0
    assert steps_for(10, 4) == 3 and steps_for(8, 4) == 2 and steps_for(1, 10**9) == 1
    r = step_and_run(8, 4.5, 4, 2.5, tokens=10)
    assert (r["steps"], r["run_seconds"]) == (3, 13.5)
    assert r["run_gpu_hours"] == pytest.approx(0.03)
    assert r["run_cost"] == pytest.approx(0.075)
    assert set(step_and_run(8, 4.5, 4)) == {"step_seconds", "step_gpu_hours"}


def test_llama_3_405b_gpu_hours_in_the_reports_ballpark():
    # Llama 3 paper: 3.8e25 FLOPs (Sec. 3.1), 38-43 % BF16 MFU on H100s (Table 4);
    # by hand: 3.8e25 / (989.4e12 · 0.38) / 3600 = 2.8075e7 GPU-hours.
    low_mfu = training_gpu_hours(3.8e25, GPUS["H100-SXM5-80GB"].peak_flops, 0.38)
    assert low_mfu == pytest.approx(2.8075e7, rel=1e-3)
    high_mfu = training_gpu_hours(3.8e25, 989.4e12, 0.43)
    assert high_mfu == pytest.approx(2.4810e7, rel=1e-3)
    # Meta's Llama 3.1 model card: 30.84M H100-hours for 405B (failures, restarts
    # and ablations included), so the ideal count is a little under it
    assert 0.75 < low_mfu / 30.84e6 < 1
    # on 16,384 GPUs: 71 days of wall-clock at 38 %
    assert low_mfu / 16_384 / 24 == pytest.approx(71.4, abs=0.1)


@pytest.mark.parametrize(
    "bad", [0, -1, math.nan, math.inf, -math.inf, 1e7, True, "2.5", None]
)
def test_bad_prices_are_refused(bad):
    with pytest.raises(ConfigError, match="price_per_gpu_hour"):
        check_price(bad)


def test_bad_mfu_and_tokens_are_refused():
    for mfu in (0, -0.1, 1.5, math.nan):
        with pytest.raises(ConfigError, match="mfu"):
            training_gpu_hours(3.8e25, 989.4e12, mfu)
    for tokens in (0, -5, 2.5, True):
        with pytest.raises(ConfigError, match="tokens"):
            steps_for(tokens, 4096)


def run(capsys, *argv):
    status = main(["parallel", "llama-3-8b", "--gpus", "64", *argv])
    out, err = capsys.readouterr()
    return status, out, err


def test_cli_cost_of_a_step_and_a_run(capsys):
    status, out, err = run(
        capsys, "--tp", "8", "--micro-batches", "4", "--price-per-gpu-hour", "2.5",
        "--tokens", "1000000000", "--json",
    )  # fmt: skip
    assert status == 0, err
    r = json.loads(out)
    c = r["cost"]
    # 64 GPUs · step seconds · 2.5 / 3600, and 8 replicas · 4 · 4096 tokens per step
    assert c["step_cost"] == pytest.approx(64 * r["step_seconds_total"] * 2.5 / 3600)
    assert r["tokens_per_step"] == 8 * 4 * 4096 == c["tokens_per_step"]
    assert c["steps"] == 7630  # ⌈10⁹ / 131,072⌉ = ⌈7629.39⌉
    assert c["run_cost"] == pytest.approx(7630 * c["step_cost"])
    assert c["run_gpu_hours"] == pytest.approx(
        64 * 7630 * r["step_seconds_total"] / 3600
    )
    status, text, _ = run(
        capsys, "--tp", "8", "--price-per-gpu-hour", "2.5", "--tokens", "1000000000"
    )
    assert status == 0 and "GPU-hours" in text and "at 2.5/GPU-h" in text
    assert "  fits in 80 GB         " in text


def test_no_cost_without_a_price_or_tokens(capsys):
    status, out, _ = run(capsys, "--json")
    assert status == 0 and "cost" not in json.loads(out)
    status, out, _ = run(capsys, "--tokens", "4096000", "--json")
    c = json.loads(out)["cost"]
    assert c["steps"] == 4096000 // (64 * 4096) + 1 and "run_cost" not in c


@pytest.mark.parametrize(
    "argv",
    [
        ["--price-per-gpu-hour", "0"],
        ["--price-per-gpu-hour", "-1"],
        ["--price-per-gpu-hour", "nan"],
        ["--price-per-gpu-hour", "inf"],
        ["--price-per-gpu-hour", "1e999"],
        ["--price-per-gpu-hour", " 2"],
        ["--price-per-gpu-hour", "\u0662"],
        ["--price-per-gpu-hour", "2", "--price-per-gpu-hour", "3"],
        ["--tokens", "0"],
        ["--tokens", "1.5e0"],
        ["--tokens", "1e19"],
        ["--tokens", "1" + "0" * 19],
        ["--tokens", "5", "--tokens", "5"],
    ],
)
def test_bad_options_get_one_line(capsys, argv):
    status, out, err = run(capsys, *argv)
    assert status == 2 and out == "" and err.count("\n") == 1


# --- chapter 9c, "What a step and a run cost" ---------------------------------------

CHAPTER_9C = Path(__file__).resolve().parents[1] / "chapters" / "09c_many_gpus.ipynb"
#: The chapter's best layout of Llama-3-70B on 1024 H100s: d = 128, t = 8, p = 1, eight
#: micro-batches of one 8192-token sequence per replica (1024 sequences a step), ZeRO-1.
LAYOUT = dict(tp=8, pp=1, zero=1, micro_batches=8, seq_len=8192, sequence_parallel=True)


def _prose(path: Path) -> str:
    cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
    text = " ".join("".join(c["source"]) for c in cells if c["cell_type"] == "markdown")
    return " ".join(text.split())


def test_chapter_9c_prices_its_run_by_hand():
    """15T tokens at 1024 · 8192 tokens a step is ⌈1,788,139.77⌉ = 1,788,140 steps; a
    step of T seconds on 1024 GPUs is 1024·T/3600 GPU-hours, at the assumed 2.5 USD
    each; the 6N rule, 6 · 70,553,706,496 · 15·10¹² FLOPs at the same MFU, about 6 %
    fewer hours (it leaves out the attention over 8192 tokens)."""
    g = glued(CHAPTER_9C)
    assert (g["cost_price"], g["cost_tokens"], g["cost_gpus"]) == (
        "2.5",
        "15T",
        "1,024",
    )
    assert g["best70"] == "d = 128, t = 8, p = 1"
    assert g["cost_gpu"] == "H100-SXM5-80GB"
    steps = 1_788_140
    assert (steps - 1) * 1024 * 8192 < 15 * 10**12 <= steps * 1024 * 8192
    assert g["cost_steps"] == f"{steps:,}"
    r = plan(presets.load("llama-3-70b"), 1024, **LAYOUT)
    assert r.dp == 128 and r.tokens_per_step == 1024 * 8192
    T = r.step_seconds
    assert g["cost_step_s"] == f"{T:.2f} s"
    assert g["cost_step_gpuh"] == f"{1024 * T / 3600:.2f}"
    assert g["cost_step_usd"] == f"{1024 * T / 3600 * 2.5:.2f}"
    assert g["cost_days"] == f"{steps * T / 86400:.0f}"
    hours = 1024 * steps * T / 3600
    assert g["cost_run_gpuh"] == f"{hours / 1e6:.2f}"
    assert g["cost_run_usd"] == f"{hours * 2.5 / 1e6:.2f}"
    six_n = 6 * 70_553_706_496 * 15 * 10**12 / (989.4e12 * r.mfu) / 3600
    assert g["cost_6n_gpuh"] == f"{six_n / 1e6:.2f}"
    assert g["cost_6n_short"] == f"{1 - six_n / hours:.0%}" == "6%"
    text = _prose(CHAPTER_9C)
    assert "a round number chosen for the example and not a quote" in text
    assert "(gpus-cost)=" in text and "{ref}`gpus-cost`" in text


def test_chapter_9c_command_prices_the_same_run(capsys):
    """The chapter's command: its "cost" is the by-hand arithmetic of the step."""
    argv = ["parallel", "llama-3-70b", "--gpus", "1024", "--tp", "8", "--pp", "1"]
    argv += ["--zero", "1", "--micro-batches", "8", "--seq-len", "8192"]
    argv += ["--sequence-parallel", "--price-per-gpu-hour", "2.5"]
    argv += ["--tokens", str(15 * 10**12), "--json"]
    assert main(argv) == 0
    r = json.loads(capsys.readouterr().out)
    c, T = r["cost"], r["step_seconds_total"]
    assert (r["dp"], c["steps"], c["tokens_per_step"]) == (128, 1_788_140, 8_388_608)
    assert c["run_gpu_hours"] == pytest.approx(1024 * 1_788_140 * T / 3600, rel=1e-12)
    assert c["run_cost"] == pytest.approx(2.5 * c["run_gpu_hours"], rel=1e-12)
    assert c["step_cost"] == pytest.approx(1024 * T * 2.5 / 3600, rel=1e-12)
    notebook = json.loads(CHAPTER_9C.read_text(encoding="utf-8"))
    (cell,) = [c for c in notebook["cells"] if c.get("id") == "gpus-cost-cli"]
    shown = "".join(cell["outputs"][0]["text"]).replace(" \\\n    ", " ")
    assert shown.startswith("python -m llmmath " + " ".join(argv) + "\n")
    assert "the command's cost equals step_and_run's: True" in shown


# --- issue 32: the cost as a range, from the layout's bound to a published MFU ------


def test_published_mfu_is_the_lowest_of_llama_3s_table_4():
    from llmmath.cost import PUBLISHED_MFU, PUBLISHED_MFU_SOURCE

    table4 = (0.43, 0.41, 0.38)  # 8,192 GPUs; 16,384; 16,384 with 131,072 tokens
    assert PUBLISHED_MFU == min(table4)
    assert "Table 4" in PUBLISHED_MFU_SOURCE and "38 %" in PUBLISHED_MFU_SOURCE


def test_step_at_mfu_by_hand():
    from llmmath.cost import step_at_mfu

    assert step_at_mfu(5.0, 0.75, 0.375) == 10.0  # half the MFU, twice the time
    assert step_at_mfu(5.0, 0.75, 0.75) == 5.0
    for bad in (0, -0.1, 1.5, math.nan, True, "0.4"):
        with pytest.raises(ConfigError, match="mfu"):
            step_at_mfu(5.0, 0.75, bad)
    with pytest.raises(ConfigError, match="above this layout's bound"):
        step_at_mfu(5.0, 0.75, 0.8)


def test_cli_cost_range_at_the_published_mfu(capsys):
    """The chapter's layout at 15T tokens: the bound's 2.57 M GPU-hours and, at 38 %,
    the same FLOPs 0.736/0.38 times slower, 4.98 M; --mfu 0.43 gives 4.40 M."""
    argv = ["parallel", "llama-3-70b", "--gpus", "1024", "--tp", "8", "--pp", "1"]
    argv += ["--zero", "1", "--micro-batches", "8", "--seq-len", "8192"]
    argv += ["--sequence-parallel", "--tokens", str(15 * 10**12)]
    assert main([*argv, "--json"]) == 0
    r = json.loads(capsys.readouterr().out)
    at, c = r["cost_at_mfu"], r["cost"]
    assert at["mfu"] == 0.38 and "Table 4" in at["mfu_source"]
    T = r["step_seconds_total"] * r["mfu"] / 0.38
    assert at["step_seconds"] == pytest.approx(T, rel=1e-12)
    assert at["steps"] == c["steps"] == 1_788_140
    assert at["run_gpu_hours"] == pytest.approx(1024 * 1_788_140 * T / 3600)
    assert round(c["run_gpu_hours"] / 1e6, 2) == 2.57
    assert round(at["run_gpu_hours"] / 1e6, 2) == 4.98
    assert main([*argv, "--mfu", "0.43", "--json"]) == 0
    at = json.loads(capsys.readouterr().out)["cost_at_mfu"]
    assert at["mfu"] == 0.43 and at["mfu_source"].startswith("given")
    assert round(at["run_gpu_hours"] / 1e6, 2) == 4.40
    assert main(argv) == 0
    text = capsys.readouterr().out
    assert "at MFU 38% (Llama 3, Table 4)" in text
    assert "from the bound to MFU 38%: 2,571,464 to 4,978,503" in text


def test_mfu_alone_gives_the_step_at_it(capsys):
    status, out, _ = run(capsys, "--tp", "8", "--micro-batches", "4", "--mfu", "0.1")
    assert status == 0 and "at MFU 10% (given)" in out
    status, out, _ = run(
        capsys, "--tp", "8", "--micro-batches", "4", "--mfu", "0.1", "--json"
    )
    r = json.loads(out)
    assert set(r["cost_at_mfu"]) == {
        "mfu",
        "mfu_source",
        "step_seconds",
        "step_gpu_hours",
    }
    assert r["cost_at_mfu"]["step_seconds"] == pytest.approx(
        r["step_seconds_total"] * r["mfu"] / 0.1
    )


def test_default_mfu_above_a_slow_layouts_bound_is_left_out(capsys):
    """A layout whose bound is under 38 % (one micro-batch: most of a 16-stage pipeline
    idles) keeps its bound's cost alone; an explicit --mfu above it is refused."""
    argv = ["--tp", "1", "--pp", "16", "--micro-batches", "1", "--tokens", str(10**9)]
    status, out, _ = run(capsys, *argv, "--json")
    r = json.loads(out)
    assert status == 0 and r["mfu"] < 0.38 and "cost_at_mfu" not in r
    status, out, err = run(capsys, *argv, "--mfu", "0.9")
    assert status == 2 and out == "" and err.count("\n") == 1 and "bound" in err


@pytest.mark.parametrize(
    "value", ["0", "-0.1", "1.5", "nan", "inf", "1e999", " 0.4", "\u0660.4", "40%"]
)
def test_bad_mfu_gets_one_line(capsys, value):
    status, out, err = run(capsys, "--mfu", value)
    assert status == 2 and out == "" and err.count("\n") == 1


def test_mfu_twice_is_refused(capsys):
    status, out, err = run(capsys, "--mfu", "0.3", "--mfu", "0.4")
    assert status == 2 and out == "" and err.count("\n") == 1


def test_chapter_9c_sets_its_bound_beside_the_published_hours():
    """Issue 32: Meta's model card (meta-llama/llama3, MODEL_CARD.md: Llama 3 8B 1.3M,
    70B 6.4M H100 GPU-hours, 7.7M in all) against the chapter's bound of 2.57 M, the
    MFU those hours imply for llmmath's FLOPs of 15T tokens (3 forward passes of
    8192-token sequences, attention too), and the hours at Table 4's MFUs; the Llama 3
    paper's Sec. 3.3.4: 466 interruptions (419 unexpected) in a 54-day snapshot, more
    than 90 % effective training time."""
    from llmmath.flops import training_flops

    g = glued(CHAPTER_9C)
    assert (g["card_70b"], g["card_total"]) == ("6.4", "7.7")
    r = plan(presets.load("llama-3-70b"), 1024, **LAYOUT)
    bound = 1024 * 1_788_140 * r.step_seconds / 3600
    assert g["cost_run_gpuh"] == "2.57" and g["card_ratio"] == f"{6.4e6 / bound:.1f}"
    assert g["card_ratio"] == "2.5"
    flops = float(training_flops(presets.load("llama-3-70b"), 15 * 10**12, 8192))
    mfu = flops / (6.4e6 * 3600 * 989.4e12)
    assert g["card_mfu"] == f"{mfu:.0%}" == "30%"
    at = {m: flops / (989.4e12 * m) / 3600 for m in (0.43, 0.41, 0.38)}
    assert (g["pub_hours_lo"], g["pub_hours_hi"]) == ("4.40", "4.98")
    assert g["pub_hours_hi"] == f"{at[0.38] / 1e6:.2f}"
    assert g["card_over_pub"] == f"{6.4e6 / at[0.38] - 1:.0%}" == "29%"
    assert g["pub_mfu"] == "38%" and (g["l3_mfu_8k"], g["l3_mfu_128k"]) == (
        "43%",
        "38%",
    )
    assert (g["l3_snapshot_days"], g["l3_interruptions"]) == ("54", "466")
    assert (g["l3_unexpected"], g["l3_effective"]) == ("419", "90%")
    text = _prose(CHAPTER_9C)
    assert "{cite:p}`meta2024llama3card`" in text and "(gpus-published-cost)=" in text
    assert "lower bound on the hours" in text

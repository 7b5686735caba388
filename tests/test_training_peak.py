"""The peak of a training step against a real GPU, by hand and by its properties
(issue 31).

- **The H200 cases** (`llmmath.measured`, 23 recipes measured with
  tests/gpu/measure_training_memory.py): ``train-memory --json``'s ``peak_bytes``
  within 10 % of ``torch.cuda.max_memory_allocated()`` over a step, for every case
  (the issue's bar; the median error must stay under 2 %, so a drift shows before it
  fails a case), the activations after the forward pass within 2 %, the gradients to
  the byte, the AdamW state to the byte but for torch's ``step`` scalars (4 bytes per
  trainable tensor, counted here), and the weights to within what the building
  allocated besides them (RoPE's buffers, cuBLAS's workspace on the first case: under
  8.3 MB, never less than the weights).
- **By hand**: Llama-3.2-1B's peak in bf16 at 2 × 2048 from its config, term by term
  as transformers' code keeps them, without llmmath's activation code.
- **Properties** over random small configs: the peak items sum to the peak; the peak
  is at least the state plus the forward's activations and at least the state plus
  every gradient; it grows with the batch; each remedy (bf16 adapters in bf16, the
  chunked loss, a fused optimizer) never raises it, and checkpointing raises it by
  no more than the layer inputs and position ids it keeps (tiny models); ``--gpu``'s
  largest batch fits and one more does not.
"""

from __future__ import annotations

import json
import statistics

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from llmmath import measured, presets
from llmmath.config import ModelConfig
from llmmath.counting import count_params
from llmmath.reports import train_memory_report
from llmmath.training import (
    _trainable_tensors,
    training_memory,
    training_peak,
)
from tests.test_training_memory import run_cli

CASES = measured.training_cases()


def case_id(c: dict) -> str:
    return (
        f"{c['model']}-{c['precision']}-{c['method']}-{c['checkpointing']}-"
        f"{c['batch']}x{c['seq_len']}"
    )


def cli_peak(case: dict) -> dict:
    """``train-memory --json`` for a measured case, as a reader would type it."""
    kw = measured.recipe_of(case)
    argv = ["train-memory", case["model"], "--precision", kw["precision"]]
    argv += ["--checkpointing", kw["checkpointing"], "--batch", str(kw["batch"])]
    argv += ["--seq-len", str(kw["seq_len"]), "--json"]
    if "method" in kw:
        argv += ["--method", "lora", "--lora-rank", str(kw["lora_rank"])]
        argv += ["--adapter-dtype", kw["adapter_dtype"]]
    status, out, err = run_cli(*argv)
    assert status == 0, err
    return json.loads(out)


def test_the_data_is_what_the_readme_says():
    data = measured.training_memory_h200()
    assert data["environment"]["name"] == "NVIDIA H200"
    assert len(CASES) == 23
    assert {c["model"] for c in CASES} == {
        "qwen2.5-0.5b",
        "llama-3.2-1b",
        "llama-3.2-3b",
        "llama-3-8b",
    }


@pytest.mark.parametrize("case", CASES, ids=case_id)
def test_peak_within_10_percent_of_the_h200(case):
    r = cli_peak(case)
    m = case["measured_bytes"]
    assert r["peak_bytes"] == pytest.approx(m["peak_of_second_step"], rel=0.10)
    assert r["trainable_params"] == case["trainable_params"]
    acts = r["items"]["activations"]
    measured_acts = m["activations_after_forward_with_logits_and_loss"]
    assert acts == pytest.approx(measured_acts, rel=0.02)


def test_median_error_under_2_percent():
    errors = [
        abs(cli_peak(c)["peak_bytes"] / c["measured_bytes"]["peak_of_second_step"] - 1)
        for c in CASES
    ]
    assert statistics.median(errors) < 0.02


@pytest.mark.parametrize("case", CASES, ids=case_id)
def test_state_exact(case):
    kw = measured.recipe_of(case)
    cfg = presets.load(case["model"])
    items = training_memory(cfg, **kw)
    m = case["measured_bytes"]
    assert items["gradients"] == m["gradients"]
    tensors = _trainable_tensors(
        cfg, kw.get("method", "full"), kw.get("lora_rank", 16), "q,k,v,o,gate,up,down"
    )
    steps = 4 * sum(n for _, n in tensors)  # torch's fp32 step scalar per tensor
    assert items["optimizer state"] + steps == m["optimizer_state"]
    assert 0 <= m["weights"] - items["weights"] < 8_300_000


def test_llama_3_2_1b_peak_by_hand():
    """Llama-3.2-1B, bf16, full fine-tuning, 2 × 2048: the peak is the loss's
    backward. Per token and layer transformers keeps: two RMSNorms, each its fp32
    input (4H), fp32 1/rms (4), normalized bf16 copy (2H) and bf16 output (2H);
    SDPA's Q (2·n_h·d), K and V at the KV heads' width (2·2·n_kv·d, enable_gqa), its
    output (2·n_h·d, also o_proj's input) and fp32 log-sum-exp (4·n_h); the SwiGLU's
    gate, SiLU and up outputs and their product (4 × 2I). Then the final norm (the
    same 8H + 4), the RoPE tables (2 × 2 × d per position: one (1, t, d) cos and
    sin, broadcast over the batch), the bf16 logits (2V),
    the fp32 log-softmax (4V) and, at that moment, two fp32 gradients (8V)."""
    cfg = presets.load("llama-3.2-1b")
    H, I, V, L = 2048, 8192, 128256, 16
    n_h, n_kv, d = 32, 8, 64
    assert (cfg.hidden_size, cfg.intermediate_size, cfg.vocab_size) == (H, I, V)
    tokens = 2 * 2048
    norm = 4 * H + 4 + 2 * H + 2 * H
    attention = 2 * n_h * d + 2 * 2 * n_kv * d + 2 * n_h * d + 4 * n_h
    layer = 2 * norm + attention + 4 * 2 * I
    N = count_params(cfg).total
    expected = (
        2 * N  # bf16 weights
        + 2 * 2 * N  # AdamW's two moments in bf16
        + tokens * (L * layer + norm)
        + 2048 * 2 * 2 * d  # RoPE's cos and sin, per position
        + tokens * V * (2 + 4 + 8)
    )
    peak = training_peak(cfg, batch=2, seq_len=2048)
    assert peak.moment == "backward: the loss"
    assert peak.peak_bytes == expected
    assert expected == pytest.approx(22_034_000_000, rel=0.01)  # the H200's peak


def small_configs():
    return st.builds(
        lambda h, heads, g, i, v, layers, tie: ModelConfig(
            vocab_size=v,
            hidden_size=h * heads,
            intermediate_size=i,
            num_hidden_layers=layers,
            num_attention_heads=heads * g,
            num_key_value_heads=heads,
            head_dim=h,
            tie_word_embeddings=tie,
        ),
        st.sampled_from([8, 16, 32]),
        st.integers(1, 4),
        st.sampled_from([1, 2, 4]),
        st.integers(8, 300),
        st.integers(16, 5000),
        st.integers(1, 6),
        st.booleans(),
    )


RECIPES = st.fixed_dictionaries(
    {
        "precision": st.sampled_from(["bf16", "amp", "mixed", "fp32"]),
        "seq_len": st.integers(1, 300),
        "batch": st.integers(1, 4),
    }
)
SETTINGS = settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)


@SETTINGS
@given(small_configs(), RECIPES, st.sampled_from(["full", "lora"]))
def test_peak_items_and_bounds(cfg, recipe, method):
    peak = training_peak(cfg, method=method, **recipe)
    assert sum(peak.items.values()) == peak.peak_bytes == max(peak.moments.values())
    rest = training_memory(cfg, method=method, **recipe)
    state = rest["weights"] + rest["optimizer state"]
    assert peak.peak_bytes >= state + rest["activations"]
    assert peak.peak_bytes >= state + rest["gradients"]


@SETTINGS
@given(small_configs(), RECIPES)
def test_peak_grows_with_the_batch_and_remedies_never_raise_it(cfg, recipe):
    def peak(**changes) -> int:
        return training_peak(cfg, **{**recipe, **changes}).peak_bytes

    base = peak()
    assert peak(batch=recipe["batch"] + 1) > base
    # checkpointing keeps each layer's input, which a layer without it need not keep
    # (the first layer's input is the embedding's output): at most L of them more
    tokens = recipe["batch"] * recipe["seq_len"]
    resid = 4 if recipe["precision"] in ("amp", "fp32") else 2
    inputs = cfg.num_hidden_layers * resid * tokens * cfg.hidden_size
    position_ids = 8 * recipe["seq_len"]  # int64 (1, t), kept by the checkpoints
    assert peak(checkpointing="full") <= base + inputs + position_ids
    assert peak(loss="chunked") <= base
    assert peak(optimizer_impl="fused") <= base
    if recipe["precision"] == "bf16":  # (mixed keeps an fp32 master of bf16 ones)
        fp32 = peak(method="lora", adapter_dtype="fp32")
        assert peak(method="lora", adapter_dtype="bf16") <= fp32


@pytest.mark.parametrize(
    "model, gpu", [("llama-3.2-1b", "H100-SXM5-80GB"), ("llama-3-8b", "A100-SXM4-80GB")]
)
def test_largest_batch_that_fits(model, gpu):
    from llmmath.gpus import GPUS

    cfg = presets.load(model)
    r = train_memory_report(model, cfg, method="lora", seq_len=2048, gpu=gpu)
    capacity = GPUS[gpu].memory
    b = r["max_batch"]
    assert r["gpu_bytes"] == capacity and b >= 1
    kw = dict(method="lora", seq_len=2048)
    assert training_peak(cfg, batch=b, **kw).peak_bytes <= capacity
    assert training_peak(cfg, batch=b + 1, **kw).peak_bytes > capacity
    assert r["fits"] == (r["peak_bytes"] <= capacity)


def test_a_model_too_big_for_the_gpu_has_no_batch():
    cfg = presets.load("llama-3-70b")
    r = train_memory_report("llama-3-70b", cfg, gpu="H100-SXM5-80GB")
    assert r["fits"] is False and r["max_batch"] == 0


def test_cli_text_shows_the_peak_and_the_fit():
    status, out, _ = run_cli(
        "train-memory", "llama-3.2-1b", "--batch", "2", "--seq-len", "2048",
        "--gpu", "H100-SXM5-80GB",
    )  # fmt: skip
    assert status == 0
    cfg = presets.load("llama-3.2-1b")
    peak = training_peak(cfg, batch=2, seq_len=2048)
    assert f"peak of a step ({peak.moment})" in out
    assert f"{peak.peak_bytes:,} bytes" in out
    assert "H100-SXM5-80GB" in out and "largest batch that fits" in out


def test_gemma_2_trains_with_eager_attention_by_default():
    cfg = presets.load("gemma-2-2b")
    r = train_memory_report("gemma-2-2b", cfg, seq_len=1024)
    assert r["attention"] == "eager"
    assert any("softmax" in k for k in r["activation_items"])
    status, _, err = run_cli("train-memory", "gemma-2-2b", "--attention", "sdpa")
    assert status == 2 and "attn_logit_softcapping" in err and err.count("\n") == 1

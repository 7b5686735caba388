"""Claims the chapters 1-6 make about the study notes, checked again here, computed
from the configs' fields rather than taken from the chapters."""

import ast
import subprocess
import sys
from fractions import Fraction
from pathlib import Path

import pytest

from llmmath import count_params, presets
from llmmath.flops import matmul_weights
from tests.notebook_outputs import glued

ROOT = Path(__file__).resolve().parents[1]


def test_ffn_does_not_import_config_at_module_level():
    """config imports ffn (MiniMind's sizing rule); ffn must not import config back."""
    tree = ast.parse((ROOT / "llmmath" / "ffn.py").read_text(encoding="utf-8"))
    top = [n for n in tree.body if isinstance(n, ast.Import | ast.ImportFrom)]
    modules = {n.module for n in top if isinstance(n, ast.ImportFrom)}
    assert "llmmath.config" not in modules
    code = "import llmmath.ffn, llmmath.config; print(llmmath.config.ModelConfig)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr


def test_note001_ffn_with_default_biases():
    """Ch. 4: note 001's nn.Linear layers keep bias=True: 3HI + 2I + H per layer."""
    torch = pytest.importorskip("torch")
    cfg = presets.load("llama-2-7b")
    H, I = cfg.hidden_size, cfg.intermediate_size
    with torch.device("meta"):
        layers = [
            torch.nn.Linear(H, I),
            torch.nn.Linear(H, I),
            torch.nn.Linear(I, H),
        ]
    numel = sum(p.numel() for layer in layers for p in layer.parameters())
    assert numel == 3 * H * I + 2 * I + H
    with_bias = count_params(cfg.replace(mlp_bias=True))
    per_layer = sum(t.numel for t in with_bias.tensors if t.group == "ffn")
    assert per_layer == numel
    plain = sum(t.numel for t in count_params(cfg).tensors if t.group == "ffn")
    assert numel - plain == 2 * I + H == 26_112


@pytest.mark.parametrize("name", ["llama-2-7b", "mistral-7b-v0.1", "llama-3.1-405b"])
def test_kv_dim_is_h_over_g(name):
    """Ch. 3: note 000's "H = kv_dim × num_kv_heads" counts the heads twice."""
    raw = presets.get(name).hf_config
    H, n_h = raw["hidden_size"], raw["num_attention_heads"]
    n_kv = raw.get("num_key_value_heads", n_h)
    d_h = raw.get("head_dim", H // n_h)
    kv_dim = n_kv * d_h
    assert H == n_h * d_h
    assert kv_dim * (n_h // n_kv) == H
    assert kv_dim * n_kv != H


def test_llama2_pie_shares_round_to_32_and_64():
    """Ch. 1: note 001's pie gives FFN 65 %; the exact share rounds to 64."""
    cfg = presets.load("llama-2-7b")
    L, H, I, V = (
        cfg.num_hidden_layers,
        cfg.hidden_size,
        cfg.intermediate_size,
        cfg.vocab_size,
    )
    total = 2 * V * H + L * (4 * H * H + 3 * H * I + 2 * H) + H
    assert total == count_params(cfg).total
    assert round(100 * L * 4 * H * H / total) == 32
    assert round(100 * L * 3 * H * I / total) == 64


def test_mixtral_flops_count_the_active_experts():
    """Ch. 2: a token of Mixtral-8x7B runs 2 of its 8 experts: about 25.5 GFLOP of
    matrix products, not the 93.14 of all experts."""
    raw = presets.get("mixtral-8x7b").hf_config
    H, I, L, V = (
        raw["hidden_size"],
        raw["intermediate_size"],
        raw["num_hidden_layers"],
        raw["vocab_size"],
    )
    n_h, n_kv, E, k = (
        raw["num_attention_heads"],
        raw["num_key_value_heads"],
        raw["num_local_experts"],
        raw["num_experts_per_tok"],
    )
    d_h = H // n_h
    attention = 2 * H * n_h * d_h + 2 * H * n_kv * d_h
    active = 2 * (L * (attention + E * H + k * 3 * H * I) + V * H)
    everything = 2 * (L * (attention + E * H + E * 3 * H * I) + V * H)
    assert active == 2 * sum(matmul_weights(presets.load("mixtral-8x7b")).values())
    assert f"{active / 1e9:.1f}" == "25.5"
    assert f"{everything / 1e9:.2f}" == "93.14"


def test_llama3_8b_uses_the_multiplier():
    """Ch. 4: not only the 70B models: Llama-3-8B's 14336 needs the 1.3 multiplier."""
    dim, multiple_of = 4096, 1024
    two_thirds = int(2 * 4 * dim / 3)
    with_mult = -(-int(1.3 * two_thirds) // multiple_of) * multiple_of
    without = -(-two_thirds // multiple_of) * multiple_of
    assert presets.load("llama-3-8b").intermediate_size == with_mult == 14336 != without


def test_llama2_7b_bare_two_thirds_is_under_one_percent_wide():
    """Ch. 4: Llama-2-7B takes int(2/3 of 4H) = 10922, rounds it up to 256: 11008,
    0.8 % above 8H/3 (the glued figures, recomputed)."""
    dim = 4096
    bare = int(2 * 4 * dim / 3)
    size = -(-bare // 256) * 256
    assert presets.load("llama-2-7b").intermediate_size == size
    shown = glued(ROOT / "chapters" / "04_ffn.ipynb")
    assert shown["meta_bare_7b"] == f"{bare} → {size}"
    assert shown["meta_bare_over"] == f"{size / (8 * dim / 3) - 1:.1%}"


def test_ffn_sizes_and_ratios_glued_in_chapter_4():
    """Ch. 4: MiniMind's rule at H = 512 and 768 (1408; 2048 = 32 blocks of 64, not
    note 003's 2112), the ratios M = I/H (43/16 = 2.6875 for Llama-2-7B and
    DeepSeek-LLM-7B, 37/7 for Qwen2.5-7B, ...), their plain ratios 1.5·M and the
    28,672 of Llama-2-70B (and Llama-3-70B): the glued figures, recomputed from the
    configs' fields and by hand."""
    shown = glued(ROOT / "chapters" / "04_ffn.ipynb")

    def minimind(h):  # int(8h/3) rounded up to a multiple of 64, by hand
        return -(-(8 * h // 3) // 64) * 64

    assert presets.load("minimind2-small").intermediate_size == minimind(512) == 1408
    assert 8 * 768 % 3 == 0 and 8 * 768 // 3 % 64 == 0  # rounding changes nothing
    assert shown["mm_512"] == str(minimind(512))
    assert shown["mm_768_exact"] == shown["mm_768"] == str(minimind(768)) != "2112"
    assert shown["mm_768_blocks"] == str(minimind(768) // 64)
    assert 2112 - minimind(768) == 64

    def ratio(name):
        cfg = presets.load(name)
        return Fraction(cfg.intermediate_size, cfg.hidden_size)

    def decimal(q, places):
        text = f"{float(q):.{places}f}"
        return text.rstrip("0").rstrip(".") if Fraction(text) == q else text

    exact = {  # glue name: (preset, the exact M)
        "m_l2_7b": ("llama-2-7b", Fraction(43, 16)),
        "m_l3_8b": ("llama-3-8b", Fraction(7, 2)),
        "m_l31_405b": ("llama-3.1-405b", Fraction(13, 4)),
        "m_l32_1b": ("llama-3.2-1b", 4),
        "m_qwen25_3b": ("qwen2.5-3b", Fraction(43, 8)),
        "m_qwen3_06b": ("qwen3-0.6b", 3),
        "m_gpt2": ("gpt2", 4),
    }
    for key, (name, m) in exact.items():
        assert ratio(name) == m
        assert Fraction(shown[key]) == m and shown[key] == decimal(m, 4)
    assert ratio("deepseek-llm-7b") == ratio("llama-2-7b")
    assert shown["m_l2_7b_frac"] == "43/16" and shown["m_l32_3b"] == "8/3"
    assert ratio("llama-3.2-3b") == Fraction(8, 3)
    for key, name, m in (
        ("m_qwen25_7b", "qwen2.5-7b", Fraction(37, 7)),
        ("m_qwen25_05b", "qwen2.5-0.5b", Fraction(38, 7)),
    ):
        assert ratio(name) == m
        assert shown[f"{key}_frac"] == f"{m.numerator}/{m.denominator}"
        assert shown[key] == f"{round(m.numerator / m.denominator, 4):.4f}"
    # a gated FFN's 3·H·I weights are a plain MLP's 2·H·I' at I' = 1.5·I
    plain_l3 = Fraction(3 * 14336, 2 * 4096)
    assert 3 * 4096 * 14336 == 2 * 4096 * (plain_l3 * 4096)
    assert shown["plain_l3_8b"] == decimal(plain_l3, 4) == "5.25"
    plain_l2 = Fraction(3, 2) * ratio("llama-2-7b")
    assert plain_l2 == Fraction(129, 32) and shown["plain_l2_7b"] == "4.031"
    assert 4 < plain_l2 < Fraction(404, 100)
    l70 = presets.load("llama-2-70b")  # the exercise's model; Llama-3-70B's I too
    assert l70.intermediate_size == presets.load("llama-3-70b").intermediate_size
    two_thirds = int(2 * 4 * 8192 / 3)  # params.json: dim 8192, x1.3, multiple of 4096
    assert l70.intermediate_size == -(-int(1.3 * two_thirds) // 4096) * 4096
    assert shown["ex_70_I"] == f"{l70.intermediate_size:,}" == "28,672"


def test_mistral_config_declares_more_than_it_trained():
    """Ch. 2: max_position_embeddings is what the config declares (32768 for
    Mistral-7B-v0.1), not the 8192 its paper trained at."""
    assert presets.load("mistral-7b-v0.1").max_position_embeddings == 32768 != 8192


def test_embedding_shares_and_pairs_glued_in_chapter_2():
    """Ch. 2: Llama-2-7B's embedding V·H is 1.9 % of an even 7·10^9 as well as (to one
    decimal) of its exact N, as note 001 rounds it; note 001's sinusoidal table of
    d = 4096 columns has d/2 = 2,048 (sine, cosine) pairs: the glued figures,
    recomputed from the config's fields and by hand."""
    shown = glued(ROOT / "chapters" / "02_embeddings.ipynb")
    cfg = presets.load("llama-2-7b")
    emb = cfg.vocab_size * cfg.hidden_size
    assert emb == 32000 * 4096 == 131_072_000
    assert shown["l2_emb_share_7e9"] == f"{emb / 7e9:.1%}" == "1.9%"
    assert f"{emb / count_params(cfg).total:.1%}" == shown["l2_emb_share_7e9"]
    d = 4096  # note 001: sinusoidal_position_encoding(512, 4096)
    assert shown["ex_pairs"] == f"{d // 2:,}" == "2,048"


# --- chapter 9: the peak of a real training step (issue 31) ---------------------------

CH9 = ROOT / "chapters" / "09_memory.ipynb"
H200 = ROOT / "llmmath" / "measured" / "training-memory-h200.json"


def _hf(name: str) -> dict:
    """A preset's config.json fields, as a reader would read them."""
    return presets.get(name).hf_config


def _report(name: str, **kw) -> dict:
    """What ``python -m llmmath train-memory NAME ... --json`` prints."""
    from llmmath.reports import train_memory_report

    return train_memory_report(name, presets.load(name), **kw)


def _recipe(case: dict) -> dict:
    """A measured case's recipe as train-memory's options, read from the data file."""
    kw = {k: case[k] for k in ("precision", "checkpointing", "batch", "seq_len")}
    if case["method"] != "full":  # lora_r16_fp32_adapters
        _, rank, dtype, _ = case["method"].split("_")
        kw.update(method="lora", lora_rank=int(rank[1:]), adapter_dtype=dtype)
    return kw


def _gb(x, digits=2) -> str:
    return f"{x / 1e9:,.{digits}f} GB"


def _paper_layer_per_token(c: dict) -> int:
    """Korthikanti et al.'s count of a Llama layer with flash attention, per token:
    four H-wide norm inputs and outputs, Q and K, V twice (QKᵀ's K and AV's V), the
    output projection's input, the log-sum-exp, four I-wide FFN tensors."""
    H, I, a = c["hidden_size"], c["intermediate_size"], c["num_attention_heads"]
    d = c.get("head_dim", H // a)
    q, kv = a * d, c["num_key_value_heads"] * d
    return 2 * 4 * H + 2 * (q + kv) + 2 * kv + 2 * q + 4 * a + 2 * 4 * I


def test_chapter9_measured_peaks_and_their_provenance():
    """Ch. 9: the H200 data's provenance, the largest and median error of the
    predicted peaks (train-memory's peak_bytes against the file's measured peaks), the
    parts at rest against the peak, the state's exactness and the weights' slack."""
    import json

    shown = glued(CH9)
    data = json.loads(H200.read_text(encoding="utf-8"))
    env, cases = data["environment"], data["cases"]
    for key in ("name", "driver", "torch", "transformers", "peft"):
        assert shown[f"gpu_{key}"] == env[key]
    assert shown["gpu_date"] == data["measured_on"]
    assert shown["gpu_cases"] == str(len(cases)) == "23"
    assert shown["gpu_models"] == str(len({c["model"] for c in cases})) == "4"
    errors, rest, slack = [], [], []
    for case in cases:
        r = _report(case["model"], **_recipe(case))
        got = case["measured_bytes"]
        errors.append(abs(r["peak_bytes"] / got["peak_of_second_step"] - 1))
        rest.append(r["total_bytes"] / got["peak_of_second_step"])
        assert r["items"]["gradients"] == got["gradients"]
        slack.append(got["weights"] - r["items"]["weights"])
    errors.sort()
    assert max(errors) < 0.10
    assert shown["peak_worst"] == f"{errors[-1]:.1%}"
    assert shown["peak_median"] == f"{errors[len(errors) // 2]:.1%}"
    assert shown["peak_bar"] == "10%"
    assert (
        shown["rest_lo"] == f"{min(rest):.2f}"
        and shown["rest_hi"] == f"{max(rest):.2f}"
    )
    assert min(rest) < 1 < max(rest)  # too low for some, too high for others
    assert min(slack) >= 0 and shown["weights_slack_MB"] == f"{max(slack) / 1e6:.1f} MB"


def test_chapter9_logits_norms_amp_and_lora_by_hand():
    """Ch. 9: 14 bytes per logit at the loss's backward pass (2 bf16 + 4 fp32
    log-softmax + 8 for two fp32 gradients), Llama-3.2-1B's 16 layers by hand, its
    norms' 8H + 4 bytes per token against the paper's 4H, AMP's per-Linear copies and
    weight copies, peft's fp32 adapters (measured), the 3B step's optimizer
    temporaries: the glued figures, from the configs and the data file."""
    import json

    shown = glued(CH9)
    c = _hf("llama-3.2-1b")
    H, I, V, L = (c[k] for k in ("hidden_size", "intermediate_size", "vocab_size",
                                 "num_hidden_layers"))  # fmt: skip
    a, n_kv = c["num_attention_heads"], c["num_key_value_heads"]
    d = c.get("head_dim", H // a)
    q, kv = a * d, n_kv * d
    assert V == _hf("llama-3-8b")["vocab_size"] and shown["l3_vocab"] == f"{V:,}"
    tokens = 2 * 2048
    assert shown["l1_shape"] == "2 × 2,048"
    held = 14 * tokens * V
    assert shown["l1_held_GB"] == _gb(held)
    assert shown["l3_held_GB"] == _gb(14 * 8192 * V, 1)
    paper = _paper_layer_per_token(c)
    bf16_layer = paper + 2 * (4 * H + 4)  # two RMSNorms: fp32 input, 1/rms, copy
    assert shown["l1_layers_GB"] == _gb(L * tokens * bf16_layer)
    assert L * tokens * bf16_layer < held  # the loss's tensors outweigh the layers
    peak = _report("llama-3.2-1b", batch=2, seq_len=2048)["peak_bytes"]
    assert shown["l1_held_share"] == f"{held / peak:.0%}"
    assert shown["norm_extra"] == f"{2 * (4 * H + 4):,}"
    assert shown["norm_layer_ratio"] == f"{bf16_layer / paper:.2f}"
    assert shown["norm_extra_GB"] == _gb(L * tokens * 2 * (4 * H + 4))
    # AMP: fp32 norm copies, a bf16 copy per Linear (q, k, v: three; gate, up: two),
    # and a bf16 copy of every weight of the layers and of the LM head
    linear = H * (2 * q + 2 * kv + 3 * I)
    amp_token = 2 * (4 * H + 4 + 4 * H) + 3 * 2 * H + 2 * 2 * H
    amp_token += 4 * q + 4 * kv + 4 * a + 2 * 4 * I
    amp_layers = L * (tokens * amp_token + 2 * linear)
    assert shown["amp_layers_ratio"] == f"{amp_layers / (L * tokens * bf16_layer):.2f}"
    assert shown["amp_copies_GB"] == _gb(2 * (L * linear + V * H))
    data = json.loads(H200.read_text(encoding="utf-8"))["cases"]

    def case(model, **kw):
        (one,) = [x for x in data if x["model"] == model and _recipe(x) == kw]
        return one["measured_bytes"]

    step = dict(checkpointing="none", batch=2, seq_len=2048)
    amp = case("llama-3.2-1b", precision="amp", **step)["peak_of_second_step"]
    bf16 = case("llama-3.2-1b", precision="bf16", **step)["peak_of_second_step"]
    assert shown["amp_measured_GB"] == _gb(amp) and shown["bf16_measured_GB"] == _gb(
        bf16
    )
    mixed = _report("llama-3.2-1b", precision="mixed", **step)["peak_bytes"]
    assert shown["mixed_peak_GB"] == _gb(mixed) and bf16 < mixed < amp
    lora = dict(method="lora", lora_rank=16)
    full3 = case("llama-3.2-3b", precision="bf16", **step)
    fp32 = case("llama-3.2-3b", precision="bf16", **step, **lora, adapter_dtype="fp32")
    bf16a = case("llama-3.2-3b", precision="bf16", **step, **lora, adapter_dtype="bf16")
    acts = "activations_after_forward_with_logits_and_loss"
    ratio = fp32[acts] / full3[acts]
    assert shown["lora_act_ratio_measured"] == f"{ratio:.2f}" and ratio > 1
    saves = fp32["peak_of_second_step"] - bf16a["peak_of_second_step"]
    assert shown["lora_bf16_saves_GB"] == _gb(saves)
    pred = [
        _report("llama-3.2-3b", **step, **lora, adapter_dtype=x)
        for x in ("fp32", "bf16")
    ]
    assert shown["lora_bf16_saves_pred_GB"] == _gb(
        pred[0]["peak_bytes"] - pred[1]["peak_bytes"]
    )
    full_acts = _report("llama-3.2-3b", **step)["items"]["activations"]
    lora_acts = pred[0]["items"]["activations"]
    assert shown["lora_act_ratio"] == f"{lora_acts / full_acts:.2f}"
    c3 = _hf("llama-3.2-3b")
    assert c3["tie_word_embeddings"]  # the embedding is the one largest tensor
    assert shown["ck3_temp_GB"] == _gb(2 * 2 * c3["vocab_size"] * c3["hidden_size"])
    ck3 = _report("llama-3.2-3b", checkpointing="full", batch=2, seq_len=2048)
    assert ck3["peak_moment"] == "optimizer step"
    assert shown["ck3_opt_GB"] == _gb(ck3["peak_bytes"])


def test_chapter9_checkpointing_counted_one_way():
    """Ch. 9: full checkpointing is the layer inputs kept and one layer rebuilt,
    everywhere: Llama-3-8B's column at 8192 tokens (the paper's count, by hand), and
    the exercise's peaks as train-memory prints them (4 × 8192, mixed precision)."""
    shown = glued(CH9)
    c = _hf("llama-3-8b")
    H, L, V = c["hidden_size"], c["num_hidden_layers"], c["vocab_size"]
    t = 8192
    ckpt = L * 2 * t * H + t * _paper_layer_per_token(c)
    assert shown["act_8192_ckpt_GB"] == _gb(ckpt)
    kw = dict(precision="mixed", batch=4, seq_len=t)
    assert shown["exck_batch"] == "4" and shown["exck_seq"] == "8,192"
    none = _report("llama-3-8b", **kw)
    full = _report("llama-3-8b", checkpointing="full", **kw)
    chunked = _report("llama-3-8b", checkpointing="full", loss="chunked", **kw)
    assert shown["exck_none_GB"] == _gb(none["peak_bytes"], 1)
    assert shown["exck_full_GB"] == _gb(full["peak_bytes"], 1)
    assert shown["exck_chunk_GB"] == _gb(chunked["peak_bytes"], 1)
    inputs = L * 2 * 4 * t * H  # the layer inputs (and a few MB the layers share)
    kept = full["peak_items"]["activations of the layers"]
    assert 0 <= kept - inputs < 10**7
    assert shown["exck_layers_full_GB"] == _gb(kept, 1) == _gb(inputs, 1)
    loss = 14 * 4 * t * V
    assert shown["exck_loss_GB"] == _gb(loss, 1)
    assert shown["exck_loss_share"] == f"{loss / full['peak_bytes']:.0%}"
    layers = none["peak_items"]["activations of the layers"]
    assert shown["exck_layers_none_GB"] == _gb(layers, 1)


def test_chapter9_options_and_remedies():
    """Ch. 9: the options table's at-rest total and peaks (Llama-2-7B, 4096 tokens),
    8-bit Adam's blocks (2,048 in the paper, 256 in bitsandbytes since 0.44.0), what
    each remedy saves on the measured steps, the largest batches on an H100 and an
    RTX 4090, and the micro-batch's bound (every bf16 gradient, 2N bytes)."""
    import json

    from llmmath.training import ADAM8BIT_BLOCK

    shown = glued(CH9)
    assert shown["paper_block"] == "2,048" and ADAM8BIT_BLOCK == 256
    assert shown["adam8bit_block"] == "256" and shown["train_seq"] == "4,096"
    full = _report("llama-2-7b", precision="mixed", seq_len=4096)
    qlora = _report(
        "llama-2-7b", precision="mixed", checkpointing="full", seq_len=4096,
        method="qlora", lora_rank=64,
    )  # fmt: skip
    assert shown["qlora_rank"] == "64"
    assert shown["train_full_GB"] == _gb(full["total_bytes"], 1)
    assert shown["train_full_peak_GB"] == _gb(full["peak_bytes"], 1)
    assert full["peak_bytes"] < full["total_bytes"]
    assert shown["train_qlora_peak_GB"] == _gb(qlora["peak_bytes"], 1)
    assert shown["train_ratio"] == f"{full['peak_bytes'] / qlora['peak_bytes']:.0f}"
    lora8 = dict(method="lora", batch=1, seq_len=4096)
    before = _report("llama-3-8b", **lora8)["peak_bytes"]
    assert shown["rem_before_GB"] == _gb(before)
    for key, change in (
        ("chunked", dict(loss="chunked")),
        ("bf16", dict(adapter_dtype="bf16")),
        ("ckpt", dict(checkpointing="full")),
    ):
        after = _report("llama-3-8b", **lora8, **change)["peak_bytes"]
        assert 0 < before - after and shown[f"rem_{key}_GB"] == _gb(before - after)
    three = dict(loss="chunked", adapter_dtype="bf16", checkpointing="full")
    assert shown["rem_all_GB"] == _gb(
        _report("llama-3-8b", **lora8, **three)["peak_bytes"]
    )
    data = json.loads(H200.read_text(encoding="utf-8"))["cases"]
    (ckpt,) = [
        x for x in data
        if x["model"] == "llama-3-8b" and x["checkpointing"] == "full"
    ]  # fmt: skip
    got = ckpt["measured_bytes"]["peak_of_second_step"]
    assert shown["rem_ckpt_measured_GB"] == _gb(got)
    h100 = dict(seq_len=4096, method="lora", gpu="H100-SXM5-80GB")
    assert shown["fit_default"] == str(_report("llama-3-8b", **h100)["max_batch"])
    assert shown["fit_remedied"] == str(
        _report("llama-3-8b", **h100, **three)["max_batch"]
    )
    ck3 = dict(checkpointing="full", batch=2, seq_len=2048)
    loop = _report("llama-3.2-3b", **ck3)["peak_bytes"]
    fused = _report("llama-3.2-3b", **ck3, optimizer_impl="fused")["peak_bytes"]
    foreach = _report("llama-3.2-3b", **ck3, optimizer_impl="foreach")["peak_bytes"]
    assert shown["rem_fused_GB"] == _gb(loop - fused) and fused < loop < foreach
    assert shown["rem_foreach_GB"] == _gb(foreach - loop)
    n1 = count_params(presets.load("llama-3.2-1b")).total
    two = _report("llama-3.2-1b", batch=2, seq_len=2048)["peak_bytes"]
    one = _report("llama-3.2-1b", batch=1, seq_len=2048)["peak_bytes"]
    assert shown["rem_micro_GB"] == _gb(two - (one + 2 * n1)) and two > one + 2 * n1
    rtx = dict(method="lora", lora_rank=16, seq_len=2048, gpu="RTX-4090-24GB")
    assert shown["exf_rank"] == "16" and shown["exf_seq"] == "2,048"
    assert shown["exf_gpu_GB"] == "24 GB"
    assert shown["exf_default"] == str(_report("llama-3.2-3b", **rtx)["max_batch"])
    assert shown["exf_remedied"] == str(
        _report("llama-3.2-3b", **rtx, **three)["max_batch"]
    )

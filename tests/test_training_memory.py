"""`llmmath.training` against torch on tiny models of every supported type (issue 25).

Optimizer state: the bytes in ``optimizer.state`` after one step of torch.optim.AdamW,
SGD(momentum=0.9) and Adafactor, in fp32 and in bf16; torch's per-tensor ``step``
scalars (4 bytes each, AdamW and Adafactor), which the formula leaves out, are
asserted as the exact difference. 8-bit Adam: bitsandbytes' optimizers need a GPU, so
its layout arithmetic is checked against its documented block size and threshold, and
the bytes against ``optimizer.state`` of torchao's block-wise AdamW8bit (same layout,
which runs on the CPU) on every supported type, with its two differences asserted.
Activations are checked against what autograd saves in transformers' own modules
(the ones readers train) in tests/test_activations.py and
tests/test_activations_moe.py, and the peak against an H200 in
tests/test_training_peak.py (issue 31).
LoRA: adapters built with plain torch (no peft), their count and Adam state. QLoRA's
4-bit base: `nf4_bytes` against the tensors of torchao's NF4Tensor, differences stated.
"""

from __future__ import annotations

import math
import warnings

import pytest
import torch
from torch import nn

from llmmath.activations import ATTENTIONS, LOSSES
from llmmath.config import SUPPORTED_MODEL_TYPES, ConfigError, ModelConfig
from llmmath.modules import build_model
from llmmath.training import (
    LORA_TARGETS,
    lora_params,
    nf4_bytes,
    optimizer_state_bytes,
    training_memory,
    training_peak,
)
from tests.test_modern_architectures import TINY_CONFIGS, tiny

GPT2 = {"model_type": "gpt2", "vocab_size": 50, "n_embd": 16, "n_layer": 2}
RAW = {
    m: TINY_CONFIGS.get(m)
    or ({**GPT2, "n_head": 4, "n_positions": 32} if m == "gpt2" else tiny(m))
    for m in SUPPORTED_MODEL_TYPES
}
B, T = 2, 5


def config(model_type: str) -> ModelConfig:
    return ModelConfig.from_hf_config(RAW[model_type])


def one_step(model: nn.Module, opt: torch.optim.Optimizer, cfg: ModelConfig) -> None:
    """One step. A routed expert that no token chose has no gradient, and torch skips
    it until one does: it gets a zero gradient here, as over a run every expert
    does (only experts may lack one). DeepSeek-V3's router score bias never has one:
    it is set by a rule, not by gradient (DeepSeek-V3 report, Sec. 2.1.2)."""
    ids = torch.randint(0, cfg.vocab_size, (B, T), generator=torch.Generator())
    model(ids).float().square().mean().backward()
    for name, p in model.named_parameters():
        if p.requires_grad and p.grad is None and "e_score_correction" not in name:
            assert ".experts." in name, name
            p.grad = torch.zeros_like(p)
    opt.step()


def state_bytes(opt: torch.optim.Optimizer) -> tuple[int, int]:
    """(bytes of every state tensor but ``step``, bytes of the ``step`` tensors)."""
    kept = steps = 0
    for state in opt.state.values():
        for key, t in state.items():
            n = t.numel() * t.element_size()
            if key == "step":
                steps += n
            else:
                kept += n
    return kept, steps


OPTIMIZERS = {
    "adamw": lambda p: torch.optim.AdamW(p),
    "sgd": lambda p: torch.optim.SGD(p, lr=0.01, momentum=0.9),
    "adafactor": lambda p: torch.optim.Adafactor(p),
}


@pytest.mark.parametrize("precision", ["fp32", "bf16"])
@pytest.mark.parametrize("model_type", SUPPORTED_MODEL_TYPES)
def test_optimizer_state_equals_torchs(model_type, precision):
    cfg = config(model_type)
    dtype = torch.float32 if precision == "fp32" else torch.bfloat16
    for name, make in OPTIMIZERS.items():
        model = build_model(cfg, device="cpu", dtype=dtype)
        opt = make(list(model.parameters()))
        params = [p for n, p in model.named_parameters() if "e_score" not in n]
        one_step(model, opt, cfg)
        kept, steps = state_bytes(opt)
        predicted = optimizer_state_bytes(cfg, name, precision)
        assert sum(predicted.values()) == kept, (name, predicted, kept)
        # independent of the formula: moments are the parameters' own size
        numel, size = sum(p.numel() for p in params), dtype.itemsize
        if name == "adamw":
            assert kept == 2 * size * numel
        if name == "sgd":
            assert kept == size * numel
        if name == "adafactor":  # matrices: rows + columns; vectors: full
            assert kept == size * sum(
                p.shape[0] + p.shape[1] if p.dim() == 2 else p.numel() for p in params
            )
            assert kept < size * numel
        # what the formula leaves out: torch's fp32 step scalar per tensor
        assert steps == (0 if name == "sgd" else 4 * len(params))


def test_mixed_precision_is_zeros_16_bytes_per_parameter():
    cfg = config("llama")
    n = sum(p.numel() for p in build_model(cfg).parameters())
    items = training_memory(cfg, "adamw", "mixed", seq_len=8)
    assert items["weights"] + items["gradients"] + items["optimizer state"] == 16 * n
    master = optimizer_state_bytes(cfg, "adamw", "mixed")["master weights (fp32)"]
    assert master == 4 * n
    fp32 = training_memory(cfg, "adamw", "fp32", seq_len=8)
    assert fp32["weights"] + fp32["gradients"] + fp32["optimizer state"] == 16 * n
    bf16 = training_memory(cfg, "adamw", "bf16", seq_len=8)
    assert bf16["weights"] + bf16["gradients"] + bf16["optimizer state"] == 8 * n


def test_adam8bit_layout_arithmetic():
    """bitsandbytes' Optimizer2State.init_state: uint8 state1 and state2, one fp32
    absmax each per 256-element block; tensors under min_8bit_size = 4096 elements
    keep fp32 state (not run: bitsandbytes is not installed)."""
    cfg = ModelConfig.from_hf_config(
        tiny("llama", hidden_size=64, intermediate_size=100, vocab_size=300)
    )
    items = optimizer_state_bytes(cfg, "adam8bit", "bf16")
    shapes = [p.shape for p in build_model(cfg).parameters()]
    big = [math.prod(s) for s in shapes if math.prod(s) >= 4096]
    small = sum(math.prod(s) for s in shapes if math.prod(s) < 4096)
    assert big and small  # both paths taken: 300 x 64 embedding, 6 x 64 k_proj
    assert items["8-bit moments (uint8)"] == 2 * sum(big)
    assert items["block absmax (fp32)"] == 8 * sum((n + 255) // 256 for n in big)
    assert items["moments of small tensors (fp32)"] == 8 * small
    # about 2 bytes + 2·4/256 per element on large tensors, a quarter of fp32 AdamW
    assert 2 * sum(big) < items["8-bit moments (uint8)"] + items["block absmax (fp32)"]
    assert items["block absmax (fp32)"] <= 8 * sum(big) / 256 + 8 * len(big)


def test_nf4_statistics_are_0127_bits_per_weight():
    """Dettmers et al. 2023, Sec. 3: double quantization brings the constants to
    8/64 + 32/(64·256) = 0.127 bits per parameter."""
    n = 64 * 256 * 1000
    assert nf4_bytes(n) == n // 2 + n // 64 + 4 * n // (64 * 256) + 4
    bits = 8 * nf4_bytes(n) / n - 4
    assert bits == pytest.approx(8 / 64 + 32 / (64 * 256), abs=1e-5)
    assert nf4_bytes(65) == 33 + 2 + 4 + 4  # 2 blocks, one second-level block


class LoRALinear(nn.Module):
    """W x + B A x with W frozen: A (r, in), B (out, r), as in Hu et al. 2021."""

    def __init__(self, base: nn.Linear, rank: int):
        super().__init__()
        self.base = base.requires_grad_(False)
        self.A = nn.Parameter(torch.randn(rank, base.in_features) * 0.01)
        self.B = nn.Parameter(torch.zeros(base.out_features, rank))

    def forward(self, x):
        return self.base(x) + x @ self.A.T @ self.B.T

    @property
    def weight(self):  # the merged W + BA, for code that reads the matrix (MLA)
        return self.base.weight + self.B @ self.A


def add_lora(model: nn.Module, modules: set[str], rank: int) -> None:
    model.requires_grad_(False)
    for parent in list(model.modules()):
        for name, child in list(parent.named_children()):
            if isinstance(child, nn.Linear) and name in modules:
                setattr(parent, name, LoRALinear(child, rank))


@pytest.mark.parametrize("model_type", SUPPORTED_MODEL_TYPES)
@pytest.mark.parametrize("targets", ["q,k,v,o,gate,up,down", "q,v", "down"])
def test_lora_trainable_parameters_and_adam_state(model_type, targets):
    cfg, rank = config(model_type), 3
    model = build_model(cfg, device="cpu")
    modules = {m for t in targets.split(",") for m in LORA_TARGETS[t]}
    add_lora(model, modules, rank)
    trainable = [p for p in model.parameters() if p.requires_grad]
    opt = torch.optim.AdamW(trainable)
    one_step(model, opt, cfg)
    n = sum(p.numel() for p in trainable)
    assert lora_params(cfg, rank, targets) == n > 0
    kept, steps = state_bytes(opt)
    assert (
        sum(optimizer_state_bytes(cfg, "adamw", "fp32", "lora", rank, targets).values())
        == kept
        == 8 * n
    )
    items = training_memory(cfg, "adamw", "fp32", "full", B, T, "lora", rank, targets)
    assert items["gradients"] == 4 * n == sum(p.grad.numel() * 4 for p in trainable)
    base = sum(p.numel() for p in model.parameters() if not p.requires_grad)
    assert items["weights"] == 4 * base + 4 * n  # fp32 base (fp32 model), adapters


def test_lora_by_hand():
    cfg = config("llama")  # H 16, n_h·d_h 24, n_kv·d_h 12, I 24, L 4
    per_layer = 2 * (16 + 24) + 2 * (16 + 12) * 2 + 2 * (24 + 16)
    per_layer += 2 * (16 + 24) * 3  # gate, up, down
    assert lora_params(cfg, 2, "q,k,v,o,gate,up,down") == 4 * per_layer
    assert lora_params(cfg, 2, "q,v") == 4 * 2 * (16 + 24 + 16 + 12)


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"optimizer": "adam"}, "optimizer must be one of"),
        ({"precision": "fp16"}, "precision must be one of"),
        ({"checkpointing": "some"}, "checkpointing must be one of"),
        ({"method": "lora", "targets": "q,x"}, "a LoRA target must be one of"),
        ({"method": "lora", "targets": "q,q"}, "each be given once"),
        ({"method": "lora", "lora_rank": 0}, "lora_rank"),
        ({"seq_len": 0}, "seq_len"),
    ],
)
def test_bad_options_are_one_line_errors(kwargs, message):
    with pytest.raises(ConfigError, match=message):
        training_memory(config("llama"), **kwargs)


def run_cli(*argv: str) -> tuple[int, str, str]:
    import contextlib
    import io

    from llmmath.cli import main

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        status = main(list(argv))
    return status, out.getvalue(), err.getvalue()


def test_cli_train_memory_json_is_the_functions_answer():
    import json

    from llmmath import presets

    status, out, _ = run_cli(
        "train-memory", "llama-3-8b", "--method", "qlora", "--lora-rank", "64",
        "--lora-targets", "q,v", "--optimizer", "adam8bit", "--json",
    )  # fmt: skip
    assert status == 0
    r = json.loads(out)
    cfg = presets.load("llama-3-8b")
    expected = training_memory(cfg, "adam8bit", "bf16", "none", 1, 4096, "qlora", 64,
                               "q,v")  # fmt: skip
    assert r["items"] == expected and r["total_bytes"] == sum(expected.values())
    peak = training_peak(cfg, "adam8bit", "bf16", "none", 1, 4096, "qlora", 64, "q,v")
    assert r["peak_bytes"] == peak.peak_bytes == sum(r["peak_items"].values())
    assert r["peak_moment"] == peak.moment and r["adapter_dtype"] == "fp32"
    # by hand: 32 layers x 64 x ((4096 + 4096) + (4096 + 1024)) adapters
    assert r["trainable_params"] == 32 * 64 * (8192 + 5120) == 27_262_976


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--lora-rank", "8"], "--lora-rank, --lora-targets and --adapter-dtype"),
        (
            ["--adapter-dtype", "bf16"],
            "--lora-rank, --lora-targets and --adapter-dtype",
        ),
        (["--gpu", "h1000"], "--gpu: must be a GPU of the catalogue"),
        (["--loss", "fused"], "invalid choice"),
        (["--method", "lora", "--lora-targets", "q,q"], "each be given once"),
        (["--method", "qlora", "--lora-targets", ""], "a LoRA target must be one of"),
        (["--optimizer", "sgd", "--optimizer", "sgd"], "given twice"),
        (["--precision", "fp16"], "invalid choice"),
        (["--batch", "0"], "positive integer"),
    ],
)
def test_cli_train_memory_bad_options(argv, message):
    status, out, err = run_cli("train-memory", "gpt2", *argv)
    assert status == 2 and out == "" and message in err and err.count("\n") == 1


def test_cli_choices_are_the_modules():
    from llmmath import training
    from llmmath.reports import ALL_TARGETS, CHOICES

    assert CHOICES["--optimizer"][0] == training.OPTIMIZERS
    assert CHOICES["--precision"][0] == tuple(training.PRECISIONS)
    assert CHOICES["--checkpointing"][0] == training.CHECKPOINTING
    assert CHOICES["--method"][0] == training.METHODS
    assert CHOICES["--adapter-dtype"][0] == training.ADAPTER_DTYPES
    assert CHOICES["--optimizer-impl"][0] == training.OPTIMIZER_IMPLS
    assert CHOICES["--attention"][0] == ATTENTIONS
    assert CHOICES["--loss"][0] == LOSSES
    assert ALL_TARGETS == ",".join(training.LORA_TARGETS)


def _adam8bit():
    """torchao's block-wise 8-bit AdamW, which runs on the CPU (bitsandbytes' needs
    a GPU): the same layout as bitsandbytes' Adam8bit, uint8 codes with one fp32
    absmax per block of 256 elements, and fp32 state for tensors under 4096
    elements."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from torchao.optim import AdamW8bit
    return AdamW8bit


@pytest.mark.parametrize("model_type", SUPPORTED_MODEL_TYPES)
def test_adam8bit_state_equals_a_block_wise_8bit_adam(model_type, monkeypatch):
    """The bytes of `optimizer_state_bytes(..., "adam8bit")` against the tensors in
    ``optimizer.state`` after one step of torchao's AdamW8bit on every supported
    type, with the two differences of that implementation stated and asserted:
    it keeps fp32 moments for a tensor whose size is not a multiple of the block
    (bitsandbytes quantizes it with a short last block), and a 256-entry fp32
    quantization map per moment tensor (bitsandbytes shares two for the model)."""
    from llmmath.training import ADAM8BIT_BLOCK, ADAM8BIT_MIN_SIZE

    # large enough for both paths: a 512 x 16 embedding of 32 whole blocks, and an
    # FFN of 264 x 16 = 4224 elements, 16.5 blocks (where the type has one)
    raw = {**RAW[model_type], "vocab_size": 512}
    if raw.get("intermediate_size"):
        raw["intermediate_size"] = 264
    cfg = ModelConfig.from_hf_config(raw)
    model = build_model(cfg, device="cpu", dtype=torch.float32)
    params = [p for n, p in model.named_parameters() if "e_score" not in n]
    opt = _adam8bit()(params)
    # torchao compiles its step with torch.compile: eager here, the same arithmetic,
    # without 20 s of compiling on a CPU
    monkeypatch.setattr(torch, "compile", lambda fn, **options: fn)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        one_step(model, opt, cfg)
    codes = scales = maps = full = 0
    for state in opt.state.values():
        for key in ("exp_avg", "exp_avg_sq"):
            t = state[key]
            if hasattr(t, "codes"):
                assert t.codes.dtype == torch.uint8 and t.scale.dtype == torch.float32
                codes += t.codes.numel()
                scales += 4 * t.scale.numel()
                maps += 4 * t.qmap.numel()
            else:
                assert t.dtype == torch.float32
                full += 4 * t.numel()
    predicted = optimizer_state_bytes(cfg, "adam8bit", "fp32")
    # tensors both quantize: exactly the prediction's uint8 codes and fp32 absmaxes
    ragged = [
        p.numel()
        for p in params
        if p.numel() >= ADAM8BIT_MIN_SIZE and p.numel() % ADAM8BIT_BLOCK
    ]
    assert codes == predicted["8-bit moments (uint8)"] - 2 * sum(ragged)
    assert scales == predicted["block absmax (fp32)"] - 8 * sum(
        -(-n // ADAM8BIT_BLOCK) for n in ragged
    )
    assert full == predicted["moments of small tensors (fp32)"] + 8 * sum(ragged)
    quantized = [
        p.numel()
        for p in params
        if p.numel() >= ADAM8BIT_MIN_SIZE and not p.numel() % ADAM8BIT_BLOCK
    ]
    assert quantized, "no tensor took the 8-bit path"
    assert maps == 2 * 4 * 256 * len(quantized)


@pytest.mark.parametrize("shape", [(256, 512), (1024, 1024), (64, 4096), (4096, 96)])
def test_nf4_bytes_equal_a_real_nf4_tensor(shape):
    """`nf4_bytes` (QLoRA's base weights) against the tensors of torchao's NF4Tensor
    (QLoRA's layout: 4-bit codes two to a byte, an int8 absmax per block of 64, one
    scale per 256 blocks and their mean), built on the CPU. Its stated differences:
    the scales and their mean are bf16 (bitsandbytes keeps fp32), and each tensor
    carries its own 16-entry code table (bitsandbytes shares one)."""
    from llmmath.training import NF4_ABSMAX_BLOCK, NF4_BLOCK

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from torchao.quantization.quantize_.workflows.nf4.nf4_tensor import to_nf4
    weight = torch.randn(shape, dtype=torch.bfloat16, generator=torch.Generator())
    nf4 = to_nf4(weight, NF4_BLOCK, NF4_ABSMAX_BLOCK)
    n, blocks = weight.numel(), weight.numel() // NF4_BLOCK
    assert nf4.quantized_data.numel() * nf4.quantized_data.element_size() == n // 2
    assert nf4.quantized_scalers.dtype == torch.int8
    assert nf4.quantized_scalers.numel() == blocks
    assert nf4.quantization_factor.numel() == -(-blocks // NF4_ABSMAX_BLOCK)
    real = sum(
        t.numel() * t.element_size()
        for t in (
            nf4.quantized_data,
            nf4.quantized_scalers,
            nf4.quantization_factor,
            nf4.scaler_mean,
            nf4.nf4,
        )
    )
    bf16_instead_of_fp32 = 2 * (nf4.quantization_factor.numel() + 1)
    own_code_table = 16 * 2
    assert real == nf4_bytes(n) - bf16_instead_of_fp32 + own_code_table

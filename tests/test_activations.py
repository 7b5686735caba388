"""What transformers' own modules keep for the backward pass, and the peak of a
training step, against `llmmath.activations` and `llmmath.training.training_peak`:
the no-GPU oracle for the dense model types (issue 31).

**Saved tensors.** Every dense type that transformers implements (llama, mistral,
qwen2, qwen3, gemma, gemma2, gemma3_text, phi3, olmo2, gpt2) is built tiny with random
weights on the CPU (``AutoConfig.for_model``, ``AutoModelForCausalLM.from_config``
with SDPA; Gemma 2 with eager attention, which its soft-capping needs) and runs one
training forward pass (``labels=input_ids``, ``use_cache`` off) under
``torch.autograd.graph.saved_tensors_hooks``. The hook counts each storage once (by
its ``data_ptr``), parameters and buffers left out; forward pre/post hooks attribute
it to the module that saved it first: a decoder layer, the rotary embedding's tables
(``shared``) or the rest (embedding, final norm, LM head, loss). Each layer's bytes
and the tables equal `saved_activations`' exactly; the rest equals its head and
logits, less the logits that the output holds (kept, not saved), plus a remainder
computed here: the int64 token ids the embedding keeps (8·b·t, and GPT-2's position
ids, 8·t; none when the embedding is frozen), the shifted int64 labels (8·b·t,
``ForCausalLMLoss``'s ``labels[..., 1:].contiguous()``) and ``nll_loss``'s fp32
``total_weight`` (4 bytes). MiniMind is not a transformers model (its code ships with
its checkpoint) and has no oracle here; the mixtures of experts and MLA are in
``tests/test_activations_moe.py``.

Recipes, for every type: bf16 full fine-tuning; AMP (``torch.autocast("cpu",
dtype=torch.bfloat16)`` over fp32 weights); LoRA by peft (r = 4 on q, k, v, o, gate,
up, down as `llmmath.training.LORA_TARGETS` names them; ``autocast_adapter_dtype=
True``, peft's default, keeps the adapters in fp32); full checkpointing
(``gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant":
False})``). Where their code paths differ (`SOME`): bf16 adapters
(``autocast_adapter_dtype=False``), eager attention, checkpointing with LoRA
(``enable_input_require_grads()``). Inside a checkpointed layer torch's own hooks
replace ours, so there the test reads what the forward pass leaves alive with
``MemTracker``: its activations equal `saved_activations(..., "full")`'s total plus
the labels, ``total_weight``, the loss (4 bytes) and GPT-2's position ids.

**The CPU is not the GPU.** llmmath models CUDA; where the CPU differs, the test
computes the difference exactly (`cpu_minus_cuda`):

- *Autocast's op lists.* CUDA runs ``pow`` (GPT-2's ``gelu_new``) in fp32, the CPU in
  bf16: ``gelu_new`` keeps 16 bytes per element of I on a GPU under AMP, 10 on the
  CPU. Every other op these models run under autocast is on the same list on both
  devices (matmuls, ``linear`` and SDPA in bf16; the loss in fp32; the norms and the
  softmax cast explicitly); GPT-2's eager softmax, fp32 on CUDA only, is not run
  under AMP here.
- *Dropout* (GPT-2 only, ``resid_pdrop = embd_pdrop = attn_pdrop = 0.1``): CUDA's
  ``native_dropout`` keeps a bool mask, the CPU a noise tensor of the input's dtype.
  SDPA with dropout falls back to the math kernel on the CPU (a GPU's flash kernel
  keeps a Philox seed), so the SDPA recipes run GPT-2 with ``attn_pdrop = 0``.
- *LayerNorm* (GPT-2) keeps its mean and 1/std in fp32 on CUDA, in bf16 on the CPU
  when input and weight are bf16.

Not checked: GPT-2 with LoRA (LORA_TARGETS names none of its Conv1D modules);
eager attention under AMP; SDPA with GPT-2's attention dropout.

**The peak.** For four types (plain, Gemma's norms, Phi-3's fused projections,
OLMo 2's post-norms) the test replays ``measure_training_memory.py`` on the CPU with
``MemTracker``: two steps of ``torch.optim.AdamW(foreach=False)``,
``zero_grad(set_to_none=step == 0)``, the peak over the second; `training_peak`'s
``peak_bytes`` must be within 10 % of it, for full fine-tuning in bf16, LoRA with fp32
adapters and full checkpointing, at V = 2048 and H = 64 (V/H = 32, the loss's moment
is the peak); and at V = 32, where the final norm's or a layer's backward is.
"""

from __future__ import annotations

import re
from contextlib import nullcontext

import pytest

from llmmath import ModelConfig
from llmmath.activations import Recipe, saved_activations
from llmmath.config import SUPPORTED_MODEL_TYPES
from llmmath.training import LORA_TARGETS, lora_targets, training_peak

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")
peft = pytest.importorskip("peft")
#: transformers 5.23 renames gradient checkpointing "activation checkpointing"
pytestmark = pytest.mark.filterwarnings("ignore:.*is deprecated:FutureWarning")

B, T = 2, 6
SIZES = {
    "vocab_size": 96,
    "hidden_size": 32,
    "intermediate_size": 48,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "head_dim": 8,
}
#: The dense types; sliding windows of 3 < T tokens, so SDPA gets a mask there.
CONFIGS = {
    "llama": {},
    "mistral": {"sliding_window": 3},
    "qwen2": {},
    "qwen3": {},
    "gemma": {},
    "gemma2": {"sliding_window": 3},
    "gemma3_text": {"sliding_window": 3, "sliding_window_pattern": 2},
    "phi3": {"pad_token_id": 0},  # Phi3Config's 32000 is outside a tiny vocabulary
    "olmo2": {},
}
GPT2 = {"model_type": "gpt2", "vocab_size": 96, "n_embd": 32, "n_layer": 2}
GPT2 |= {"n_head": 4, "n_positions": 16}  # n_inner: 4·H; dropout 0.1 (GPT2Config's)
#: Mixtures of experts and MLA: tests/test_activations_moe.py
SPARSE = ("mixtral", "qwen3_moe", "deepseek_v2", "deepseek_v3")
RECIPES = ("bf16", "amp", "lora-fp32", "lora-bf16", "eager")
LORA = frozenset(
    m for t in lora_targets("q,k,v,o,gate,up,down") for m in LORA_TARGETS[t]
)


def raw_config(model_type: str, **changes) -> dict:
    if model_type == "gpt2":
        return {**GPT2, **changes}
    return {"model_type": model_type, **SIZES, **CONFIGS[model_type], **changes}


def test_every_dense_type_has_an_oracle():
    assert {*CONFIGS, "gpt2", *SPARSE, "minimind"} == set(SUPPORTED_MODEL_TYPES)


def attention_of(model_type: str, recipe: str) -> str:
    return "eager" if recipe == "eager" or model_type == "gemma2" else "sdpa"


def recipe_of(name: str, attention: str, precision: str = "bf16") -> Recipe:
    if name.startswith("lora"):
        return Recipe("bf16", "lora", 4, LORA, name[5:], attention)
    return Recipe(precision, attention=attention)


def hf_model(raw: dict, dtype, attention: str, recipe: str = "bf16"):
    """transformers' causal LM for ``raw``, random weights of ``dtype``, in training
    mode; wrapped by peft for a LoRA recipe."""
    raw = dict(raw)
    config = transformers.AutoConfig.for_model(raw.pop("model_type"), **raw)
    torch.manual_seed(0)
    model = transformers.AutoModelForCausalLM.from_config(
        config, attn_implementation=attention, dtype=dtype
    )
    model.config.use_cache = False
    if recipe.startswith("lora"):
        names = {n.rsplit(".", 1)[-1] for n, _ in model.named_modules()}
        lora = peft.LoraConfig(
            r=4, lora_alpha=8, lora_dropout=0.0, target_modules=sorted(LORA & names)
        )
        model = peft.get_peft_model(
            model, lora, autocast_adapter_dtype=recipe == "lora-fp32"
        )
    return model.train()


LAYER = re.compile(r"\.(?:layers|h)\.(\d+)(?:\.|$)")


def saved_by_part(model, ids, amp: bool = False) -> dict[str, int]:
    """Bytes of the unique storages autograd saves in one training forward pass, by
    part: ``"layer i"``, ``"tables"`` (the rotary embedding's outputs) and
    ``"rest"``; parameters and buffers left out."""
    state = {t.untyped_storage().data_ptr() for t in model.parameters()}
    state |= {t.untyped_storage().data_ptr() for t in model.buffers()}
    stack, tables, hooks, seen = ["model"], set(), [], {}

    def enter(module, *args):
        stack.append(module.oracle_name)

    def leave(module, *args):
        stack.pop()

    def rope(module, args, out):
        tables.update(t.untyped_storage().data_ptr() for t in out)

    for name, module in model.named_modules():
        module.oracle_name = name
        hooks += [module.register_forward_pre_hook(enter)]
        hooks += [module.register_forward_hook(leave)]
        if name.endswith("rotary_emb"):
            hooks += [module.register_forward_hook(rope)]

    def pack(t):
        storage = t.untyped_storage()
        ptr = storage.data_ptr()
        if ptr and ptr not in state and ptr not in seen:
            seen[ptr] = (stack[-1], storage.nbytes())
        return t

    autocast = torch.autocast("cpu", dtype=torch.bfloat16) if amp else nullcontext()
    try:
        with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t), autocast:
            model(input_ids=ids, labels=ids)
    finally:
        for hook in hooks:
            hook.remove()
    parts: dict[str, int] = {}
    for ptr, (module, nbytes) in seen.items():
        layer = LAYER.search(module)
        part = "tables" if ptr in tables else f"layer {layer[1]}" if layer else "rest"
        parts[part] = parts.get(part, 0) + nbytes
    return parts


def cpu_minus_cuda(cfg: ModelConfig, recipe: Recipe, attn_pdrop: float):
    """(per layer, rest): what the CPU keeps beyond what CUDA keeps, which llmmath
    models (see the module's docstring). Zero for every type but GPT-2."""
    if cfg.model_type != "gpt2":
        return 0, 0
    tokens, H, I = B * T, cfg.hidden_size, cfg.intermediate_size
    a = cfg.num_attention_heads
    amp = recipe.precision == "amp"
    resid = 4 if amp else 2
    # the noise of resid_dropout and of the MLP's dropout (their inputs are bf16 c_proj
    # outputs, under autocast too) against bool masks; the embedding's in resid
    layer = 2 * tokens * H * (2 - 1)
    rest = tokens * H * (resid - 1)
    if not amp:  # LayerNorm's mean and 1/std: bf16 on the CPU, fp32 on CUDA
        layer -= 2 * 2 * tokens * (4 - 2)
        rest -= 2 * tokens * (4 - 2)
    if amp:  # gelu_new: pow in bf16 on the CPU (10 bytes per element, 16 on CUDA)
        layer -= (16 - 10) * tokens * I
    if recipe.attention == "eager":  # attention dropout: noise, or none at all
        probs = tokens * a * T
        layer += probs * (2 - 1) if attn_pdrop else -probs * (1 + 2)
    return layer, rest


def remainder(cfg: ModelConfig, recipe: Recipe) -> int:
    """What the rest keeps beyond llmmath's head and logits: the int64 ids the
    embedding keeps (GPT-2: and its position ids) when it trains, the shifted int64
    labels and nll_loss's fp32 total_weight."""
    ids = 8 * B * T if not recipe.lora else 0
    if cfg.model_type == "gpt2":
        ids += 8 * T
    return ids + 8 * B * T + 4


#: Each type in bf16, under AMP and with fp32 LoRA adapters; bf16 adapters and eager
#: attention where their code differs: plain, Gemma's and OLMo 2's norms, Phi-3's
#: fused projections; eager's masks and GPT-2's own eager attention (Gemma 2 runs
#: eager in every recipe)
SOME = {
    "lora-bf16": ("llama", "gemma", "phi3", "olmo2"),
    "eager": ("llama", "gemma3_text", "phi3", "gpt2"),
}


def cases():
    for model_type in (*CONFIGS, "gpt2"):
        for recipe in RECIPES:
            if model_type == "gpt2" and recipe.startswith("lora"):
                continue  # LORA_TARGETS names none of GPT-2's Conv1D modules
            if model_type in SOME.get(recipe, (model_type,)):
                yield model_type, recipe


@pytest.mark.parametrize("model_type, recipe_name", list(cases()))
def test_saved_tensors_equal_transformers(model_type, recipe_name):
    amp = recipe_name == "amp"
    attention = attention_of(model_type, recipe_name)
    # SDPA with dropout runs PyTorch's math kernel on the CPU, not a GPU's flash
    attn_pdrop = 0.1 if attention == "eager" else 0.0
    raw = raw_config(
        model_type, **({"attn_pdrop": attn_pdrop} if model_type == "gpt2" else {})
    )
    cfg = ModelConfig.from_hf_config(raw)
    recipe = recipe_of(recipe_name, attention, "amp" if amp else "bf16")
    model = hf_model(
        raw, torch.float32 if amp else torch.bfloat16, attention, recipe_name
    )
    ids = torch.randint(0, cfg.vocab_size, (B, T), generator=torch.Generator())
    parts = saved_by_part(model, ids, amp)
    saved = saved_activations(cfg, B, T, recipe)
    on_layer, on_rest = cpu_minus_cuda(cfg, recipe, attn_pdrop)
    for i, layer in enumerate(saved.layers):
        assert parts[f"layer {i}"] == sum(layer.values()) + on_layer, (i, layer)
    shared = dict(saved.shared)
    assert parts.get("tables", 0) == shared.pop("RoPE cos and sin tables", 0)
    held = saved.logits["logits (held by the model's output)"]
    rest = sum(shared.values()) + sum(saved.head.values()) + sum(saved.logits.values())
    assert parts["rest"] == rest - held + remainder(cfg, recipe) + on_rest


class _Placeholder:
    def remove(self):
        pass


def mem_tracker(model):
    """torch's MemTracker on the CPU. It registers a gradient hook on every parameter
    it meets, which torch refuses for a frozen one (LoRA's base): a placeholder
    handle marks those as done."""
    from torch.distributed._tools.mem_tracker import MemTracker

    tracker = MemTracker()
    for w in model.parameters():
        if not w.requires_grad:
            tracker._param_to_grad_hook_handles[w] = (_Placeholder(), _Placeholder())
    return tracker


def activations_of(snapshot) -> int:
    (act,) = [v for k, v in snapshot.items() if str(k).endswith("ACT")]
    return act


@pytest.mark.parametrize(
    "model_type, recipe_name",
    [(m, "bf16") for m in (*CONFIGS, "gpt2")]
    + [(m, "lora-fp32") for m in ("llama", "gemma2", "phi3")],
)
def test_full_checkpointing_keeps_the_layers_inputs(model_type, recipe_name):
    attention = attention_of(model_type, recipe_name)
    raw = raw_config(
        model_type, **({"attn_pdrop": 0.0} if model_type == "gpt2" else {})
    )
    cfg = ModelConfig.from_hf_config(raw)
    model = hf_model(raw, torch.bfloat16, attention, recipe_name)
    model.gradient_checkpointing_enable(
        gradient_checkpointing_kwargs={"use_reentrant": False}
    )
    if recipe_name != "bf16":
        model.enable_input_require_grads()
    ids = torch.randint(0, cfg.vocab_size, (B, T), generator=torch.Generator())
    tracker = mem_tracker(model)
    tracker.track_external(model, ids)
    with tracker:
        out = model(input_ids=ids, labels=ids)
        kept = activations_of(tracker.get_tracker_snapshot()[torch.device("cpu")])
    del out
    recipe = recipe_of(recipe_name, attention)
    saved = saved_activations(cfg, B, T, recipe, "full")
    _, on_rest = cpu_minus_cuda(cfg, recipe, 0.0)
    # the int64 ids are the caller's; GPT2Model makes its position ids (8·t)
    made = 8 * T if model_type == "gpt2" else 0
    assert kept == saved.total + 8 * B * T + 4 + 4 + made + on_rest


#: (type, vocabulary, tokens per sequence): V/H = 32, where the loss's moment is the
#: peak, and V = 32, where the final norm's or a layer's backward is
PEAK_CASES = [(m, 2048, 32) for m in ("llama", "gemma", "phi3", "olmo2")]
SMALL_VOCAB = [
    ("llama", "full"),
    ("llama", "checkpointing"),
    ("olmo2", "checkpointing"),
]


def measured_peak(raw: dict, recipe: str, seq_len: int) -> int:
    """The CPU's replay of measure_training_memory.py: two steps of AdamW
    (``foreach=False``), ``zero_grad(set_to_none=step == 0)``; the peak of what
    MemTracker sees over the second (the first only creates the optimizer state)."""
    lora = "lora-fp32" if recipe == "lora" else "bf16"
    model = hf_model(raw, torch.bfloat16, "sdpa", lora)
    if recipe == "checkpointing":
        model.gradient_checkpointing_enable(
            gradient_checkpointing_kwargs={"use_reentrant": False}
        )
    params = [w for w in model.parameters() if w.requires_grad]
    opt = torch.optim.AdamW(params, lr=1e-5, foreach=False)
    size = (2, seq_len)
    ids = torch.randint(0, raw["vocab_size"], size, generator=torch.Generator())

    def step(n: int) -> None:
        out = model(input_ids=ids, labels=ids)
        out.loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=n == 0)

    step(0)
    tracker = mem_tracker(model)
    tracker.track_external(model, opt, ids)
    with tracker:
        step(1)
    return tracker.get_tracker_snapshot("peak")[torch.device("cpu")]["Total"]


def peak_cases():
    for model_type, vocab, seq_len in PEAK_CASES:
        for recipe in ("full", "lora", "checkpointing"):
            yield model_type, vocab, seq_len, recipe
    for model_type, recipe in SMALL_VOCAB:
        yield model_type, 32, 64, recipe


@pytest.mark.parametrize("model_type, vocab, seq_len, recipe", list(peak_cases()))
def test_training_peak_within_10_percent_of_memtracker(
    model_type, vocab, seq_len, recipe
):
    sizes = {"vocab_size": vocab, "hidden_size": 64, "intermediate_size": 128}
    raw = raw_config(model_type, **sizes, head_dim=16, eos_token_id=0)
    cfg = ModelConfig.from_hf_config(raw)
    measured = measured_peak(raw, recipe, seq_len)
    peak = training_peak(
        cfg,
        checkpointing="full" if recipe == "checkpointing" else "none",
        batch=2,
        seq_len=seq_len,
        method="lora" if recipe == "lora" else "full",
        lora_rank=4,
    )
    assert peak.peak_bytes == pytest.approx(measured, rel=0.10), peak.moment
    if vocab < cfg.hidden_size:  # the final norm's or a layer's moment
        assert "loss" not in peak.moment, peak.moment

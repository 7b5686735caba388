"""Measure one training recipe's GPU memory the way the figures in
llmmath/measured/training-memory-h200.json were measured (needs a CUDA GPU, torch,
transformers, peft and llmmath). Prints one JSON object. Not run by the tests (no GPU
there): it is the procedure behind the data, kept with it.

    python measure_training_memory.py llama-3.2-1b --precision bf16 \
        --checkpointing none --batch 2 --seq-len 2048 [--lora 16 [--bf16-adapters]]

Procedure: the preset's config.json -> AutoConfig -> AutoModelForCausalLM.from_config
with attn_implementation="sdpa", built on the GPU with random weights in bf16
(precision bf16) or fp32 (precision amp: torch.autocast(bfloat16) around the forward);
use_cache off; labels = input_ids (transformers' own causal-LM loss);
torch.optim.AdamW(foreach=False, lr=1e-5); LoRA: peft LoraConfig(r, alpha 2r, dropout
0, targets q,k,v,o,gate,up,down projections), get_peft_model(...,
autocast_adapter_dtype=not --bf16-adapters) (peft's default keeps adapters in fp32);
checkpointing full: gradient_checkpointing_enable(use_reentrant=False). Two steps;
between them zero_grad(set_to_none=True). The peak is torch.cuda.max_memory_allocated()
over the second step (reset just before its forward).
"""

import argparse
import json
import os

import torch
from transformers import AutoConfig, AutoModelForCausalLM

from llmmath import presets

p = argparse.ArgumentParser()
p.add_argument("preset")
p.add_argument("--precision", choices=["bf16", "amp"], default="bf16")
p.add_argument("--checkpointing", choices=["none", "full"], default="none")
p.add_argument("--batch", type=int, default=2)
p.add_argument("--seq-len", type=int, default=2048)
p.add_argument("--lora", type=int, default=0)
p.add_argument("--bf16-adapters", action="store_true")
a = p.parse_args()

raw = json.load(
    open(os.path.join(os.path.dirname(presets.__file__), a.preset + ".json"))
)
d = dict(raw["config"])
model_type = d.pop("model_type")
for k in ("architectures", "transformers_version", "torch_dtype"):
    d.pop(k, None)
cfg = AutoConfig.for_model(model_type, **d)

alloc = torch.cuda.memory_allocated
base = alloc()
torch.set_default_dtype(torch.float32 if a.precision == "amp" else torch.bfloat16)
with torch.device("cuda"):
    model = AutoModelForCausalLM.from_config(cfg, attn_implementation="sdpa")
torch.set_default_dtype(torch.float32)
model.config.use_cache = False
if a.lora:
    from peft import LoraConfig, get_peft_model

    for w in model.parameters():
        w.requires_grad_(False)
    targets = [
        "q_proj",
        "k_proj",
        "v_proj",
        "o_proj",
        "gate_proj",
        "up_proj",
        "down_proj",
    ]
    lora = LoraConfig(
        r=a.lora, lora_alpha=2 * a.lora, lora_dropout=0.0, target_modules=targets
    )
    model = get_peft_model(model, lora, autocast_adapter_dtype=not a.bf16_adapters)
if a.checkpointing == "full":
    model.gradient_checkpointing_enable(
        gradient_checkpointing_kwargs={"use_reentrant": False}
    )
    if a.lora:
        model.enable_input_require_grads()
model.train()
weights = alloc() - base
params = [w for w in model.parameters() if w.requires_grad]
opt = torch.optim.AdamW(params, lr=1e-5, foreach=False)
ids = torch.randint(0, cfg.vocab_size, (a.batch, a.seq_len), device="cuda")
inner = model.get_base_model() if a.lora else model
seen = {}
inner.model.norm.register_forward_hook(
    lambda *_: seen.__setitem__("last_norm", alloc())
)
for step in range(2):
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    before = alloc()
    with torch.autocast("cuda", dtype=torch.bfloat16, enabled=a.precision == "amp"):
        out = model(input_ids=ids, labels=ids)
    after_forward = alloc()
    out.loss.backward()
    opt.step()
    opt.zero_grad(set_to_none=step == 0)
    torch.cuda.synchronize()
    peak = torch.cuda.max_memory_allocated()
    del out
grads = sum(
    w.grad.numel() * w.grad.element_size() for w in params if w.grad is not None
)
state = sum(
    v.numel() * v.element_size()
    for s in opt.state.values()
    for v in s.values()
    if torch.is_tensor(v)
)
print(
    json.dumps(
        {
            "weights": weights,
            "gradients": grads,
            "optimizer_state": state,
            "activations_when_last_norm_ran": seen["last_norm"] - before,
            "activations_after_forward_with_logits_and_loss": after_forward - before,
            "peak_of_second_step": peak,
        },
        indent=1,
    )
)

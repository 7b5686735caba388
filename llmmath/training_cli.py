"""The ``train-memory`` command (registered by `llmmath.cli.build_parser` through
`add_commands`).

``python -m llmmath train-memory MODEL [--optimizer adamw|adam8bit|adafactor|sgd]
[--precision fp32|mixed|bf16] [--checkpointing none|selective|full] [--attention
flash|eager] [--method full|lora|qlora] [--lora-rank R] [--lora-targets q,k,v,o,...]
[--batch B] [--seq-len T] [--json]``: one training step's memory by item
(`llmmath.training.training_memory`). Bad arguments exit 2 with one line on stderr.
"""

from __future__ import annotations

import argparse
import json

from llmmath.config import ConfigError, ModelConfig
from llmmath.units import human_bytes

ALL_TARGETS = "q,k,v,o,gate,up,down"
#: The options' choices and defaults, `llmmath.training`'s (a test checks they agree),
#: spelled here so that building the parser imports no counting code.
CHOICES = {
    "--optimizer": (("adamw", "adam8bit", "adafactor", "sgd"), "adamw"),
    "--precision": (("fp32", "mixed", "bf16"), "mixed"),
    "--checkpointing": (("none", "selective", "full"), "none"),
    "--attention": (("flash", "eager"), "flash"),
    "--method": (("full", "lora", "qlora"), "full"),
}


def train_memory_report(
    name: str,
    cfg: ModelConfig,
    optimizer: str = "adamw",
    precision: str = "mixed",
    checkpointing: str = "none",
    attention: str = "flash",
    method: str = "full",
    lora_rank: int | None = None,
    lora_targets: str | None = None,
    batch: int = 1,
    seq_len: int = 4096,
) -> dict:
    """What ``train-memory --json`` prints: ``"items"`` (weights, gradients, optimizer
    state, activations; exact int bytes), ``"total_bytes"``, the optimizer's and the
    activations' own items, and ``"trainable_params"``.

    Raises:
        ConfigError: an unknown option, a LoRA option without ``method`` lora or
        qlora, or a size that is not a positive integer.
    """
    from llmmath import training

    if method == "full" and (lora_rank is not None or lora_targets is not None):
        raise ConfigError("--lora-rank and --lora-targets apply to --method lora/qlora")
    if attention not in ("flash", "eager"):
        raise ConfigError(f"attention must be flash or eager; got {attention!r}")
    rank = 16 if lora_rank is None else lora_rank
    targets = ALL_TARGETS if lora_targets is None else lora_targets
    flash = attention == "flash"
    items = training.training_memory(
        cfg, optimizer, precision, checkpointing, batch, seq_len, method, rank,
        targets, flash,
    )  # fmt: skip
    state = training.optimizer_state_bytes(
        cfg, optimizer, precision, method, rank, targets
    )
    acts = training.activation_bytes(
        cfg, seq_len, batch, checkpointing, precision, flash
    )
    lora = method != "full"
    return {
        "model": name,
        "optimizer": optimizer,
        "precision": precision,
        "checkpointing": checkpointing,
        "attention": attention,
        "method": method,
        "lora_rank": rank if lora else None,
        "lora_targets": targets if lora else None,
        "batch": batch,
        "seq_len": seq_len,
        "trainable_params": training.lora_params(cfg, rank, targets)
        if lora
        else training.trainable_params(cfg),
        "items": items,
        "total_bytes": sum(items.values()),
        "optimizer_items": state,
        "activation_items": acts,
        "left_out": "the LM head's logits and loss, temporary buffers, the CUDA "
        "context and allocator fragmentation",
    }


def _train_memory(args: argparse.Namespace) -> int:
    from llmmath.reports import resolve

    name, cfg = resolve(args.model, args.revision)
    r = train_memory_report(
        name,
        cfg,
        args.optimizer,
        args.precision,
        args.checkpointing,
        args.attention,
        args.method,
        args.lora_rank,
        args.lora_targets,
        args.batch,
        args.seq_len,
    )
    if args.json:
        print(json.dumps(r, indent=2))
        return 0
    lora = f", rank {r['lora_rank']} on {r['lora_targets']}" if r["lora_rank"] else ""
    lines = [
        f"{name}: {r['method']}{lora}, {r['optimizer']}, {r['precision']}, "
        f"checkpointing {r['checkpointing']}, {r['batch']:,} x {r['seq_len']:,} "
        f"tokens; {r['trainable_params']:,} trainable parameters"
    ]
    lines += [f"  {k:<18}{v:>22,} bytes" for k, v in r["items"].items()]
    total = r["total_bytes"]
    lines.append(f"  {'total':<18}{total:>22,} bytes = {human_bytes(total)}")
    print("\n".join(lines))
    return 0


def add_commands(sub, command, count, once=None) -> None:
    """Add ``train-memory`` to the subparsers ``sub`` of `llmmath.cli.build_parser`;
    ``command`` adds a MODEL command, ``count`` is the CLI's positive-integer type and
    ``once`` its refuse-twice action."""
    opt = {"action": once} if once else {}
    t = command(
        "train-memory",
        _train_memory,
        "training memory: optimizer, precision, checkpointing, LoRA/QLoRA",
        "Bytes of weights, gradients, optimizer state and activations of one "
        "training step (llmmath.training).",
    )
    for flag, (allowed, default) in CHOICES.items():
        t.add_argument(
            flag, choices=allowed, default=default, help=f"default {default}", **opt
        )
    t.add_argument("--lora-rank", type=count, help="LoRA rank (default 16)", **opt)
    t.add_argument(
        "--lora-targets", help=f"comma-separated (default {ALL_TARGETS})", **opt
    )
    t.add_argument("--batch", type=count, default=1, help="sequences (1)", **opt)
    t.add_argument(
        "--seq-len", type=count, default=4096, help="tokens per sequence (4096)", **opt
    )

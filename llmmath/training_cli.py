"""The ``train-memory`` command (registered by `llmmath.cli.build_parser` through
`add_commands`).

``python -m llmmath train-memory MODEL [--optimizer adamw|adam8bit|adafactor|sgd]
[--optimizer-impl for-loop|foreach|fused] [--precision bf16|amp|mixed|fp32]
[--checkpointing none|selective|full] [--attention sdpa|eager] [--method
full|lora|qlora] [--lora-rank R] [--lora-targets q,k,v,o,...] [--adapter-dtype
fp32|bf16] [--loss full|chunked] [--batch B] [--seq-len T] [--gpu NAME] [--json]``:
the peak of one training step (`llmmath.training.training_peak`), item by item at
its moment, and the parts at rest (`llmmath.training.training_memory`); with
``--gpu``, whether the peak fits and the largest batch that does. Bad arguments exit
2 with one line on stderr.
"""

from __future__ import annotations

import argparse
import json

from llmmath.config import ConfigError, ModelConfig
from llmmath.messages import gettext as _
from llmmath.messages import ljust, translated
from llmmath.units import human_bytes

ALL_TARGETS = "q,k,v,o,gate,up,down"
#: The options' choices and defaults, `llmmath.training`'s (a test checks they agree),
#: spelled here so that building the parser imports no counting code.
CHOICES = {
    "--optimizer": (("adamw", "adam8bit", "adafactor", "sgd"), "adamw"),
    "--optimizer-impl": (("for-loop", "foreach", "fused"), "for-loop"),
    "--precision": (("bf16", "amp", "mixed", "fp32"), "bf16"),
    "--checkpointing": (("none", "selective", "full"), "none"),
    "--attention": (("sdpa", "eager"), "sdpa"),
    "--method": (("full", "lora", "qlora"), "full"),
    "--adapter-dtype": (("fp32", "bf16"), "fp32"),
    "--loss": (("full", "chunked"), "full"),
}
#: The largest batch `train_memory_report` looks for with ``gpu``.
MAX_BATCH = 1 << 20


def train_memory_report(
    name: str,
    cfg: ModelConfig,
    optimizer: str = "adamw",
    precision: str = "bf16",
    checkpointing: str = "none",
    attention: str | None = None,
    method: str = "full",
    lora_rank: int | None = None,
    lora_targets: str | None = None,
    batch: int = 1,
    seq_len: int = 4096,
    adapter_dtype: str | None = None,
    loss: str = "full",
    optimizer_impl: str = "for-loop",
    gpu: str | None = None,
) -> dict:
    """What ``train-memory --json`` prints: ``"peak_bytes"`` (the peak of
    ``torch.cuda.max_memory_allocated()`` over one step), ``"peak_moment"`` and
    ``"peak_items"`` (the bytes held then, by item), ``"items"`` (weights,
    gradients, optimizer state, activations at rest; exact int bytes) with their
    ``"total_bytes"``, the optimizer's and the activations' own items, and
    ``"trainable_params"``. With ``gpu`` (a name `llmmath.gpus.match_gpu` reads):
    ``"gpu"`` (its catalogue name; ``"gpu_note"`` when the family rule picked it),
    ``"gpu_bytes"``, ``"fits"`` (peak ≤ the GPU's memory) and
    ``"max_batch"``, the largest batch whose peak fits (0 if none).

    Raises:
        ConfigError: an unknown option or GPU, a LoRA option without ``method`` lora
        or qlora, or a size that is not a positive integer.
    """
    from llmmath import training
    from llmmath.activations import default_attention

    if attention is None:
        attention = default_attention(cfg)
    if method == "full" and (
        lora_rank is not None or lora_targets is not None or adapter_dtype is not None
    ):
        raise ConfigError(
            _(
                "--lora-rank, --lora-targets and --adapter-dtype apply to --method "
                "lora/qlora"
            )
        )
    rank = 16 if lora_rank is None else lora_rank
    targets = ALL_TARGETS if lora_targets is None else lora_targets
    adapters = "fp32" if adapter_dtype is None else adapter_dtype

    def peak(b: int) -> training.TrainingPeak:
        return training.training_peak(
            cfg, optimizer, precision, checkpointing, b, seq_len, method, rank,
            targets, attention, adapters, loss, optimizer_impl,
        )  # fmt: skip

    top = peak(batch)
    items = training.training_memory(
        cfg, optimizer, precision, checkpointing, batch, seq_len, method, rank,
        targets, attention, adapters, loss,
    )  # fmt: skip
    state = training.optimizer_state_bytes(
        cfg, optimizer, precision, method, rank, targets, adapters
    )
    acts = training.activation_bytes(
        cfg, seq_len, batch, checkpointing, precision, attention, method, rank,
        targets, adapters, loss,
    )  # fmt: skip
    lora = method != "full"
    report = {
        "model": name,
        "optimizer": optimizer,
        "optimizer_impl": optimizer_impl,
        "precision": precision,
        "checkpointing": checkpointing,
        "attention": attention,
        "method": method,
        "lora_rank": rank if lora else None,
        "lora_targets": targets if lora else None,
        "adapter_dtype": adapters if lora else None,
        "loss": loss,
        "batch": batch,
        "seq_len": seq_len,
        "trainable_params": training.lora_params(cfg, rank, targets)
        if lora
        else training.trainable_params(cfg),
        "peak_bytes": top.peak_bytes,
        "peak_moment": top.moment,
        "peak_items": top.items,
        "items": items,
        "total_bytes": sum(items.values()),
        "optimizer_items": state,
        "activation_items": acts,
        "left_out": "the CUDA context, cuBLAS workspaces and allocator "
        "fragmentation (not in torch.cuda.max_memory_allocated)",
    }
    if gpu is not None:
        from llmmath.gpus import match_gpu

        card, note = match_gpu(gpu)
        capacity = card.memory
        report.update(
            gpu=card.name,
            **({"gpu_note": note} if note else {}),
            gpu_bytes=capacity,
            fits=top.peak_bytes <= capacity,
            max_batch=_largest_batch(lambda b: peak(b).peak_bytes <= capacity),
        )
    return report


def _largest_batch(fits) -> int:
    """The largest b ≤ `MAX_BATCH` with ``fits(b)`` (the peak grows with b), else 0."""
    if not fits(1):
        return 0
    low, high = 1, 2
    while high <= MAX_BATCH and fits(high):
        low, high = high, 2 * high
    high = min(high, MAX_BATCH + 1)
    while high - low > 1:  # fits(low), not fits(high) (or past MAX_BATCH)
        mid = (low + high) // 2
        low, high = (mid, high) if fits(mid) else (low, mid)
    return low


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
        args.adapter_dtype,
        args.loss,
        args.optimizer_impl,
        args.gpu,
    )
    if args.json:
        print(json.dumps(r, indent=2))
        return 0
    from llmmath.reports import item_label

    lora = (
        _(", rank {rank} on {targets} ({dtype} adapters)").format(
            rank=r["lora_rank"], targets=r["lora_targets"], dtype=r["adapter_dtype"]
        )
        if r["lora_rank"]
        else ""
    )

    def row(label: str, n: int) -> str:
        return _("  {label}{n} bytes").format(label=ljust(label, 38), n=f"{n:>22,}")

    lines = [
        _(
            "{name}: {method}{lora}, {optimizer} ({impl}), {precision}, checkpointing "
            "{checkpointing}, {attention} attention, {loss} loss, {batch} x {t} "
            "tokens; {n} trainable parameters"
        ).format(
            name=name,
            method=r["method"],
            lora=lora,
            optimizer=r["optimizer"],
            impl=r["optimizer_impl"],
            precision=r["precision"],
            checkpointing=r["checkpointing"],
            attention=r["attention"],
            loss=r["loss"],
            batch=f"{r['batch']:,}",
            t=f"{r['seq_len']:,}",
            n=f"{r['trainable_params']:,}",
        ),
        _("peak of a step ({moment}):").format(moment=item_label(r["peak_moment"])),
    ]
    lines += [row(item_label(k), v) for k, v in r["peak_items"].items()]
    peak = r["peak_bytes"]
    lines.append(row(_("peak"), peak) + f" = {human_bytes(peak)}")
    lines.append(_("at rest:"))
    lines += [row(item_label(k), v) for k, v in r["items"].items()]
    total = r["total_bytes"]
    lines.append(row(_("total"), total) + f" = {human_bytes(total)}")
    if "gpu" in r:
        verdict = _("the peak fits") if r["fits"] else _("the peak does not fit")
        lines.append(
            _("{gpu} ({size}): {verdict}; largest batch that fits: {n}").format(
                gpu=r["gpu"],
                size=human_bytes(r["gpu_bytes"]),
                verdict=verdict,
                n=f"{r['max_batch']:,}",
            )
        )
        if "gpu_note" in r:
            lines.append(f"--gpu {translated(r['gpu_note'])}")
    print("\n".join(lines))
    return 0


def add_commands(sub, command, count, once=None) -> None:
    """Add ``train-memory`` to the subparsers ``sub`` of `llmmath.cli.build_parser`;
    ``command`` adds a MODEL command, ``count`` is the CLI's positive-integer type and
    ``once`` its refuse-twice action."""
    from llmmath.gpus import GPU_HELP, GPUS, gpu_argument

    opt = {"action": once} if once else {}
    t = command(
        "train-memory",
        _train_memory,
        _("training memory: the peak of a step; precision, checkpointing, LoRA/QLoRA"),
        _(
            "The peak of one training step of a transformers model in PyTorch, item "
            "by item at its moment, and the weights, gradients, optimizer state and "
            "activations at rest (llmmath.training)."
        ),
    )
    for flag, (allowed, default) in CHOICES.items():
        note = {  # None: refused without LoRA; chosen by the model
            "--adapter-dtype": _(" (peft's; LoRA/QLoRA)"),
            "--attention": _(" (eager for soft-capped models, which SDPA refuses)"),
        }.get(flag)
        t.add_argument(
            flag,
            choices=allowed,
            default=None if note else default,
            help=_("default {default}{note}").format(default=default, note=note or ""),
            **opt,
        )
    t.add_argument("--lora-rank", type=count, help=_("LoRA rank (default 16)"), **opt)
    t.add_argument(
        "--lora-targets",
        help=_("comma-separated (default {targets})").format(targets=ALL_TARGETS),
        **opt,
    )
    t.add_argument("--batch", type=count, default=1, help=_("sequences (1)"), **opt)
    t.add_argument(
        "--seq-len",
        type=count,
        default=4096,
        help=_("tokens per sequence (4096)"),
        **opt,
    )
    t.add_argument(
        "--gpu",
        type=gpu_argument,
        metavar="NAME",
        help=_(
            "{gpu_help}: whether the peak fits and the largest batch that does; {names}"
        ).format(gpu_help=_(GPU_HELP), names=", ".join(GPUS)),
        **opt,
    )

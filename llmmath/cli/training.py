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
2 with one line on stderr. The report itself (`train_memory_report`) and the options'
choices (`CHOICES`) live in `llmmath.reports`, which the memory explorer shares.
"""

from __future__ import annotations

import argparse
import json

from llmmath.messages import gettext as _
from llmmath.messages import ljust, translated
from llmmath.reports import (  # re-exported: tests and chapters import them here
    ALL_TARGETS,
    CHOICES,
    MAX_BATCH,
    train_memory_report,
)
from llmmath.units import human_bytes

__all__ = ["ALL_TARGETS", "CHOICES", "MAX_BATCH", "add_commands", "train_memory_report"]


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

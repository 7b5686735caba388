"""The serving commands of the command line: ``memory``, ``speculative`` and
``measure`` (registered by `llmmath.cli.build_parser` through `add_commands`).

``python -m llmmath memory MODEL --weights bf16|fp8|int8|int4 [--group-size G]
[--kv-dtype D] [--batch B] [--seq-len T] [--gpu NAME] [--json]``: weights plus KV cache
against a GPU. ``python -m llmmath speculative --alpha A --gamma G [--cost-ratio C]
[--json]``: tokens per target pass and speed-up. ``python -m llmmath measure [MODEL]
[--device cpu|cuda] [--json]``: this machine's FLOP/s and bandwidth, and a model's
predicted and measured tokens per second; on CUDA a decode step eager and replayed as a
CUDA graph (`llmmath.measure`; the only path that imports torch).

Bad arguments exit 2 with one line on stderr, as every command does.
"""

from __future__ import annotations

import argparse
import json
import math

from llmmath.gpus import DEFAULT_GPU, GPU_HELP, GPUS, gpu_argument
from llmmath.messages import gettext as _
from llmmath.messages import ljust, translated
from llmmath.reports import (  # re-exported, as before
    JSON_HELP,
    REVISION_HELP,
    WEIGHTS,
    item_label,
    memory_report,
)
from llmmath.units import DTYPE_BITS, human_bytes

#: The GPUs ``--gpu`` names: the one catalogue, `llmmath.gpus.GPUS` (any case, or a
#: short name that names one: `llmmath.gpus.match_gpu`).
GPU_NAMES = tuple(GPUS)


def _memory(args: argparse.Namespace) -> int:
    from llmmath.reports import resolve

    name, cfg = resolve(args.model, args.revision)
    r = memory_report(
        name,
        cfg,
        args.weights,
        args.group_size,
        args.kv_dtype,
        args.batch,
        args.seq_len,
        args.gpu,
    )
    if args.json:
        print(json.dumps(r, indent=2))
        return 0
    group = _(", groups of {n}").format(n=r["group_size"]) if r["group_size"] else ""
    lines = [
        _("{name}: weights in {format}{groups}, KV cache in {dtype}").format(
            name=name, format=args.weights, groups=group, dtype=args.kv_dtype
        )
    ]

    def row(label: str, n: int) -> str:
        return _("  {label}{n} bytes").format(label=ljust(label, 24), n=f"{n:>20,}")

    items = r["weight_items"]
    if list(items) != ["weights"]:  # one item (bf16) is the weights line below
        lines += [row(item_label(k), v) for k, v in items.items()]
    lines += [
        row(_("weights"), r["weight_bytes"]),
        row(_("KV cache"), r["kv_cache_bytes"])
        + _(" ({batch} x {t} tokens)").format(
            batch=f"{args.batch:,}", t=f"{args.seq_len:,}"
        ),
        row(_("total"), r["total_bytes"]) + f" = {human_bytes(r['total_bytes'])}",
        _("  fits in {gpu} ({n} bytes): {answer}").format(
            gpu=r["gpu"],
            n=f"{r['gpu_bytes']:,}",
            answer=_("yes") if r["fits"] else _("no"),
        ),
    ]
    if "gpu_note" in r:
        lines.append(f"  --gpu {translated(r['gpu_note'])}")
    print("\n".join(lines))
    return 0


def _speculative(args: argparse.Namespace) -> int:
    from llmmath.speculative import report

    r = report(args.alpha, args.gamma, args.cost_ratio)
    if args.json:
        print(json.dumps(r, indent=2))
        return 0
    lines = [
        _(
            "speculative decoding, alpha = {alpha}, gamma = {gamma}, a draft pass "
            "costs {cost} target passes"
        ).format(alpha=args.alpha, gamma=args.gamma, cost=args.cost_ratio),
        _("  expected tokens per target pass: {n}").format(
            n=f"{r['expected_tokens_per_target_pass']:.4f}"
        ),
        _("  speed-up over plain decoding: {n}").format(n=f"{r['speedup']:.4f}"),
        _("  best gamma for this alpha and cost: {n}").format(n=r["best_gamma"]),
        f"  {r['formula']} ({r['source']})",
    ]
    print("\n".join(lines))
    return 0


def _measure(args: argparse.Namespace) -> int:
    from llmmath.measure import format_report, measure_report

    try:  # the one command that runs a model: torch, an extra of the core install
        import torch  # noqa: F401
    except ModuleNotFoundError as error:
        from llmmath.errors import needs_extra

        raise needs_extra(error, "python -m llmmath measure") from error
    r = measure_report(args.model, revision=args.revision, device=args.device)
    print(json.dumps(r, indent=2) if args.json else format_report(r))
    return 0


def _probability(text: str) -> float:
    """An argparse type: a number in [0, 1) (an acceptance rate)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(
            _("must be a number in [0, 1), got {value}").format(value=repr(text[:40]))
        ) from None
    if not 0 <= value < 1:  # NaN fails too
        raise argparse.ArgumentTypeError(
            _("must be in [0, 1), got {value}").format(value=text[:40])
        )
    return value


def _nonnegative(text: str) -> float:
    """An argparse type: a finite number ≥ 0 (a cost ratio)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(
            _("must be a number >= 0, got {value}").format(value=repr(text[:40]))
        ) from None
    if not (math.isfinite(value) and value >= 0):
        raise argparse.ArgumentTypeError(
            _("must be finite and >= 0, got {value}").format(value=text[:40])
        )
    return value


def add_commands(sub, command, count, once=None) -> None:
    """Add ``memory``, ``speculative`` and ``measure`` to the subparsers ``sub`` of
    `llmmath.cli.build_parser`; ``command`` adds a MODEL command, ``count`` is the
    CLI's positive-integer type and ``once`` its refuse-twice action."""
    opt = {"action": once} if once else {}
    m = command(
        "memory",
        _memory,
        _("weights (bf16, fp8, int8, int4) + KV cache against a GPU"),
        _(
            "Bytes of the weights in a quantized format (block matrices with a bf16 "
            "scale per group; embedding, LM head and norms in bf16) plus the KV cache, "
            "and whether they fit on the GPU."
        ),
    )
    m.add_argument(
        "--weights", default="bf16", choices=WEIGHTS, help=_("weights (bf16)"), **opt
    )
    m.add_argument(
        "--group-size",
        type=count,
        default=None,
        help=_(
            "weights per scale (default 128 for int4, one per row for int8 and fp8)"
        ),
        **opt,
    )
    m.add_argument(
        "--kv-dtype",
        default="bf16",
        choices=list(DTYPE_BITS),
        help=_("KV cache number format (default bf16)"),
        **opt,
    )
    m.add_argument("--batch", type=count, default=1, help=_("sequences (1)"), **opt)
    m.add_argument(
        "--seq-len",
        type=count,
        default=4096,
        help=_("tokens per sequence (4096)"),
        **opt,
    )
    m.add_argument(
        "--gpu",
        default=DEFAULT_GPU,
        type=gpu_argument,
        metavar="NAME",
        help=_("{gpu_help}; default {default}: {names}").format(
            gpu_help=_(GPU_HELP), default=DEFAULT_GPU, names=", ".join(GPU_NAMES)
        ),
        **opt,
    )
    sp = sub.add_parser(
        "speculative",
        help=_("speculative decoding: tokens per target pass and speed-up"),
        description=_(
            "Expected tokens per target pass (1 - a^(g+1)) / (1 - a) and the speed-up "
            "E / (g * c + 1) (Leviathan et al. 2023)."
        ),
    )
    sp.add_argument(
        "--alpha",
        type=_probability,
        required=True,
        help=_("acceptance rate, in [0, 1)"),
        **opt,
    )
    sp.add_argument(
        "--gamma", type=count, required=True, help=_("draft tokens per pass"), **opt
    )
    sp.add_argument(
        "--cost-ratio",
        type=_nonnegative,
        default=0.0,
        help=_("a draft pass's cost in target passes (default 0)"),
        **opt,
    )
    sp.add_argument("--json", action="store_true", help=_(JSON_HELP))
    sp.set_defaults(run=_speculative)
    me = sub.add_parser(
        "measure",
        help=_("this machine's FLOP/s and bandwidth; predicted vs measured tokens/s"),
        description=_(
            "Attained matmul FLOP/s and memory bandwidth (torch), and a model's "
            "predicted and measured prefill and decode tokens per second. On the CPU a "
            "small reference model in fp32; on CUDA the whole Llama-3.2-1B in bf16 "
            "with a static KV cache, its decode step eager and replayed as a CUDA "
            "graph, the share of the bandwidth each attains and the cost that "
            "dominates. Imports torch."
        ),
    )
    me.add_argument(
        "model",
        metavar="MODEL",
        nargs="?",
        default=None,
        help=_(
            "preset, config.json or hub id (default: a small reference model on the "
            "CPU, llama-3.2-1b on CUDA)"
        ),
    )
    me.add_argument(
        "--device",
        choices=("cpu", "cuda"),
        default=None,
        help=_("where to measure (default: cuda when torch sees a GPU, else cpu)"),
        **opt,
    )
    me.add_argument("--revision", help=_(REVISION_HELP), **opt)
    me.add_argument("--json", action="store_true", help=_(JSON_HELP))
    me.set_defaults(run=_measure)

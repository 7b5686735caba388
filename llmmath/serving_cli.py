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
from llmmath.reports import WEIGHTS, memory_report  # re-exported, as before
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
    group = f", groups of {r['group_size']}" if r["group_size"] else ""
    lines = [f"{name}: weights in {args.weights}{group}, KV cache in {args.kv_dtype}"]
    items = r["weight_items"]
    if list(items) != ["weights"]:  # one item (bf16) is the weights line below
        lines += [f"  {k:<24}{v:>20,} bytes" for k, v in items.items()]
    lines += [
        f"  {'weights':<24}{r['weight_bytes']:>20,} bytes",
        f"  {'KV cache':<24}{r['kv_cache_bytes']:>20,} bytes "
        f"({args.batch:,} x {args.seq_len:,} tokens)",
        f"  {'total':<24}{r['total_bytes']:>20,} bytes = "
        f"{human_bytes(r['total_bytes'])}",
        f"  fits in {r['gpu']} ({r['gpu_bytes']:,} bytes): "
        f"{'yes' if r['fits'] else 'no'}",
    ]
    if "gpu_note" in r:
        lines.append(f"  --gpu {r['gpu_note']}")
    print("\n".join(lines))
    return 0


def _speculative(args: argparse.Namespace) -> int:
    from llmmath.speculative import report

    r = report(args.alpha, args.gamma, args.cost_ratio)
    if args.json:
        print(json.dumps(r, indent=2))
        return 0
    print(
        f"speculative decoding, alpha = {args.alpha}, gamma = {args.gamma}, "
        f"a draft pass costs {args.cost_ratio} target passes\n"
        f"  expected tokens per target pass: "
        f"{r['expected_tokens_per_target_pass']:.4f}\n"
        f"  speed-up over plain decoding: {r['speedup']:.4f}\n"
        f"  best gamma for this alpha and cost: {r['best_gamma']}\n"
        f"  {r['formula']} ({r['source']})"
    )
    return 0


def _measure(args: argparse.Namespace) -> int:
    from llmmath.measure import format_report, measure_report

    r = measure_report(args.model, revision=args.revision, device=args.device)
    print(json.dumps(r, indent=2) if args.json else format_report(r))
    return 0


def _probability(text: str) -> float:
    """An argparse type: a number in [0, 1) (an acceptance rate)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"must be a number in [0, 1), got {text[:40]!r}"
        ) from None
    if not 0 <= value < 1:  # NaN fails too
        raise argparse.ArgumentTypeError(f"must be in [0, 1), got {text[:40]}")
    return value


def _nonnegative(text: str) -> float:
    """An argparse type: a finite number ≥ 0 (a cost ratio)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"must be a number >= 0, got {text[:40]!r}"
        ) from None
    if not (math.isfinite(value) and value >= 0):
        raise argparse.ArgumentTypeError(f"must be finite and >= 0, got {text[:40]}")
    return value


def add_commands(sub, command, count, once=None) -> None:
    """Add ``memory``, ``speculative`` and ``measure`` to the subparsers ``sub`` of
    `llmmath.cli.build_parser`; ``command`` adds a MODEL command, ``count`` is the
    CLI's positive-integer type and ``once`` its refuse-twice action."""
    opt = {"action": once} if once else {}
    m = command(
        "memory",
        _memory,
        "weights (bf16, fp8, int8, int4) + KV cache against a GPU",
        "Bytes of the weights in a quantized format (block matrices with a bf16 scale "
        "per group; embedding, LM head and norms in bf16) plus the KV cache, and "
        "whether they fit on the GPU.",
    )
    m.add_argument(
        "--weights", default="bf16", choices=WEIGHTS, help="weights (bf16)", **opt
    )
    m.add_argument(
        "--group-size",
        type=count,
        default=None,
        help="weights per scale (default 128 for int4, one per row for int8 and fp8)",
        **opt,
    )
    m.add_argument(
        "--kv-dtype",
        default="bf16",
        choices=list(DTYPE_BITS),
        help="KV cache number format (default bf16)",
        **opt,
    )
    m.add_argument("--batch", type=count, default=1, help="sequences (1)", **opt)
    m.add_argument(
        "--seq-len", type=count, default=4096, help="tokens per sequence (4096)", **opt
    )
    m.add_argument(
        "--gpu",
        default=DEFAULT_GPU,
        type=gpu_argument,
        metavar="NAME",
        help=f"{GPU_HELP}; default {DEFAULT_GPU}: " + ", ".join(GPU_NAMES),
        **opt,
    )
    sp = sub.add_parser(
        "speculative",
        help="speculative decoding: tokens per target pass and speed-up",
        description="Expected tokens per target pass (1 - a^(g+1)) / (1 - a) and the "
        "speed-up E / (g * c + 1) (Leviathan et al. 2023).",
    )
    sp.add_argument(
        "--alpha",
        type=_probability,
        required=True,
        help="acceptance rate, in [0, 1)",
        **opt,
    )
    sp.add_argument(
        "--gamma", type=count, required=True, help="draft tokens per pass", **opt
    )
    sp.add_argument(
        "--cost-ratio",
        type=_nonnegative,
        default=0.0,
        help="a draft pass's cost in target passes (default 0)",
        **opt,
    )
    sp.add_argument("--json", action="store_true", help="print one JSON object")
    sp.set_defaults(run=_speculative)
    me = sub.add_parser(
        "measure",
        help="this machine's FLOP/s and bandwidth; predicted vs measured tokens/s",
        description="Attained matmul FLOP/s and memory bandwidth (torch), and a "
        "model's predicted and measured prefill and decode tokens per second. On the "
        "CPU a small reference model in fp32; on CUDA the whole Llama-3.2-1B in bf16 "
        "with a static KV cache, its decode step eager and replayed as a CUDA graph, "
        "the share of the bandwidth each attains and the cost that dominates. "
        "Imports torch.",
    )
    me.add_argument(
        "model",
        metavar="MODEL",
        nargs="?",
        default=None,
        help="preset, config.json or hub id (default: a small reference model on "
        "the CPU, llama-3.2-1b on CUDA)",
    )
    me.add_argument(
        "--device",
        choices=("cpu", "cuda"),
        default=None,
        help="where to measure (default: cuda when torch sees a GPU, else cpu)",
        **opt,
    )
    me.add_argument(
        "--revision",
        help="hub id only: branch, tag or commit hash (default main)",
        **opt,
    )
    me.add_argument("--json", action="store_true", help="print one JSON object")
    me.set_defaults(run=_measure)

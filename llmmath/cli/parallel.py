"""The ``parallel`` command of the command line (registered by
`llmmath.cli.build_parser` through `add_commands`).

``python -m llmmath parallel MODEL --gpus N [--dp D] [--tp T] [--pp P] [--ep E]
[--zero 0|1|2|3] [--micro-batches M] [--micro-batch-size B] [--seq-len S]
[--sequence-parallel] [--recompute] [--chunks V] [--gpu NAME]
[--price-per-gpu-hour P] [--tokens N] [--mfu F] [--json]``: what each GPU holds and
sends in one training step of that layout (`llmmath.parallel.plan`); with a price, what
a step costs, and with a token budget, the whole run's steps, time and cost
(`llmmath.cost`), as a range: at the layout's bound (every FLOP at the peak) and at an
MFU a real run reached (``--mfu``, default `llmmath.cost.PUBLISHED_MFU`, Llama 3's).
``--gpu`` takes the catalogue's names as every command does (`llmmath.gpus.match_gpu`:
``H100-SXM5-80GB``, ``h100``, ``H800``, ``a100``), of a GPU with a cluster
(`llmmath.parallel.CLUSTERS`); ``--tokens`` takes ``15000000000000``, ``1.5e13`` or
``15T`` (`llmmath.errors.large_count_argument`).

A layout that does not fit together (dp·tp·pp ≠ gpus, heads not divisible by tp,
layers by pp, experts by ep) exits 2 with one line on stderr. Imports neither torch nor
SymPy.
"""

from __future__ import annotations

import argparse
import json
import re

from llmmath.config import ModelConfig
from llmmath.errors import large_count_argument
from llmmath.gpus import DEFAULT_GPU, GPU_HELP
from llmmath.messages import gettext as _
from llmmath.messages import ljust, translated
from llmmath.units import human_bytes


def parallel_report(name: str, cfg: ModelConfig, **layout) -> dict:
    """What ``parallel --json`` prints: the model's name and `llmmath.parallel.Plan.
    report` (``"params_per_gpu"`` in parameters; ``"model_state_bytes_per_gpu"``,
    ``"activation_bytes_per_gpu"`` and ``"communication_bytes_per_step"`` by collective
    in bytes; ``"pipeline_bubble_fraction"``, the bubble's share of the step, and
    ``"pipeline_bubble_of_ideal_exact"``, Narayanan et al.'s (p−1)/(v·m); times in
    seconds).

    With ``gpu`` a name that the family rule read (`llmmath.gpus.match_gpu`, such as
    ``"h100"``), ``"gpu_note"`` says which GPU it read.

    Raises:
        ConfigError: see `llmmath.parallel.plan`."""
    from llmmath.gpus import match_gpu
    from llmmath.parallel import plan

    report = {"model": name, **plan(cfg, **layout).report()}
    gpu = layout.get("gpu")
    note = match_gpu(gpu).note if isinstance(gpu, str) else None
    return report | ({"gpu_note": note} if note else {})


def money(amount: float) -> str:
    """A cost with its precision: at least three significant digits, and cents from
    1 up (``0.00279``, ``2.50``, ``85.20``, ``1,234``), never ``0.00`` for a cost
    that is not zero."""
    if amount >= 1000 or amount == 0:
        return f"{amount:,.0f}"
    if amount >= 1:
        return f"{amount:,.2f}"
    import math

    return f"{amount:.{2 - math.floor(math.log10(amount))}f}"


def cost_report(report: dict, price_per_gpu_hour=None, tokens=None, mfu=None) -> dict:
    """``report`` (`parallel_report`'s) with ``"cost"``, `llmmath.cost.step_and_run` of
    its step (seconds, GPU-hours, currency units of the price), and
    ``"cost_at_mfu"``, the same for the step stretched to ``mfu``
    (`llmmath.cost.step_at_mfu`; default `llmmath.cost.PUBLISHED_MFU`) with its
    ``"mfu"`` and ``"mfu_source"``: the cost as a range, from the layout's bound to a
    published MFU. Both when a price, a token budget or an MFU is given; else
    ``report`` unchanged. The default MFU above a layout's bound (a layout slower than
    Llama 3's runs) leaves ``"cost_at_mfu"`` out.

    Raises:
        ConfigError: a price that is not positive and finite, bad tokens, or an
        ``mfu`` not in (0, 1] or above the layout's bound."""
    if price_per_gpu_hour is None and tokens is None and mfu is None:
        return report
    from llmmath.cost import (
        PUBLISHED_MFU,
        PUBLISHED_MFU_SOURCE,
        step_and_run,
        step_at_mfu,
    )

    gpus, step = report["gpus"], report["step_seconds_total"]
    per_step = report["tokens_per_step"]
    out = {
        **report,
        "cost": step_and_run(gpus, step, per_step, price_per_gpu_hour, tokens),
    }
    given = mfu is not None
    mfu = mfu if given else PUBLISHED_MFU
    if given or mfu <= report["mfu"]:
        slower = step_at_mfu(step, report["mfu"], mfu)
        out["cost_at_mfu"] = {
            "mfu": mfu,
            "mfu_source": "given (--mfu)" if given else PUBLISHED_MFU_SOURCE,
            **step_and_run(gpus, slower, per_step, price_per_gpu_hour, tokens),
        }
    return out


def _cost_lines(c: dict, at: dict | None = None) -> list[str]:
    def cost(key: str, report: dict) -> str:
        return (
            _(", cost {cost}").format(cost=money(report[key])) if key in report else ""
        )

    lines = [_("  step = {n} GPU-hours").format(n=f"{c['step_gpu_hours']:.4g}")]
    if "step_cost" in c:
        lines[0] += _(", cost {cost} at {price}/GPU-h").format(
            cost=money(c["step_cost"]), price=f"{c['price_per_gpu_hour']:g}"
        )
    if "steps" in c:
        lines.append(
            _(
                "  {tokens} tokens = {steps} steps ≈ {days} days, {hours} GPU-hours"
            ).format(
                tokens=f"{c['tokens']:,}",
                steps=f"{c['steps']:,}",
                days=f"{c['run_days']:,.1f}",
                hours=f"{c['run_gpu_hours']:,.0f}",
            )
            + cost("run_cost", c)
        )
    if at is None:
        return lines
    source = (
        _("given") if at["mfu_source"].startswith("given") else _("Llama 3, Table 4")
    )
    mfu = f"{at['mfu']:.0%}"
    lines.append(
        _("  at MFU {mfu} ({source}): step {seconds} s = {hours} GPU-hours").format(
            mfu=mfu,
            source=source,
            seconds=f"{at['step_seconds']:.3g}",
            hours=f"{at['step_gpu_hours']:.4g}",
        )
        + cost("step_cost", at)
    )
    if "steps" in at:
        lines.append(
            _("  the run at MFU {mfu}: {days} days, {hours} GPU-hours").format(
                mfu=mfu,
                days=f"{at['run_days']:,.1f}",
                hours=f"{at['run_gpu_hours']:,.0f}",
            )
            + cost("run_cost", at)
        )
        lines.append(
            _(
                "  the run's GPU-hours, from the bound to MFU {mfu}: {low} to {high}"
            ).format(
                mfu=mfu,
                low=f"{c['run_gpu_hours']:,.0f}",
                high=f"{at['run_gpu_hours']:,.0f}",
            )
        )
    return lines


_DECIMAL = re.compile(r"(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")


def _price(text: str) -> float:
    """An argparse type: a price per GPU-hour, a positive finite decimal number in
    ASCII (`llmmath.cost.check_price`)."""
    from llmmath.cost import check_price
    from llmmath.errors import ConfigError

    shown = text if len(text) <= 40 else f"{text[:20]}...{text[-10:]}"
    if len(text) > 100 or not _DECIMAL.fullmatch(text):
        raise argparse.ArgumentTypeError(
            _("must be a positive number, got {value}").format(value=repr(shown))
        )
    try:
        return check_price(float(text))
    except ConfigError as e:
        raise argparse.ArgumentTypeError(_rule(str(e))) from None


def _mfu(text: str) -> float:
    """An argparse type: a model FLOPs utilization, a decimal number in (0, 1] in
    ASCII (`llmmath.cost.check_mfu`)."""
    from llmmath.cost import check_mfu
    from llmmath.errors import ConfigError

    shown = text if len(text) <= 40 else f"{text[:20]}...{text[-10:]}"
    if len(text) > 100 or not _DECIMAL.fullmatch(text):
        raise argparse.ArgumentTypeError(
            _("must be a number in (0, 1], got {value}").format(value=repr(shown))
        )
    try:
        return check_mfu(float(text))
    except ConfigError:
        raise argparse.ArgumentTypeError(
            _("must be in (0, 1], got {value}").format(value=shown)
        ) from None


def _rule(message: str) -> str:
    """A `ConfigError`'s "NAME must be …, got …" without the value (argparse shows
    it), in English or Chinese."""
    for got in (", got", "，收到的是"):
        message = message.split(got)[0]
    return message


def _cluster_gpu(text: str) -> str:
    """An argparse type: ``text`` when it names a GPU with a cluster
    (`llmmath.parallel.cluster`, through `llmmath.gpus.match_gpu`)."""
    from llmmath.errors import ConfigError
    from llmmath.gpus import gpu_argument
    from llmmath.parallel import cluster

    gpu_argument(text)  # the resolver's own message for a name that names no GPU
    try:
        cluster(text)
    except ConfigError as e:
        raise argparse.ArgumentTypeError(str(e).removeprefix("gpu ")) from None
    return text


def _parallel(args: argparse.Namespace) -> int:
    from llmmath.reports import resolve

    name, cfg = resolve(args.model, args.revision)
    report = parallel_report(
        name,
        cfg,
        gpus=args.gpus,
        dp=args.dp,
        tp=args.tp,
        pp=args.pp,
        ep=args.ep,
        zero=args.zero,
        micro_batches=args.micro_batches,
        micro_batch_size=args.micro_batch_size,
        seq_len=args.seq_len,
        sequence_parallel=args.sequence_parallel,
        recompute=args.recompute,
        chunks=args.chunks,
        gpu=args.gpu,
    )
    report = cost_report(report, args.price_per_gpu_hour, args.tokens, args.mfu)
    if args.json:
        print(json.dumps(report, indent=2))
        return 0
    r = report
    fits_in = _("fits in {gb} GB").format(gb=f"{r['gpu_memory_bytes'] / 10**9:.0f}")

    def bytes_row(label: str, n: int) -> str:
        return _("  {label}{n} bytes = {human}").format(
            label=ljust(label, 22), n=f"{n:>22,}", human=human_bytes(n)
        )

    lines = [
        _(
            "{name} on {gpus} GPUs ({cluster}): dp {dp} x tp {tp} x pp {pp}, ep {ep}, "
            "ZeRO-{zero}"
        ).format(
            name=name,
            gpus=f"{r['gpus']:,}",
            cluster=r["gpu"],
            dp=r["dp"],
            tp=r["tp"],
            pp=r["pp"],
            ep=r["ep"],
            zero=r["zero"],
        ),
        *([f"  --gpu {translated(r['gpu_note'])}"] if "gpu_note" in r else []),
        "  " + ljust(_("parameters per GPU"), 22) + f"{r['params_per_gpu']:>22,}",
        bytes_row(_("model state per GPU"), r["model_state_bytes_per_gpu"]),
        bytes_row(_("activations per GPU"), r["activation_bytes_per_gpu"]),
        "  " + ljust(fits_in, 22) + (_("yes") if r["fits"] else _("no")),
        _("  {label}{fraction} of a step").format(
            label=ljust(_("pipeline bubble"), 22),
            fraction=f"{r['pipeline_bubble_fraction_exact']:>22}",
        ),
        _("  bytes sent per GPU per step, by collective:"),
        *(
            f"    {op:<20}{b:>22,}"
            for op, b in r["communication_bytes_per_step"].items()
            if b
        ),
        _("  step ≈ {seconds} s, MFU ≈ {mfu} (ideal kernels)").format(
            seconds=f"{r['step_seconds_total']:.3g}", mfu=f"{r['mfu']:.0%}"
        ),
        *(_cost_lines(r["cost"], r.get("cost_at_mfu")) if "cost" in r else []),
    ]
    print("\n".join(lines))
    return 0


def add_commands(sub, command, count, once=None) -> None:
    """Add ``parallel`` to the subparsers ``sub`` of `llmmath.cli.build_parser`;
    ``command`` adds a MODEL command, ``count`` is the CLI's positive-integer type and
    ``once`` its refuse-twice action."""
    opt = {"action": once} if once else {}
    p = command(
        "parallel",
        _parallel,
        _("a training layout on many GPUs: memory and traffic per GPU"),
        _(
            "Data, tensor, pipeline and expert parallelism with ZeRO: parameters, "
            "model state (16 bytes per parameter, sharded as configured), activations "
            "and bytes sent per GPU in one step. dp defaults to gpus / (tp * pp)."
        ),
    )
    p.add_argument("--gpus", type=count, required=True, help=_("GPUs in all"), **opt)
    p.add_argument(
        "--dp", type=count, default=None, help=_("data-parallel ranks"), **opt
    )
    for flag, text in (
        ("--tp", _("tensor-parallel ranks (1)")),
        ("--pp", _("pipeline stages (1)")),
        ("--ep", _("expert-parallel ranks (1)")),
        ("--micro-batches", _("micro-batches per step per replica (1)")),
        ("--micro-batch-size", _("sequences per micro-batch (1)")),
        ("--chunks", _("model chunks per GPU, interleaved schedule (1)")),
    ):
        p.add_argument(flag, type=count, default=1, help=text, **opt)
    p.add_argument(
        "--zero",
        type=int,
        choices=[0, 1, 2, 3],
        default=0,
        help=_("ZeRO stage (0)"),
        **opt,
    )
    p.add_argument(
        "--seq-len",
        type=count,
        default=4096,
        help=_("tokens per sequence (4096)"),
        **opt,
    )
    p.add_argument(
        "--sequence-parallel",
        action="store_true",
        help=_("split norms and dropout by the sequence (Korthikanti et al.)"),
    )
    p.add_argument(
        "--recompute",
        action="store_true",
        help=_("full activation checkpointing: keep each layer's input only"),
    )
    p.add_argument(
        "--gpu",
        type=_cluster_gpu,
        default=DEFAULT_GPU,
        metavar="NAME",
        help=_(
            "{gpu_help}, with a cluster: H100-SXM5-80GB (default), H800-SXM5-80GB, "
            "A100-SXM4-80GB"
        ).format(gpu_help=_(GPU_HELP)),
        **opt,
    )
    p.add_argument(
        "--price-per-gpu-hour",
        type=_price,
        default=None,
        help=_("your price of one GPU for an hour: the step's cost (and the run's)"),
        **opt,
    )
    p.add_argument(
        "--tokens",
        type=large_count_argument,
        default=None,
        help=_(
            "training tokens (15000000000000, 1.5e13 or 15T): the run's steps, days, "
            "GPU-hours (and cost)"
        ),
        **opt,
    )
    p.add_argument(
        "--mfu",
        type=_mfu,
        default=None,
        help=_(
            "the MFU a real run reaches, in (0, 1]: the costs also at it (default "
            "0.38, the lowest of the Llama 3 paper's Table 4)"
        ),
        **opt,
    )

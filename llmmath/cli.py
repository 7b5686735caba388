"""Command line.

``python -m llmmath params <preset | config.json> [--json]``: the exact parameter
breakdown. ``python -m llmmath kv-cache <preset | config.json> --seq-len T [--batch B]
[--dtype bf16] [--json]``: the KV cache in bytes. ``python -m llmmath flops <preset |
config.json> --seq-len T [--attention causal|full] [--json]``: forward FLOPs per token.
``python -m llmmath coursework handout|key|editions|grade ...``: the teacher's commands
(`llmmath.coursework.cli`): signed sheets per student and chapter, a student's answers,
the blank editions, and grading in a sandbox. ``python -m llmmath parallel MODEL --gpus
N [--dp D] [--tp T] [--pp P] [--ep E] [--zero 0-3] ...``: a training layout's memory and
traffic per GPU (`llmmath.parallel_cli`).

MODEL is a preset name, the path of a Hugging Face ``config.json`` or a hub id
``org/name`` read from the local Hugging Face cache (`llmmath.hub`; ``--revision``,
default main). Bad input exits
with status 2 and one line on stderr, never a traceback. These paths import neither
torch nor SymPy, so they answer in a fraction of a second.
"""

from __future__ import annotations

import argparse
import json
import os
import sys

from llmmath import presets
from llmmath.config import ConfigError, ModelConfig
from llmmath.counting import GROUPS, NON_EMBEDDING_CONVENTION, ParamCount, count_params
from llmmath.kvcache import (
    LAYOUTS,
    cached_tokens,
    cached_tokens_per_layer,
    kv_cache_bytes,
    kv_cache_bytes_per_token,
    kv_values_per_token_per_layer,
)
from llmmath.units import DTYPE_BITS, dtype_bits, human_bytes

#: The CLI's bounds on sizes given as arguments (the calculator page uses the same).
MAX_SEQ_LEN = 10**8
MAX_BATCH = 10**6


def one_line(message: str) -> str:
    """``message`` with every line break escaped (``\\n``, ``\\r`` and the others
    `str.splitlines` splits on), so that an error is one line whatever a user typed."""
    return message.translate(_LINE_BREAKS)


_LINE_BREAKS = {ord(c): repr(c)[1:-1] for c in "\n\r\v\f\x1c\x1d\x1e\x85\u2028\u2029"}


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # one line and exit 2, as for bad configs
        self.exit(2, f"{self.prog}: error: {one_line(message)}\n")


class _Once(argparse.Action):
    """Store an option's value, refusing the option given twice (which value would
    count is then ambiguous, as with a duplicate key in a config.json)."""

    def __call__(self, parser, namespace, values, option_string=None):
        if getattr(namespace, f"_given_{self.dest}", False):
            raise argparse.ArgumentError(
                self, "given twice; give it once (which value counts is ambiguous)"
            )
        setattr(namespace, f"_given_{self.dest}", True)
        setattr(namespace, self.dest, values)


def resolve(model: str, revision: str | None = None) -> tuple[str, ModelConfig]:
    """A path to a ``config.json``, a preset name or a hub id → (display name, config).

    Precedence: a file that exists wins; a name ending in ``.json`` is a file; a name
    with a ``/`` is a hub id ``org/name``, read from the local Hugging Face cache at
    ``revision`` (default main; `llmmath.hub`); any other name is a preset.

    Raises:
        ConfigError: no such file, preset or cached model; an invalid hub id; a
        ``revision`` given with anything but a hub id; or the config is invalid.
    """
    is_file = os.path.exists(model) or model.endswith(".json")
    if not is_file and ("/" in model or os.sep in model):
        from llmmath import hub

        shown = model if revision is None else f"{model}@{revision}"
        return shown, hub.load_config(model, revision)
    if revision is not None:
        raise ConfigError(
            f"--revision applies to a hub id (org/name), not to {model!r}"
        )
    if is_file:
        return model, ModelConfig.from_hf_config(model)
    return presets.get(model).title, presets.load(model)


def format_table(name: str, counts: ParamCount) -> str:
    """The human-readable breakdown: tensor, formula, exact count, share of total."""
    total = counts.total
    rows = [(t.name, t.formula, counts.total_of(t)) for t in counts.tensors]
    if counts.tie_word_embeddings:
        rows.append(("lm_head.weight", "tied to embed_tokens", 0))

    def share(c: int) -> str:
        return (
            f"{c / total:>7.2%}"
            if c == 0 or c / total >= 1e-4
            else f"{c / total:>7.4%}"
        )

    w_name = max(len(r[0]) for r in rows) + 2
    w_form = max(len(r[1]) for r in rows) + 2
    lines = [
        f"{name}: {total:,} parameters ({total / 1e9:.3f} B, 1 B = 10^9)",
        "",
        f"{'tensor':<{w_name}}{'formula':<{w_form}}{'parameters':>17}  {'share':>7}",
    ]
    lines += [f"{n:<{w_name}}{f:<{w_form}}{c:>17,}  {share(c)}" for n, f, c in rows]
    lines += ["", f"{'group':<{w_name}}{'':<{w_form}}{'parameters':>17}  {'share':>7}"]
    lines += [
        f"{g:<{w_name}}{'':<{w_form}}{c:>17,}  {share(c)}"
        for g, c in counts.by_group().items()
        if g in GROUPS
    ]
    lines += [
        "",
        f"{'per layer':<{w_name}}{'':<{w_form}}{counts.per_layer:>17,}",
        f"{'non-embedding':<{w_name}}{'':<{w_form}}{counts.non_embedding:>17,}",
        *(
            [f"{'active per token (MoE)':<{w_name}}{'':<{w_form}}{counts.active:>17,}"]
            if counts.active != total
            else []
        ),
        f"{'total':<{w_name}}{'':<{w_form}}{total:>17,}",
        *(
            [f"{'MTP module (not in total)':<{w_name}}{'':<{w_form}}{counts.mtp:>17,}"]
            if counts.mtp
            else []
        ),
        "",
        NON_EMBEDDING_CONVENTION,
    ]
    return "\n".join(lines)


def params_report(name: str, cfg: ModelConfig) -> dict:
    """What ``params --json`` prints: the model's name and `ParamCount.as_dict`
    (parameters; ``"total"`` is the exact count, ``"active"`` the parameters one token
    uses)."""
    return {"model": name, **count_params(cfg).as_dict()}


def _params(args: argparse.Namespace) -> int:
    name, cfg = resolve(args.model, args.revision)
    counts = count_params(cfg)
    if args.json:
        print(json.dumps(params_report(name, cfg), indent=2))
    else:
        print(format_table(name, counts))
    return 0


def kv_cache_report(
    name: str,
    cfg: ModelConfig,
    seq_len: int,
    batch: int = 1,
    dtype: str = "bf16",
    layout: str = "latent",
    between_steps: bool = False,
) -> dict:
    """What ``kv-cache --json`` prints: ``"bytes"`` for the whole batch and
    ``"bytes_per_token"`` of one sequence (`llmmath.kvcache`), with the sizes they
    follow from. ``layout`` (``"latent"`` or ``"expanded"``) matters only for
    multi-head latent attention; with it the report adds ``"latent_values"`` (d_c +
    d_r) and ``"expanded_values"`` per layer and token. ``"sliding_window_tokens"``
    says what a sliding layer counts: ``"W (during the attention call)"``, or with
    ``between_steps`` ``"W - 1 (between steps, as transformers keeps them)"``; None
    for a model without a sliding window.

    Raises:
        ConfigError: an unknown ``dtype`` or ``layout``, or a length or batch that is
        not a positive int.
    """
    dtype_bits(dtype)  # refuse an unknown dtype first
    report = {
        "model": name,
        "bytes": kv_cache_bytes(cfg, batch, seq_len, dtype, layout, between_steps),
        "bytes_per_token": kv_cache_bytes_per_token(cfg, dtype, layout),
        "batch": batch,
        "seq_len": seq_len,
        "cached_tokens": cached_tokens(cfg, seq_len, between_steps),
        "sliding_window": cfg.sliding_window,
        "sliding_window_tokens": _window_tokens(cfg, between_steps),
        "dtype": dtype,
        "num_hidden_layers": cfg.num_hidden_layers,
        "num_key_value_heads": cfg.num_key_value_heads,
        "head_dim": cfg.head_dim,
        "formula": "2 * L * batch * cached_tokens * n_kv * d_h * bytes_per_element",
        "layout": layout,
    }
    if cfg.layer_types is not None:
        report["cached_tokens_per_layer"] = cached_tokens_per_layer(
            cfg, seq_len, between_steps
        )
        report["formula"] = (
            "2 * batch * sum over layers of cached_tokens[layer] * n_kv * d_h * "
            "bytes_per_element"
        )
    if cfg.is_mla:
        report["latent_values"] = kv_values_per_token_per_layer(cfg, "latent")
        report["expanded_values"] = kv_values_per_token_per_layer(cfg, "expanded")
        report["formula"] = (
            "L * batch * cached_tokens * (kv_lora_rank + qk_rope_head_dim) * "
            "bytes_per_element"
            if layout == "latent"
            else "L * batch * cached_tokens * n_h * (qk_nope_head_dim + "
            "qk_rope_head_dim + v_head_dim) * bytes_per_element"
        )
    return report


def _window_tokens(cfg: ModelConfig, between_steps: bool) -> str | None:
    """What a sliding layer of ``cfg`` counts (`llmmath.kvcache`, *Which W*)."""
    if cfg.sliding_window is None:
        return None
    if between_steps:
        return "W - 1 (between steps, as transformers keeps them)"
    return "W (during the attention call)"


def _kv_cache(args: argparse.Namespace) -> int:
    name, cfg = resolve(args.model, args.revision)
    paged = None
    if args.block_size is not None:  # whole blocks of B tokens (llmmath.paged_cache)
        from llmmath.paged_cache import blocks_for, padded_tokens

        paged = {
            "block_size": args.block_size,
            "requested_seq_len": args.seq_len,
            "blocks_per_sequence": blocks_for(args.seq_len, args.block_size),
            "wasted_slots_per_sequence": padded_tokens(args.seq_len, args.block_size)
            - args.seq_len,
        }
        args.seq_len = padded_tokens(args.seq_len, args.block_size)
    result = kv_cache_report(
        name, cfg, args.seq_len, args.batch, args.dtype, args.layout, args.between_steps
    )
    if paged:
        result.update(paged)
        if not args.json:
            print(
                f"paged: {paged['blocks_per_sequence']:,} blocks of "
                f"{args.block_size} tokens per sequence, {args.seq_len:,} slots "
                f"({paged['wasted_slots_per_sequence']:,} empty in the last block)"
            )
    total, per_token = result["bytes"], result["bytes_per_token"]
    cached = result["cached_tokens"]
    if args.json:
        print(json.dumps(result, indent=2))
        return 0
    if cfg.is_mla or cfg.layer_types is not None:
        tokens = result["sliding_window_tokens"]
        convention = f"; {tokens}" if tokens and not cfg.is_mla else ""
        print(
            f"{name}: KV cache for batch {args.batch} x {args.seq_len:,} tokens "
            f"in {args.dtype} ({_cache_kind(cfg, args.layout)}{convention})\n"
            f"  {result['formula']}\n"
            f"  = {total:,} bytes = {human_bytes(total)}\n"
            f"  per token (one sequence): {per_token:,} bytes"
        )
        return 0
    window = (
        f" (sliding window {cfg.sliding_window}: {cached:,} tokens kept, "
        f"{result['sliding_window_tokens']})"
        if cached < args.seq_len
        else ""
    )
    print(
        f"{name}: KV cache for batch {args.batch} x {args.seq_len:,} tokens "
        f"in {args.dtype}{window}\n"
        f"  2 x L x b x t x n_kv x d_h x bytes = 2 x {cfg.num_hidden_layers} "
        f"x {args.batch} x {cached:,} x {cfg.num_key_value_heads} x {cfg.head_dim} "
        f"x {dtype_bits(args.dtype)}/8\n"
        f"  = {total:,} bytes = {human_bytes(total)}\n"
        f"  per token (one sequence): {per_token:,} bytes"
    )
    return 0


def _cache_kind(cfg: ModelConfig, layout: str) -> str:
    """How the cache is laid out, for the text report: MLA's layout, or which layers
    keep a sliding window."""
    if cfg.is_mla:
        return f"{layout} layout"
    sliding = sum(cfg.window_of(i) is not None for i in range(cfg.num_hidden_layers))
    return (
        f"sliding window {cfg.sliding_window} on {sliding} of "
        f"{cfg.num_hidden_layers} layers"
    )


def _number(value):
    """An exact Fraction as an int when whole, else a float (JSON has no fractions)."""
    return int(value) if value.denominator == 1 else float(value)


def flops_report(
    name: str, cfg: ModelConfig, seq_len: int, attention: str = "causal"
) -> dict:
    """What ``flops --json`` prints: ``"forward_flops_per_token"`` (FLOPs) and its parts
    (`llmmath.flops.forward_flops_per_token`), with the literature's conventions."""
    from fractions import Fraction

    from llmmath.flops import CONVENTIONS, forward_flops_per_token

    f = forward_flops_per_token(cfg, seq_len, attention)
    averaging = (
        "full: every token against all T keys, 4*L*T*n_h*d_h per token"
        if attention == "full"
        else "causal: token i (1-based) reads i keys (at most sliding_window), "
        "averaged over the T positions of the sequence: 4*L*n_h*d_h*pairs/T"
    )
    return {
        "model": name,
        "seq_len": seq_len,
        "attention": attention,
        "forward_flops_per_token": _number(f.total),
        "forward_flops_per_token_exact": str(f.total),
        "parts": {
            "attention_projections": f.parts["attention"],
            "ffn": f.parts["ffn"],
            "lm_head": f.parts["lm_head"],
            "attention_qk_av": _number(f.attention),
        },
        "matmul_flops_per_token": f.matmul,
        "averaging": averaging,
        "counted": "2 x every matmul weight (LM head included, tied or not) + QK^T "
        "and AV; the embedding lookup, biases, norms, activations and softmax are not "
        "counted",
        "conventions": {
            k: _number(Fraction(fn(cfg, seq_len))) for k, fn in CONVENTIONS.items()
        },
    }


def _flops(args: argparse.Namespace) -> int:
    from llmmath.flops import forward_flops_per_token

    name, cfg = resolve(args.model, args.revision)
    if args.by_module or args.recompute:  # forward, backward, training per module
        from llmmath.flops_by_module import by_module_report, format_by_module

        if not args.by_module:
            raise ConfigError("--recompute needs --by-module")
        report = by_module_report(
            name, cfg, args.seq_len, 1, args.attention, args.recompute or "none"
        )
        print(json.dumps(report, indent=2) if args.json else format_by_module(report))
        return 0
    f = forward_flops_per_token(cfg, args.seq_len, args.attention)
    result = flops_report(name, cfg, args.seq_len, args.attention)
    averaging = result["averaging"]
    if args.json:
        print(json.dumps(result, indent=2))
        return 0
    rows = [
        ("attention projections", f.parts["attention"]),
        ("FFN", f.parts["ffn"]),
        ("LM head", f.parts["lm_head"]),
        ("QK^T and AV", f.attention),
    ]
    print(
        f"{name}: forward FLOPs per token at T = {args.seq_len:,} "
        f"({args.attention} attention)"
    )

    def show(value) -> str:
        return (
            f"{int(value):,}" if float(value).is_integer() else f"{float(value):,.2f}"
        )

    for label, value in rows:
        print(f"  {label:<24}{show(value):>22}  {float(value / f.total):>7.2%}")
    print(f"  {'total':<24}{show(f.total):>22}\n  {averaging}")
    return 0


def _count(text: str, limit: int = 10**18) -> int:
    """An argparse type: a positive integer of at most ``limit``, in ASCII digits
    (no sign, spaces, underscores or other scripts' digits)."""
    shown = text if len(text) <= 40 else f"{text[:20]}...{text[-10:]}"
    if not (text.isascii() and text.isdigit()):
        raise argparse.ArgumentTypeError(f"must be a positive integer, got {shown!r}")
    if len(text) > len(str(limit)) or int(text) > limit:
        raise argparse.ArgumentTypeError(f"must be at most {limit:,}, got {shown}")
    if int(text) <= 0:
        raise argparse.ArgumentTypeError(f"must be a positive integer, got {text}")
    return int(text)


def _seq_len_option(parser: argparse.ArgumentParser, meaning: str) -> None:
    """The required ``--seq-len`` of ``kv-cache`` and ``flops``: a count up to
    `MAX_SEQ_LEN`, given once."""
    parser.add_argument(
        "--seq-len",
        type=_count_up_to(MAX_SEQ_LEN),
        required=True,
        action=_Once,
        help=f"{meaning} (at most {MAX_SEQ_LEN:,})",
    )


def _count_up_to(limit: int):
    """`_count` with the bound ``limit``, as an argparse type."""

    def count(text: str) -> int:
        return _count(text, limit)

    return count


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="python -m llmmath",
        description="Exact parameters, KV cache bytes and FLOPs of decoder-only "
        "language models.",
    )
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)

    def command(name: str, run, help: str, description: str) -> argparse.ArgumentParser:
        cmd = sub.add_parser(name, help=help, description=description)
        cmd.add_argument(
            "model",
            metavar="MODEL",
            help="preset name, path to a config.json, or hub id org/name (read from "
            "the local Hugging Face cache)",
        )
        cmd.add_argument(
            "--revision",
            action=_Once,
            help="hub id only: branch, tag or commit hash (default main)",
        )
        cmd.add_argument("--json", action="store_true", help="print one JSON object")
        cmd.set_defaults(run=run)
        return cmd

    command(
        "params",
        _params,
        "parameter breakdown of a preset or a config.json",
        "Exact parameter breakdown. MODEL is a preset name "
        f"({', '.join(presets.names())}), a path to a config.json or a hub id "
        "org/name (its config.json from the local Hugging Face cache).",
    )
    k = command(
        "kv-cache",
        _kv_cache,
        "KV cache bytes of a preset or a config.json",
        "Exact KV cache size: 2 * L * batch * tokens * n_kv * d_h * bytes per element; "
        "a sliding window W caps the tokens kept at W, what exists during the "
        "attention call (--between-steps: W - 1, what transformers keeps between "
        "calls).",
    )
    _seq_len_option(k, "tokens per sequence")
    k.add_argument(
        "--batch",
        type=_count_up_to(MAX_BATCH),
        default=1,
        action=_Once,
        help=f"sequences (default 1, at most {MAX_BATCH:,})",
    )
    k.add_argument(
        "--dtype",
        action=_Once,
        default="bf16",
        choices=list(DTYPE_BITS),
        help="cache number format (default bf16)",
    )
    k.add_argument(
        "--layout",
        action=_Once,
        default="latent",
        choices=list(LAYOUTS),
        help="multi-head latent attention: cache the latent (default) or per-head "
        "keys and values",
    )
    k.add_argument(
        "--block-size",
        type=_count_up_to(MAX_SEQ_LEN),
        default=None,
        action=_Once,
        help="paged cache: round each sequence up to whole blocks of B tokens",
    )
    k.add_argument(
        "--between-steps",
        action="store_true",
        help="count W - 1 tokens per sliding-window layer, what transformers keeps "
        "between forward calls (default: W, what exists during the attention call)",
    )
    f = command(
        "flops",
        _flops,
        "forward FLOPs per token of a preset or a config.json",
        "Forward FLOPs per token: 2 x every matmul weight (LM head included) plus QK^T "
        "and AV at length T.",
    )
    _seq_len_option(f, "sequence length T")
    f.add_argument(
        "--attention",
        action=_Once,
        choices=["causal", "full"],
        default="causal",
        help="count causal pairs (default) or all T x T",
    )
    f.add_argument(
        "--by-module",
        action="store_true",
        help="forward, backward and training FLOPs of one sequence, per module",
    )
    f.add_argument(
        "--recompute",
        action=_Once,
        choices=["none", "selective", "full"],
        help="with --by-module: activation recomputation (default none)",
    )

    from llmmath.serving_cli import add_commands  # memory, speculative, measure

    add_commands(sub, command, _count_up_to(MAX_SEQ_LEN), _Once)
    from llmmath.parallel_cli import add_commands as add_parallel  # many GPUs

    add_parallel(sub, command, _count_up_to(MAX_SEQ_LEN), _Once)
    from llmmath.training_cli import add_commands as add_training  # train-memory

    add_training(sub, command, _count_up_to(MAX_SEQ_LEN), _Once)

    sub.add_parser(
        "coursework",
        help="coursework: hand out signed sheets, grade them in a sandbox",
        description="The teacher's commands (handout, key, editions, grade); "
        "`python -m llmmath coursework --help` lists them.",
        add_help=False,
    )  # listed here for --help; main() hands its arguments to llmmath.coursework.cli
    return parser


def main(argv: list[str] | None = None) -> int:
    """Entry point; returns the exit status: 0 on success (``--help`` included), 2 on
    bad input (one line on stderr), 141 (128 + SIGPIPE) when stdout's reader went away
    (``| head``), silently. Never raises `SystemExit`."""
    argv = sys.argv[1:] if argv is None else list(argv)
    reconfigure = getattr(sys.stdout, "reconfigure", None)
    if reconfigure is not None:  # a path that is not UTF-8 is shown, not a crash
        reconfigure(errors="backslashreplace")
    try:
        status = _run(argv)
        if sys.stdout is not None:
            sys.stdout.flush()  # a closed pipe shows here, not at interpreter exit
        return status
    except BrokenPipeError:
        try:  # nothing more can reach the reader; keep Python's exit flush quiet
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        except (OSError, ValueError, AttributeError):
            pass
        return 141


def _run(argv: list[str]) -> int:
    try:
        if argv[:1] == ["coursework"]:  # its own parser, options and help included
            from llmmath.coursework.cli import main as coursework_main

            return coursework_main(argv[1:])
        args = build_parser().parse_args(argv)
    except SystemExit as e:  # argparse: --help (0) or a bad argument (2, one line)
        return e.code if isinstance(e.code, int) else 0 if e.code is None else 2
    try:
        return args.run(args)
    except ConfigError as e:
        print(f"llmmath: error: {one_line(str(e))}", file=sys.stderr)
        return 2

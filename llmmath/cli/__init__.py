"""Command line.

``python -m llmmath params <preset | config.json> [--json]``: the exact parameter
breakdown. ``python -m llmmath kv-cache <preset | config.json> --seq-len T [--batch B]
[--dtype bf16] [--json]``: the KV cache in bytes. ``python -m llmmath flops <preset |
config.json> --seq-len T [--attention causal|full] [--json]``: forward FLOPs per token.
``python -m llmmath coursework handout|key|editions|grade ...``: the teacher's commands
(`llmmath.coursework.cli`): signed sheets per student and chapter, a student's answers,
the blank editions, and grading in a sandbox. ``python -m llmmath parallel MODEL --gpus
N [--dp D] [--tp T] [--pp P] [--ep E] [--zero 0-3] ...``: a training layout's memory and
traffic per GPU (`llmmath.cli.parallel`).

MODEL is a preset name, the path of a Hugging Face ``config.json`` or a hub id
``org/name`` read from the local Hugging Face cache (`llmmath.hub`; ``--revision``,
default main). Bad input exits
with status 2 and one line on stderr, never a traceback. These paths import neither
torch nor SymPy, so they answer in a fraction of a second.
"""

from __future__ import annotations

import importlib
import json
import os
import sys

from llmmath.config import ConfigError, ModelConfig
from llmmath.errors import MissingExtra, count_argument, one_line
from llmmath.messages import N_, current, ljust, translated
from llmmath.messages import gettext as _
from llmmath.reports import (  # re-exported: chapters and tests import them from here
    JSON_HELP,
    REVISION_HELP,
    flops_report,
    format_table,
    kv_cache_report,
    params_report,
    resolve,
)

TYPE_CHECKING = False  # typing.TYPE_CHECKING, without importing typing

#: argparse loads only to build a parser (annotations are strings here,
#: `from __future__ import annotations`).
if TYPE_CHECKING:
    import argparse

__all__ = [
    "MAX_BATCH",
    "MAX_SEQ_LEN",
    "build_parser",
    "flops_report",
    "format_table",
    "kv_cache_report",
    "main",
    "one_line",
    "params_report",
    "resolve",
]

#: The CLI's bounds on sizes given as arguments (the calculator page uses the same).
MAX_SEQ_LEN = 10**8
MAX_BATCH = 10**6


#: `_Parser` and `_Once`, made by `_argparse_types` on first use: argparse (and gettext,
#: locale and shutil behind it) loads only when a parser is built, never for the
#: common ``params MODEL [--json]`` that `_quick_params` reads.
_TYPES: tuple[type, type] | None = None


def _argparse_types() -> tuple[type, type]:
    """(`_Parser`, `_Once`): the parser that reports an error in one line and exits 2,
    and the action that refuses an option given twice."""
    global _TYPES
    if _TYPES is not None:
        return _TYPES
    import argparse

    class _Wrapping(argparse.HelpFormatter):
        """Help wrapped by the columns a terminal gives each character, breaking
        between Chinese characters and at spaces, never inside a Latin word (argparse's
        textwrap counts characters and cuts a run without spaces anywhere)."""

        def _split_lines(self, text: str, width: int) -> list[str]:
            return _wrap(self._whitespace_matcher.sub(" ", text).strip(), width)

        def _fill_text(self, text: str, width: int, indent: str) -> str:
            text = self._whitespace_matcher.sub(" ", text).strip()
            lines = _wrap(text, width - len(indent))
            return "\n".join(indent + line for line in lines)

    class _Parser(argparse.ArgumentParser):
        def error(self, message: str) -> None:  # one line and exit 2, as for configs
            line = _("{prog}: error: {error}").format(
                prog=self.prog, error=one_line(message)
            )
            self.exit(2, line + "\n")

        def _get_formatter(self) -> argparse.HelpFormatter:
            if current() == "en":  # English is wrapped as argparse always did
                return super()._get_formatter()
            return _Wrapping(prog=self.prog)

    class _Once(argparse.Action):
        """Store an option's value, refusing the option given twice (which value would
        count is then ambiguous, as with a duplicate key in a config.json)."""

        def __call__(self, parser, namespace, values, option_string=None):
            if getattr(namespace, f"_given_{self.dest}", False):
                raise argparse.ArgumentError(
                    self,
                    _("given twice; give it once (which value counts is ambiguous)"),
                )
            setattr(namespace, f"_given_{self.dest}", True)
            setattr(namespace, self.dest, values)

    _Parser.__qualname__, _Once.__qualname__ = "_Parser", "_Once"
    _TYPES = _Parser, _Once
    return _TYPES


#: A wide character (CJK, full-width forms and punctuation), a run of anything else
#: but spaces, or spaces: the units `_wrap` breaks between.
_WIDE = "\u2e80-\u9fff\uf900-\ufaff\uff00-\uffef\u3000-\u303f"
#: Full-width punctuation that never starts a line, and that never ends one.
_NO_LINE_START = "，。、；：！？）》」』"
_NO_LINE_END = "（《「『"


def _wrap(text: str, columns: int) -> list[str]:
    """``text`` in lines of at most ``columns`` terminal columns (a line holding one
    word longer than that is as long as the word; a full-width comma or closing
    bracket stays on the line before, an opening bracket goes to the line after)."""
    import re

    from llmmath.messages import width

    lines, line = [], ""
    for token in re.findall(rf"[{_WIDE}]|[^\s{_WIDE}]+|\s+", text):
        if token.isspace():
            line += " " if line else ""
        elif line and width(line + token) > columns and token not in _NO_LINE_START:
            kept = line[-1] if line[-1] in _NO_LINE_END and len(line) > 1 else ""
            lines.append(line[: len(line) - len(kept)].rstrip())
            line = kept + token
        else:
            line += token
    return lines + [line.rstrip()] if line else lines


def _params(args: argparse.Namespace) -> int:
    return _params_of(args.model, args.revision, args.json)


def _params_of(model: str, revision: str | None, as_json: bool) -> int:
    """``params``: the JSON report (`params_report`) or the table (`format_table`)."""
    name, cfg = resolve(model, revision)
    if as_json:
        print(json.dumps(params_report(name, cfg), indent=2))
    else:
        from llmmath.counting import count_params

        print(format_table(name, count_params(cfg)))
    return 0


def _quick_params(argv: list[str]) -> tuple[str, bool] | None:
    """(MODEL, whether ``--json``) when ``argv`` is ``params MODEL`` with ``--json``
    anywhere after ``params`` (any number of times, as argparse's ``store_true``
    allows), MODEL not starting with ``-``; None for anything else (``--help``,
    ``--revision``, an abbreviated option, an error, ...), which the full parser
    reads. What argparse would make of the same words, without importing it."""
    if argv[:1] != ["params"]:
        return None
    model, as_json = None, False
    for arg in argv[1:]:
        if arg == "--json":
            as_json = True
        elif model is not None or arg.startswith("-"):
            return None
        else:
            model = arg
    return None if model is None else (model, as_json)


def _kv_cache(args: argparse.Namespace) -> int:
    from llmmath.units import dtype_bits, human_bytes

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
                _(
                    "paged: {blocks} blocks of {size} tokens per sequence, {slots} "
                    "slots ({empty} empty in the last block)"
                ).format(
                    blocks=f"{paged['blocks_per_sequence']:,}",
                    size=args.block_size,
                    slots=f"{args.seq_len:,}",
                    empty=f"{paged['wasted_slots_per_sequence']:,}",
                )
            )
    total, per_token = result["bytes"], result["bytes_per_token"]
    cached = result["cached_tokens"]
    if args.json:
        print(json.dumps(result, indent=2))
        return 0
    head = _("{name}: KV cache for batch {batch} x {t} tokens in {dtype}").format(
        name=name, batch=args.batch, t=f"{args.seq_len:,}", dtype=args.dtype
    )
    tail = [
        _("  = {n} bytes = {human}").format(n=f"{total:,}", human=human_bytes(total)),
        _("  per token (one sequence): {n} bytes").format(n=f"{per_token:,}"),
    ]
    if cfg.is_mla or cfg.layer_types is not None:
        tokens = result["sliding_window_tokens"]
        kind = _cache_kind(cfg, args.layout)
        if tokens and not cfg.is_mla:
            kind = _("{kind}; {convention}").format(
                kind=kind, convention=translated(tokens)
            )
        lines = [
            _("{head} ({kind})").format(head=head, kind=kind),
            f"  {translated(result['formula'])}",
        ]
        print("\n".join(lines + tail))
        return 0
    window = (
        _(" (sliding window {w}: {n} tokens kept, {convention})").format(
            w=cfg.sliding_window,
            n=f"{cached:,}",
            convention=translated(result["sliding_window_tokens"]),
        )
        if cached < args.seq_len
        else ""
    )
    formula = (
        f"  2 x L x b x t x n_kv x d_h x bytes = 2 x {cfg.num_hidden_layers} "
        f"x {args.batch} x {cached:,} x {cfg.num_key_value_heads} x {cfg.head_dim} "
        f"x {dtype_bits(args.dtype)}/8"
    )
    print("\n".join([head + window, formula, *tail]))
    return 0


def _cache_kind(cfg: ModelConfig, layout: str) -> str:
    """How the cache is laid out, for the text report: MLA's layout, or which layers
    keep a sliding window."""
    if cfg.is_mla:
        return _("{layout} layout").format(layout=layout)
    sliding = sum(cfg.window_of(i) is not None for i in range(cfg.num_hidden_layers))
    return _("sliding window {w} on {n} of {layers} layers").format(
        w=cfg.sliding_window, n=sliding, layers=cfg.num_hidden_layers
    )


def _flops(args: argparse.Namespace) -> int:
    from llmmath.flops import forward_flops_per_token

    name, cfg = resolve(args.model, args.revision)
    # forward, backward, training per module
    if args.by_module or args.recompute or args.batch is not None:
        from llmmath.flops_by_module import by_module_report, format_by_module

        if not args.by_module:
            option = "--recompute" if args.recompute else "--batch"
            raise ConfigError(_("{option} needs --by-module").format(option=option))
        report = by_module_report(
            name,
            cfg,
            args.seq_len,
            args.batch or 1,
            args.attention,
            args.recompute or "none",
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
        (_("attention projections"), f.parts["attention"]),
        (_("FFN"), f.parts["ffn"]),
        (_("LM head"), f.parts["lm_head"]),
        (_("QK^T and AV"), f.attention),
    ]
    print(
        _("{name}: forward FLOPs per token at T = {t} ({attention} attention)").format(
            name=name, t=f"{args.seq_len:,}", attention=args.attention
        )
    )

    def show(value) -> str:
        return (
            f"{int(value):,}" if float(value).is_integer() else f"{float(value):,.2f}"
        )

    for label, value in rows:
        print(f"  {ljust(label, 24)}{show(value):>22}  {float(value / f.total):>7.2%}")
    total = ljust(_("total"), 24)
    print(f"  {total}{show(f.total):>22}\n  {translated(averaging)}")
    return 0


_count = count_argument  # the shared argparse type (llmmath.errors)


def _seq_len_option(parser: argparse.ArgumentParser, meaning: str) -> None:
    """The required ``--seq-len`` of ``kv-cache`` and ``flops``: a count up to
    `MAX_SEQ_LEN`, given once."""
    parser.add_argument(
        "--seq-len",
        type=_count_up_to(MAX_SEQ_LEN),
        required=True,
        action=_argparse_types()[1],
        help=_("{meaning} (at most {limit})").format(
            meaning=meaning, limit=f"{MAX_SEQ_LEN:,}"
        ),
    )


def _count_up_to(limit: int):
    """`_count` with the bound ``limit``, as an argparse type."""

    def count(text: str) -> int:
        return _count(text, limit)

    return count


def _add_params(sub, command, count, once) -> None:
    """Add ``params`` (`llmmath.reports.params_report` and `format_table`)."""
    from llmmath import presets

    command(
        "params",
        _params,
        _("parameter breakdown of a preset or a config.json"),
        _(
            "Exact parameter breakdown. MODEL is a preset name ({names}), a path to a "
            "config.json or a hub id org/name (its config.json from the local Hugging "
            "Face cache)."
        ).format(names=", ".join(presets.names())),
    )


def _add_kv_cache(sub, command, count, once) -> None:
    """Add ``kv-cache`` (`llmmath.reports.kv_cache_report`)."""
    from llmmath.kvcache import LAYOUTS
    from llmmath.units import DTYPE_BITS

    k = command(
        "kv-cache",
        _kv_cache,
        _("KV cache bytes of a preset or a config.json"),
        _(
            "Exact KV cache size: 2 * L * batch * tokens * n_kv * d_h * bytes per "
            "element; a sliding window W caps the tokens kept at W, what exists during "
            "the attention call (--between-steps: W - 1, what transformers keeps "
            "between calls)."
        ),
    )
    _seq_len_option(k, _("tokens per sequence"))
    k.add_argument(
        "--batch",
        type=_count_up_to(MAX_BATCH),
        default=1,
        action=once,
        help=_("sequences (default 1, at most {limit})").format(limit=f"{MAX_BATCH:,}"),
    )
    k.add_argument(
        "--dtype",
        action=once,
        default="bf16",
        choices=list(DTYPE_BITS),
        help=_("cache number format (default bf16)"),
    )
    k.add_argument(
        "--layout",
        action=once,
        default="latent",
        choices=list(LAYOUTS),
        help=_(
            "multi-head latent attention: cache the latent (default) or per-head keys "
            "and values"
        ),
    )
    k.add_argument(
        "--block-size",
        type=_count_up_to(MAX_SEQ_LEN),
        default=None,
        action=once,
        help=_("paged cache: round each sequence up to whole blocks of B tokens"),
    )
    k.add_argument(
        "--between-steps",
        action="store_true",
        help=_(
            "count W - 1 tokens per sliding-window layer, what transformers keeps "
            "between forward calls (default: W, what exists during the attention call)"
        ),
    )


def _add_flops(sub, command, count, once) -> None:
    """Add ``flops`` (`llmmath.reports.flops_report`, `llmmath.flops_by_module`)."""
    f = command(
        "flops",
        _flops,
        _("forward FLOPs per token of a preset or a config.json"),
        _(
            "Forward FLOPs per token: 2 x every matmul weight (LM head included) plus "
            "QK^T and AV at length T."
        ),
    )
    _seq_len_option(f, _("sequence length T"))
    f.add_argument(
        "--attention",
        action=once,
        choices=["causal", "full"],
        default="causal",
        help=_("count causal pairs (default) or all T x T"),
    )
    f.add_argument(
        "--by-module",
        action="store_true",
        help=_("forward, backward and training FLOPs of the batch, per module"),
    )
    f.add_argument(
        "--batch",
        type=_count_up_to(MAX_BATCH),
        action=once,
        help=_("with --by-module: sequences (default 1, at most {limit})").format(
            limit=f"{MAX_BATCH:,}"
        ),
    )
    f.add_argument(
        "--recompute",
        action=once,
        choices=["none", "selective", "full"],
        help=_("with --by-module: activation recomputation (default none)"),
    )


def _add_coursework(sub, command, count, once) -> None:
    """List ``coursework`` for ``--help``; `main` hands its arguments to
    `llmmath.coursework.cli`, which has its own parser."""
    sub.add_parser(
        "coursework",
        help=_("coursework: hand out signed sheets, grade them in a sandbox"),
        description=_(
            "The teacher's commands (handout, key, editions, grade); `python -m "
            "llmmath coursework --help` lists them."
        ),
        add_help=False,
    )


#: Every command in ``--help``'s order, with what adds it: a function here, or the
#: module whose ``add_commands(sub, command, count, once)`` adds that group.
_BUILDERS = (
    (("params",), _add_params),
    (("kv-cache",), _add_kv_cache),
    (("flops",), _add_flops),
    (("memory", "speculative", "measure"), "llmmath.cli.serving"),
    (("parallel",), "llmmath.cli.parallel"),
    (("train-memory",), "llmmath.cli.training"),
    (("coursework",), _add_coursework),
)
#: The command names, in ``--help``'s order.
COMMANDS = tuple(name for names, _ in _BUILDERS for name in names)


class _Only:
    """The subparsers of `build_parser` as a builder sees them: the command ``only``
    is added in full; any other gets an empty placeholder in its place (keeping the
    order of the choices) while its options go to a parser that is thrown away."""

    def __init__(self, sub, only: str | None) -> None:
        self.sub, self.only = sub, only

    def add_parser(self, name: str, **kwargs) -> argparse.ArgumentParser:
        if self.only is None or name == self.only:
            return self.sub.add_parser(name, **kwargs)
        self.sub.add_parser(name, add_help=False)
        return _argparse_types()[0](prog=name, add_help=False)


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    """The parser of ``python -m llmmath``: every command, or with ``only`` (one of
    `COMMANDS`) that command in full and the others as empty placeholders, so that a
    command imports only what it uses (a group's module, such as
    `llmmath.cli.serving`, loads only when one of its commands is built)."""
    _Parser, _Once = _argparse_types()
    parser = _Parser(
        prog="python -m llmmath",
        description=_(
            "Exact parameters, KV cache bytes and FLOPs of decoder-only language "
            "models."
        ),
    )
    sub = _Only(
        parser.add_subparsers(dest="command", required=True, parser_class=_Parser),
        only if only in COMMANDS else None,
    )

    def command(name: str, run, help: str, description: str) -> argparse.ArgumentParser:
        cmd = sub.add_parser(name, help=help, description=description)
        cmd.add_argument(
            "model",
            metavar="MODEL",
            help=_(
                "preset name, path to a config.json, or hub id org/name (read from "
                "the local Hugging Face cache)"
            ),
        )
        cmd.add_argument("--revision", action=_Once, help=_(REVISION_HELP))
        cmd.add_argument("--json", action="store_true", help=_(JSON_HELP))
        cmd.set_defaults(run=run)
        return cmd

    count, once = _count_up_to(MAX_SEQ_LEN), _Once
    for names, add in _BUILDERS:
        if sub.only is not None and sub.only not in names:
            for name in names:
                sub.add_parser(name)
            continue
        if isinstance(add, str):
            add = importlib.import_module(add).add_commands
        add(sub, command, count, once)
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
        quick = _quick_params(argv)
        if quick is not None:  # the common case, without argparse
            model, as_json = quick
            return _run_command(_params_of, model, None, as_json)
        only = argv[0] if argv and argv[0] in COMMANDS else None
        with _ArgparseSpeaking():
            args = build_parser(only).parse_args(argv)
    except SystemExit as e:  # argparse: --help (0) or a bad argument (2, one line)
        return e.code if isinstance(e.code, int) else 0 if e.code is None else 2
    return _run_command(args.run, args)


def _run_command(run, *args) -> int:
    """``run(*args)``'s status, or 2 with one line on stderr for a `ConfigError` or
    a package of an extra that is not installed (`MissingExtra`, which names the
    extra)."""
    try:
        return run(*args)
    except (ConfigError, MissingExtra) as e:
        print(error_line(e), file=sys.stderr)
        return 2


def error_line(error: Exception | str) -> str:
    """The one line of an error, ``llmmath: error: …`` (``llmmath：错误：…`` in
    Chinese), with every line break escaped (`one_line`)."""
    return _("llmmath: error: {error}").format(error=one_line(str(error)))


#: argparse's own words that a reader of ``--help`` or of a bad argument meets: in the
#: catalogue, so that argparse says them in the reader's language (`_ArgparseSpeaking`).
ARGPARSE_MESSAGES = (
    N_("usage: "),
    N_("positional arguments"),
    N_("options"),
    N_("show this help message and exit"),
    N_("argument %(argument_name)s: %(message)s"),
    N_("the following arguments are required: %s"),
    N_("unrecognized arguments: %s"),
    N_("invalid choice: %(value)r (choose from %(choices)s)"),
    N_("invalid %(type)s value: %(value)r"),
    N_("expected one argument"),
    N_("expected at most one argument"),
    N_("expected at least one argument"),
    N_("ambiguous option: %(option)s could match %(matches)s"),
    N_("ignored explicit argument %r"),
    N_("not allowed with argument %s"),
    N_("one of the arguments %s is required"),
    N_("unexpected option string: %s"),
    N_("unknown parser %(parser_name)r (choices: %(choices)s)"),
)


class _ArgparseSpeaking:
    """Within it, argparse's own messages (`ARGPARSE_MESSAGES`: "usage:", its headings
    and errors) come from llmmath's catalogue in a language other than English; the
    gettext argparse had comes back after. (argparse looks its words up through the
    module's ``_`` when it builds a parser and when it reports, both inside.)"""

    def __enter__(self) -> None:
        import argparse

        self.before = argparse._
        if current() != "en":
            argparse._ = _

    def __exit__(self, *exc) -> None:
        import argparse

        argparse._ = self.before

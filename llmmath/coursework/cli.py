"""The teacher's commands: ``python -m llmmath.coursework handout|key|editions|grade``.

``handout --students roster.txt --out DIR [--key KEYFILE] [--force] [CHAPTER ...]``
writes one signed sheet per student and chapter; ``key --student ID [CHAPTER ...]``
prints a student's answers; ``editions [--out coursework]`` writes the blank sheets;
``grade DIR [--key KEYFILE] [--csv out.csv] [--junit out.xml] [--unsafe] [--cell-timeout
S] [--timeout S]`` grades every notebook under DIR, each in its own sandbox
(`llmmath.coursework.grading`), and prints one line per student and question.

Exit status of ``grade``: 0 every answer of every sheet right, 1 some answer not right
(wrong, not answered, tampered or unreadable), 2 the grader could not run (bad input, no
key, no sandbox, a failed pre-flight), with one line on stderr and never a traceback.
The other commands exit 0, or 2 on bad input."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from llmmath.messages import gettext as _


class _Parser(argparse.ArgumentParser):
    def error(self, message):
        from llmmath.errors import one_line  # line breaks a user typed, escaped

        self.exit(2, f"{self.prog}: error: {one_line(message)}\n")


def _positive(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a number; got {text!r}") from None
    if not value > 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"must be positive; got {text!r}")
    return value


def _count(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be an integer; got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1; got {text!r}")
    return value


def _grade_epilog() -> str:
    import textwrap

    from llmmath.coursework.grading import NAMING_RULE

    rule = textwrap.fill(
        f"Only regular files named {NAMING_RULE}.",
        width=86,
        initial_indent="  ",
        subsequent_indent="  ",
    )
    return f"""\
files read:
{rule}
  Links (never followed), devices, other files and deeper folders are listed in the
  report as unreadable and never opened; nothing in DIR is imported or run as it is.

exit status:
  0  every answer of every sheet is right
  1  some answer is not right (wrong, not answered, tampered or unreadable)
  2  the grader could not run: bad input, no key, no sandbox, or a failed
     pre-flight (the sandbox cannot import llmmath); nobody is marked then
"""


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="python -m llmmath.coursework",
        description="Coursework: hand out signed sheets, print a student's answers, "
        "write the blank editions, or grade handed-in sheets in a sandbox.",
    )
    actions = parser.add_subparsers(dest="action", required=True, parser_class=_Parser)
    h = actions.add_parser("handout", help="write OUT/<student>/<chapter>.ipynb")
    h.add_argument("--students", required=True, help="roster: one student ID a line")
    h.add_argument("--out", required=True, help="folder to write into")
    h.add_argument("--force", action="store_true", help="overwrite existing sheets")
    h.add_argument(
        "--lang",
        default="en",
        help="the sheets' language: en (default) or zh (Chinese)",
    )
    key = actions.add_parser("key", help="one student's answers, for the teacher")
    key.add_argument("--student", required=True, help="the student's ID")
    ed = actions.add_parser("editions", help="the blank editions (coursework/)")
    ed.add_argument("--out", default="coursework", help="folder (default: coursework)")
    ed.add_argument("--lang", default="en", help="en (default) or zh (Chinese)")
    g = actions.add_parser(
        "grade",
        help="grade every notebook under DIR",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Grade every handed-in sheet under DIR, each in its own sandbox, "
        "and print one line per student and question.",
        epilog=_grade_epilog(),
    )
    g.add_argument("folder", metavar="DIR", help="the handed-in notebooks")
    g.add_argument("--csv", help="also write the grades as CSV")
    g.add_argument("--junit", help="also write the grades as JUnit XML")
    g.add_argument(
        "--unsafe", action="store_true", help="grade without a sandbox (not advised)"
    )
    g.add_argument(
        "--cell-timeout", type=_positive, default=60, help="seconds (default 60)"
    )
    g.add_argument(
        "--timeout", type=_positive, default=600, help="seconds a notebook (600)"
    )
    g.add_argument(
        "--memory-mb",
        type=_count,
        default=4096,
        help="MiB for all of a sheet's processes (default 4096)",
    )
    g.add_argument(
        "--jobs", type=_count, default=0, help="sheets at once (default CPUs + 1)"
    )
    g.add_argument(
        "--processes",
        type=_count,
        default=256,
        help="processes and threads a sheet may run at once (default 256)",
    )
    for a in (h, g):
        a.add_argument(
            "--key",
            help="the teacher's key file (default $LLMMATH_COURSEWORK_KEY or "
            "~/.config/llmmath/coursework.key)",
        )
    for a in (h, key, ed):
        a.add_argument(
            "chapters",
            nargs="*",
            metavar="CHAPTER",
            help="chapters, e.g. 07_kv_cache (default: all)",
        )
    return parser


def _grade(args) -> int:
    from llmmath.coursework.grading import Options, grade_folder
    from llmmath.coursework.sandbox import Limits
    from llmmath.coursework.signing import default_key_path, load_key

    key_path = Path(args.key) if args.key else default_key_path()
    key = load_key(key_path)
    folder = Path(args.folder).resolve()
    if folder == key_path.resolve().parent or folder in key_path.resolve().parents:
        raise ValueError(f"key file {key_path} lies inside the graded folder {folder}")
    limits = Limits(
        cell_timeout=args.cell_timeout,
        notebook_timeout=args.timeout,
        memory_mb=args.memory_mb,
        processes=args.processes,
    )
    options = Options(limits, unsafe=args.unsafe, jobs=args.jobs, key_path=key_path)
    if args.unsafe:
        print(_("warning: grading without a sandbox (--unsafe)"), file=sys.stderr)
    report = grade_folder(args.folder, key, options)
    if args.csv:
        report.write_csv(args.csv)
    if args.junit:
        report.write_junit(args.junit)
    sys.stdout.write(report.text())
    return 0 if report.all_right else 1


def main(argv: list[str] | None = None) -> int:
    """Run the command in ``argv`` (default ``sys.argv[1:]``); returns the exit
    status."""
    from llmmath.coursework import chapters
    from llmmath.coursework.handout import (
        answer_key,
        hand_out,
        read_students,
        student_notebook,
    )
    from llmmath.coursework.signing import default_key_path

    args = build_parser().parse_args(argv)
    try:
        if args.action == "grade":
            return _grade(args)
        chapter_list = list(dict.fromkeys(args.chapters)) or list(chapters())
        if args.action == "handout":
            key_path = Path(args.key) if args.key else default_key_path()
            new_key = not key_path.exists()
            written = hand_out(
                read_students(args.students),
                args.out,
                chapter_list,
                key=args.key,
                force=args.force,
                lang=args.lang,
            )
            print(
                _("wrote {n} notebooks under {out}").format(
                    n=len(written), out=args.out
                )
            )
            notice = (
                _(
                    "created the key {key}: grade with it, keep it private, out of the "
                    "hand-out folder and out of git, and back it up"
                )
                if new_key
                else _(
                    "signed with the key {key}: grade with it, keep it private, out of "
                    "the hand-out folder and out of git, and back it up"
                )
            )
            print(notice.format(key=key_path.resolve()))
        elif args.action == "key":
            for chapter in chapter_list:
                for n, p in enumerate(answer_key(chapter, args.student), 1):
                    tol = ""
                    if p.tolerance:
                        low, high = sorted(
                            p.answer * (1 + s * p.tolerance) for s in (-1, 1)
                        )
                        tol = _(
                            " (relative tolerance {tolerance}: {low} to {high} "
                            "accepted)"
                        ).format(
                            tolerance=f"{p.tolerance:g}",
                            low=f"{low:,.10g}",
                            high=f"{high:,.10g}",
                        )
                    print(
                        _(
                            "{chapter} {student} question {n}: {answer}{tolerance}"
                        ).format(
                            chapter=chapter,
                            student=args.student,
                            n=n,
                            answer=p.answer_text,
                            tolerance=tol,
                        )
                    )
        else:
            import nbformat

            os.makedirs(args.out, exist_ok=True)
            for chapter in chapter_list:
                nbformat.write(
                    student_notebook(chapter, lang=args.lang),
                    os.path.join(args.out, f"{chapter}.ipynb"),
                )
            print(
                _("wrote {n} blank editions under {out}").format(
                    n=len(chapter_list), out=args.out
                )
            )
    except (ValueError, OSError, RuntimeError) as e:
        print(_("llmmath: error: {error}").format(error=e), file=sys.stderr)
        return 2
    except ModuleNotFoundError as e:  # nbformat and the kernel: llmmath[notebooks]
        from llmmath.errors import needs_extra

        print(
            f"llmmath: error: {needs_extra(e, 'python -m llmmath coursework')}",
            file=sys.stderr,
        )
        return 2
    return 0

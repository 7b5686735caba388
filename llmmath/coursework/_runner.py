"""Inside the sandbox: run one grading notebook with nbval and report each cell.

``python -m llmmath.coursework._runner SHEET --cell-timeout S --cpu S --memory-mb M
--file-mb F --processes P --input-fd I --records-fd R`` reads, from descriptor I, a
line with the run's secret token and then the grading notebook, which it writes to
SHEET. It makes itself undumpable (so no process of the sheet can read the token from
its memory, open its file descriptors through ``/proc`` or trace it), closes I, keeps R
from every process it starts, sets the resource limits (inherited by the kernel, before
any student code runs), sends its own output and the kernel's to /dev/null, and runs
``pytest --nbval-lax`` on SHEET with `llmmath.coursework._capture`, which writes one
``LLMMATH-CELL <token> {json}`` line per cell to R. The grader (`llmmath.coursework.
sandbox.Launch`) holds the other ends of I and R, and no process of the sheet can open
either: bwrap's init closes them, and the sheet's processes are neither the runner nor
its parent. The grader trusts only the answer values in lines that carry the token.

``python -m llmmath.coursework._runner --check`` is the grader's pre-flight: it imports
everything a run needs and exits 0, or prints the error on stderr and exits 1."""

from __future__ import annotations

import argparse
import ctypes
import os
import resource
import sys
from pathlib import Path


def _limit(which: int, value: int) -> None:
    try:
        resource.setrlimit(which, (value, value))
    except (ValueError, OSError):
        soft, hard = resource.getrlimit(which)
        if hard == resource.RLIM_INFINITY or value < hard:
            resource.setrlimit(which, (value, value))


def _undumpable() -> None:
    """prctl(PR_SET_DUMPABLE, 0): no process of the same user may ptrace this one or
    open its /proc files (memory, file descriptors)."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(4, 0, 0, 0, 0)  # PR_SET_DUMPABLE = 4
    except (OSError, AttributeError):
        pass


def check() -> int:
    """Import what a grading run needs; 0 if all of it imports."""
    try:
        import ipykernel  # noqa: F401
        import nbval  # noqa: F401
        import pytest  # noqa: F401

        import llmmath.coursework  # noqa: F401
        import llmmath.coursework._capture  # noqa: F401
        import llmmath.coursework._record  # noqa: F401
    except Exception as e:  # any failure here is the grader's, not a student's
        print(f"{type(e).__name__}: {e}", file=sys.stderr)
        return 1
    return 0


def main(argv: list[str] | None = None) -> int:
    """Run the grading notebook given on standard input (see the module's
    docstring)."""
    parser = argparse.ArgumentParser(prog="python -m llmmath.coursework._runner")
    parser.add_argument("sheet", nargs="?")
    parser.add_argument("--check", action="store_true")
    parser.add_argument("--cell-timeout", type=float, default=60)
    parser.add_argument("--cpu", type=int, default=605)
    parser.add_argument("--memory-mb", type=int, default=4096)
    parser.add_argument("--file-mb", type=int, default=64)
    parser.add_argument("--processes", type=int, default=256)
    parser.add_argument("--input-fd", type=int, default=0)
    parser.add_argument("--records-fd", type=int, default=1)
    args = parser.parse_args(argv)
    if args.check or args.sheet is None:
        return check()
    _undumpable()
    os.set_inheritable(args.records_fd, False)
    with os.fdopen(args.input_fd, "rb", closefd=args.input_fd > 2) as given:
        token = given.readline().decode("ascii", "replace").strip()
        notebook = given.read()
    sheet = Path(args.sheet)
    sheet.parent.mkdir(parents=True, exist_ok=True)
    sheet.write_bytes(notebook)
    _limit(resource.RLIMIT_CPU, args.cpu)
    _limit(resource.RLIMIT_AS, args.memory_mb << 20)
    _limit(resource.RLIMIT_FSIZE, args.file_mb << 20)
    _limit(resource.RLIMIT_CORE, 0)
    _limit(resource.RLIMIT_NPROC, args.processes)

    out = os.fdopen(os.dup(args.records_fd), "w", buffering=1, encoding="utf-8")
    if args.records_fd > 2:
        os.close(args.records_fd)
    null = os.open(os.devnull, os.O_RDWR)
    os.dup2(null, 0)
    os.dup2(null, 1)
    os.dup2(null, 2)

    # jsonschema's optional IRI format checker takes a second to import (it builds a
    # grammar) and nbformat's validation never needs it: leave it out of every sheet's
    # run.
    sys.modules.setdefault("rfc3987_syntax", None)
    import pytest

    from llmmath.coursework import _capture

    _capture.OUT, _capture.TOKEN = out, token
    ini = Path.cwd() / "pytest.ini"
    ini.write_text("[pytest]\n", encoding="utf-8")
    return pytest.main(
        [
            str(sheet),
            "-c",
            str(ini),
            "--rootdir",
            str(Path.cwd()),
            "-p",
            "nbval",
            "-p",
            "llmmath.coursework._capture",
            "-p",
            "no:cacheprovider",
            "--nbval-lax",
            "--nbval-current-env",
            f"--nbval-cell-timeout={args.cell_timeout:g}",
            "-q",
        ]
    )


if __name__ == "__main__":
    sys.exit(main())

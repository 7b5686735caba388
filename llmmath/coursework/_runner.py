"""Inside the sandbox: run one grading notebook with nbval and report each cell.

``python -m llmmath.coursework._runner SHEET --cell-timeout S --cpu S --memory-mb M
--file-mb F`` sets the resource limits (inherited by the kernel, before any student code
runs), sends its own output and the kernel's to /dev/null, and runs ``pytest
--nbval-lax`` on SHEET with `llmmath.coursework._capture`, which writes one
``LLMMATH-CELL {json}`` line per cell to the grader. The grader trusts only the answer
values in those lines."""

from __future__ import annotations

import argparse
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


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m llmmath.coursework._runner")
    parser.add_argument("sheet")
    parser.add_argument("--cell-timeout", type=float, required=True)
    parser.add_argument("--cpu", type=int, required=True)
    parser.add_argument("--memory-mb", type=int, required=True)
    parser.add_argument("--file-mb", type=int, required=True)
    args = parser.parse_args(argv)
    _limit(resource.RLIMIT_CPU, args.cpu)
    _limit(resource.RLIMIT_AS, args.memory_mb << 20)
    _limit(resource.RLIMIT_FSIZE, args.file_mb << 20)
    _limit(resource.RLIMIT_CORE, 0)

    out = os.fdopen(os.dup(1), "w", buffering=1, encoding="utf-8")
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

    _capture.OUT = out
    sheet = Path(args.sheet)
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

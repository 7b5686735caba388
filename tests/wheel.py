"""llmmath as its users install it: the wheel, built from the package's own files, and
a fresh virtual environment holding it and nothing else (tests/test_wheel.py, and the
start-up figures of tests/benchmarks/run.py).

The wheel is the one the site serves (`llmmath_book.runtime.build_wheel`): built from a
copy of what pip reads (pyproject.toml, README.md and llmmath/), so nothing is written
into the checkout, with the setuptools of the running environment
(``--no-build-isolation``: nothing is downloaded). It is installed with
``--no-deps`` into a ``python -m venv --without-pip`` environment by this Python's pip
(``--python``), which compiles the bytecode at install as every pip install does.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _pip(*args: str, timeout: float = 300) -> subprocess.CompletedProcess:
    result = subprocess.run(
        [sys.executable, "-m", "pip", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    if result.returncode:
        raise RuntimeError(f"pip {' '.join(args)}: {result.stdout}{result.stderr}")
    return result


def build_wheel(work: Path) -> Path:
    """Build llmmath's wheel under ``work`` (a new folder) as the site builds the one it
    serves (`llmmath_book.runtime.build_wheel`, from a copy of the source); its path."""
    from llmmath_book.runtime import build_wheel as build

    return build(ROOT, work / "dist")


def install_wheel(wheel: Path, venv: Path) -> Path:
    """A new virtual environment at ``venv`` (no pip, no system site-packages) with
    ``wheel`` installed and nothing else; its Python."""
    subprocess.run(
        [sys.executable, "-m", "venv", "--without-pip", str(venv)],
        check=True,
        timeout=120,
    )
    python = venv / "bin" / "python"
    _pip("--python", str(python), "install", "--quiet", "--no-deps", str(wheel))
    return python

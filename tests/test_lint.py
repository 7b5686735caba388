"""ruff check and ruff format (line length 88, config in pyproject.toml) over the
package, the tests, the chapters and the book's notebooks."""

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PATHS = ["llmmath", "tests", "chapters", "book"]
RUFF = [sys.executable, "-m", "ruff"]


@pytest.mark.parametrize(
    "command", [["check", "--output-format", "concise"], ["format", "--check"]]
)
def test_ruff(command):
    result = subprocess.run(
        [*RUFF, *command, *PATHS], cwd=ROOT, capture_output=True, text=True
    )
    assert result.returncode == 0, result.stdout[-6000:] + result.stderr[-2000:]

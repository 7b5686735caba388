"""The chapters' stored outputs hold on other CPU kernels too.

``ATEN_CPU_CAPABILITY=default`` makes PyTorch use its generic kernels instead of the
AVX2 or AVX-512 ones, and ``OMP_NUM_THREADS=1`` changes how reductions split, the way
another machine would. Every output must still match: numbers at rounding level are
asserted in the cells and never printed. pyproject.toml's addopts add ``--nbval`` and
the sanitizer.
"""

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted(str(p.relative_to(ROOT)) for p in ROOT.glob("chapters/*.ipynb"))


def test_nbval_with_generic_kernels_and_one_thread():
    env = {**os.environ, "ATEN_CPU_CAPABILITY": "default", "OMP_NUM_THREADS": "1"}
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            *NOTEBOOKS,
            "book/errata.ipynb",
        ],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0, result.stdout[-8000:] + result.stderr[-2000:]

"""The chapters' stored outputs hold on other CPU kernels too.

``ATEN_CPU_CAPABILITY=default`` makes PyTorch use its generic kernels instead of the
AVX2 or AVX-512 ones, and ``OMP_NUM_THREADS=1`` changes how reductions split, the way
another machine would. Every output must still match: numbers at rounding level are
asserted in the cells and never printed. pyproject.toml's addopts add ``--nbval`` and
the sanitizer. The notebooks run in two pytest processes at once (each kernel uses one
thread), which halves the time on a two-core machine.
"""

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted(str(p.relative_to(ROOT)) for p in ROOT.glob("chapters/*.ipynb"))
NOTEBOOKS.append("book/errata.ipynb")


def test_nbval_with_generic_kernels_and_one_thread():
    env = {**os.environ, "ATEN_CPU_CAPABILITY": "default", "OMP_NUM_THREADS": "1"}
    halves = [NOTEBOOKS[0::2], NOTEBOOKS[1::2]]
    runs = [
        subprocess.Popen(
            [sys.executable, "-m", "pytest", "-q", *half],
            cwd=ROOT,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        for half in halves
    ]
    outputs = [run.communicate()[0] for run in runs]
    failed = [out[-8000:] for run, out in zip(runs, outputs) if run.returncode != 0]
    assert not failed, "\n\n".join(failed)

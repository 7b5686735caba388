"""Speed of the reader's tools on this machine (a script, not collected by pytest).

    make benchmark        # or: .venv/bin/python tests/benchmarks/run.py

Prints, against the targets of the foundation issue:
- whole-process time of ``python -m llmmath params <preset> --json`` (target < 0.3 s);
- ``import llmmath`` inside a fresh interpreter (target < 0.2 s);
- each chapter's execution time in a fresh kernel (target < 10 s each);
- each explorer's recompute-and-redraw time in a kernel (target < 50 ms);
- grading a class of 30 coursework sheets of one chapter, each in its own sandbox
  (``python -m llmmath.coursework grade``, target < 60 s).
"""

from __future__ import annotations

import statistics
import subprocess
import sys
import time
from pathlib import Path

import nbformat
from nbclient import NotebookClient

ROOT = Path(__file__).resolve().parents[2]
REPEATS = 7


def whole_process(args: list[str]) -> float:
    """Median wall time of running ``args`` as a new process, in seconds."""
    times = []
    for _ in range(REPEATS):
        start = time.perf_counter()
        subprocess.run(args, check=True, capture_output=True, cwd=ROOT)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def import_time() -> float:
    """Median time of ``import llmmath`` in a fresh interpreter, in seconds."""
    code = (
        "import time; t = time.perf_counter(); import llmmath; "
        "print(time.perf_counter() - t)"
    )
    return statistics.median(
        float(
            subprocess.run(
                [sys.executable, "-c", code],
                check=True,
                capture_output=True,
                text=True,
                cwd=ROOT,
            ).stdout
        )
        for _ in range(REPEATS)
    )


def chapter_time(path: Path) -> float:
    """Seconds to execute a chapter top to bottom in a fresh kernel (no start-up)."""
    nb = nbformat.read(path, as_version=4)
    client = NotebookClient(
        nb,
        timeout=600,
        kernel_name="python3",
        resources={"metadata": {"path": str(path.parent)}},
    )
    with client.setup_kernel():
        start = time.perf_counter()
        for index, cell in enumerate(nb.cells):
            client.execute_cell(cell, index)
        return time.perf_counter() - start


#: Each explorer and one control change that makes it recompute and redraw.
WIDGETS = {
    "ParamExplorer": (
        "ParamExplorer('llama-2-7b')",
        "explorer.sizes['num_hidden_layers']",
    ),
    "AttentionExplorer": ("AttentionExplorer()", "explorer.seq_len"),
    "ServingExplorer": ("ServingExplorer()", "explorer.batch"),
    "RotaryExplorer": ("RotaryExplorer()", "explorer.position"),
    "MemoryBudget": ("MemoryBudget()", "explorer.batch"),
    "RooflineExplorer": ("RooflineExplorer()", "explorer.batch"),
}


def widget_time(name: str) -> float:
    """Median seconds for one control change of an explorer, in a live kernel."""
    make, control = WIDGETS[name]
    cells = [
        "import time, statistics\nfrom llmmath import widgets\n"
        f"explorer = widgets.{make}\ncontrol = {control}\nstart_value = control.value",
        "times = []\nfor i in range(20):\n    start = time.perf_counter()\n"
        "    control.value = start_value + 1 + i % 2\n"
        "    times.append(time.perf_counter() - start)\n"
        "print(statistics.median(times))",
    ]
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(c) for c in cells])
    NotebookClient(
        nb,
        timeout=120,
        kernel_name="python3",
        resources={"metadata": {"path": str(ROOT)}},
    ).execute()
    return float(nb.cells[-1].outputs[0]["text"])


def coursework_class_time(students: int = 30, chapter: str = "07_kv_cache") -> float:
    """Seconds for ``python -m llmmath.coursework grade`` over a class's answered sheets
    of one chapter, each in its own sandbox (the whole process, on every CPU)."""
    import tempfile

    from llmmath.coursework.handout import student_notebook
    from llmmath.coursework.signing import load_key

    answers = {
        "sheet.check(1, answer_1)": "d = q1.hidden_size // q1.num_attention_heads\n"
        "answer_1 = 2 * q1.num_hidden_layers * q1.num_key_value_heads * d * "
        "{'bf16': 2, 'fp32': 4, 'fp8': 1}[q1.dtype]\n\n",
        "sheet.check(2, answer_2)": "d = q2.hidden_size // q2.num_attention_heads\n"
        "answer_2 = 2 * q2.num_hidden_layers * q2.batch * q2.seq_len"
        " * q2.num_key_value_heads * d * 2\n\n",
    }
    with tempfile.TemporaryDirectory() as tmp:
        key = load_key(Path(tmp) / "key", create=True)
        (Path(tmp) / "in").mkdir()
        for i in range(students):
            nb = student_notebook(chapter, f"s{i:02d}", key=key)
            for cell in nb.cells:
                last = cell.source.splitlines()[-1:]
                if last and last[0] in answers:
                    cell.source = answers[last[0]] + last[0]
            nbformat.write(nb, Path(tmp) / "in" / f"s{i:02d}.ipynb")
        start = time.perf_counter()
        run = subprocess.run(
            [sys.executable, "-m", "llmmath.coursework", "grade", "in", "--key", "key"],
            capture_output=True,
            text=True,
            cwd=tmp,
        )
        seconds = time.perf_counter() - start
    if run.returncode != 0:
        raise RuntimeError(f"grading failed: {run.stdout[-500:]}{run.stderr[-500:]}")
    return seconds


def report(label: str, seconds: float, target: float) -> None:
    verdict = "ok" if seconds < target else "OVER TARGET"
    print(
        f"{label:<52} {seconds * 1000:8.1f} ms   "
        f"target < {target * 1000:.0f} ms   {verdict}"
    )


def main() -> None:
    print(f"python {sys.version.split()[0]}, median of {REPEATS} runs where repeated\n")
    for preset in ("llama-2-7b", "gpt2"):
        report(
            f"python -m llmmath params {preset} --json",
            whole_process(
                [sys.executable, "-m", "llmmath", "params", preset, "--json"]
            ),
            0.3,
        )
    report("import llmmath", import_time(), 0.2)
    for path in sorted((ROOT / "chapters").glob("*.ipynb")) + sorted(
        (ROOT / "book").glob("*.ipynb")
    ):
        report(f"chapter {path.name}", chapter_time(path), 10.0)
    for name in WIDGETS:
        report(f"{name} recompute and redraw", widget_time(name), 0.05)
    report("grade 30 coursework sheets (07_kv_cache)", coursework_class_time(), 60.0)


if __name__ == "__main__":
    main()

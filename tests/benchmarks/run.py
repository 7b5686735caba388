"""Speed of the reader's tools on this machine (a script, not collected by pytest).

    make benchmark        # or: .venv/bin/python tests/benchmarks/run.py

    make benchmark BENCHMARK_ARGS=startup   # the start-up figures alone

Prints, against the targets of the foundation issue and of issue 25:
- start-up against bare Python (`startup_report`): a whole ``python -m llmmath params
  <preset> --json`` process against ``python -c pass`` (target < 1.5x), ``import
  llmmath`` in a fresh interpreter (target < 15 ms) and one in-process query (target
  < 30 µs), each with the spread of its runs (this machine's noise);
- each chapter's execution time in a fresh kernel (target < 10 s each);
- each explorer's recompute time in a kernel (target < 50 ms);
- on the built site in headless Chromium: the first change of an explorer's control to
  its first result computed in the page by Pyodide, cold (target < 4 s), a later update
  (target < 100 ms), and the bytes the runtime (Pyodide, the wheel) adds to the site;
- grading a class of 30 coursework sheets of one chapter, each in its own sandbox
  (``python -m llmmath.coursework grade``, target < 30 s on 2 cores), and the same class
  with six slow copies of one student's sheet handed in under other names (they are
  refused before anything runs: target within 1.2x of the class alone), and a class of
  30 with 8 hostile sheets (issue 35: two freezers, the tracer, the forger, forged
  report lines, the XML breaker, a folder of 1,000 files, an invisible character in a
  name; target under 2 minutes and within 2x of the class alone);
- the distributed tests (``tests/test_distributed.py``: two gloo processes and the fake
  process group) as one pytest process (target < 60 s).
"""

from __future__ import annotations

import os
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


#: Runs of each start-up figure (the median and the best are shown).
STARTUP_RUNS = 21

#: One in-process query, timed in a fresh interpreter with the package imported and
#: the preset loaded once: (label, setup, statement).
QUERIES = (
    (
        "count_params(cfg), cfg a loaded preset",
        "from llmmath import count_params, presets; cfg = presets.load(P)",
        "count_params(cfg)",
    ),
    (
        "count_params(presets.load(name))",
        "from llmmath import count_params, presets; presets.load(P)",
        "count_params(presets.load(P))",
    ),
    (
        "params_report(name, cfg), what params --json prints",
        "from llmmath import presets; from llmmath.cli import params_report; "
        "cfg = presets.load(P)",
        "params_report(P, cfg)",
    ),
)


def _bytecode_env(prefix: str) -> dict[str, str]:
    """The environment with bytecode written and read under ``prefix``, as an installed
    package has it (pip compiles at install): without it (``PYTHONDONTWRITEBYTECODE``,
    set here by the sandbox) every process compiles llmmath's sources again, several
    ms that no user pays."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    return {**env, "PYTHONPYCACHEPREFIX": prefix}


#: The environment of the start-up runs (`startup_report` sets it).
STARTUP_ENV: dict[str, str] | None = None


def _runs(args: list[str], runs: int = STARTUP_RUNS) -> list[float]:
    """Wall seconds of ``runs`` runs of ``args`` as a new process (one warm-up run
    first, not counted, which also writes the bytecode)."""
    subprocess.run(args, check=True, capture_output=True, cwd=ROOT, env=STARTUP_ENV)
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        subprocess.run(args, check=True, capture_output=True, cwd=ROOT, env=STARTUP_ENV)
        times.append(time.perf_counter() - start)
    return times


def _spread(times: list[float]) -> str:
    """Median, best and the interquartile range of ``times``, in ms."""
    q1, _, q3 = statistics.quantiles(times, n=4)
    return (
        f"median {statistics.median(times) * 1e3:.1f} ms, best {min(times) * 1e3:.1f}"
        f" ms, IQR {(q3 - q1) * 1e3:.1f} ms"
    )


def import_times(runs: int = STARTUP_RUNS) -> list[float]:
    """Seconds of ``import llmmath`` in ``runs`` fresh interpreters (wall time around
    the import statement)."""
    code = (
        "import time; t = time.perf_counter(); import llmmath; "
        "print(time.perf_counter() - t)"
    )
    return [
        float(
            subprocess.run(
                [sys.executable, "-c", code],
                check=True,
                capture_output=True,
                text=True,
                cwd=ROOT,
                env=STARTUP_ENV,
            ).stdout
        )
        for _ in range(runs)
    ]


def query_time(setup: str, statement: str, preset: str = "llama-3-8b") -> float:
    """Best seconds per call of ``statement`` after ``setup`` (``P`` the preset's
    name), in a fresh interpreter: `timeit`'s autorange loop count, best of 7."""
    code = (
        "import timeit\n"
        f"P = {preset!r}\n"
        f"{setup}\n"
        f"timer = timeit.Timer({statement!r}, globals=globals())\n"
        "number, _ = timer.autorange()\n"
        "print(min(timer.repeat(7, number)) / number)\n"
    )
    run = subprocess.run(
        [sys.executable, "-c", code], check=True, capture_output=True, text=True,
        cwd=ROOT, env=STARTUP_ENV,
    )  # fmt: skip
    return float(run.stdout)


def startup_report(preset: str = "llama-3-8b") -> None:
    """Issue 25's start-up figures against bare Python on this machine, with bytecode
    cached (`_bytecode_env`) for bare Python and llmmath alike."""
    import tempfile

    global STARTUP_ENV
    with tempfile.TemporaryDirectory() as prefix:
        STARTUP_ENV = _bytecode_env(prefix)
        try:
            _startup_figures(preset)
        finally:
            STARTUP_ENV = None


def _startup_figures(preset: str) -> None:
    """The figures of `startup_report`, printed."""
    print("(bytecode cached under a temporary PYTHONPYCACHEPREFIX)")
    bare = _runs([sys.executable, "-c", "pass"])
    whole = _runs([sys.executable, "-m", "llmmath", "params", preset, "--json"])
    print(f"{'python -c pass (bare Python)':<52} {_spread(bare)}")
    print(f"{f'python -m llmmath params {preset} --json':<52} {_spread(whole)}")
    for how, pick in (("median", statistics.median), ("best", min)):
        ratio = pick(whole) / pick(bare)
        verdict = "ok" if ratio < 1.5 else "OVER TARGET"
        print(f"{f'  params / bare, {how} of {len(bare)}':<52} {ratio:8.2f} x"
              f"     target < 1.5 x     {verdict}")  # fmt: skip
    imports = import_times()
    print(f"{'import llmmath (fresh interpreter)':<52} {_spread(imports)}")
    report("  import llmmath, median", statistics.median(imports), 0.015)
    for label, setup, statement in QUERIES:
        seconds = query_time(setup, statement, preset)
        verdict = "ok" if seconds < 30e-6 else "OVER TARGET"
        print(f"{label:<52} {seconds * 1e6:8.1f} µs   target < 30 µs   {verdict}")


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


#: Each explorer and one of its controls, set to a few values in turn.
WIDGETS = {
    "ParamExplorer": ("ParamExplorer('llama-2-7b')", "num_hidden_layers"),
    "AttentionExplorer": ("AttentionExplorer()", "seq_len"),
    "ServingExplorer": ("ServingExplorer()", "batch"),
    "RotaryExplorer": ("RotaryExplorer()", "position"),
    "MemoryBudget": ("MemoryBudget()", "batch"),
    "RooflineExplorer": ("RooflineExplorer()", "batch"),
    "Calculator": ("Calculator()", "batch"),
    "LayoutExplorer": ("LayoutExplorer()", "micro_batches"),
    "LatentAttentionExplorer": ("LatentAttentionExplorer()", "seq_len"),
    "SpeculativeExplorer": ("SpeculativeExplorer()", "gamma"),
}


def widget_time(name: str) -> float:
    """Median seconds for one control change of an explorer in a live kernel: the front
    end's new state in, the kernel's new view out (`Explorer.set` does what the comm
    message does)."""
    make, control = WIDGETS[name]
    cells = [
        "import time, statistics\nfrom llmmath import widgets\n"
        f"explorer = widgets.{make}\nstart_value = explorer.state[{control!r}]",
        "times = []\nfor i in range(20):\n    start = time.perf_counter()\n"
        f"    explorer.set({control}=start_value + 1 + i % 2)\n"
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


def build_site(out: Path) -> Path:
    """Build the book into ``out`` (as ``make book`` does) and return its HTML
    folder."""
    subprocess.run(
        [
            Path(sys.executable).with_name("jupyter-book"),
            "build",
            ROOT,
            "--path-output",
            out,
        ],
        check=True,
        capture_output=True,
    )
    return out / "_build" / "html"


def site_times() -> tuple[float, float, int]:
    """The published site's live explorers in headless Chromium, served on localhost:
    (seconds from the first change of a control to the first result computed in the
    page, cold; median seconds of a later update; bytes the runtime adds to the site).
    Builds the book into a temporary folder first."""
    import json
    import tempfile

    sys.path.insert(0, str(ROOT))
    from tests.test_browser import READ, SET, chromium, serve

    with tempfile.TemporaryDirectory() as tmp:
        html = build_site(Path(tmp))
        script = (html / "_static/runtime/llmmath-runtime.js").read_text("utf-8")
        manifest = json.loads(script.split("const MANIFEST = ", 1)[1].split(";\n")[0])
        added = manifest["bytes"] + len(script.encode())
        added += (html / "_static/anywidget/index.js").stat().st_size
        httpd = serve(html)
        driver = chromium(Path(tmp) / "profile")
        try:
            driver.get(f"{httpd.base}/chapters/09_memory.html")
            while not driver.execute_script(
                "return document.querySelectorAll('.llmmath-explorer').length"
            ):
                time.sleep(0.01)

            def update(value) -> float:
                before = driver.execute_script(READ, 0)["draws"]
                start = time.perf_counter()
                driver.execute_script(SET, 0, "batch", value)
                while True:
                    now = driver.execute_script(READ, 0)
                    if now["draws"] > before and now["live"]:
                        return time.perf_counter() - start
                    time.sleep(0.002)

            cold = update(2)
            later = statistics.median(update(3 + i) for i in range(20))
        finally:
            driver.quit()
            httpd.shutdown()
    return cold, later, added


def coursework_class_time(
    students: int = 30, chapter: str = "07_kv_cache", slow_copies: int = 0
) -> float:
    """Seconds for ``python -m llmmath.coursework grade`` over a class's answered sheets
    of one chapter, each in its own sandbox (the whole process, on every CPU); with
    ``slow_copies``, that many copies of the first student's sheet, a minute of
    ``sleep`` in each answer cell, handed in under other names."""
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

    def answered(student: str, prefix: str = ""):
        nb = student_notebook(chapter, student, key=key)
        for cell in nb.cells:
            last = cell.source.splitlines()[-1:]
            if last and last[0] in answers:
                cell.source = prefix + answers[last[0]] + last[0]
        return nb

    with tempfile.TemporaryDirectory() as tmp:
        key = load_key(Path(tmp) / "key", create=True)
        (Path(tmp) / "in").mkdir()
        for i in range(students):
            nbformat.write(answered(f"s{i:02d}"), Path(tmp) / "in" / f"s{i:02d}.ipynb")
        for i in range(slow_copies):
            slow = answered("s00", "import time\ntime.sleep(60)\n")
            nbformat.write(slow, Path(tmp) / "in" / f"copy{i}.ipynb")
        start = time.perf_counter()
        run = subprocess.run(
            [sys.executable, "-m", "llmmath.coursework", "grade", "in", "--key", "key"],
            capture_output=True,
            text=True,
            cwd=tmp,
        )
        seconds = time.perf_counter() - start
    if run.returncode != (1 if slow_copies else 0):
        raise RuntimeError(f"grading failed: {run.stdout[-500:]}{run.stderr[-500:]}")
    return seconds


def coursework_hostile_class_time() -> float:
    """Seconds for ``python -m llmmath.coursework grade`` over a class of 30 with 8
    hostile sheets (`tests.test_coursework_attacks.hostile_class`), default limits."""
    import tempfile

    sys.path.insert(0, str(ROOT))
    from tests.test_coursework_attacks import hostile_class

    with tempfile.TemporaryDirectory() as tmp:
        hostile_class(Path(tmp))
        start = time.perf_counter()
        run = subprocess.run(
            [sys.executable, "-m", "llmmath.coursework", "grade", "in", "--key", "key"],
            capture_output=True,
            text=True,
            cwd=tmp,
        )
        seconds = time.perf_counter() - start
    right = sum(line.endswith(": right") for line in run.stdout.splitlines())
    if run.returncode != 1 or right < 2 * 23:
        raise RuntimeError(f"grading failed: {run.stdout[-500:]}{run.stderr[-500:]}")
    return seconds


def distributed_tests_time() -> float:
    """Seconds for ``pytest tests/test_distributed.py`` as a whole process: two gloo
    ranks spawned once (FSDP2 and DTensor on the reference model) and the fake process
    group at 70B and 405B (target < 60 s on 2 cores)."""
    start = time.perf_counter()
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:nbval", "-o", "addopts=",
         "tests/test_distributed.py"],
        capture_output=True,
        text=True,
        cwd=ROOT,
    )  # fmt: skip
    seconds = time.perf_counter() - start
    if run.returncode != 0:
        raise RuntimeError(f"distributed tests failed: {run.stdout[-500:]}")
    return seconds


def report(label: str, seconds: float, target: float) -> None:
    verdict = "ok" if seconds < target else "OVER TARGET"
    print(
        f"{label:<52} {seconds * 1000:8.1f} ms   "
        f"target < {target * 1000:.0f} ms   {verdict}"
    )


def main() -> None:
    print(f"python {sys.version.split()[0]}, median of {REPEATS} runs where repeated\n")
    startup_report()
    for preset in ("llama-2-7b", "gpt2"):
        report(
            f"python -m llmmath params {preset} --json",
            whole_process(
                [sys.executable, "-m", "llmmath", "params", preset, "--json"]
            ),
            0.3,
        )
    for path in sorted((ROOT / "chapters").glob("*.ipynb")) + sorted(
        (ROOT / "book").glob("*.ipynb")
    ):
        report(f"chapter {path.name}", chapter_time(path), 10.0)
    for name in WIDGETS:
        report(f"{name} recompute and redraw", widget_time(name), 0.05)
    alone = coursework_class_time()
    report("grade 30 coursework sheets (07_kv_cache)", alone, 30.0)
    report(
        "the same class with six slow copies handed in",
        coursework_class_time(slow_copies=6),
        1.2 * alone,
    )
    report(
        "a class of 30 with 8 hostile sheets",
        coursework_hostile_class_time(),
        min(120.0, 2 * alone),
    )
    report(
        "pytest tests/test_distributed.py (gloo, fake PG)",
        distributed_tests_time(),
        60.0,
    )
    cold, later, added = site_times()
    report("site: first change to first live result, cold", cold, 4.0)
    report("site: a later update, computed in the page", later, 0.1)
    print(f"{'site: bytes the browser runtime adds':<52} {added:>11,} B")


if __name__ == "__main__" and sys.argv[1:] == ["startup"]:
    print(f"python {sys.version.split()[0]}, {STARTUP_RUNS} runs each\n")
    startup_report()
    sys.exit(0)
if __name__ == "__main__":
    main()


# --- issue 23: the browser runtime under load, and the size of a shared link ----------


def runtime_figures(runs: int = 3) -> tuple[list[float], int]:
    """On the built site in headless Chromium: (seconds from the first change of a
    control to its first result, cold, while two other processes keep two CPUs busy,
    once per run, each on a fresh origin and browser profile; characters of the link
    the calculator shares for a pasted Llama-3-8B config.json). Builds the book into a
    temporary folder first."""
    import json
    import tempfile

    sys.path.insert(0, str(ROOT))
    from llmmath import presets
    from tests.test_browser import READ, SET, chromium, serve

    def wait_live(driver, before: int) -> None:
        while True:
            if driver.execute_script(
                "return document.querySelectorAll('.llmmath-explorer').length"
            ):
                now = driver.execute_script(READ, 0)
                if now["draws"] > before and now["live"]:
                    return
                if "Could not run Python" in now["status"]:
                    raise RuntimeError(now["status"])
            time.sleep(0.005)

    with tempfile.TemporaryDirectory() as tmp:
        html = build_site(Path(tmp))
        busy = [
            subprocess.Popen([sys.executable, "-c", "while True: pass"])
            for _ in range(2)
        ]
        colds = []
        try:
            for run in range(runs):
                httpd = serve(html)  # a new port: nothing cached from the last run
                driver = chromium(Path(tmp) / f"profile-{run}")
                try:
                    driver.get(f"{httpd.base}/chapters/09_memory.html")
                    while not driver.execute_script(
                        "return document.querySelectorAll('.llmmath-explorer').length"
                    ):
                        time.sleep(0.01)
                    before = driver.execute_script(READ, 0)["draws"]
                    start = time.perf_counter()
                    driver.execute_script(SET, 0, "batch", 2)
                    wait_live(driver, before)
                    colds.append(time.perf_counter() - start)
                finally:
                    driver.quit()
                    httpd.shutdown()
        finally:
            for process in busy:
                process.kill()
                process.wait()
        httpd = serve(html)
        driver = chromium(Path(tmp) / "profile-link")
        try:
            driver.get(f"{httpd.base}/book/calculator.html")
            while not driver.execute_script(
                "return document.querySelectorAll('.llmmath-explorer').length"
            ):
                time.sleep(0.01)
            before = driver.execute_script(READ, 0)["draws"]
            text = json.dumps(presets.get("llama-3-8b").hf_config)  # as downloaded
            driver.execute_script(SET, 0, "config", text)
            wait_live(driver, before)
            time.sleep(0.5)  # the link is written once the answer is drawn
            link = driver.current_url
        finally:
            driver.quit()
            httpd.shutdown()
    return colds, len(link)


def runtime_report() -> None:
    colds, link = runtime_figures()
    report(
        "site: first live result, cold, 2 busy processes",
        statistics.median(colds),
        4.0,
    )
    print(f"{'  (each run)':<52} " + ", ".join(f"{s:.2f} s" for s in colds))
    print(f"{'site: shared link, pasted Llama-3-8B config':<52} {link:>11,} characters")


if __name__ == "__main__":  # after main(): the figures of issue 23
    runtime_report()

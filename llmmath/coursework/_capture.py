"""A pytest plugin loaded only inside the grading sandbox
(`llmmath.coursework._runner`).

After nbval runs each cell it writes one line ``LLMMATH-CELL <token> {json}`` to the
grader (the token is the run's secret, which the kernel cannot learn): the cell's
number, its standard output, and its error, time-out or the kernel's death. A watchdog
thread notices a kernel that exits in a cell (``os._exit(0)``) at once, reports it and
ends the run, instead of waiting out nbval's cell timeout."""

from __future__ import annotations

import json
import os
import threading

import pytest

OUT = None  # set by the runner: a line-buffered file the kernel does not inherit
TOKEN = ""  # set by the runner: the run's secret, read from the grader's pipe
MAX_STDOUT = 200_000


def _emit(record: dict) -> None:
    if OUT is not None:
        OUT.write(f"LLMMATH-CELL {TOKEN} " + json.dumps(record) + "\n")
        OUT.flush()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_call(item):
    kernel = getattr(item.parent, "kernel", None)
    done = threading.Event()

    def watch():
        while not done.wait(0.1):
            try:
                alive = kernel is not None and kernel.is_alive()
            except Exception:
                alive = False
            if not alive and not done.is_set():
                _emit({"cell": getattr(item, "cell_num", -1), "died": True})
                os._exit(3)

    threading.Thread(target=watch, daemon=True).start()
    try:
        yield
    finally:
        done.set()


def pytest_runtest_makereport(item, call):
    if call.when != "call" or not hasattr(item, "cell_num"):
        return
    outs = getattr(item, "test_outputs", None) or []
    stdout = "".join(
        o.get("text", "")
        for o in outs
        if o.get("output_type") == "stream" and o.get("name") == "stdout"
    )
    record = {"cell": item.cell_num, "stdout": stdout[:MAX_STDOUT]}
    error = next((o for o in outs if o.get("output_type") == "error"), None)
    timed_out = getattr(item.parent, "timed_out", False)
    if call.excinfo is not None and timed_out:
        record["timeout"] = item.config.option.nbval_cell_timeout
    elif error is not None:
        record["error"] = f"{error.get('ename')}: {error.get('evalue')}"[:300]
    elif call.excinfo is not None:
        message = str(call.excinfo.value)
        if "Kernel dead" in message:
            record["died"] = True
        else:
            record["error"] = message[:300]
    _emit(record)

"""The published site's browser runtime: Pyodide and the llmmath wheel, served by it.

The site's explorers (`llmmath.widgets`) call `llmmath.explorers` in the reader's
browser on Pyodide, CPython compiled to WebAssembly, with no server and no other host.
This module is a Sphinx extension (``_config.yml`` lists it) that, after each HTML
build:

1. builds llmmath's wheel (``pip wheel``) into ``_static/runtime/``;
2. hashes it and the Pyodide files that ``_vendor/pyodide/`` put into
   ``_static/pyodide/`` (npm's ``pyodide`` package, pinned in ``package.json`` and its
   lockfile);
3. writes ``_static/runtime/llmmath-runtime.js`` from ``llmmath/static/runtime.js``
   with that manifest inlined: the names, sizes and SHA-384 digests the page checks
   before it runs them.

Pages with explorers load that script (``nb_ipywidgets_js``). It defines
``globalThis.llmmathRuntime``, which loads Pyodide only on the reader's first change of
a control, with visible progress: a reader who only reads downloads none of it.
"""

from __future__ import annotations

import base64
import hashlib
import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

#: The Pyodide files the runtime loads (no Pyodide packages: llmmath needs the stdlib).
PYODIDE_FILES = (
    "pyodide.mjs",
    "pyodide.asm.mjs",
    "pyodide.asm.wasm",
    "python_stdlib.zip",
    "pyodide-lock.json",
)
TEMPLATE = Path(__file__).with_name("static") / "runtime.js"


def sri(data: bytes) -> str:
    """The Subresource Integrity string of ``data``: ``sha384-`` and the base64
    digest."""
    return "sha384-" + base64.b64encode(hashlib.sha384(data).digest()).decode()


def build_wheel(project: Path, out: Path) -> Path:
    """Build llmmath's wheel from ``project`` (the repository root) into ``out``.

    Raises:
        RuntimeError: pip failed; the message holds its output.
    """
    out.mkdir(parents=True, exist_ok=True)
    for old in out.glob("llmmath-*.whl"):
        old.unlink()
    with tempfile.TemporaryDirectory() as tmp:
        result = subprocess.run(
            [
                sys.executable,
                "-m",
                "pip",
                "wheel",
                "--quiet",
                "--no-deps",
                "--no-build-isolation",
                "--wheel-dir",
                tmp,
                str(project),
            ],
            capture_output=True,
            text=True,
        )
        if result.returncode:
            raise RuntimeError(f"pip wheel failed:\n{result.stdout}{result.stderr}")
        (wheel,) = Path(tmp).glob("llmmath-*.whl")
        return Path(shutil.copy(wheel, out))


def manifest(static: Path, wheel: Path) -> dict:
    """Paths (relative to ``static``), sizes in bytes and SRI digests of what the
    runtime loads: the Pyodide files under ``static/pyodide/`` and the wheel."""
    files = {}
    for name in PYODIDE_FILES:
        data = (static / "pyodide" / name).read_bytes()
        files[name] = {
            "path": f"pyodide/{name}",
            "bytes": len(data),
            "sha384": sri(data),
        }
    data = wheel.read_bytes()
    files["wheel"] = {
        "path": f"runtime/{wheel.name}",
        "bytes": len(data),
        "sha384": sri(data),
    }
    lock = json.loads((static / "pyodide" / "pyodide-lock.json").read_text("utf-8"))
    return {
        "python": lock["info"]["python"],
        "files": files,
        "bytes": sum(f["bytes"] for f in files.values()),
    }


def write_runtime(static: Path, project: Path) -> dict:
    """Build the wheel and write ``static/runtime/llmmath-runtime.js``; returns the
    manifest."""
    wheel = build_wheel(project, static / "runtime")
    found = manifest(static, wheel)
    script = TEMPLATE.read_text("utf-8").replace("__MANIFEST__", json.dumps(found))
    (static / "runtime" / "llmmath-runtime.js").write_text(script, "utf-8")
    return found


def _build_finished(app, exception) -> None:
    if exception is None and app.builder.format == "html":
        write_runtime(Path(app.outdir) / "_static", Path(app.confdir))


def setup(app) -> dict:
    """Sphinx entry point: write the runtime after every HTML build."""
    app.connect("build-finished", _build_finished)
    return {"parallel_read_safe": True, "parallel_write_safe": True}

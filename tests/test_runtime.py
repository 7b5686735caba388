"""What the browser runs: llmmath's core on the standard library alone; the runtime.

The published site runs `llmmath.explorers` on Pyodide with no Pyodide packages, so the
core must import and compute with numpy, sympy, torch, matplotlib and ipywidgets
absent."""

import base64
import hashlib
import json
import re
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from llmmath_book import runtime

ROOT = Path(__file__).resolve().parents[1]
BLOCKED = (
    "numpy",
    "sympy",
    "torch",
    "matplotlib",
    "ipywidgets",
    "IPython",
    "anywidget",
)
CORE = (
    "llmmath",
    "llmmath.config",
    "llmmath.presets",
    "llmmath.counting",
    "llmmath.kvcache",
    "llmmath.flops",
    "llmmath.memory",
    "llmmath.roofline",
    "llmmath.units",
    "llmmath.ffn",
    "llmmath.norms",
    "llmmath.cli",
    "llmmath.explorers",
)

BLOCKING = f"""
import importlib.abc, sys
class Block(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in {BLOCKED!r}:
            raise ImportError(f"blocked: {{name}}")
sys.meta_path.insert(0, Block())
"""


def test_core_imports_and_computes_on_the_standard_library_alone():
    code = (
        BLOCKING
        + f"""
import importlib, json
for name in {CORE!r}:
    importlib.import_module(name)
from llmmath.explorers import EXPLORERS, explore_json
for kind in EXPLORERS:
    view = json.loads(explore_json(kind, "{{}}"))
    assert view["blocks"], kind
assert not {{m.split(".")[0] for m in sys.modules}} & set({BLOCKED!r})
print("ok")
"""
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "ok"


def test_the_block_really_blocks():
    code = BLOCKING + "import numpy"
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True
    )
    assert result.returncode == 1 and "blocked: numpy" in result.stderr


def test_sri_is_base64_sha384():
    data = b"llm math"
    expected = "sha384-" + base64.b64encode(hashlib.sha384(data).digest()).decode()
    assert runtime.sri(data) == expected
    assert len(runtime.sri(data)) == len("sha384-") + 64  # 48 bytes in base64


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """The runtime written into a copy of the site's _static (with vendored Pyodide)."""
    static = tmp_path_factory.mktemp("static")
    (static / "pyodide").mkdir()
    for name in runtime.PYODIDE_FILES:
        (static / "pyodide" / name).write_bytes(
            (ROOT / "_vendor/pyodide" / name).read_bytes()
        )
    return static, runtime.write_runtime(static, ROOT)


def test_wheel_holds_the_core_presets_and_front_end(built):
    static, found = built
    wheel = static / found["files"]["wheel"]["path"]
    names = set(zipfile.ZipFile(wheel).namelist())
    assert {"llmmath/explorers/__init__.py", "llmmath/static/explorer.js"} <= names
    assert "llmmath/presets/llama-2-7b.json" in names
    # the copy the browser downloads is the package's wheel: no book machinery in it
    # (tests/test_wheel.py lists what it may hold)
    assert not [n for n in names if re.search(r"editions|translation|runtime", n)]


def test_manifest_pins_every_file_by_digest_and_size(built):
    static, found = built
    assert set(found["files"]) == {*runtime.PYODIDE_FILES, "wheel"}
    for file in found["files"].values():
        data = (static / file["path"]).read_bytes()
        assert file["bytes"] == len(data)
        digest = base64.b64encode(hashlib.sha384(data).digest()).decode()
        assert file["sha384"] == "sha384-" + digest
    assert found["bytes"] == sum(f["bytes"] for f in found["files"].values())
    script = (static / "runtime/llmmath-runtime.js").read_text("utf-8")
    assert "__MANIFEST__" not in script and json.dumps(found) in script


def test_vendored_pyodide_is_the_locked_version():
    lock = json.loads((ROOT / "package-lock.json").read_text("utf-8"))
    pinned = json.loads((ROOT / "package.json").read_text("utf-8"))["dependencies"]
    assert lock["packages"]["node_modules/pyodide"]["version"] == pinned["pyodide"]
    assert all(
        "resolved" not in p for p in lock["packages"].values()
    )  # no registry host
    pyodide_lock = json.loads((ROOT / "_vendor/pyodide/pyodide-lock.json").read_text())
    assert pyodide_lock["info"]["python"].startswith("3.")
    assert pyodide_lock["info"]["arch"] == "wasm32"


NOTEBOOKS = sorted((ROOT / "chapters").glob("*.ipynb")) + sorted(
    (ROOT / "book").glob("*.ipynb")
)


#: A cell that runs torch: imports it, calls into it or builds the reference model (not
#: one that only names it in a string, as a version field or "torch's default" does).
TORCH_USE = re.compile(r"\bimport torch\b|\bfrom torch\b|\btorch\.\w|build_model")


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_cells_that_need_torch_say_so_on_the_site(path):
    """The site runs the explorers, not the code cells: a cell that uses torch carries
    the
    ``needs-kernel`` tag, which _vendor/llmmath.css turns into a note on the page."""
    import nbformat

    untagged = [
        cell.source.splitlines()[0]
        for cell in nbformat.read(path, as_version=4).cells
        if cell.cell_type == "code"
        and TORCH_USE.search(cell.source)
        and "importlib.util.find_spec" not in cell.source  # the Colab install cell
        and "needs-kernel" not in cell.metadata.get("tags", [])
    ]
    assert not untagged, f"{path.name}: cells using torch without needs-kernel"


def test_needs_kernel_note_is_styled():
    css = (ROOT / "_vendor" / "llmmath.css").read_text(encoding="utf-8")
    assert ".cell.tag_needs-kernel::before" in css and "needs a kernel" in css


def test_pin_scripts_gives_every_local_script_its_digest(tmp_path):
    """`pin_scripts` (issue 36): a local script's tag gets the file's SHA-384 as
    `integrity`, kept inert in a template that the page's loader writes in its place
    (with the digest over http(s), without it on file://), again after the file
    changed; the loader preloads it over http(s) in place of the page's own preload
    tag; other hosts, inline scripts and the rest of the page are left as they were."""
    (tmp_path / "_static").mkdir()
    (tmp_path / "_static/a.js").write_text("let a = 1;\n")
    page = tmp_path / "book" / "p.html"
    page.parent.mkdir()
    preload = '<link rel="preload" as="script" href="../_static/a.js?digest=1" />'
    script = '<script defer src="../_static/a.js?v=2"></script>'
    text = (
        f"<html><head>\n{preload}\n  {script}"
        '<script src="https://example.org/x.js"></script>\n'
        "<script>let inline = '<script src=\"../_static/a.js\">';</script>\n"
        "</head><body>text</body></html>\n"
    )
    page.write_text(text)
    assert runtime.pin_scripts(page, tmp_path) == 1
    digest = runtime.sri(b"let a = 1;\n")
    pinned = page.read_text()
    (loader,) = re.findall(r'<script id="llmmath-pin">.*?</script>', pinned, re.S)
    preloads = json.loads(re.search(r"if \(served\) (\[.*?\])\.forEach", loader)[1])
    assert preloads == [
        ["../_static/a.js?digest=1", digest],
        ["../_static/a.js?v=2", digest],
    ]
    tag = script.replace('v=2"', f'v=2" integrity="{digest}"')
    assert pinned == text.replace(preload, loader).replace(
        script,
        f'<template class="llmmath-pinned">{tag}</template>'
        "<script>llmmathPin()</script>",
    )
    (tmp_path / "_static/a.js").write_text("let a = 2;\n")
    assert runtime.pin_scripts(page, tmp_path) == 1
    again = page.read_text()
    assert again.count(runtime.sri(b"let a = 2;\n")) == 2 and digest not in again
    assert again.count("<template") == 1 and again.count('id="llmmath-pin"') == 1

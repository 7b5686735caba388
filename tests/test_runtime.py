"""What the browser runs: llmmath's core on the standard library alone; the runtime.

The published site runs `llmmath.explorers` on Pyodide with no Pyodide packages, so the
core must import and compute with numpy, sympy, torch, matplotlib and ipywidgets
absent."""

import base64
import gzip
import hashlib
import json
import re
import shutil
import struct
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from llmmath_book import runtime, snapshot

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
    shutil.copytree(
        ROOT / "_vendor" / runtime.SNAPSHOT_FOLDER, static / runtime.SNAPSHOT_FOLDER
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
    # the snapshot is pinned the same way, outside `files`: the worker may skip it
    packed = (static / found["snapshot"]["path"]).read_bytes()
    assert found["snapshot"] == {
        "path": "pyodide-snapshot/pyodide-snapshot.bin",
        "bytes": len(packed),
        "sha384": "sha384-"
        + base64.b64encode(hashlib.sha384(packed).digest()).decode(),
    }
    script = (static / "runtime/llmmath-runtime.js").read_text("utf-8")
    assert "__MANIFEST__" not in script and json.dumps(found) in script


SNAPSHOT = ROOT / "_vendor" / runtime.SNAPSHOT_FOLDER


def test_the_snapshot_was_made_from_the_vendored_pyodide():
    """`make vendor` without `make snapshot` would serve a snapshot Pyodide refuses
    (issue 36): the record names the SHA-384 of each Pyodide file it was made from."""
    record = json.loads((SNAPSHOT / runtime.SNAPSHOT_RECORD).read_text("utf-8"))
    for name in runtime.PYODIDE_FILES:
        data = (ROOT / "_vendor/pyodide" / name).read_bytes()
        digest = base64.b64encode(hashlib.sha384(data).digest()).decode()
        assert record["from"][name] == "sha384-" + digest, name
    packed = (SNAPSHOT / runtime.SNAPSHOT_NAME).read_bytes()
    assert record["gzip_bytes"] == len(packed)
    assert (
        record["pyodide"]
        == json.loads((ROOT / "package.json").read_text("utf-8"))["dependencies"][
            "pyodide"
        ]
    )


def test_the_snapshot_is_pyodides_of_this_build():
    """The snapshot, unpacked, starts with Pyodide's header (``API.makeSnapshot``):
    the magic number and the BUILD_ID that the vendored loader accepts, read here from
    pyodide.mjs's own text, and a heap of whole WebAssembly pages (64 KiB)."""
    raw = snapshot.unpack(
        gzip.decompress((SNAPSHOT / runtime.SNAPSHOT_NAME).read_bytes())
    )
    magic, offset, json_bytes, zero = struct.unpack_from("<4I", raw)
    assert (magic, zero) == (0x706E7300, 0)
    loader = (ROOT / "_vendor/pyodide/pyodide.mjs").read_text("utf-8")
    (build_id,) = re.findall(r'BUILD_ID:"([0-9a-f]{64})"', loader)
    words = struct.unpack_from("<8I", raw, 16)
    assert "".join(f"{w:08x}" for w in words) == build_id
    assert json.loads(raw[48 : 48 + json_bytes].decode("utf-8"))  # the hiwire state
    assert (len(raw) - offset) % 65536 == 0
    record = json.loads((SNAPSHOT / runtime.SNAPSHOT_RECORD).read_text("utf-8"))
    assert record["bytes"] == len(raw) and record["build_id"] == build_id


def test_a_snapshot_of_other_pyodide_files_stops_the_build(built, tmp_path):
    static, _ = built
    copy = tmp_path / "static"
    shutil.copytree(static, copy)
    record_path = copy / runtime.SNAPSHOT_FOLDER / runtime.SNAPSHOT_RECORD
    record = json.loads(record_path.read_text("utf-8"))
    record["from"]["pyodide.asm.wasm"] = runtime.sri(b"another build")
    record_path.write_text(json.dumps(record), "utf-8")
    with pytest.raises(RuntimeError, match="pyodide.asm.wasm.*make snapshot"):
        runtime.snapshot_entry(copy)
    shutil.rmtree(copy / runtime.SNAPSHOT_FOLDER)
    assert runtime.snapshot_entry(copy) is None  # no snapshot: Python starts instead


PAGE = snapshot.PAGE


@st.composite
def heaps(draw):
    """Bytes like a heap: pages of zeros, of data, and data with zeros in it, and a
    tail shorter than a page."""
    kinds = draw(st.lists(st.sampled_from(["zero", "data", "sparse"]), max_size=12))
    pages = []
    for kind in kinds:
        if kind == "zero":
            pages.append(bytes(PAGE))
        else:
            page = bytearray(draw(st.binary(min_size=PAGE, max_size=PAGE)))
            if kind == "sparse":
                page[: PAGE // 2] = bytes(PAGE // 2)
                page[-1] = page[-1] or 1
            pages.append(bytes(page))
    return b"".join(pages) + draw(st.binary(max_size=PAGE - 1))


@given(heaps())
def test_packing_a_snapshot_leaves_out_zero_pages_and_nothing_else(heap):
    packed = snapshot.pack(heap)
    assert snapshot.unpack(packed) == heap
    length, count = struct.unpack_from("<2I", packed)
    runs = struct.unpack_from(f"<{2 * count}I", packed, 8)
    assert length == len(heap)
    kept = sum(runs[1::2])
    zero_pages = sum(
        heap[i : i + PAGE] == bytes(len(heap[i : i + PAGE]))
        for i in range(0, len(heap), PAGE)
    )
    pages = -(-len(heap) // PAGE)
    assert kept == len(heap) - sum(
        len(heap[i : i + PAGE])
        for i in range(0, len(heap), PAGE)
        if heap[i : i + PAGE] == bytes(len(heap[i : i + PAGE]))
    )
    assert count <= pages - zero_pages  # adjacent data pages are one run
    offsets = runs[::2]
    assert list(offsets) == sorted(offsets) and all(o % PAGE == 0 for o in offsets)


def test_a_damaged_pack_is_refused():
    packed = snapshot.pack(bytes(PAGE) + b"\x01" * PAGE)
    with pytest.raises(ValueError, match="after the last run"):
        snapshot.unpack(packed + b"\x00")
    length, count, offset, size = struct.unpack_from("<4I", packed)
    bad = struct.pack("<4I", length, count, offset + PAGE, size) + packed[16:]
    with pytest.raises(ValueError, match="ends past"):
        snapshot.unpack(bad)


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

"""The site's Python snapshot: Pyodide started by the maintainer, restored by readers.

Starting Pyodide's interpreter takes 2-3 s of a reader's CPU (Chromium, 2026; most of
it inside ``import _pyodide_core``), on every page. A memory snapshot of an interpreter
already started (Pyodide's ``makeMemorySnapshot`` / ``loadPyodide({_loadSnapshot})``,
the mechanism Cloudflare's Python Workers start from) is restored in about 0.1 s, so
the site's worker (``llmmath/static/runtime-worker.js``) restores this one when it can
download it quickly enough, and starts Python from scratch otherwise (issue 36: the
first live number under 2.5 s, and under 1 s on the next page, where the browser's
cache holds it).

The snapshot holds Pyodide and the standard-library modules that llmmath's explorers
import, not llmmath, which changes with every build: the worker unpacks the build's
wheel and imports it after the restore. So it changes only with Pyodide, and is made
like the other vendored files (``_vendor/README.md``), not at every build: by

    make snapshot        (python -m llmmath_book.snapshot)

in headless Chromium (``snapshot_maker.js``), which writes
``_vendor/pyodide-snapshot/``:

- ``pyodide-snapshot.bin``: the snapshot without its runs of zero pages (`pack`: about
  half of the 30 MiB), gzip-compressed (level 9). Its name says nothing of gzip, so
  that no host serves it with ``Content-Encoding: gzip`` and changes the bytes whose
  SHA-384 the page checks; the worker decompresses and unpacks it (`unpack` is the
  same in Python, for the tests).
- ``snapshot.json``: what it was made from (the SHA-384 of each Pyodide file, the
  modules imported, Pyodide's BUILD_ID, its size). ``tests/test_runtime.py`` fails
  when the vendored Pyodide no longer matches it.

The snapshot's header is Pyodide's (``API.makeSnapshot`` in ``pyodide.asm.mjs``): four
little-endian uint32 (magic 0x706E7300, the offset of the heap, the length of a JSON
part, 0), then the BUILD_ID as eight uint32, then the JSON, then the WebAssembly
memory. Pyodide refuses a snapshot of another build (``Snapshot build id mismatch``).
"""

from __future__ import annotations

import argparse
import functools
import gzip
import http.server
import json
import re
import shutil
import struct
import tempfile
import threading
import time
from pathlib import Path

from llmmath_book.runtime import (
    PYODIDE_FILES,
    SNAPSHOT_FOLDER,
    SNAPSHOT_NAME,
    SNAPSHOT_RECORD,
    build_wheel,
    sri,
)

ROOT = Path(__file__).resolve().parents[3]
FOLDER = ROOT / "_vendor" / SNAPSHOT_FOLDER
NAME = SNAPSHOT_NAME
RECORD = SNAPSHOT_RECORD
MAKER = Path(__file__).with_name("snapshot_maker.js")
MAGIC = 0x706E7300  # Pyodide's snapshot magic number
HEADER = 48  # bytes before the JSON part


def build_id(pyodide_mjs: str) -> str:
    """The BUILD_ID that Pyodide's loader (``pyodide.mjs``) accepts in a snapshot.

    Raises:
        ValueError: the file names no BUILD_ID (not a Pyodide loader with snapshots).
    """
    found = re.search(r'BUILD_ID:"([0-9a-f]{64})"', pyodide_mjs)
    if not found:
        raise ValueError("pyodide.mjs names no BUILD_ID")
    return found.group(1)


def header(snapshot: bytes) -> dict:
    """The header of a raw (decompressed) snapshot: ``build_id``, ``heap_offset`` and
    ``heap_bytes`` (the WebAssembly memory it restores, in bytes).

    Raises:
        ValueError: not a Pyodide snapshot (wrong magic number, or too short).
    """
    if len(snapshot) < HEADER:
        raise ValueError("too short for a Pyodide snapshot")
    magic, offset, _, _ = struct.unpack_from("<4I", snapshot)
    if magic != MAGIC:
        raise ValueError(f"magic number {magic:#x}, not {MAGIC:#x}")
    words = struct.unpack_from("<8I", snapshot, 16)
    return {
        "build_id": "".join(f"{w:08x}" for w in words),
        "heap_offset": offset,
        "heap_bytes": len(snapshot) - offset,
    }


#: `pack`'s unit: the zero runs it leaves out are whole pages of this many bytes.
PAGE = 4096


def pack(snapshot: bytes) -> bytes:
    """The snapshot without its zero pages: little-endian uint32 ``length`` (of the
    snapshot) and ``count``, then ``count`` pairs (offset, bytes) of the runs of
    non-zero pages, then those runs' bytes in order (`unpack` inverts it; so does
    ``unpackSnapshot`` in ``llmmath/static/runtime-worker.js``)."""
    runs: list[list[int]] = []
    zero = bytes(PAGE)
    for start in range(0, len(snapshot), PAGE):
        page = snapshot[start : start + PAGE]
        if page == zero[: len(page)]:
            continue
        if runs and runs[-1][0] + runs[-1][1] == start:
            runs[-1][1] += len(page)
        else:
            runs.append([start, len(page)])
    head = struct.pack(f"<2I{2 * len(runs)}I", len(snapshot), len(runs), *sum(runs, []))
    return head + b"".join(snapshot[o : o + n] for o, n in runs)


def unpack(packed: bytes) -> bytes:
    """The snapshot that `pack` packed.

    Raises:
        ValueError: the runs do not fit the length, or the bytes do not match them.
    """
    length, count = struct.unpack_from("<2I", packed)
    runs = struct.unpack_from(f"<{2 * count}I", packed, 8)
    out = bytearray(length)
    at = 8 + 8 * count
    for offset, size in zip(runs[::2], runs[1::2], strict=True):
        if offset + size > length:
            raise ValueError(f"a run of {size} bytes at {offset} ends past {length}")
        out[offset : offset + size] = packed[at : at + size]
        at += size
    if at != len(packed):
        raise ValueError(f"{len(packed) - at} bytes after the last run")
    return bytes(out)


def pyodide_digests(pyodide: Path) -> dict[str, str]:
    """{name: SRI SHA-384} of the Pyodide files the runtime loads, in ``pyodide``."""
    return {name: sri((pyodide / name).read_bytes()) for name in PYODIDE_FILES}


class _Maker(http.server.SimpleHTTPRequestHandler):
    """Serves the maker's folder; keeps the body of ``POST /snapshot``."""

    received: dict

    def do_POST(self):
        if self.path != "/snapshot":
            self.send_error(404)
            return
        length = int(self.headers["Content-Length"])
        self.received["snapshot"] = self.rfile.read(length)
        self.send_response(204)
        self.end_headers()

    def log_message(self, *args):
        pass


def make(project: Path = ROOT, out: Path = FOLDER, wait_s: float = 300) -> dict:
    """Make the snapshot in headless Chromium (Debian's, with its chromedriver, as
    ``make test`` installs them) from ``project``'s vendored Pyodide and a wheel of its
    llmmath; write ``out/pyodide-snapshot.bin`` and ``out/snapshot.json``; return the
    record.

    Raises:
        RuntimeError: the maker failed in the browser, or did not finish in ``wait_s``.
    """
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    pyodide = project / "_vendor" / "pyodide"
    with tempfile.TemporaryDirectory() as tmp:
        served = Path(tmp) / "served"
        served.mkdir()
        for name in PYODIDE_FILES:
            shutil.copy(pyodide / name, served / name)
        shutil.copy(MAKER, served / "maker.js")
        wheel = build_wheel(project, served)
        (served / "index.html").write_text(
            "<!doctype html><title>snapshot</title><script>"
            'const w = new Worker("maker.js", {type: "module"});'
            "w.onmessage = (e) => { window.made = e.data; };"
            f"w.postMessage({{wheel: {json.dumps(wheel.name)}}});"
            "</script>"
        )
        received: dict = {}
        handler = type("Handler", (_Maker,), {"received": received})
        httpd = http.server.ThreadingHTTPServer(
            ("127.0.0.1", 0), functools.partial(handler, directory=str(served))
        )
        threading.Thread(target=httpd.serve_forever, daemon=True).start()
        options = webdriver.ChromeOptions()
        options.binary_location = "/usr/bin/chromium"
        for arg in ["--headless", "--no-sandbox", "--disable-gpu"]:
            options.add_argument(arg)
        options.add_argument("--disable-dev-shm-usage")
        options.add_argument(f"--user-data-dir={tmp}/profile")
        driver = webdriver.Chrome(
            service=Service(executable_path="/usr/bin/chromedriver"), options=options
        )
        try:
            driver.get(f"http://127.0.0.1:{httpd.server_port}/index.html")
            deadline = time.monotonic() + wait_s
            while not (made := driver.execute_script("return window.made || null")):
                if time.monotonic() > deadline:
                    raise RuntimeError(f"no snapshot after {wait_s:.0f} s")
                time.sleep(0.2)
            browser = driver.capabilities.get("browserVersion", "?")
        finally:
            driver.quit()
            httpd.shutdown()
            httpd.server_close()
    if "error" in made:
        raise RuntimeError(f"the snapshot maker failed in Chromium:\n{made['error']}")
    raw = received["snapshot"]
    found = header(raw)
    expected = build_id((pyodide / "pyodide.mjs").read_text("utf-8"))
    if found["build_id"] != expected:
        raise RuntimeError(f"snapshot of build {found['build_id']}, not {expected}")
    packed = gzip.compress(pack(raw), compresslevel=9, mtime=0)
    out.mkdir(parents=True, exist_ok=True)
    (out / NAME).write_bytes(packed)
    record = {
        "pyodide": made["version"],
        "build_id": expected,
        "made_with": f"Chromium {browser}",
        "bytes": len(raw),
        "gzip_bytes": len(packed),
        "sha384": sri(packed),
        "modules": made["modules"],
        "from": pyodide_digests(pyodide),
    }
    (out / RECORD).write_text(json.dumps(record, indent=1) + "\n", "utf-8")
    return record


def main() -> None:
    parser = argparse.ArgumentParser(
        prog="python -m llmmath_book.snapshot",
        description="Make _vendor/pyodide-snapshot/ in headless Chromium.",
    )
    parser.parse_args()
    record = make()
    print(
        f"{FOLDER / NAME}: {record['gzip_bytes']:,} bytes "
        f"({record['bytes']:,} uncompressed), {len(record['modules'])} modules, "
        f"Pyodide {record['pyodide']}"
    )


if __name__ == "__main__":
    main()

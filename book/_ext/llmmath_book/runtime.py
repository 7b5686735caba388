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
   before it runs them;
   and the runtime's own words (`llmmath.explorers.RUNTIME_MESSAGES`) in the build's
   language (``{msgid: msgstr}`` from llmmath's gettext catalogue, in place of
   ``__MESSAGES__``; empty in English);
4. copies ``llmmath/static/runtime-worker.js`` beside it as
   ``llmmath-runtime-worker.js``: the module worker that downloads, checks and runs
   them, off the page's main thread.

The explorers' front end (``llmmath/static/explorer.js`` and ``explorer.css``) also
reaches the site through this extension: each page's stored widget state (the
notebook's metadata, written when the chapter was last executed) gets the package's
current ``_esm`` and ``_css``, so that the site runs the front end of this build, and
each explorer's stored ``view`` is computed again from its state in the build's language
(``language: zh_CN``: Chinese), so that the page shows this build's words and controls
(their accessible names included) before the reader changes anything; the worker speaks
the page's ``<html lang>``.

Pages with explorers load that script (``nb_ipywidgets_js``). It defines
``globalThis.llmmathRuntime``, which loads Pyodide only on the reader's first change of
a control (or on opening a link with an answer in it), with visible progress: a reader
who only reads downloads none of it.
"""

from __future__ import annotations

import base64
import hashlib
import html.parser
import json
import re
import shutil
import subprocess
import sys
import tempfile
import urllib.parse
from pathlib import Path

import llmmath

#: The Pyodide files the runtime loads (no Pyodide packages: llmmath needs the stdlib).
PYODIDE_FILES = (
    "pyodide.mjs",
    "pyodide.asm.mjs",
    "pyodide.asm.wasm",
    "python_stdlib.zip",
    "pyodide-lock.json",
)
#: The snapshot of Pyodide started (`llmmath_book.snapshot`), vendored in
#: ``_vendor/pyodide-snapshot/``: the gzip-compressed snapshot and the record of what
#: it was made from.
SNAPSHOT_FOLDER = "pyodide-snapshot"
SNAPSHOT_NAME = "pyodide-snapshot.bin"
SNAPSHOT_RECORD = "snapshot.json"
TEMPLATE = Path(llmmath.__file__).with_name("static") / "runtime.js"
WORKER = Path(llmmath.__file__).with_name("static") / "runtime-worker.js"
WORKER_NAME = "llmmath-runtime-worker.js"
WIDGET_STATE = "application/vnd.jupyter.widget-state+json"


def sri(data: bytes) -> str:
    """The Subresource Integrity string of ``data``: ``sha384-`` and the base64
    digest."""
    return "sha384-" + base64.b64encode(hashlib.sha384(data).digest()).decode()


def source_copy(project: Path, dest: Path) -> Path:
    """llmmath's source as pip gets it from the repository ``project`` (pyproject.toml,
    README.md and llmmath/, without bytecode), copied into the new folder ``dest``;
    ``dest``. A wheel built from it holds nothing a build folder of the checkout kept
    (setuptools' ``build/lib`` would carry modules since moved or removed)."""
    dest.mkdir(parents=True)
    for name in ["pyproject.toml", "README.md"]:
        shutil.copy(project / name, dest / name)
    shutil.copytree(
        project / "llmmath",
        dest / "llmmath",
        ignore=shutil.ignore_patterns("__pycache__"),
    )
    return dest


def build_wheel(project: Path, out: Path) -> Path:
    """Build llmmath's wheel from a copy of ``project``'s source (`source_copy`; the
    repository root) into ``out``, with the running environment's setuptools
    (``--no-build-isolation``: nothing is downloaded). The site serves this wheel, and
    the tests install it (``tests/wheel.py``).

    Raises:
        RuntimeError: pip failed; the message holds its output.
    """
    out.mkdir(parents=True, exist_ok=True)
    for old in out.glob("llmmath-*.whl"):
        old.unlink()
    with tempfile.TemporaryDirectory() as tmp:
        project = source_copy(project, Path(tmp) / "src")
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


def snapshot_entry(static: Path) -> dict | None:
    """The manifest's entry of the Pyodide snapshot under ``static/pyodide-snapshot/``
    (path, bytes, SHA-384); None when the site has none.

    Raises:
        RuntimeError: the snapshot was made from other Pyodide files than those under
            ``static/pyodide/`` (Pyodide would refuse it): run ``make snapshot``.
    """
    folder = static / SNAPSHOT_FOLDER
    if not (folder / SNAPSHOT_RECORD).is_file():
        return None
    record = json.loads((folder / SNAPSHOT_RECORD).read_text("utf-8"))
    for name in PYODIDE_FILES:
        if record["from"].get(name) != sri((static / "pyodide" / name).read_bytes()):
            raise RuntimeError(
                f"_vendor/{SNAPSHOT_FOLDER}/{SNAPSHOT_NAME} was made from another "
                f"{name} than _vendor/pyodide's: run make snapshot"
            )
    data = (folder / SNAPSHOT_NAME).read_bytes()
    return {
        "path": f"{SNAPSHOT_FOLDER}/{SNAPSHOT_NAME}",
        "bytes": len(data),
        "sha384": sri(data),
    }


def manifest(static: Path, wheel: Path) -> dict:
    """Paths (relative to ``static``), sizes in bytes and SRI digests of what the
    runtime loads: the Pyodide files under ``static/pyodide/`` and the wheel (``files``,
    ``bytes`` their sum), the snapshot of Pyodide started, which the worker uses when
    it downloads quickly enough (``snapshot``, `snapshot_entry`), and the worker script
    (``worker``, already copied into ``static/runtime/``)."""
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
    worker = (static / "runtime" / WORKER_NAME).read_bytes()
    return {
        "python": lock["info"]["python"],
        "files": files,
        "bytes": sum(f["bytes"] for f in files.values()),
        "snapshot": snapshot_entry(static),
        "worker": {
            "path": f"runtime/{WORKER_NAME}",
            "bytes": len(worker),
            "sha384": sri(worker),
        },
    }


def runtime_messages(language: str = "en") -> dict[str, str]:
    """{msgid: msgstr} of the runtime's own words (`llmmath.explorers.RUNTIME_MESSAGES`)
    in ``language``: what llmmath-runtime.js looks up (empty for English)."""
    from llmmath.explorers import RUNTIME_MESSAGES
    from llmmath.messages import messages

    return messages(language, only=set(RUNTIME_MESSAGES))


def write_runtime(static: Path, project: Path, language: str = "en") -> dict:
    """Build the wheel, copy the worker and write
    ``static/runtime/llmmath-runtime.js`` (its words in ``language``); returns the
    manifest."""
    from llmmath.config import MAX_CONFIG_BYTES

    wheel = build_wheel(project, static / "runtime")
    shutil.copyfile(WORKER, static / "runtime" / WORKER_NAME)
    found = manifest(static, wheel)
    script = (
        TEMPLATE.read_text("utf-8")
        .replace("__MANIFEST__", json.dumps(found))
        .replace("__MAX_CONFIG_BYTES__", str(MAX_CONFIG_BYTES))
        .replace(
            "__MESSAGES__", json.dumps(runtime_messages(language), ensure_ascii=False)
        )
    )
    (static / "runtime" / "llmmath-runtime.js").write_text(script, "utf-8")
    return found


class _ScriptTags(html.parser.HTMLParser):
    """The ``<script src>`` and ``<link rel=preload as=script>`` tags of a page: their
    (line, column) in it, raw text and the URL they load."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.found: list[tuple[tuple[int, int], str, str]] = []

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "script" and a.get("src"):
            url = a["src"]
        elif tag == "link" and a.get("as") == "script" and a.get("href"):
            url = a["href"]
        else:
            return
        self.found.append((self.getpos(), self.get_starttag_text(), url))


#: A pinned script tag, kept inert in a ``<template>`` (neither run nor fetched by the
#: browser's preload scanner) and written into the page by `PIN_LOADER`'s function.
PINNED = '<template class="llmmath-pinned">{tag}</script></template>'
PINNED_RE = re.compile(
    r'<template class="llmmath-pinned">(.*?)</template><script>llmmathPin\(\)</script>',
    re.S,
)
#: The inline script put before a page's first pinned script. Over http(s) it preloads
#: every pinned script with its digest (the preload scanner does not see them) and
#: writes each tag as it stands, so the browser runs none whose bytes changed. A page
#: opened from disk (file://) has an opaque origin: browsers refuse every script that
#: carries an integrity there (they cannot read its bytes), so there each tag is written
#: without it: whoever can change the site's files on disk can change the page too.
#: ``document.write`` keeps each script where its tag was: it runs in order with the
#: page's inline scripts, before DOMContentLoaded, and ``defer`` keeps its meaning.
PIN_LOADER = (
    '<script id="llmmath-pin">(function () {{'
    ' var served = location.protocol !== "file:";'
    " window.llmmathPin = function () {{"
    " var tag = document.currentScript.previousElementSibling.content"
    ".firstElementChild.cloneNode(true);"
    ' if (!served) tag.removeAttribute("integrity");'
    " document.write(tag.outerHTML); }};"
    " if (served) {preloads}.forEach(function (p) {{"
    ' var link = document.createElement("link");'
    ' link.rel = "preload"; link.as = "script"; link.href = p[0];'
    " link.integrity = p[1]; document.head.appendChild(link); }});"
    " }})();</script>"
)
PIN_LOADER_RE = re.compile(r'<script id="llmmath-pin">.*?</script>', re.S)


def pin_scripts(page: Path, root: Path) -> int:
    """Pin every script tag of ``page`` that loads a file of the site under ``root``:
    the tag gets the file's SHA-384 as its ``integrity`` and is written into the page
    by `PIN_LOADER`, which checks it over http(s) and leaves it out on file://; the
    page's preloads of such scripts are left to the loader (over http(s) only). Run
    again on a pinned page, it pins its tags with the files' current digests. Returns
    how many tags were pinned."""
    text = PIN_LOADER_RE.sub("", page.read_text("utf-8"))
    text = PINNED_RE.sub(r"\1", text)
    parser = _ScriptTags()
    parser.feed(text)
    parser.close()
    starts = [0]
    for line in text.splitlines(keepends=True):
        starts.append(starts[-1] + len(line))
    pieces, at, pinned, preloads, first = [], 0, 0, {}, None
    for (line, column), raw, url in parser.found:
        parts = urllib.parse.urlsplit(url)
        if parts.scheme or parts.netloc or not parts.path:
            continue  # another host, or a data: URL: none on this site's pages
        target = (page.parent / urllib.parse.unquote(parts.path)).resolve()
        if not target.is_file() or not target.is_relative_to(root.resolve()):
            continue
        offset = starts[line - 1] + column
        digest = sri(target.read_bytes())
        preloads.setdefault(url, digest)
        pieces.append(text[at:offset])
        first = len(pieces) if first is None else first
        at = offset + len(raw)
        if raw.startswith("<link"):
            continue  # the loader preloads it
        if not text.startswith("</script>", at):
            raise ValueError(f"{page}: {raw} is not followed by </script>")
        at += len("</script>")
        tag = re.sub(r'\s+integrity="[^"]*"', "", raw)[:-1].rstrip()
        pieces.append(PINNED.format(tag=f'{tag} integrity="{digest}">'))
        pieces.append("<script>llmmathPin()</script>")
        pinned += 1
    if first is not None:
        loader = PIN_LOADER.format(
            preloads=json.dumps(list(preloads.items())).replace("</", r"<\/")
        )
        pieces.insert(first, loader)
    page.write_text("".join(pieces) + text[at:], "utf-8")
    return pinned


def pin_site(root: Path) -> None:
    """`pin_scripts` on every page of the site built into ``root`` (not those of
    another build inside it, such as the Chinese edition's ``zh/``, with its own
    ``_static``)."""
    for page in root.rglob("*.html"):
        rel = page.relative_to(root)
        if "_static" in rel.parts or any(
            (root / Path(*rel.parts[:i]) / "_static").is_dir()
            for i in range(1, len(rel.parts))
        ):
            continue
        pin_scripts(page, root)


def current_front_end(state_json: str, language: str = "en") -> str:
    """A page's stored widget state (JSON text, as myst-nb puts it in the page) with
    the current front end (``_esm``, ``_css``) in each llmmath explorer's model, and
    each explorer's ``view`` computed again from its state in ``language`` (the numbers
    are the same; the words and controls are this build's)."""
    from llmmath.messages import language as language_name

    static = TEMPLATE.parent
    esm = (static / "explorer.js").read_text("utf-8")
    css = (static / "explorer.css").read_text("utf-8")
    language = language_name(language or "en")
    state = json.loads(state_json)
    for model in state.get("state", {}).values():
        fields = model.get("state", {})
        if model.get("model_name") == "AnyModel" and {"kind", "view"} <= set(fields):
            fields["_esm"], fields["_css"] = esm, css
            fields["view"] = translated_view(fields, language)
    return json.dumps(state).replace("</script>", r"<\/script>")  # as myst-nb does


def translated_view(fields: dict, language: str) -> dict:
    """An explorer model's stored ``view`` computed again in ``language`` from the state
    it shows (the stored view unchanged when it cannot be)."""
    from llmmath.explorers import EXPLORERS, explore
    from llmmath.messages import speaking

    view = fields["view"]
    kind = fields.get("kind")
    shown = view.get("state") if isinstance(view, dict) else None
    if kind not in EXPLORERS or not isinstance(shown, dict):
        return view
    with speaking(language):
        return explore(kind, shown)


def _page_context(app, pagename, templatename, context, doctree) -> None:
    for script in context.get("script_files", []):
        attributes = getattr(script, "attributes", None)
        if attributes and attributes.get("type") == WIDGET_STATE:
            attributes["body"] = current_front_end(
                attributes["body"], app.config.language or "en"
            )


def _build_finished(app, exception) -> None:
    if exception is None and app.builder.format == "html":
        write_runtime(
            Path(app.outdir) / "_static",
            Path(app.confdir),
            app.config.language or "en",
        )
        pin_site(Path(app.outdir))


def _config_inited(app, config) -> None:
    # The pages embed the front end and the runtime's scripts, and the digests of the
    # static files they load (`pin_site`): a digest of all of them in the HTML config
    # makes Sphinx write every page again when one of them changes, and copy the static
    # files again (a build with no page to write copies none: a changed
    # _vendor/widgets-setup.js stayed out of the site).
    static = TEMPLATE.parent
    files = [
        static / name
        for name in ("explorer.js", "explorer.css", "runtime.js", "runtime-worker.js")
    ]
    for folder in config.html_static_path:
        found = (Path(app.confdir) / folder).rglob("*")
        files += sorted(path for path in found if path.is_file())
    digest = hashlib.sha384()
    for path in files:
        digest.update(path.read_bytes())
    config.html_context = {
        **(config.html_context or {}),
        "llmmath_front_end": base64.b64encode(digest.digest()).decode(),
    }


def setup(app) -> dict:
    """Sphinx entry point: the current front end in every page, the runtime after
    every HTML build."""
    app.connect("config-inited", _config_inited)
    app.connect("html-page-context", _page_context, priority=900)  # after myst-nb's
    app.connect("build-finished", _build_finished)
    return {"parallel_read_safe": True, "parallel_write_safe": True}

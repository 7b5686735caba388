"""Binder's build files say what repo2docker (2026.4) does with them, and the readers'
set they install works on its own.

repo2docker reads ``binder/`` when it exists and then ignores the root files: it
installs ``binder/requirements.txt`` (a ``-r`` line makes it copy the whole repository
first, so ``-r ../requirements/reader.txt`` resolves), then runs ``binder/postBuild``
from the repository root, with the Python of ``binder/runtime.txt``. Checked once with
``repo2docker --no-build --debug .``, whose Dockerfile runs ``pip install --no-cache-dir
-r "binder/requirements.txt"`` and then ``./binder/postBuild``; these tests keep the
files saying so. The last test does the same in a fresh virtual environment (no system
site-packages) and runs a chapter there; it needs the package index, or pip's cache.
"""

import json
import os
import re
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import nbformat
import tomllib
from packaging.specifiers import SpecifierSet
from packaging.version import Version

from tests.test_environment import new_venv, norm, pins, pip_into, source_copy

ROOT = Path(__file__).resolve().parents[1]
BINDER = ROOT / "binder"
CHAPTER = ROOT / "chapters" / "05_norms.ipynb"  # light: torch, sympy, tables, glue


def _lines(path):
    return [
        l.split("#", 1)[0].strip()
        for l in path.read_text().splitlines()
        if l.split("#", 1)[0].strip()
    ]


def test_binder_python_is_the_books():
    (runtime,) = _lines(BINDER / "runtime.txt")
    version = runtime.removeprefix("python-")
    (needed,) = re.findall(
        r"^NEEDS_PYTHON := (\S+)$", (ROOT / "Makefile").read_text(), re.M
    )
    assert version == needed  # the Python `make` checks for
    spec = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"][
        "requires-python"
    ]
    assert Version(f"{version}.0") in SpecifierSet(spec)


def test_binder_installs_the_readers_set_by_name():
    lines = _lines(BINDER / "requirements.txt")
    assert lines == ["-r ../requirements/reader.txt"]
    reader = pins((BINDER / lines[0].split()[1]).resolve())  # fails on any unpinned
    assert {"torch", "torchao", "jupyterlab", "ipywidgets", "anywidget"} <= set(reader)
    assert not {"sphinx", "pytest", "selenium", "transformers"} & set(reader)


def test_binder_postbuild_installs_the_package():
    post = BINDER / "postBuild"
    assert os.access(post, os.X_OK)
    commands = [l for l in _lines(post) if not l.startswith("set ")]
    assert commands == [
        'python -m pip install --no-cache-dir --no-build-isolation ".[notebooks,torch]"'
    ]
    assert (
        tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["name"]
        == "llmmath"
    )


RUN_CHAPTER = textwrap.dedent(
    """
    import json, sys
    import nbformat
    from nbclient import NotebookClient

    nb = nbformat.read(sys.argv[1], as_version=4)
    NotebookClient(nb, timeout=300, kernel_name="python3",
                   resources={"metadata": {"path": sys.argv[2]}}).execute()
    json.dump(nb, sys.stdout)
    """
)


def glued(nb) -> dict[str, dict]:
    """The chapter's glued values: ``{name: data}``."""
    return {
        out["metadata"]["scrapbook"]["name"]: out["data"]
        for cell in nb.cells
        if cell.cell_type == "code"
        for out in cell.get("outputs", [])
        if "scrapbook" in out.get("metadata", {})
    }


def test_binder_set_installs_pinned_and_runs_a_chapter(tmp_path):
    """What Binder does, in a fresh venv: install binder/requirements.txt, then llmmath
    with its extras as postBuild does (pip installs nothing more: the pins meet them).
    Every installed package is one of the pins at its version, and a chapter runs
    there with no error, glueing the numbers its stored outputs hold."""
    python = new_venv(tmp_path / "binder")
    start = time.monotonic()
    pip_into(
        python,
        "install",
        "--quiet",
        "--no-compile",
        "-r",
        str(BINDER / "requirements.txt"),
    )
    pip_into(  # as postBuild does: the extras, which the pins already meet
        python,
        "install",
        "--quiet",
        "--no-build-isolation",
        f"{source_copy(tmp_path)}[notebooks,torch]",
    )
    installed_in = time.monotonic() - start
    listed = json.loads(pip_into(python, "list", "--format=json").stdout)
    reader = pins(BINDER / "requirements.txt")
    unpinned = [
        f"{d['name']}=={d['version']}"
        for d in listed
        if norm(d["name"]) != "llmmath"
        and reader.get(norm(d["name"])) != Version(d["version"]).public
    ]
    assert not unpinned, f"installed but not pinned: {unpinned}"
    assert {norm(d["name"]) for d in listed} == set(reader) | {"llmmath"}

    result = subprocess.run(
        [str(python), "-c", RUN_CHAPTER, str(CHAPTER), str(CHAPTER.parent)],
        capture_output=True,
        text=True,
        timeout=600,
        env={k: v for k, v in os.environ.items() if k != "PYTHONPATH"},
    )
    assert result.returncode == 0, result.stderr[-4000:]
    ran = nbformat.reads(result.stdout, as_version=4)
    errors = [
        out
        for cell in ran.cells
        for out in cell.get("outputs", [])
        if out.get("output_type") == "error"
    ]
    assert not errors
    stored = glued(nbformat.read(CHAPTER, as_version=4))
    assert stored and glued(ran) == stored
    print(f"binder set installed in {installed_in:.0f} s", file=sys.stderr)

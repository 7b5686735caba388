"""Binder's build files say what repo2docker (2026.4) does with them.

repo2docker reads ``binder/`` when it exists and then ignores the root files: it
installs ``binder/requirements.txt`` (a ``-r`` line makes it copy the whole repository
first, so ``-r ../requirements.txt`` resolves), then runs ``binder/postBuild`` from the
repository root, with the Python of ``binder/runtime.txt``. Checked once with
``repo2docker --no-build --debug .``, whose Dockerfile runs ``pip install --no-cache-dir
-r "binder/requirements.txt"`` and then ``./binder/postBuild``; these tests keep the
files saying so.
"""

import os
import re
from pathlib import Path

import tomllib
from packaging.specifiers import SpecifierSet

ROOT = Path(__file__).resolve().parents[1]
BINDER = ROOT / "binder"


def _lines(path):
    return [
        l.split("#", 1)[0].strip()
        for l in path.read_text().splitlines()
        if l.split("#", 1)[0].strip()
    ]


def test_binder_python_is_the_books():
    (runtime,) = _lines(BINDER / "runtime.txt")
    version = runtime.removeprefix("python-")
    assert (
        f"python{version}" in (ROOT / "Makefile").read_text()
    )  # the Python `make` uses
    spec = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"][
        "requires-python"
    ]
    assert version in SpecifierSet(spec)


def test_binder_requirements_chain_to_the_pinned_ones_with_cpu_torch():
    lines = _lines(BINDER / "requirements.txt")
    assert lines == [
        "--extra-index-url https://download.pytorch.org/whl/cpu",
        "-r ../requirements.txt",
    ]
    pinned = _lines((BINDER / lines[1].split()[1]).resolve())
    assert "torch==2.13.0" in pinned
    assert all(re.fullmatch(r"[A-Za-z0-9_.\-\[\],]+==[^=\s]+", l) for l in pinned), (
        "all pinned"
    )


def test_binder_postbuild_installs_the_package():
    post = BINDER / "postBuild"
    assert os.access(post, os.X_OK)
    commands = [l for l in _lines(post) if not l.startswith("set ")]
    assert commands == ["python -m pip install --no-cache-dir --no-deps ."]
    assert (
        tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["name"]
        == "llmmath"
    )

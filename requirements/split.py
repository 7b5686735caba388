"""Write the three pinned requirement sets from the packages installed in this venv.

    .venv/bin/python requirements/split.py

Each set is the dependency closure of its roots (below), read from the installed
distributions' metadata for this interpreter (Linux, CPython 3.11), less what the sets
before it already pin; every version is the installed one, ``==`` pinned. To change a
pin: install the new version into .venv, run this, then ``make test``.

- ``reader.txt``: what a reader's Jupyter needs to run every chapter, the calculator
  and the errata: llmmath's extras ``notebooks`` and ``torch`` (read from
  pyproject.toml), JupyterLab and its kernel (Binder installs exactly this, then
  ``llmmath[notebooks,torch]``, whose requirements it then already meets);
- ``book.txt``: ``-r reader.txt`` and what ``make book`` adds (jupyter-book, Sphinx);
- ``dev.txt``: ``-r book.txt`` and what ``make test`` adds (pytest, nbval, the oracles).
"""

from __future__ import annotations

import importlib.metadata
import re
import sys
from pathlib import Path

import tomllib
from packaging.markers import default_environment
from packaging.requirements import Requirement

HERE = Path(__file__).resolve().parent


def extras(*names: str) -> list[str]:
    """The names of the packages that llmmath's extras ``names`` require
    (pyproject.toml's ``[project.optional-dependencies]``)."""
    project = tomllib.loads((HERE.parent / "pyproject.toml").read_text())["project"]
    optional = project["optional-dependencies"]
    return [Requirement(text).name for name in names for text in optional[name]]


SETS = {
    "reader": [*extras("notebooks", "torch"), "ipykernel", "jupyterlab"],
    "book": ["jieba", "jupyter-book", "sphinx-exercise", "sphinx-intl"],
    "dev": [
        "gguf",
        "hypothesis",
        "nbval",
        "peft",
        "pyseccomp",
        "pytest",
        "pytest-xdist",
        "ruff",
        "selenium",
        "transformers",
    ],
}

HEADERS = {
    "reader": """\
# Readers' environment, all pinned with every dependency: what each chapter, the
# calculator and the errata need in Jupyter (llmmath's extras notebooks and torch:
# SymPy, NumPy, Matplotlib, the widgets, tabulate, torch, torchao for chapter 9b; and
# JupyterLab). Binder installs exactly this, then llmmath[notebooks,torch], which it
# then meets. Python 3.11 (any 3.11.x). Written by requirements/split.py from the
# installed packages; do not edit by hand.
""",
    "book": """\
# Building the book (make book): the readers' set and jupyter-book with Sphinx, all
# pinned with every dependency. Written by requirements/split.py.
-r reader.txt
""",
    "dev": """\
# Testing (make test): the book's set and pytest, nbval and the test-only oracles, all
# pinned with every dependency. Written by requirements/split.py.
-r book.txt
""",
}

NOTES = {
    "torch": "CPU wheel here; see binder/requirements.txt for its size",
    "torchao": "chapter 9b: quantized tensors on the CPU; no dependencies",
    "jupyterlab": "make lab; nbconvert: executing the chapters (README)",
    "jupyter-book": "must stay >=1.0.4.post1,<2: 2.x ignores _config.yml and _toc.yml",
    "soupsieve": "the newest that runs on Python 3.11.0-3.11.4 (3.0 on need 3.11.5)",
    "gguf": "tests/test_quantization.py: GGML block sizes and a GGUF file it writes",
    "selenium": "tests/test_browser.py; 4.52.0 needs a newer certifi than the index's",
    "transformers": "tests/test_transformers_oracle.py only; llmmath never imports it",
    "peft": "tests/test_activations.py: LoRA as peft builds it",
    "pyseccomp": "the grading sandbox's seccomp filter, through Debian's libseccomp2",
    "pytest-xdist": "make test: two workers, a file per worker (--dist loadfile)",
}


def norm(name: str) -> str:
    """A distribution's name as pip compares them (PEP 503)."""
    return re.sub(r"[-_.]+", "-", name).lower()


def installed() -> dict[str, importlib.metadata.Distribution]:
    found: dict[str, importlib.metadata.Distribution] = {}
    for dist in importlib.metadata.distributions():
        found.setdefault(norm(dist.metadata["Name"]), dist)
    return found


def requirements(dist, extras: frozenset[str]) -> list[Requirement]:
    """``dist``'s requirements that apply here with ``extras`` requested."""
    env = default_environment()
    out = []
    for text in dist.requires or []:
        req = Requirement(text)
        if req.marker is None or any(
            req.marker.evaluate({**env, "extra": e}) for e in {"", *extras}
        ):
            out.append(req)
    return out


def closure(roots: list[str], dists) -> set[str]:
    """The normalized names of ``roots`` and everything they need, with extras."""
    seen: set[tuple[str, frozenset[str]]] = set()
    todo = [(norm(r), frozenset()) for r in roots]
    while todo:
        name, extras = todo.pop()
        if (name, extras) in seen:
            continue
        seen.add((name, extras))
        if name not in dists:
            sys.exit(f"{name} is needed but not installed")
        for req in requirements(dists[name], extras):
            todo.append((norm(req.name), frozenset(req.extras)))
    return {name for name, _ in seen}


def pin(dist) -> str:
    version = dist.version.split("+")[0]  # torch's "+cpu": any 2.13.0 build will do
    line = f"{dist.metadata['Name']}=={version}"
    note = NOTES.get(norm(dist.metadata["Name"]))
    return f"{line}  # {note}" if note else line


def main() -> None:
    dists = installed()
    done: set[str] = set()
    for name, roots in SETS.items():
        names = closure(roots, dists) - done
        done |= names
        lines = [pin(dists[n]) for n in sorted(names)]
        (HERE / f"{name}.txt").write_text(HEADERS[name] + "\n".join(lines) + "\n")
        print(f"requirements/{name}.txt: {len(lines)} pins")


if __name__ == "__main__":
    main()

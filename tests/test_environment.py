"""The readers' and the developers' environments (issue 21, part 3).

- ``make`` checks the Python it would use before anything else and stops with one line
  when it is unsuitable; every pin installs on the oldest Python the check accepts.
- ``make lab`` starts for root and for a user, at ``LAB_START``.
- requirements/: the readers' set (Binder's), the book's and the tests' are each closed
  under their pins' dependencies, all ``==`` pinned, and the readers' holds what every
  notebook imports and nothing that only builds or tests the book.
- The install cell that opens every notebook installs, on a Colab-like Python with
  ipywidgets 7.7.1, what the chapters need, leaves ipywidgets alone and brings no
  Sphinx; it says when a restart is needed.

The Colab resolve needs the package index (pip's cache serves repeated runs).
"""

from __future__ import annotations

import ast
import importlib.metadata
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

import nbformat
import pytest
import tomllib
from packaging.markers import default_environment
from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet
from packaging.version import Version

from llmmath import environment

ROOT = Path(__file__).resolve().parents[1]
SETS = ["reader", "book", "dev"]
BUILD_AND_TEST_ONLY = [  # the list: what a reader's kernel must not get
    "sphinx",
    "docutils",
    "myst-parser",
    "myst-nb",
    "jupyter-book",
    "pytest",
    "nbval",
    "hypothesis",
    "selenium",
    "transformers",
    "ruff",
]


def norm(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def pins(path: Path) -> dict[str, str]:
    """``{normalized name: version}`` of a requirements file and the files it ``-r``s;
    fails on any line that is not an ``==`` pin or ``-r``."""
    found: dict[str, str] = {}
    for raw in path.read_text().splitlines():
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        if line.startswith("-r "):
            found |= pins((path.parent / line[3:].strip()).resolve())
            continue
        match = re.fullmatch(r"([A-Za-z0-9_.\-]+)==([^=\s;]+)", line)
        assert match, f"{path.name}: not an exact pin: {raw!r}"
        found[norm(match[1])] = match[2]
    return found


def pins_of(name: str) -> dict[str, str]:
    return pins(ROOT / "requirements" / f"{name}.txt")


# --- make: the interpreter check ---


def fake_python(directory: Path, version: str, with_venv: bool = True) -> Path:
    """A script that answers the Makefile's probe like a Python ``version`` would, and
    logs every call (the check must not run pip or venv)."""
    path = directory / f"python{version}"
    fail = "" if with_venv else 'case "$*" in *ensurepip*) exit 1;; esac\n'
    path.write_text(
        "#!/bin/sh\n"
        f'echo "$*" >> "{directory}/calls.log"\n'
        f"{fail}"
        'case "$1" in -c) ;; *) exit 3;; esac\n'
        f"echo {version}\n"
    )
    path.chmod(0o755)
    return path


def make(*args: str, cwd: Path, path_dir: Path | None = None):
    """Run make with the repository's Makefile in ``cwd`` (no .venv there), outside any
    outer make (whose MAKEFLAGS would add "Entering directory" lines)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MAKE", "MFLAGS"))}
    if path_dir is not None:
        env["PATH"] = f"{path_dir}:{env['PATH']}"
    return subprocess.run(
        ["make", "-f", str(ROOT / "Makefile"), *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )


@pytest.fixture
def bare(tmp_path):
    """A directory with the files the Makefile's rules name, and no .venv."""
    for name in ["requirements.txt", "pyproject.toml", "book/_ext/pyproject.toml"]:
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(ROOT / name, tmp_path / name)
    shutil.copytree(ROOT / "requirements", tmp_path / "requirements")
    return tmp_path


def accepted(version: str, bare: Path) -> bool:
    python = fake_python(bare, version)
    return make("-n", "setup", f"PYTHON={python}", cwd=bare).returncode == 0


@pytest.mark.parametrize("target", ["setup", "book", "test", "lab"])
@pytest.mark.parametrize(
    "found", ["3.11.2-no-venv", "3.12.1", "3.10.14", "missing"], ids=str
)
def test_make_stops_at_once_with_one_line(bare, target, found):
    if found == "missing":
        python = bare / "no-such-python"
    else:
        python = fake_python(bare, found.split("-")[0], "no-venv" not in found)
    start = time.monotonic()
    result = make(target, f"PYTHON={python}", cwd=bare)
    elapsed = time.monotonic() - start
    out = (result.stdout + result.stderr).strip()
    assert result.returncode != 0
    assert len(out.splitlines()) == 1, out
    assert "Traceback" not in out and not re.search(r"\bpip\b", out)
    needed = re.search(r"needs Python (\d+\.\d+)", out)
    assert needed and Version(f"{needed[1]}.0") in SpecifierSet(
        tomllib.loads((ROOT / "pyproject.toml").read_text())["project"][
            "requires-python"
        ]
    )
    assert str(python) in out and "PYTHON=" in out
    if found != "missing":
        assert found.split("-")[0] in out
        calls = (bare / "calls.log").read_text()
        assert "-m" not in calls.split()  # no `python -m venv` or `-m pip`
    assert not (bare / ".venv").exists()
    assert elapsed < 10


def test_make_accepts_every_311_and_only_311(bare):
    assert accepted("3.11.0", bare) and accepted("3.11.2", bare)
    assert accepted("3.11.14", bare)
    assert not accepted("3.10.14", bare) and not accepted("3.12.0", bare)


def test_make_without_a_python_target_checks_nothing(bare):
    python = fake_python(bare, "2.7.18")
    assert make("-n", "clean", f"PYTHON={python}", cwd=bare).returncode == 0
    assert not (bare / "calls.log").exists()


def test_every_pin_installs_on_the_oldest_python_make_accepts(bare):
    """The check's lowest accepted version satisfies every pinned package's
    Requires-Python (read from the installed distribution, which must be the pin)."""
    oldest = next(v for v in (f"3.11.{n}" for n in range(20)) if accepted(v, bare))
    assert not accepted("3.10.99", bare)
    too_new = []
    for name, version in pins(ROOT / "requirements.txt").items():
        dist = importlib.metadata.distribution(name)
        assert Version(dist.version).public == version, (
            f"{name}: .venv differs from pin"
        )
        spec = dist.metadata.get("Requires-Python")
        if spec and Version(oldest) not in SpecifierSet(spec):
            too_new.append(f"{name}=={version} needs Python {spec}")
    assert not too_new, f"make accepts {oldest}, but " + "; ".join(too_new)


# --- make lab ---


def fake_id(directory: Path, uid: int) -> Path:
    (directory / "id").write_text(f"#!/bin/sh\necho {uid}\n")
    (directory / "id").chmod(0o755)
    return directory


@pytest.mark.parametrize("uid", [0, 1000])
def test_make_lab_allows_root_only_for_root(tmp_path, uid):
    env_dir = fake_id(tmp_path, uid)
    result = make("-n", "-o", ".venv/.installed", "lab", cwd=ROOT, path_dir=env_dir)
    assert result.returncode == 0, result.stderr
    command = result.stdout.replace("\\\n", " ").split()
    assert "lab" in command
    assert ("--allow-root" in command) == (uid == 0)
    start = next(a for a in command if a.startswith("--LabApp.default_url="))
    assert start.endswith("/lab/tree/editions/en")  # the reader editions
    other = make(
        "-n", "-o", ".venv/.installed", "lab", "LAB_START=book", cwd=ROOT
    ).stdout
    assert "--LabApp.default_url=/lab/tree/book" in other


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_make_lab_starts_and_opens_lab_start():
    """The real server, as this user (root in CI): it answers and redirects to the
    start folder."""
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MAKE", "MFLAGS"))}
    env.pop("DISPLAY", None)
    env.pop("WAYLAND_DISPLAY", None)
    args = f"--port={port} --ip=127.0.0.1 --IdentityProvider.token="
    proc = subprocess.Popen(
        ["make", "-o", ".venv/.installed", "lab", f"LAB_ARGS={args}"],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    opener = urllib.request.build_opener(NoRedirect)
    try:
        deadline = time.monotonic() + 60
        while True:
            assert proc.poll() is None, proc.stdout.read().decode()[-3000:]
            try:
                opener.open(f"http://127.0.0.1:{port}/", timeout=2)
            except urllib.error.HTTPError as redirect:
                location = redirect.headers.get("Location")
                break
            except OSError:
                assert time.monotonic() < deadline, "JupyterLab did not start"
                time.sleep(0.5)
        assert urllib.parse.urlsplit(location).path.endswith("/lab/tree/editions/en")
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=30)


class NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args, **kwargs):
        return None


# --- requirements/ ---


def requires(name: str, extras: frozenset[str] = frozenset()) -> list[Requirement]:
    env = default_environment()
    out = []
    for text in importlib.metadata.distribution(name).requires or []:
        req = Requirement(text)
        if req.marker is None or any(
            req.marker.evaluate({**env, "extra": e}) for e in {"", *extras}
        ):
            out.append(req)
    return out


@pytest.mark.parametrize("name", SETS)
def test_each_set_pins_all_it_needs(name):
    """Every requirement of every pinned package (with the extras asked for) is pinned
    in the same set, at a version that satisfies it."""
    pinned = pins_of(name)
    assert pinned
    todo = [(n, frozenset()) for n in pinned]
    seen = set()
    missing = []
    while todo:
        item = todo.pop()
        if item in seen:
            continue
        seen.add(item)
        for req in requires(*item):
            dep = norm(req.name)
            if dep not in pinned:
                missing.append(f"{item[0]} needs {req} (not pinned)")
            elif not req.specifier.contains(pinned[dep], prereleases=True):
                missing.append(f"{item[0]} needs {req}, pinned {pinned[dep]}")
            else:
                todo.append((dep, frozenset(req.extras)))
    assert not missing, "\n".join(missing)


def test_sets_chain_and_do_not_overlap():
    """requirements.txt is the dev set, which includes the book's, which includes the
    readers'; no package is pinned twice; what only builds or tests stays out of the
    readers' set."""
    assert pins(ROOT / "requirements.txt") == pins_of("dev")
    own = []
    for name in SETS:
        lines = (ROOT / "requirements" / f"{name}.txt").read_text().splitlines()
        includes = [l for l in lines if l.startswith("-r ")]
        assert includes == ([f"-r {SETS[SETS.index(name) - 1]}.txt"] if own else [])
        own.append({norm(l.split("==")[0]) for l in lines if "==" in l})
    assert sum(map(len, own)) == len(set().union(*own)) == len(pins_of("dev"))
    reader = pins_of("reader")
    assert not [n for n in BUILD_AND_TEST_ONLY if n in reader]
    assert all(n in pins_of("dev") for n in BUILD_AND_TEST_ONLY)


def notebook_imports() -> set[str]:
    """The top-level modules that the chapters and the book's notebooks import."""
    found = set()
    paths = [*ROOT.glob("chapters/*.ipynb"), *ROOT.glob("book/*.ipynb")]
    pattern = re.compile(r"^\s*(?:from\s+([\w.]+)\s+import|import\s+([\w., ]+))", re.M)
    for path in paths:
        for cell in nbformat.read(path, as_version=4).cells:
            if cell.cell_type != "code":
                continue
            for m in pattern.finditer(cell.source):
                names = [m[1]] if m[1] else [n.split()[0] for n in m[2].split(",")]
                found |= {n.split(".")[0] for n in names}
    return found - set(sys.stdlib_module_names)


def test_reader_set_holds_what_the_notebooks_and_llmmath_need():
    reader = pins_of("reader")
    providers = importlib.metadata.packages_distributions()
    modules = notebook_imports() - {"llmmath"}
    assert {"torch", "sympy", "matplotlib"} <= modules
    for module in modules:
        assert any(norm(d) in reader for d in providers[module]), module
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    extras = project["optional-dependencies"]
    for text in [*project["dependencies"], *extras["notebooks"], *extras["torch"]]:
        req = Requirement(text)
        assert norm(req.name) in reader, text
        assert req.specifier.contains(reader[norm(req.name)]), text


def test_pyproject_accepts_colabs_widgets():
    """llmmath and the anywidget it pins take the ipywidgets 7 that Colab ships."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    widgets = [Requirement(r) for r in project["optional-dependencies"]["notebooks"]]
    (spec,) = [r.specifier for r in widgets if r.name == "ipywidgets"]
    assert spec.contains("7.6.0") and spec.contains("7.7.1")
    (anywidget_needs,) = [r for r in requires("anywidget") if r.name == "ipywidgets"]
    assert anywidget_needs.specifier.contains("7.7.1")


def test_no_package_index_is_named():
    """Everything installs by package name: no index URL or host in the files that
    install."""
    files = [
        ROOT / "requirements.txt",
        ROOT / "pyproject.toml",
        ROOT / "Makefile",
        *(ROOT / "requirements").glob("*.txt"),
        *(ROOT / "binder").iterdir(),
    ]
    for path in files:
        text = path.read_text()
        assert "index-url" not in text and "find-links" not in text, path
        urls = re.findall(r"[a-z+]+://(?!localhost[:/])\S+", text)
        assert not urls, f"{path.name}: {urls}"


# --- the install cell ---


def cell_pip_arguments(book: str) -> list[str]:
    """The arguments after ``pip install`` in the install cell's command, its package
    spec (``BOOK``) replaced by ``book``."""
    source = environment.install_cell()
    (spec,) = re.findall(r'^BOOK = "(.*)"$', source, re.M)
    assert spec.startswith("llmmath[notebooks] @ git+")
    (run,) = [
        node
        for node in ast.walk(ast.parse(source))
        if isinstance(node, ast.Call) and ast.unparse(node.func) == "subprocess.run"
    ]
    command = [
        book if ast.unparse(a) == "BOOK" else ast.literal_eval(a)
        for a in run.args[0].elts
        if ast.unparse(a) != "sys.executable"
    ]
    assert command[:3] == ["-m", "pip", "install"]
    return command[3:]


def test_install_cell_is_short_and_quiet():
    source = environment.install_cell()
    assert max(map(len, source.splitlines())) <= 88
    assert "%pip" not in source  # IPython's %pip always says a restart may be needed
    assert "://" in source and "git+https://github.com/" in source  # code, no index
    assert "--index-url" not in source and "--extra-index-url" not in source


def test_restart_note_only_when_an_imported_package_changed(capsys):
    now = environment.installed()
    assert environment.restart_note(now) is None  # nothing changed
    before = dict(now)
    before["ipywidgets"] = "7.7.1"  # as if pip had upgraded it
    before["IPyWidgets"] = before.pop("ipywidgets")  # any spelling
    import ipywidgets  # noqa: F401  (imported, as on Colab)

    line = environment.restart_note(before)
    assert line and "restart" in line and "ipywidgets" in line
    assert capsys.readouterr().out == line + "\n"
    before = dict(now, hypothesis_not_imported="0")
    assert environment.changed_and_imported(before, modules={"json": None}) == []
    before = dict(now, pytest="0.0")  # a changed package that is not imported
    assert environment.changed_and_imported(before, modules={"json": None}) == []
    assert environment.changed_and_imported(before, modules={"_pytest.main": 1}) == [
        "pytest"
    ]


def source_copy(tmp: Path) -> Path:
    """llmmath's source as pip would get it from the repository (no .venv, no build
    output in the checkout; `llmmath_book.runtime.source_copy`)."""
    from llmmath_book.runtime import source_copy as copy

    return copy(ROOT, tmp / "llmmath-src")


def pip_into(python: Path, *args: str, timeout: float = 600):
    result = subprocess.run(
        [sys.executable, "-m", "pip", "--python", str(python), *args],
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    return result


def new_venv(path: Path) -> Path:
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", path], check=True)
    return path / "bin" / "python"


def test_colab_install_keeps_ipywidgets_7_and_brings_no_sphinx(tmp_path):
    """On a Python with ipywidgets 7.7.1 and its dependencies (as Colab has), the
    cell's pip command resolves, leaves ipywidgets alone, installs torchao at the
    readers' pin and nothing that builds or tests the book."""
    python = new_venv(tmp_path / "colab")
    pip_into(python, "install", "--quiet", "--no-compile", "ipywidgets==7.7.1")
    report = tmp_path / "report.json"
    book = f"llmmath[notebooks] @ {source_copy(tmp_path).as_uri()}"
    args = cell_pip_arguments(book)
    pip_into(python, "install", "--dry-run", "--report", str(report), *args)
    planned = {
        norm(item["metadata"]["name"]): item["metadata"]["version"]
        for item in json.loads(report.read_text())["install"]
    }
    assert "llmmath" in planned
    assert "ipywidgets" not in planned, "pip would change Colab's ipywidgets"
    assert not [n for n in BUILD_AND_TEST_ONLY if n in planned], planned
    assert planned.get("torchao") == pins_of("reader")["torchao"]
    assert "tabulate" in planned  # chapters' tables
    listed = pip_into(python, "list", "--format=json").stdout
    versions = {norm(d["name"]): d["version"] for d in json.loads(listed)}
    assert versions["ipywidgets"] == "7.7.1"

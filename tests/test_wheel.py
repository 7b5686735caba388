"""llmmath as its users install it (issue 34): the wheel needs nothing outside the
standard library, runs every command of the command line, and holds what the CLI, the
chapters and the browser run, not the book's build machinery (book/_ext/).

The wheel is built from the package's own files and installed with ``--no-deps`` into
a fresh virtual environment that has nothing else (tests/wheel.py); each command there
prints what the checkout's prints. A package of an extra (``llmmath[notebooks]``,
``[torch]``, ``[hub]``) that is missing is named in one line with the extra to
install.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import subprocess
import sys
import zipfile
from email.parser import Parser
from pathlib import Path

import pytest

from tests.wheel import build_wheel, install_wheel

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    """(the wheel, the Python of a fresh venv holding it and nothing else)."""
    work = tmp_path_factory.mktemp("wheel")
    wheel = build_wheel(work)
    return wheel, install_wheel(wheel, work / "venv")


def run(python, *args: str, cwd: Path, env: dict | None = None):
    """``python -m llmmath ARGS`` in ``cwd`` (not the checkout: the installed package is
    the one imported), in English."""
    env = {
        k: v
        for k, v in (env or os.environ).items()
        if k not in ("LLMMATH_LANG", "LLMMATH_LANGUAGE")
    }
    return subprocess.run(
        [str(python), "-m", "llmmath", *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        env=env,
        timeout=60,
    )


#: Every command of ``python -m llmmath --help`` with arguments that make it work.
COMMANDS = {
    "params": ["params", "llama-3-8b", "--json"],
    "kv-cache": ["kv-cache", "llama-3-8b", "--seq-len", "8192", "--batch", "4"],
    "flops": ["flops", "mixtral-8x7b", "--seq-len", "4096"],
    "memory": ["memory", "llama-3-70b", "--gpu", "h100", "--weights", "int4"],
    "speculative": ["speculative", "--alpha", "0.8", "--gamma", "4"],
    "parallel": [
        *("parallel", "llama-3-70b", "--gpus", "64", "--tp", "8", "--zero", "1"),
        *("--gpu", "H100-SXM5-80GB", "--tokens", "1e9"),
    ],
    "train-memory": ["train-memory", "qwen2.5-7b", "--method", "qlora"],
    "coursework": ["coursework", "key", "--student", "alice", "07_kv_cache"],
}


def test_the_wheel_requires_nothing(installed):
    """Its metadata requires a package only under an extra, and the venv holds the
    package and its record alone (pip installed nothing else)."""
    wheel, python = installed
    with zipfile.ZipFile(wheel) as z:
        (name,) = [n for n in z.namelist() if n.endswith(".dist-info/METADATA")]
        metadata = Parser().parsestr(z.read(name).decode())
    requires = metadata.get_all("Requires-Dist") or []
    assert requires and all("extra ==" in r for r in requires), requires
    assert set(metadata.get_all("Provides-Extra")) == {"notebooks", "torch", "hub"}
    site = next(python.parent.parent.glob("lib/python3*/site-packages"))
    assert sorted(p.name for p in site.iterdir()) == [
        "llmmath",
        "llmmath-0.1.0.dist-info",
    ]


def test_help_lists_the_commands_tested_here(installed, tmp_path):
    out = run(installed[1], "--help", cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    (listed,) = re.findall(r"^usage: .*?\{([\w,-]+)\}", out.stdout, re.S)
    assert sorted(listed.split(",")) == sorted([*COMMANDS, "measure"])


@pytest.mark.parametrize("name", COMMANDS)
def test_every_command_runs_from_the_wheel_alone(installed, tmp_path, name):
    """Each command succeeds in the venv and prints what it prints from the checkout
    (with the test environment's packages); no module outside the standard library
    exists there to import."""
    env = dict(os.environ, LLMMATH_COURSEWORK_KEY=str(tmp_path / "key"))
    (tmp_path / "key").write_text(secrets.token_hex(32))
    wheel = run(installed[1], *COMMANDS[name], cwd=tmp_path, env=env)
    assert wheel.returncode == 0, wheel.stderr
    assert wheel.stderr == ""
    checkout = run(sys.executable, *COMMANDS[name], cwd=ROOT, env=env)
    assert checkout.returncode == 0, checkout.stderr
    assert wheel.stdout == checkout.stdout
    assert len(wheel.stdout.splitlines()) >= 1


def test_params_json_is_the_count(installed, tmp_path):
    """The numbers come from the installed package, through ``python -m llmmath`` and
    the ``llmmath`` script: Llama-3-8B's 8,030,261,248 parameters (its model card:
    8.03B)."""
    out = run(installed[1], "params", "llama-3-8b", "--json", cwd=tmp_path)
    assert json.loads(out.stdout)["total"] == 8_030_261_248
    script = installed[1].with_name("llmmath")  # the console script pip wrote
    out = subprocess.run(
        [str(script), "params", "llama-3-8b", "--json"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
    )
    assert json.loads(out.stdout)["total"] == 8_030_261_248


@pytest.mark.parametrize(
    "args, extra",
    [
        (["measure"], "torch"),
        (["coursework", "editions", "--out", "ed", "07_kv_cache"], "notebooks"),
    ],
)
def test_a_command_that_needs_an_extra_names_it(installed, tmp_path, args, extra):
    """``measure`` runs a torch model, the blank editions are notebooks: without the
    extra, one line that names it and exit 2, no traceback."""
    out = run(installed[1], *args, cwd=tmp_path)
    assert out.returncode == 2
    (line,) = out.stderr.splitlines()
    assert line.startswith("llmmath: error: ")
    assert f"pip install 'llmmath[{extra}]'" in line


@pytest.mark.parametrize(
    "module, package, extra",
    [
        ("llmmath.formulas", "sympy", "notebooks"),
        ("llmmath.plots", "matplotlib", "notebooks"),
        ("llmmath.widgets", "anywidget", "notebooks"),
        ("llmmath.modules", "torch", "torch"),
        ("llmmath.rope", "torch", "torch"),
        ("llmmath.positions", "torch", "torch"),
        ("llmmath.distributed", "torch", "torch"),
    ],
)
def test_a_module_that_needs_an_extra_names_it(installed, tmp_path, module, package,
                                               extra):  # fmt: skip
    code = (
        "from llmmath.errors import MissingExtra\n"
        f"try:\n    import {module}\nexcept MissingExtra as e:\n"
        "    print(e.name, e, sep='|')\n"
    )
    out = subprocess.run(
        [str(installed[1]), "-c", code], capture_output=True, text=True, cwd=tmp_path
    )
    name, message = out.stdout.strip().split("|")
    assert name.partition(".")[0] == package
    assert message == (
        f"{module} needs {package}, which is not installed: "
        f"pip install 'llmmath[{extra}]'"
    )


def test_the_light_modules_import_on_the_standard_library(installed, tmp_path):
    """What the CLI, the browser runtime and the chapters' counting import loads with
    no third-party package."""
    light = [
        "llmmath", "llmmath.cli", "llmmath.explorers", "llmmath.book",
        "llmmath.config", "llmmath.counting", "llmmath.flops", "llmmath.kvcache",
        "llmmath.memory", "llmmath.parallel", "llmmath.training", "llmmath.hub",
        "llmmath.gpus", "llmmath.quantization", "llmmath.coursework",
        "llmmath.environment", "llmmath.localize", "llmmath.measured",
    ]  # fmt: skip
    out = subprocess.run(
        [str(installed[1]), "-c", "import " + ", ".join(light)],
        capture_output=True,
        text=True,
        cwd=tmp_path,
    )
    assert out.returncode == 0, out.stderr


def wheel_files(wheel: Path) -> list[str]:
    with zipfile.ZipFile(wheel) as z:
        return [n for n in z.namelist() if ".dist-info/" not in n]


def test_the_wheel_holds_no_sphinx_extension_or_builder(installed):
    """No module of the wheel is a Sphinx extension (a ``setup(app)`` function) or
    imports Sphinx, docutils, myst or jupyter-book; the book's extensions and builders
    (those _config.yml lists, book/_ext/) are not in it, nor the runtime's scripts."""
    wheel, _python = installed
    names = wheel_files(wheel)
    with zipfile.ZipFile(wheel) as z:
        sources = {n: z.read(n).decode() for n in names if n.endswith(".py")}
    assert len(sources) > 40 and "llmmath/cli/__init__.py" in sources
    for name, text in sources.items():
        assert not re.search(r"^def setup\(app", text, re.M), name
        found = re.findall(
            r"^\s*(?:from|import)\s+(sphinx|docutils|myst_\w+|jupyter_book)\b",
            text,
            re.M,
        )
        assert not found, (name, found)
    config = (ROOT / "_config.yml").read_text()
    (listed,) = re.findall(r"^    extensions: \[(.*)\]$", config, re.M)
    ours = [e.strip() for e in listed.split(",") if "llmmath" in e]
    assert sorted(ours) == [
        "llmmath_book.editions",
        "llmmath_book.runtime",
        "llmmath_book.translation",
    ]
    for extension in ours:
        module = extension.replace(".", "/") + ".py"
        assert (ROOT / "book" / "_ext" / module).is_file()
        assert not [n for n in names if n.endswith(module.split("/")[-1])], module
    assert not [n for n in names if n.startswith("llmmath_book")]
    assert not [n for n in names if "runtime" in n or "templates/" in n]


def test_the_wheel_holds_only_modules_and_their_data(installed):
    """Python modules, the presets and measured figures (JSON), the explorers' front
    end, the compiled catalogues (the live parts' words and the figures'), and the CJK
    font subset the Chinese figures are drawn with (`llmmath.figures`, with its
    licence); and it is small (README: its size)."""
    wheel, _python = installed
    allowed = re.compile(
        r"llmmath/(?:[\w/]+\.py|presets/[\w.-]+\.json|measured/[\w.-]+\.json"
        r"|static/explorer\.(?:js|css)|locale/\w+/LC_MESSAGES/(?:llmmath|figures)\.mo"
        r"|fonts/(?:wqy-microhei-subset\.ttf|LICENSE-Apache-2\.0\.txt|README\.md))$"
    )
    assert [n for n in wheel_files(wheel) if not allowed.fullmatch(n)] == []
    assert wheel.stat().st_size < 450_000  # README: about 423 kB


def test_import_llmmath_loads_no_json_re_or_typing(installed, tmp_path):
    """Issue 34: ``import llmmath`` loads neither json nor re (with enum) nor typing
    (about 20 ms of CPU together here); the presets load on first use, and
    ``llmmath.presets`` still works as an attribute."""
    code = (
        "import sys; heavy = {'json', 're', 'enum', 'typing'}; "
        "before = heavy & set(sys.modules); import llmmath; "
        "print(sorted(heavy & set(sys.modules) - before)); "
        "print(llmmath.presets.load('gpt2').hidden_size)"
    )
    out = subprocess.run(
        [str(installed[1]), "-c", code], capture_output=True, text=True, cwd=tmp_path
    )
    assert out.stdout.split("\n")[:2] == ["[]", "768"], out.stderr

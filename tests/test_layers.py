"""The package's layers: no import circle, and a command that imports only what it uses.

Layers, bottom to top (README, "The package has four layers"): data and configuration
(`llmmath.errors`, `config`, `ffn`, `presets`, `units`, `gpus`, `hub`, `messages`) →
counting and formulas (`counting`, `kvcache`, `flops`, ...) → the shared reports
(`llmmath.reports`, and `plots` and `measure`, which draw and run what they report) →
the front ends (the command line in `llmmath/cli/`, the explorers in
`llmmath/explorers/`, `widgets`, the coursework's command). Every ``import`` of every
module is read with `ast`, function-level ones and the modules named by string to
`importlib` included; no module imports one of a higher layer, and the graph is
checked for cycles.
"""

from __future__ import annotations

import ast
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "llmmath"


def module_name(path: Path) -> str:
    """``llmmath/coursework/cli.py`` → ``llmmath.coursework.cli``."""
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def _is_type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _targets(node: ast.Import | ast.ImportFrom, here: str) -> set[str]:
    """The llmmath modules an import statement in module ``here`` loads (not the
    parent packages, which are always initialised first)."""
    if isinstance(node, ast.Import):
        return {a.name for a in node.names if a.name in MODULES}
    base = node.module or ""
    if node.level:  # relative: from the package of ``here``
        package = (
            here if MODULES[here].name == "__init__.py" else here.rpartition(".")[0]
        )
        for _ in range(node.level - 1):
            package = package.rpartition(".")[0]
        base = f"{package}.{base}" if base else package
    found = set()
    for alias in node.names:
        if f"{base}.{alias.name}" in MODULES:
            found.add(f"{base}.{alias.name}")  # a submodule
        elif base in MODULES and base != "llmmath":
            found.add(base)
        elif base == "llmmath":
            found.add("llmmath")  # a name from the package's __init__
    return found


def imports(name: str, typing_only: bool = False) -> tuple[set[str], set[str]]:
    """(modules ``name`` imports at module level, modules it imports only inside a
    function or by name through `importlib`); ``if TYPE_CHECKING:`` blocks are left
    out, since they never run, unless ``typing_only`` (a type checker reads them)."""
    tree = ast.parse(MODULES[name].read_text("utf-8"))
    top, inner = set(), set()

    def visit(node: ast.AST, in_function: bool) -> None:
        if isinstance(node, ast.If) and _is_type_checking(node) and not typing_only:
            for child in node.orelse:
                visit(child, in_function)
            return
        if isinstance(node, ast.Import | ast.ImportFrom):
            (inner if in_function else top).update(_targets(node, name))
        elif (  # a module named by its dotted name, e.g. for importlib.import_module
            isinstance(node, ast.Constant)
            and isinstance(node.value, str)
            and node.value in MODULES
            and node.value != name
        ):
            inner.add(node.value)
        nested = in_function or isinstance(
            node, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda
        )
        for child in ast.iter_child_nodes(node):
            visit(child, nested)

    visit(tree, False)
    return top - {name}, inner - top - {name}


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One cycle of ``graph`` as a list of nodes (first == last), or None."""
    state: dict[str, int] = {}  # 1: on the stack, 2: done
    stack: list[str] = []

    def walk(node: str) -> list[str] | None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                return stack[stack.index(nxt) :] + [nxt]
            if nxt not in state and (cycle := walk(nxt)):
                return cycle
        stack.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state and (cycle := walk(node)):
            return cycle
    return None


GRAPH = {name: imports(name) for name in MODULES}

#: The layers as the README lists them, by name (1, 3) or by where a module lives (4);
#: every other module counts and derives (2).
DATA = {
    "llmmath.errors",
    "llmmath.config",
    "llmmath.ffn",
    "llmmath.presets",
    "llmmath.units",
    "llmmath.gpus",
    "llmmath.hub",
    "llmmath.messages",
}
REPORTS = {"llmmath.reports", "llmmath.plots", "llmmath.measure"}
#: The front ends: the command line's subpackage, the explorers' (one module per
#: chapter served), the widgets, the coursework's command and the ``python -m`` stubs.
FRONT_END_PACKAGES = ("llmmath.cli", "llmmath.explorers")
FRONT_END_MODULES = {
    "llmmath.widgets",
    "llmmath.coursework.cli",
    "llmmath.__main__",
    "llmmath.coursework.__main__",
}


def layer(name: str) -> int:
    """1 data and configuration, 2 counting and formulas, 3 reports, 4 front ends."""
    if (
        name in FRONT_END_MODULES
        or name.partition(".")[0] != name
        and any(name == p or name.startswith(p + ".") for p in FRONT_END_PACKAGES)
    ):
        return 4
    return 3 if name in REPORTS else 1 if name in DATA else 2  # llmmath: counts


@pytest.mark.parametrize("name", sorted(MODULES))
def test_no_module_imports_a_higher_layer(name):
    top, inner = GRAPH[name]
    higher = {m for m in top | inner if layer(m) > layer(name)}
    assert not higher, f"{name} (layer {layer(name)}) imports {sorted(higher)}"


def test_the_front_ends_live_where_the_readme_says():
    """The command line is one subpackage (its command modules beside it, no
    ``*_cli`` module left at the top), and every module its ``_BUILDERS`` name is in
    it; every explorer is defined in a module of `llmmath.explorers` whose docstring
    names the chapter it serves, and that chapter's notebook shows that explorer."""
    from llmmath import cli, explorers, widgets

    commands = {n for n in MODULES if layer(n) == 4 and n.startswith("llmmath.cli")}
    assert commands == {
        "llmmath.cli",
        "llmmath.cli.parallel",
        "llmmath.cli.serving",
        "llmmath.cli.training",
    }
    assert (PACKAGE / "cli" / "__init__.py").is_file()
    assert not [n for n in MODULES if n.endswith("_cli") or n == "llmmath.explorers_"]
    assert {b for _names, b in cli._BUILDERS if isinstance(b, str)} < commands
    readme = (ROOT / "README.md").read_text("utf-8")
    shown = {}  # kind -> the notebooks whose code shows its widget
    for notebook in [
        *ROOT.glob("chapters/*.ipynb"),
        ROOT / "book" / "calculator.ipynb",
    ]:
        text = notebook.read_text("utf-8")
        for cls in set(re.findall(r"widgets\.([A-Z]\w+)\b", text)):
            kind = getattr(widgets, cls)().kind  # each widget at its defaults
            shown.setdefault(kind, set()).add(notebook.name)
    for kind, function in explorers.EXPLORERS.items():
        module = sys.modules[function.__module__]
        assert module.__name__.startswith("llmmath.explorers."), kind
        assert module.__name__ != "llmmath.explorers.controls", kind
        found = re.match(
            r"(?:Chapter (\d+)(b|c)? \(|The calculator page)", module.__doc__
        )
        assert found, (kind, module.__name__)
        number, letter = found.groups()
        page = (
            r"calculator\.ipynb"
            if number is None
            else rf"{int(number):02d}{letter or ''}_\w+\.ipynb"
        )
        assert [n for n in shown.get(kind, ()) if re.fullmatch(page, n)], (kind, page)
        path = Path(*module.__name__.split(".")).with_suffix(".py").as_posix()
        assert f"`{path}`" in readme, path


def test_the_import_reader_sees_both_kinds_of_import():
    top, inner = GRAPH["llmmath.cli"]
    assert "llmmath.reports" in top  # module level
    assert "llmmath.flops_by_module" in inner  # inside _flops
    assert "llmmath.cli.serving" in inner  # named for importlib in _BUILDERS
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": set()}) is None


def test_no_import_circle_at_module_level():
    assert find_cycle({n: top for n, (top, _) in GRAPH.items()}) is None


def test_no_import_circle_at_all():
    """Function-level imports included: nothing imports back up the layers, so a
    report never needs `llmmath.cli` and the CLI's command modules never need it
    either (they are handed its helpers)."""
    assert find_cycle({n: top | inner for n, (top, inner) in GRAPH.items()}) is None


def test_no_import_circle_even_for_a_type_checker():
    """``if TYPE_CHECKING:`` imports included (issue 34: `llmmath.ffn` imported
    `llmmath.config` there while config imports ffn's sizing rule): the layers hold
    for a type checker and an import-graph tool too."""
    graph = {name: set().union(*imports(name, typing_only=True)) for name in MODULES}
    assert find_cycle(graph) is None


@pytest.mark.parametrize(
    "name",
    [
        "llmmath.reports",
        *[n for n in MODULES if n.startswith("llmmath.explorers")],
        "llmmath.cli.serving",
    ],
)
def test_below_the_cli_nothing_imports_it(name):
    top, inner = GRAPH[name]
    assert not {"llmmath.cli", "llmmath.widgets"} & (top | inner)


#: Run ``python -m llmmath ARGS`` in-process and print, after the command's output
#: and a marker line, every module loaded by the end and those loaded before the command
#: (by the interpreter's own start-up: site, .pth files).
WRAPPER = """
import json, runpy, sys
before = sorted(sys.modules)
sys.argv = ["llmmath", *sys.argv[1:]]
try:
    runpy.run_module("llmmath", run_name="__main__", alter_sys=True)
except SystemExit as exit:
    status = exit.code
print("\\n--modules--")
print(json.dumps({"status": status, "before": before, "modules": sorted(sys.modules)}))
"""


def run_llmmath(*args: str) -> tuple[str, set[str], set[str]]:
    """(stdout of ``python -m llmmath ARGS``, the modules loaded before the command,
    every module loaded by its end); the command must succeed."""
    run = subprocess.run(
        [sys.executable, "-c", WRAPPER, *args],
        capture_output=True,
        text=True,
        cwd=ROOT,
        check=True,
    )
    out, _, tail = run.stdout.rpartition("\n--modules--\n")
    found = json.loads(tail)
    assert found["status"] == 0, run.stderr
    return out, set(found["before"]), set(found["modules"])


def loaded_by(*args: str) -> tuple[str, set[str]]:
    """(stdout of ``python -m llmmath ARGS``, the modules it loaded)."""
    out, _, modules = run_llmmath(*args)
    return out, modules


HEAVY = {"torch", "numpy", "sympy", "matplotlib", "huggingface_hub", "ipywidgets"}
#: The modules of other commands that ``params`` must not load.
NOT_FOR_PARAMS = {
    "llmmath.cli.serving",
    "llmmath.cli.parallel",
    "llmmath.cli.training",
    "llmmath.parallel",
    "llmmath.training",
    "llmmath.flops",
    "llmmath.flops_by_module",
    "llmmath.kvcache",
    "llmmath.memory",
    "llmmath.quantization",
    "llmmath.gpus",
    "llmmath.hub",
}


def test_params_imports_only_what_it_uses():
    out, modules = loaded_by("params", "llama-3-8b", "--json")
    direct = subprocess.run(
        [sys.executable, "-m", "llmmath", "params", "llama-3-8b", "--json"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        check=True,
    )
    assert out == direct.stdout  # the wrapper changes nothing
    assert json.loads(out)["total"] == 8_030_261_248
    assert not {m.split(".")[0] for m in modules} & HEAVY
    assert not modules & NOT_FOR_PARAMS


def test_kv_cache_does_not_load_the_other_commands():
    out, modules = loaded_by("kv-cache", "llama-3-8b", "--seq-len", "8", "--json")
    assert json.loads(out)["bytes"] == 2 * 32 * 8 * 8 * 128 * 2
    assert "llmmath.kvcache" in modules
    assert not {m.split(".")[0] for m in modules} & HEAVY
    assert not modules & (NOT_FOR_PARAMS - {"llmmath.kvcache"})


def test_the_whole_tree_for_help_loads_no_heavy_library():
    out, modules = loaded_by("--help")
    assert "train-memory" in out and "coursework" in out
    assert not {m.split(".")[0] for m in modules} & HEAVY
    assert not modules & {"llmmath.flops_by_module", "llmmath.measure", "llmmath.hub"}

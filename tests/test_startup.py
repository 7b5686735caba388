"""Start-up of ``python -m llmmath params`` (issue 25): the command imports only what it
uses. Asserted on the modules loaded, not on timings (``make benchmark
BENCHMARK_ARGS=startup`` measures those): argparse and what it pulls in (gettext,
locale, shutil and its compressors) load only when the full parser is built, which
``params MODEL [--json]`` never needs; and no ``dataclasses``, which imports ``inspect``
(about 7 ms, the reason the records on this path are named tuples), nor `typing`
(issue 34: they are made by `llmmath.config.record`, not `typing.NamedTuple`).
"""

from __future__ import annotations

import contextlib
import io
from pathlib import Path

import pytest

from llmmath import cli
from tests.test_layers import run_llmmath

ROOT = Path(__file__).resolve().parents[1]

#: Modules the params path must not load (unless the interpreter's start-up already
#: did): the argument parser and what it imports, and other heavy standard modules.
NOT_ON_THE_PARAMS_PATH = {
    "argparse",
    "gettext",
    "locale",
    "shutil",
    "bz2",
    "lzma",
    "dataclasses",
    "inspect",
    "difflib",
    "fractions",
    "decimal",
    "subprocess",
    "tempfile",
    "importlib.metadata",
    "typing",  # issue 34: the records are named tuples made by llmmath.config.record
    "llmmath.units",
    "llmmath.hub",
}


def added_by(*args: str) -> tuple[str, set[str]]:
    """(stdout of ``python -m llmmath ARGS``, the modules the command loaded)."""
    out, before, added = loaded_by(*args)
    return out, added


def loaded_by(*args: str) -> tuple[str, set[str], set[str]]:
    """(stdout of ``python -m llmmath ARGS``, the modules loaded before the command,
    the modules the command loaded)."""
    out, before, modules = run_llmmath(*args)
    return out, before, modules - before


@pytest.mark.parametrize(
    "args",
    [
        ("params", "llama-3-8b", "--json"),
        ("params", "llama-3-8b"),
        ("params", "--json", "deepseek-v3"),
    ],
)
def test_params_imports_no_heavy_module(args):
    out, added = added_by(*args)
    assert out.strip()
    assert "llmmath.cli" in added  # the wrapper did run the command
    assert not added & NOT_ON_THE_PARAMS_PATH


def test_other_forms_still_build_the_parser():
    """``--revision``, ``--help`` and anything unusual go to argparse, as before."""
    out, before, added = loaded_by("params", "--help")
    assert out.startswith("usage: python -m llmmath params")
    assert "argparse" in added | before


def _through_argparse(argv: list[str]) -> tuple[int, str, str]:
    """(status, stdout, stderr) of ``argv`` read by the full parser, never the quick
    path."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        args = cli.build_parser(argv[0]).parse_args(argv)
        status = cli._run_command(args.run, args)
    return status, out.getvalue(), err.getvalue()


def _through_main(argv: list[str]) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        status = cli.main(argv)
    return status, out.getvalue(), err.getvalue()


@pytest.mark.parametrize(
    "argv",
    [
        ["params", "llama-3-8b", "--json"],
        ["params", "gpt2"],
        ["params", "--json", "deepseek-v3"],
        ["params", "qwen3-30b-a3b", "--json", "--json"],
        ["params", "no-such-preset"],
        ["params", "missing.json", "--json"],
        ["params", ""],
    ],
)
def test_the_quick_path_answers_as_argparse_does(argv):
    assert cli._quick_params(argv) is not None
    assert _through_main(argv) == _through_argparse(argv)


@pytest.mark.parametrize(
    "argv",
    [
        ["params"],
        ["params", "--json"],
        ["params", "-h"],
        ["params", "gpt2", "--js"],
        ["params", "gpt2", "--json=1"],
        ["params", "gpt2", "--revision", "main"],
        ["params", "a", "b"],
        ["params", "--", "gpt2"],
        ["params", "-1"],
        ["kv-cache", "gpt2", "--seq-len", "8"],
        ["--help"],
        [],
    ],
)
def test_anything_else_goes_to_argparse(argv):
    assert cli._quick_params(argv) is None

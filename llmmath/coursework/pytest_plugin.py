"""A pytest plugin that grades coursework sheets under ``pytest --nbval`` the safe way.

nbval alone runs a handed-in notebook as it is, so a student who edits the notebook
(nbval's control tags, a patched checker, another student's ID) can make it pass. For
every notebook that is a coursework sheet, this plugin takes nbval's tests away and puts
its own in their place:

- with ``--coursework-key KEYFILE`` (the teacher's key, `llmmath.coursework.signing`),
  *every* notebook collected is graded by `llmmath.coursework.grading.grade_sheet`, each
  in its own sandbox: one test per question, failing with the verdict and its reason (a
  notebook that is not a signed sheet fails as tampered). ``--coursework-unsafe``,
  ``--coursework-cell-timeout`` and ``--coursework-timeout`` are the ``grade`` command's
  ``--unsafe``, ``--cell-timeout`` and ``--timeout``;
- without it, each notebook that looks like a sheet (its metadata, or a code cell that
  names ``llmmath.coursework``) gets one failing test that says how to grade it.

``python -m llmmath.coursework grade DIR`` runs the same grading without pytest and also
catches a sheet handed in twice. pytest loads this plugin by itself wherever llmmath is
installed (entry point ``pytest11``); it leaves other notebooks to nbval.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from llmmath.coursework.handout import METADATA_KEY


class GradeFailure(Exception):
    """A question that is not right; the message is the report's line."""


def pytest_addoption(parser):
    group = parser.getgroup("llmmath coursework")
    group.addoption(
        "--coursework-key",
        help="grade every notebook as a coursework sheet signed with this key file",
    )
    group.addoption(
        "--coursework-unsafe",
        action="store_true",
        help="grade without a sandbox (not advised)",
    )
    group.addoption(
        "--coursework-cell-timeout", type=float, default=60, help="seconds (60)"
    )
    group.addoption(
        "--coursework-timeout", type=float, default=600, help="seconds a sheet (600)"
    )


def looks_like_sheet(path: Path) -> bool:
    """Whether the notebook at ``path`` is, or was made from, a coursework sheet."""
    try:
        nb = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    if not isinstance(nb, dict):
        return False
    if METADATA_KEY in (nb.get("metadata") or {}):
        return True
    cells = nb.get("cells")
    return isinstance(cells, list) and any(
        isinstance(c, dict)
        and c.get("cell_type") == "code"
        and "llmmath.coursework" in json.dumps(c.get("source", ""))
        for c in cells
    )


@pytest.hookimpl(wrapper=True)
def pytest_collect_file(file_path, parent):
    collected = yield
    if file_path.suffix != ".ipynb":
        return collected
    graded = parent.config.getoption("coursework_key") is not None
    if not graded and not looks_like_sheet(file_path):
        return collected
    keep = [c for c in collected if type(c).__module__.split(".")[0] != "nbval"]
    return keep + [SheetFile.from_parent(parent, path=file_path)]


class SheetFile(pytest.File):
    def collect(self):
        config = self.config
        key_file = config.getoption("coursework_key")
        if key_file is None:
            yield SheetItem.from_parent(
                self,
                name="sheet",
                line=(
                    f"{self.path.name}: a coursework sheet: grade it with "
                    "`python -m llmmath.coursework grade DIR` or `pytest --nbval "
                    "--coursework-key KEYFILE`; nbval alone cannot tell a tampered one"
                ),
            )
            return
        from llmmath.coursework.grading import Options, grade_sheet
        from llmmath.coursework.sandbox import Limits, SandboxUnavailable, command
        from llmmath.coursework.signing import load_key

        try:
            key = load_key(key_file)
            limits = Limits(
                cell_timeout=config.getoption("coursework_cell_timeout"),
                notebook_timeout=config.getoption("coursework_timeout"),
            )
            unsafe = config.getoption("coursework_unsafe")
            if not unsafe:
                command(self.path, limits, probe=True)
        except (ValueError, SandboxUnavailable) as e:
            yield SheetItem.from_parent(self, name="sheet", line=f"{e}")
            return
        options = Options(limits, unsafe=unsafe, key_path=Path(key_file))
        root = Path(config.invocation_params.dir)
        if root not in self.path.parents:
            root = self.path.parent
        for row in grade_sheet(self.path, root, key, options):
            name = f"question {row.question}" if row.question else "sheet"
            line = None if row.verdict == "right" else row.line()
            yield SheetItem.from_parent(self, name=name, line=line)


class SheetItem(pytest.Item):
    def __init__(self, *, line: str | None, **kwargs):
        super().__init__(**kwargs)
        self.line = line

    def runtest(self) -> None:
        if self.line is not None:
            raise GradeFailure(self.line)

    def repr_failure(self, excinfo, style=None):
        if isinstance(excinfo.value, GradeFailure):
            return str(excinfo.value)
        return super().repr_failure(excinfo)

    def reportinfo(self):
        return self.path, None, f"{self.path.name}::{self.name}"

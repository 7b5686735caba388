"""A pytest plugin that keeps ``pytest --nbval`` from passing a coursework sheet.

nbval alone runs a handed-in notebook as it is, so a student who edits the notebook
(nbval's control tags, a patched checker, another student's ID) can make it pass. For
each notebook that looks like a coursework sheet (its metadata, or a code cell that
names ``llmmath.coursework``) this plugin takes nbval's tests away and puts one failing
test in their place, which says how to grade it.

Grading is ``python -m llmmath.coursework grade DIR`` alone. pytest cannot grade a
hand-in folder safely: it imports every ``conftest.py`` and collects every test file
under the folder it is given, in the teacher's own process, before any plugin could
refuse them. So ``pytest --coursework-key ...``, once a way to grade, now stops before
pytest loads anything from the folder and says to use ``grade``.

pytest loads this plugin by itself wherever llmmath is installed (entry point
``pytest11``); it leaves other notebooks to nbval.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from llmmath.coursework.handout import METADATA_KEY

GRADE = "python -m llmmath.coursework grade DIR"


class GradeFailure(Exception):
    """A sheet run by pytest: the message says how to grade it."""


def pytest_addoption(parser):
    group = parser.getgroup("llmmath coursework")
    group.addoption(
        "--coursework-key",
        help=f"removed: pytest would import conftest.py files from the graded folder; "
        f"grade with `{GRADE} --key KEYFILE`",
    )


@pytest.hookimpl(tryfirst=True)
def pytest_load_initial_conftests(early_config, parser, args):
    """Refuse ``--coursework-key`` before pytest imports any ``conftest.py``."""
    if any(str(a).startswith("--coursework") for a in args):
        raise pytest.UsageError(
            "pytest --coursework-key no longer grades: pytest would import conftest.py "
            "and test files from the students' folder as you. Grade with "
            f"`{GRADE} --key KEYFILE` instead"
        )


def looks_like_sheet(path: Path) -> bool:
    """Whether the notebook at ``path`` is, or was made from, a coursework sheet."""
    try:
        nb = json.loads(path.read_text(encoding="utf-8-sig"))
    except (OSError, ValueError, RecursionError):
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
    if file_path.suffix != ".ipynb" or not looks_like_sheet(file_path):
        return collected
    keep = [c for c in collected if type(c).__module__.split(".")[0] != "nbval"]
    return keep + [SheetFile.from_parent(parent, path=file_path)]


class SheetFile(pytest.File):
    """A coursework sheet: one failing test that says how to grade it."""

    def collect(self):
        yield SheetItem.from_parent(
            self,
            name="sheet",
            line=(
                f"{self.path.name}: a coursework sheet: grade it with `{GRADE}`; "
                "nbval alone cannot tell a tampered one"
            ),
        )


class SheetItem(pytest.Item):
    """A test that fails with ``line``."""

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

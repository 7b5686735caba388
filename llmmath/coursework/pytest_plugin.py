"""A pytest plugin that keeps ``pytest --nbval`` from passing a coursework sheet.

nbval alone runs a handed-in notebook as it is, so a student who edits the notebook
(nbval's control tags, a patched checker, another student's ID) can make it pass. For
each notebook that looks like a coursework sheet (`looks_like_sheet`: its metadata, or
any of its cells: a sheet's tags, title, checker calls, answer variables or the
coursework module) this plugin takes nbval's tests away and puts one failing test in
their place, which says how to grade it.

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
import re
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


#: What a sheet's cells hold and no chapter's do (tests/test_coursework_attacks.py
#: checks both): its cells' tags; in code, the coursework module however imported, the
#: checker's calls, a `Sheet` or an ``answer_n``; in text, its title.
SHEET_TAGS = frozenset({"student-id", "question", "answer", "summary"})
SHEET_CODE = re.compile(
    r"\bcoursework\b|\bsheet\s*\.\s*(?:check|question|summary)\s*\("
    r"|\bSheet\s*\(|\banswer_\d+\b"
)
SHEET_TITLE = re.compile(r"^\s*#\s*Coursework\s+\d+\w*\s*:", re.MULTILINE)


def _text(source: object) -> str:
    if isinstance(source, list):
        return "".join(s for s in source if isinstance(s, str))
    return source if isinstance(source, str) else ""


def looks_like_sheet(path: Path) -> bool:
    """Whether the notebook at ``path`` is, or was made from, a coursework sheet: by
    its metadata, or by its cells (`SHEET_TAGS`, `SHEET_CODE`, `SHEET_TITLE`), so
    that a sheet stripped of its metadata is still one."""
    try:
        nb = json.loads(path.read_text(encoding="utf-8-sig"))
    except (OSError, ValueError, RecursionError, UnicodeDecodeError):
        return False
    if not isinstance(nb, dict):
        return False
    meta = nb.get("metadata")
    if isinstance(meta, dict) and METADATA_KEY in meta:
        return True
    cells = nb.get("cells")
    if not isinstance(cells, list):
        return False
    for c in cells:
        if not isinstance(c, dict):
            continue
        cell_meta = c.get("metadata")
        tags = cell_meta.get("tags") if isinstance(cell_meta, dict) else None
        if isinstance(tags, list) and SHEET_TAGS & {t for t in tags if type(t) is str}:
            return True
        source = _text(c.get("source", ""))
        if c.get("cell_type") == "code" and SHEET_CODE.search(source):
            return True
        if c.get("cell_type") == "markdown" and SHEET_TITLE.search(source):
            return True
    return False


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

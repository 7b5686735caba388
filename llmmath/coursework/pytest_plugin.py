"""A pytest plugin that completes ``pytest --nbval`` for handed-in coursework.

nbval runs each notebook again and fails a notebook whose cells raise, so a wrong answer fails.
It cannot see a cell that is no longer there: a student who deleted a failing check cell would
pass. For every notebook whose metadata marks it as a coursework sheet (``"llmmath_coursework"``,
written by `llmmath.coursework.handout.student_notebook`) this plugin adds one test, "sheet
complete", which fails unless

- the sheet is created for the chapter and student the metadata names,
- every question's answer cell still ends in ``sheet.check(n, answer_n)``, and
- the last code cell is ``sheet.summary()`` (which raises unless every question passed).

pytest loads the plugin by itself wherever llmmath is installed (entry point ``pytest11``); it
does nothing for other notebooks.
"""

from __future__ import annotations

import json

import pytest

from llmmath.coursework.handout import (
    METADATA_KEY,
    SUMMARY_SOURCE,
    check_source,
    sheet_source,
)


class SheetIncompleteError(Exception):
    """A handed-in sheet that lacks a required cell; the message says which."""


def sheet_problems(nb: dict) -> list[str]:
    """What is missing from a coursework notebook (a parsed ``.ipynb``); empty when complete."""
    meta = nb.get("metadata", {}).get(METADATA_KEY, {})
    code = [
        "".join(c["source"]) if isinstance(c["source"], list) else c["source"]
        for c in nb.get("cells", [])
        if c.get("cell_type") == "code"
    ]
    problems = []
    create = sheet_source(meta.get("chapter"), meta.get("student"))
    if not any(create in src for src in code):
        problems.append(f"no cell creates the sheet as `{create.splitlines()[-1]}`")
    for n in range(1, int(meta.get("questions", 0)) + 1):
        line = check_source(n)
        if not any(
            src.rstrip().splitlines()[-1:] == [line] for src in code if src.strip()
        ):
            problems.append(f"question {n}: no answer cell ends in `{line}`")
    if not code or code[-1].strip() != SUMMARY_SOURCE:
        problems.append(f"the last code cell is not `{SUMMARY_SOURCE}`")
    return problems


class SheetFile(pytest.File):
    def collect(self):
        yield SheetComplete.from_parent(self, name="sheet complete")


class SheetComplete(pytest.Item):
    def runtest(self) -> None:
        nb = json.loads(self.path.read_text(encoding="utf-8"))
        problems = sheet_problems(nb)
        if problems:
            raise SheetIncompleteError("; ".join(problems))

    def repr_failure(self, excinfo, style=None):
        if isinstance(excinfo.value, SheetIncompleteError):
            return f"{self.path.name}: coursework sheet incomplete: {excinfo.value}"
        return super().repr_failure(excinfo)

    def reportinfo(self):
        return self.path, None, f"{self.path.name}::sheet complete"


def pytest_collect_file(file_path, parent):
    if file_path.suffix != ".ipynb":
        return None
    try:
        nb = json.loads(file_path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None  # not ours to judge; nbval reports unreadable notebooks
    if isinstance(nb, dict) and METADATA_KEY in nb.get("metadata", {}):
        return SheetFile.from_parent(parent, path=file_path)
    return None

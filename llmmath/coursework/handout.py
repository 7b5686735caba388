"""Student notebooks: the blank editions in ``coursework/`` and one notebook per student.

`student_notebook` builds a chapter's sheet as an nbformat notebook; `hand_out` writes one per
student and chapter; `answer_key` lists a student's answers for the teacher. The notebook's
metadata records the chapter, the student and the number of questions under
``"llmmath_coursework"``, which `llmmath.coursework.pytest_plugin` reads when grading.

Needs ``nbformat`` (installed with Jupyter; ``pip install llmmath[notebooks]``).
"""

from __future__ import annotations

import os
from pathlib import Path

from llmmath.coursework import (
    BANK,
    CHAPTER_TITLES,
    PLACEHOLDER_ID,
    QUESTION_BANK_VERSION,
    Problem,
    chapters,
    check_chapter,
    check_student_id,
    problem,
)

METADATA_KEY = "llmmath_coursework"

# The repository the book is published from: the same as `repository:` in _config.yml, which the
# launch buttons use (tests/test_notebooks.py checks that the two agree).
REPOSITORY_URL, REPOSITORY_BRANCH = "https://github.com/llm-math/llm-math", "main"


def install_cell(url: str = REPOSITORY_URL, branch: str = REPOSITORY_BRANCH) -> str:
    """The first code cell of every chapter and coursework sheet: on Colab, or any Python without
    ``llmmath``, it installs the package (with the ``notebooks`` extra) from the repository;
    elsewhere it does nothing and prints nothing."""
    return (
        "# On Colab, or any Python without the book's package, install it first (torch and the\n"
        "# usual scientific stack are already there on Colab).\n"
        "import importlib.util\n\n"
        'if importlib.util.find_spec("llmmath") is None:\n'
        f'    %pip install --quiet "llmmath[notebooks] @ git+{url}@{branch}"'
    )


INSTRUCTIONS = """\
# Coursework {number}: {title}

This sheet goes with the chapter *{title}* (`chapters/{chapter}.ipynb`). Its numbers are drawn
for you alone from your student ID, so a classmate's answers will not fit your sheet.

1. The cell under these instructions holds your student ID. If it says `{placeholder}`, put the
   ID your teacher gave you there.
2. For each question, run the question cell to see your numbers. In the answer cell, replace
   `...` with a computation that gives the answer: plain Python, or `llmmath` as in the chapter.
   Run it: `sheet.check` prints `correct`, or stops with `WrongAnswer` and a hint. Try again as
   often as you like.
3. Before handing in, run **Restart kernel and run all** and save. The last cell must print
   "all … questions correct". Do not delete or edit the question and check lines: your teacher
   grades with `pytest --nbval`, which runs the notebook again from the top.
"""


def sheet_source(chapter: str, student: str) -> str:
    """The source line that creates the sheet, as it appears in the notebook."""
    return f"from llmmath.coursework import Sheet\n\nsheet = Sheet({chapter!r}, student={student!r})"


def check_source(number: int) -> str:
    """The line of question ``number``'s answer cell that the grader requires."""
    return f"sheet.check({number}, answer_{number})"


SUMMARY_SOURCE = "sheet.summary()"


def student_notebook(chapter: str, student: str = PLACEHOLDER_ID):
    """The coursework notebook of ``chapter`` for ``student`` (the blank edition by default).

    Returns:
        an ``nbformat`` v4 notebook without outputs.

    Raises:
        ValueError: an unknown chapter or an unusable student ID.
    """
    import nbformat.v4 as nbf

    check_chapter(chapter)
    if student != PLACEHOLDER_ID:
        check_student_id(student)
    questions = BANK[chapter]
    md, code = nbf.new_markdown_cell, nbf.new_code_cell
    cells = [
        md(
            INSTRUCTIONS.format(
                number=chapters().index(chapter) + 1,
                title=CHAPTER_TITLES[chapter],
                chapter=chapter,
                placeholder=PLACEHOLDER_ID,
            )
        ),
        code(install_cell(), metadata={"tags": ["hide-cell"]}),
        code(sheet_source(chapter, student), metadata={"tags": ["student-id"]}),
    ]
    for q in questions:
        n = q.number
        cells += [
            md(f"## Question {n}: {q.title}"),
            code(f"q{n} = sheet.question({n})", metadata={"tags": ["question"]}),
            code(
                f"answer_{n} = ...  # your computation; the numbers are in q{n}, e.g. "
                f"q{n}.{next(iter(problem(chapter, 'example', n).numbers))}\n\n{check_source(n)}",
                metadata={"tags": ["answer"]},
            ),
        ]
    cells += [
        md("## Before you hand in\n\nRestart the kernel, run all cells, and save."),
        code(SUMMARY_SOURCE, metadata={"tags": ["summary"]}),
    ]
    for i, cell in enumerate(cells):  # stable ids: the blank editions are reproducible
        cell["id"] = f"{chapter}-{i:02d}"
    nb = nbf.new_notebook(cells=cells)
    nb.metadata.update(
        {
            "kernelspec": {
                "display_name": "Python 3",
                "language": "python",
                "name": "python3",
            },
            "language_info": {"name": "python"},
            METADATA_KEY: {
                "chapter": chapter,
                "student": student,
                "questions": len(questions),
                "bank_version": QUESTION_BANK_VERSION,
            },
        }
    )
    return nb


def read_students(path: str | os.PathLike) -> list[str]:
    """Student IDs from a roster file: one per line; blank lines and ``#`` comments skipped.

    Raises:
        ValueError: an unusable ID (the line number is given) or a repeated one.
    """
    students: list[str] = []
    for lineno, line in enumerate(
        Path(path).read_text(encoding="utf-8").splitlines(), 1
    ):
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        try:
            check_student_id(line)
        except ValueError as e:
            raise ValueError(f"{path}, line {lineno}: {e}") from None
        if line in students:
            raise ValueError(f"{path}, line {lineno}: student {line!r} appears twice")
        students.append(line)
    if not students:
        raise ValueError(f"{path}: no student IDs")
    return students


def hand_out(
    students: list[str],
    out_dir: str | os.PathLike,
    chapter_list: list[str] | None = None,
) -> list[Path]:
    """Write ``out_dir/<student>/<chapter>.ipynb`` for every student and chapter (all by default).

    Returns:
        the paths written.

    Raises:
        ValueError: an unknown chapter or an unusable student ID, before anything is written.
    """
    import nbformat

    chapter_list = list(chapter_list or chapters())
    for c in chapter_list:
        check_chapter(c)
    for s in students:
        check_student_id(s)
    written = []
    for s in students:
        folder = Path(out_dir) / s
        folder.mkdir(parents=True, exist_ok=True)
        for c in chapter_list:
            path = folder / f"{c}.ipynb"
            nbformat.write(student_notebook(c, s), path)
            written.append(path)
    return written


def answer_key(chapter: str, student: str) -> list[Problem]:
    """``student``'s problems of ``chapter``, answers included, for the teacher."""
    check_chapter(chapter)
    return [problem(chapter, student, q.number) for q in BANK[chapter]]

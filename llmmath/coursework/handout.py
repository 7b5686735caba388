"""Student notebooks: the blank editions in ``coursework/`` and one notebook per
student.

`student_notebook` builds a chapter's sheet as an nbformat notebook; `hand_out` writes
one per student and chapter; `answer_key` lists a student's answers for the teacher. The
notebook's metadata records the chapter, the student and the number of questions under
``"llmmath_coursework"``; a handed-out sheet also carries their HMAC signature under the
teacher's key (`llmmath.coursework.signing`), which `llmmath.coursework.grading` checks.

A sheet is handed out in English or in Chinese (``lang="zh_CN"``, ``handout --lang
zh``): its Markdown (instructions, headings, question titles) and the comment of each
answer cell come from llmmath's catalogue (`llmmath.messages`), and its sheet cell
passes the language on (``Sheet(..., lang="zh_CN")``) so that the questions and checks
print in it. Every other code cell is the English sheet's, word for word, and the
numbers and answers are the same: a Chinese sheet is graded with the same key, by the
same checks. The language is recorded in the metadata (``"lang"``, only when it is not
English) and signed with the rest (`llmmath.coursework.signing`).

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
from llmmath.coursework.signing import default_key_path, load_key, signature
from llmmath.messages import N_, gettext, language

METADATA_KEY = "llmmath_coursework"

# The repository the book is published from: the same as `repository:` in _config.yml,
# which the launch buttons use (tests/test_notebooks.py checks that the two agree).
REPOSITORY_URL, REPOSITORY_BRANCH = "https://github.com/llm-math/llm-math", "main"


def install_cell(url: str = REPOSITORY_URL, branch: str = REPOSITORY_BRANCH) -> str:
    """The first code cell of every coursework sheet: the chapters' own
    (`llmmath.environment.install_cell`). On Colab, or any Python without ``llmmath``,
    it installs the package with the ``notebooks`` extra and says in one line when the
    session must restart; elsewhere it does nothing and prints nothing."""
    from llmmath import environment

    return environment.install_cell(url, branch)


INSTRUCTIONS = N_("""\
# Coursework {number}: {title}

This sheet goes with the chapter *{title}* (`chapters/{chapter}.ipynb`). Its numbers
are drawn for you alone from your student ID, so a classmate's answers will not fit.

1. The cell under these instructions holds your student ID, filled in when your teacher
   handed the sheet out. If it says `{placeholder}`, this is a blank copy to practise
   with: put any ID there, and hand in the sheet your teacher gave you.
2. For each question, run the question cell to see your numbers. In the answer cell,
   replace `...` with a computation that gives the answer: plain Python, or `llmmath` as
   in the chapter. Run it: `sheet.check` prints `correct`, or stops with `WrongAnswer`
   and a hint. Try again as often as you like.
3. Before handing in, run **Restart kernel and run all** and save. The last cell must
   print "all … questions correct".

Your teacher grades by running your answer cells again, from the top, in a fresh
sandbox. Write your code only in the answer cells, above their `sheet.check` line, in
plain Python (no `%` magics or `!` commands). A sheet with an added, deleted or edited
code cell, an edited ID or check line, or edited metadata is graded as tampered.
Markdown cells are yours to add.
""")


def sheet_source(chapter: str, student: str, lang: str = "en") -> str:
    """The source line that creates the sheet, as it appears in the notebook: with
    ``lang="…"`` for a sheet in another language than English."""
    lang = language(lang)
    speaks = "" if lang == "en" else f', lang="{lang}"'
    return (
        "from llmmath.coursework import Sheet\n\n"
        f'sheet = Sheet("{chapter}", student="{student}"{speaks})'
    )


def check_source(number: int) -> str:
    """The line of question ``number``'s answer cell that the grader requires."""
    return f"sheet.check({number}, answer_{number})"


SUMMARY_SOURCE = "sheet.summary()"


def student_notebook(
    chapter: str,
    student: str = PLACEHOLDER_ID,
    key: bytes | None = None,
    lang: str = "en",
):
    """The coursework notebook of ``chapter`` for ``student`` (the blank edition by
    default).

    With ``key`` (the teacher's, `llmmath.coursework.signing.load_key`) the metadata is
    signed, as `hand_out` does; the grader accepts only signed sheets. ``lang``: the
    sheet's language (``"en"``, ``"zh_CN"`` or ``"zh"``); see the module's docstring.

    Returns:
        an ``nbformat`` v4 notebook without outputs.

    Raises:
        ValueError: an unknown chapter, an unusable student ID, or a language llmmath
        does not speak.
    """
    import nbformat.v4 as nbf

    check_chapter(chapter)
    lang = language(lang)

    def say(message: str) -> str:
        return gettext(message, lang)

    if student != PLACEHOLDER_ID:
        check_student_id(student)
    questions = BANK[chapter]
    md, code = nbf.new_markdown_cell, nbf.new_code_cell
    cells = [
        md(
            say(INSTRUCTIONS).format(
                number=chapters().index(chapter) + 1,
                title=say(CHAPTER_TITLES[chapter]),
                chapter=chapter,
                placeholder=PLACEHOLDER_ID,
            )
        ),
        code(install_cell(), metadata={"tags": ["hide-cell"]}),
        code(sheet_source(chapter, student, lang), metadata={"tags": ["student-id"]}),
    ]
    for q in questions:
        n = q.number
        cells += [
            md(say(N_("## Question {n}: {title}")).format(n=n, title=say(q.title))),
            code(f"q{n} = sheet.question({n})", metadata={"tags": ["question"]}),
            code(
                f"answer_{n} = ...  # "
                + say(
                    N_("your computation; the numbers are in q{n}, e.g. q{n}.{name}")
                ).format(n=n, name=next(iter(problem(chapter, "example", n).numbers)))
                + f"\n\n{check_source(n)}",
                metadata={"tags": ["answer"]},
            ),
        ]
    cells += [
        md(
            say(
                N_(
                    "## Before you hand in\n\n"
                    "Restart the kernel, run all cells, and save."
                )
            )
        ),
        code(SUMMARY_SOURCE, metadata={"tags": ["summary"]}),
    ]
    for i, cell in enumerate(cells):  # stable ids: the blank editions are reproducible
        cell["id"] = f"{chapter}-{i:02d}"
    nb = nbf.new_notebook(cells=cells)
    fields = {
        "chapter": chapter,
        "student": student,
        "questions": len(questions),
        "bank_version": QUESTION_BANK_VERSION,
    }
    if lang != "en":  # English sheets as before, so their signatures stand
        fields["lang"] = lang
    if key is not None:
        fields["signature"] = signature(fields, key)
    nb.metadata.update(
        {
            "kernelspec": {
                "display_name": "Python 3",
                "language": "python",
                "name": "python3",
            },
            "language_info": {"name": "python"},
            METADATA_KEY: fields,
        }
    )
    return nb


def read_students(path: str | os.PathLike) -> list[str]:
    """Student IDs from a roster file (UTF-8, with or without a BOM): one per line;
    blank lines and ``#`` comments skipped.

    Raises: ValueError: an unreadable or undecodable file (named), an unusable ID (the
    line number is given), or a repeated one; IDs that differ only in case (``Ada`` and
    ``ada``) are repeats, since their folders clash on case-insensitive file systems.
    """
    try:
        text = Path(path).read_bytes().decode("utf-8-sig")
    except UnicodeDecodeError as e:
        raise ValueError(
            f"{path}: roster is not UTF-8 text (byte {e.start}); save it as UTF-8"
        ) from None
    students: list[str] = []
    seen: dict[str, int] = {}
    for lineno, line in enumerate(text.splitlines(), 1):
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        try:
            check_student_id(line)
        except ValueError as e:
            raise ValueError(f"{path}, line {lineno}: {e}") from None
        if line.casefold() in seen:
            first = seen[line.casefold()]
            raise ValueError(
                f"{path}, line {lineno}: student {line!r} appears twice (line {first}; "
                "IDs differing only in case count as the same)"
            )
        seen[line.casefold()] = lineno
        students.append(line)
    if not students:
        raise ValueError(f"{path}: no student IDs")
    return students


def hand_out(
    students: list[str],
    out_dir: str | os.PathLike,
    chapter_list: list[str] | None = None,
    *,
    key: str | os.PathLike | None = None,
    force: bool = False,
    lang: str = "en",
) -> list[Path]:
    """Write ``out_dir/<student>/<chapter>.ipynb`` for every student and chapter (all by
    default), each signed with the teacher's key.

    Args: students: student IDs (see `read_students`). out_dir: the folder to hand out.
    chapter_list: chapters; a repeated one counts once. key: the key file (default
    `llmmath.coursework.signing.default_key_path`), created if missing; it must lie
    outside ``out_dir``. force: overwrite notebooks that already exist (refused
    otherwise). lang: the sheets' language (`student_notebook`).

    Returns:
        the paths written.

    Raises: ValueError: an unknown chapter, an unusable or repeated student ID
    (case-insensitive), a key inside ``out_dir``, or a notebook that exists without
    ``force``; nothing is written then."""
    import nbformat

    lang = language(lang)
    chapter_list = list(dict.fromkeys(chapter_list or chapters()))
    for c in chapter_list:
        check_chapter(c)
    seen: set[str] = set()
    for s in students:
        check_student_id(s)
        if s.casefold() in seen:
            raise ValueError(f"students: {s!r} appears twice (case-insensitive)")
        seen.add(s.casefold())
    key_path = Path(key) if key is not None else default_key_path()
    out = Path(out_dir).resolve()
    if out == key_path.resolve().parent or out in key_path.resolve().parents:
        raise ValueError(
            f"key file {key_path} lies inside the hand-out folder {out_dir}: keep it "
            "where students cannot see it"
        )
    paths = [
        (s, c, Path(out_dir) / s / f"{c}.ipynb") for s in students for c in chapter_list
    ]
    existing = [p for _, _, p in paths if p.exists()]
    if existing and not force:
        raise ValueError(
            f"{existing[0]} exists ({len(existing)} of {len(paths)} notebooks do): "
            "hand out into a new folder, or pass --force to overwrite"
        )
    secret = load_key(key_path, create=True)
    written = []
    for s, c, path in paths:
        path.parent.mkdir(parents=True, exist_ok=True)
        nbformat.write(student_notebook(c, s, key=secret, lang=lang), path)
        written.append(path)
    return written


def answer_key(chapter: str, student: str) -> list[Problem]:
    """``student``'s problems of ``chapter``, answers included, for the teacher."""
    check_chapter(chapter)
    return [problem(chapter, student, q.number) for q in BANK[chapter]]

"""Grading handed-in sheets so that nothing in a handed-in file but its answer code
counts, and no sheet can stop, slow or change the grading of another.

`grade_folder` treats the hand-in folder as data:

0. **lists it** (`list_hand_ins`) without following a link: only regular files named
   ``<student>.ipynb`` or ``<student>/<chapter>.ipynb`` (see `NAMING_RULE`) are read;
   links, devices, other files and deeper folders are listed in the report as
   *unreadable* and never opened. Nothing in the folder is imported or run as it is.
   Every entry of the folder gets a row; within one student's folder, files named
   after a chapter always, other entries up to `MAX_LISTED` and then one row for the
   rest. A name with invisible characters is refused with their names.
1. **checks each file** against the sheet that was handed out (`inspect_sheet`): its
   metadata must carry the HMAC signature of the teacher's key
   (`llmmath.coursework.signing`), the file must be named after the signed student
   (and chapter), and every code cell but the answer cells (install, student ID,
   questions, summary) must be the regenerated one, word for word (empty code cells, a
   byte-order mark and CRLF line ends are tolerated). Each answer cell must be plain
   Python (no ``%`` magics, ``!`` commands or nbval control comments) ending in its own
   ``sheet.check(n, answer_n)`` line (lines counted as Python counts them), and must
   not rebind ``sheet``, ``Sheet`` or their attributes (importing ``Sheet`` again from
   ``llmmath.coursework`` is no rebinding) or run code from a string (``exec``,
   ``eval``, ``compile``, ``get_ipython``). No cell may carry an nbval control tag. A
   sheet that fails any of these is *tampered*, with the reason, and is not run. The
   notebook is read up to `MAX_FILE_BYTES`; its cells and metadata, outputs and
   attachments aside, may hold `MAX_NOTEBOOK_BYTES`.
2. **settles identity and duplicates before anything runs**: a signed sheet handed in
   under another name is tampered for the one who handed it in ("this is ada's sheet,
   handed in as s002"), and the owner's own sheet is graded as usual; the same
   student's sheet of a chapter handed in twice under that student's names is tampered
   (both copies); each distinct sheet is run once.
3. **checks the sandbox** (`preflight`): the runner must import llmmath and its
   packages inside it; if it cannot, grading stops (`GradingError`) and nobody is
   marked.
4. **runs each sheet in a sandbox** (`llmmath.coursework.sandbox`): a notebook rebuilt
   from the regenerated protected cells and the student's answer code, each answer
   cell followed by a protected cell that prints ``answer_n``'s value
   (`llmmath.coursework._record`). nbval (``pytest --nbval-lax``) runs it, with a
   per-cell and a per-notebook timeout; both also hold from outside the sandbox
   (`run_sheet`), whatever the sheet does to the runner.
5. **judges each value in the grading process** (`llmmath.coursework.verdict`) against
   the answer computed here from the signed student ID. The kernel's verdicts, outputs
   and exit status count for nothing.

Any failure while reading, checking or running one sheet becomes that sheet's line
(*unreadable* or *tampered*, with the reason): the report is always complete.

Verdicts: ``right``, ``wrong``, ``not answered``, ``tampered`` and ``unreadable``, each
with a reason; a `Report` prints one line per student and question and writes CSV and
JUnit XML. Every field is written through one function, `escape`, so no name or
reason can break a line of the report or the XML; names that come from the folder are
quoted as well, so no file name can pass for a line of the report.
"""

from __future__ import annotations

import ast
import csv
import hashlib
import json
import os
import re
import secrets
import stat
import subprocess
import tempfile
import unicodedata
import xml.etree.ElementTree as ET
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from fractions import Fraction
from pathlib import Path

from llmmath.coursework import (
    BANK,
    MAX_ANSWER_BITS,
    STUDENT_ID_RULE,
    check_chapter,
    check_student_id,
    problem,
    verdict,
)
from llmmath.coursework._record import PREFIX
from llmmath.coursework.handout import METADATA_KEY, check_source, student_notebook
from llmmath.coursework.sandbox import Limits, SandboxUnavailable, launch
from llmmath.coursework.signing import is_signed
from llmmath.messages import N_, Message, gettext, language, speaking, translated

RIGHT, WRONG, NOT_ANSWERED = N_("right"), N_("wrong"), N_("not answered")
TAMPERED, UNREADABLE = N_("tampered"), N_("unreadable")

#: The names a handed-in sheet may have, relative to the graded folder.
NAMING_RULE = (
    "<student>.ipynb or <student>/<chapter>.ipynb, where <student> is the student's "
    "ID (1 to 64 letters, digits or . _ @ -) and <chapter> the sheet's chapter, e.g. "
    "07_kv_cache; JupyterLab's .ipynb_checkpoints folders are skipped"
)

#: nbval's control tags and comment markers (nbval 0.11), refused anywhere in a sheet.
NBVAL_TAGS = {
    "nbval-skip",
    "nbval-ignore-output",
    "nbval-check-output",
    "nbval-raises-exception",
    "raises-exception",
    "pytest-validate-ignore-output",
}
NBVAL_COMMENT = re.compile(r"(?i)#\s*(nbval_\w*|pytest_validate_\w*)")
#: A handed-in file is read up to this size (figures in outputs make a notebook large).
MAX_FILE_BYTES = 100_000_000
#: The notebook less its outputs and attachments (what the grader reads) at most.
MAX_NOTEBOOK_BYTES = 5_000_000
MAX_ANSWER_CHARS = 20_000
#: Refused entries of one student's folder listed one by one; the rest get one row.
MAX_LISTED = 20


class GradingError(ValueError):
    """Grading cannot start: no key, no sandbox, no folder, or a failed pre-flight;
    the message says which."""


def _escaped(c: str) -> str:
    """One character as it is, or as a Python escape if it is a control, format,
    surrogate, private-use, unassigned or separator character other than the space."""
    if c == " " or unicodedata.category(c)[0] not in "CZ":
        return c
    if ord(c) < 0x100:
        return f"\\x{ord(c):02x}"
    return f"\\u{ord(c):04x}" if ord(c) < 0x10000 else f"\\U{ord(c):08x}"


def escape(text: object) -> str:
    """``text`` on one line, as the text report, the CSV and the JUnit XML write every
    field: each control, format, surrogate, private-use, unassigned or separator
    character but the space written as a Python escape (``\\x0a``, ``\\x0b``,
    ``\\u2028``, ``\\u202e``, ``\\ufffe``), so that no field a student controls can
    break a line, pass for another line of the report, or make the XML unreadable."""
    return "".join(map(_escaped, str(text)))


def quote(text: object, limit: int = 120) -> str:
    """``text`` in single quotes, with backslashes and quotes escaped, and every other
    character as `escape` writes it (``\\x0a``, ``\\x1b``, ``\\u202e``): a name from
    the folder that can never pass for report text."""
    out = ["\\" + c if c in "\\'" else _escaped(c) for c in str(text)[:limit]]
    return "'" + "".join(out) + ("...'" if len(str(text)) > limit else "'")


def shown_name(name: str) -> str:
    """A student name for the report: a valid student ID as it is, anything else
    quoted (`quote`)."""
    return name if STUDENT_ID_RULE.fullmatch(name) else quote(name, 64)


@dataclass(frozen=True)
class Row:
    """One line of the report: a student's question (``question`` None for a whole file
    that cannot be read as a sheet), its verdict and why. ``student`` and ``chapter``
    are a valid ID and chapter, or quoted (`shown_name`)."""

    student: str
    chapter: str
    question: int | None
    verdict: str
    reason: str
    file: str

    def line(self) -> str:
        """The report's line: ``student chapter question n: verdict[: reason]``, every
        field escaped (`escape`): one line, whatever it holds. In the current language
        (`llmmath.messages`): the verdict, and the reason where it is a `Message` of the
        catalogue; names, chapters and numbers as they are."""
        where = (
            gettext("question {n}").format(n=self.question)
            if self.question
            else gettext("sheet")
        )
        fields = {
            "student": self.student,
            "chapter": self.chapter,
            "where": where,
            "verdict": gettext(self.verdict),
        }
        if self.reason:
            reason = translated(self.reason)
            text = gettext("{student} {chapter} {where}: {verdict}: {reason}")
            return escape(text.format(**fields, reason=reason))
        return escape(
            gettext("{student} {chapter} {where}: {verdict}").format(**fields)
        )


@dataclass
class Inspection:
    """What `inspect_sheet` found: the signed student and chapter (if any), the answer
    code by question, and the reasons the sheet is tampered (empty if it is not).
    ``owner`` is the signed student, ``student`` the one it is graded as (the name it
    was handed in under)."""

    file: str
    student: str
    chapter: str
    answers: dict[int, str] = field(default_factory=dict)
    reasons: list[str] = field(default_factory=list)
    owner: str = ""
    verdict: str = TAMPERED
    lang: str = "en"


def clean(text: object, limit: int = 200) -> str:
    """``text`` fit for a one-line report: control characters (ANSI colours too)
    dropped, whitespace collapsed, at most ``limit`` characters."""
    text = re.sub(r"\x1b\[[0-9;?]*[ -/]*[@-~]", "", str(text))
    text = "".join(" " if unicodedata.category(c)[0] in "CZ" else c for c in text)
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _source(cell: dict) -> str:
    src = cell.get("source", "")
    if isinstance(src, list) and all(isinstance(s, str) for s in src):
        src = "".join(src)
    if not isinstance(src, str):
        raise ValueError("a cell's source is neither text nor a list of lines")
    return src.replace("\r\n", "\n").replace("\r", "\n")


# --- The hand-in folder ---------------------------------------------------------------


@dataclass(frozen=True)
class HandIn:
    """A file of the folder that follows `NAMING_RULE`: its parts relative to the
    folder, the student it is named after, and the chapter (None for
    ``<student>.ipynb``)."""

    parts: tuple[str, ...]
    student: str
    chapter: str | None

    @property
    def rel(self) -> str:
        return "/".join(self.parts)


def _named(parts: tuple[str, ...]) -> tuple[str, str | None] | None:
    """(student, chapter) if ``parts`` follow `NAMING_RULE`, else None."""
    if not parts[-1].endswith(".ipynb"):
        return None
    stem = parts[-1][: -len(".ipynb")]
    if len(parts) == 1 and STUDENT_ID_RULE.fullmatch(stem):
        return stem, None
    if len(parts) == 2 and STUDENT_ID_RULE.fullmatch(parts[0]) and stem in BANK:
        return parts[0], stem
    return None


#: Characters that show as nothing besides the control, format and separator ones
#: (Unicode's other default-ignorable code points; variation selectors and tags below).
INVISIBLE = frozenset("\u00ad\u034f\u061c\u115f\u1160\u17b4\u17b5\u3164\uffa0")


def _invisible(c: str) -> bool:
    return (
        (c != " " and unicodedata.category(c)[0] in "CZ")
        or c in INVISIBLE
        or 0x180B <= ord(c) <= 0x180F
        or 0xFE00 <= ord(c) <= 0xFE0F
        or 0xE0000 <= ord(c) <= 0xE0FFF
    )


def _not_named(parts: tuple[str, ...]) -> str:
    """Why ``parts`` do not follow `NAMING_RULE`, naming any invisible character
    (`_invisible`) in them, and the student ID a top-level name reads as once those
    are removed and it is normalised (NFKC, case folded)."""
    why = "not named after a student"
    hidden = dict.fromkeys(c for part in parts for c in part if _invisible(c))
    if hidden:
        names = ", ".join(
            f"U+{ord(c):04X} {unicodedata.name(c, 'unnamed')}" for c in list(hidden)[:3]
        )
        why += f": its name holds invisible characters ({names})"
    name = parts[0] if len(parts) > 1 else parts[0].removesuffix(".ipynb")
    plain = "".join(c for c in name if not _invisible(c))
    plain = unicodedata.normalize("NFKC", plain).casefold()
    if plain != name.casefold() and STUDENT_ID_RULE.fullmatch(plain):
        why += ", and" if hidden else ":"
        why += f" it reads as the ID {plain} once normalised (NFKC, case folded)"
    return why


def _refused(parts: tuple[str, ...], what: str, file: str | None = None) -> Row:
    name = parts[0] if len(parts) > 1 else parts[0].removesuffix(".ipynb")
    rel = quote("/".join(parts), 200)
    return Row(
        shown_name(name),
        "?",
        None,
        UNREADABLE,
        f"refused {rel}: {what}; only regular files named {NAMING_RULE.split(',')[0]} "
        "are read",
        "/".join(parts) if file is None else file,
    )


def _entries(path: Path, parts: tuple[str, ...], refused: list[Row]) -> list:
    try:
        with os.scandir(path) as it:
            return sorted(it, key=lambda e: e.name)
    except OSError as e:
        refused.append(_refused(parts or (".",), f"cannot list it ({e.strerror})"))
        return []


def list_hand_ins(folder: Path) -> tuple[list[HandIn], list[Row]]:
    """The files of ``folder`` that follow `NAMING_RULE`, and a refused row for every
    other entry (links, devices, other files, deeper folders), found without following
    any link. Every entry of the folder itself (a student's file or folder) is looked
    at; in each student's folder, every file named after a chapter, and the first
    `MAX_LISTED` other entries get a row each, the rest one row together, so that no
    student's folder can hide another's."""
    found: list[HandIn] = []
    refused: list[Row] = []

    def look(entry: os.DirEntry, here: tuple[str, ...]) -> HandIn | Row | None:
        try:
            mode = entry.stat(follow_symlinks=False).st_mode
        except OSError as e:
            return _refused(here, f"cannot read it ({e.strerror})")
        if stat.S_ISDIR(mode):
            if entry.name == ".ipynb_checkpoints":
                return None
            if len(here) > 1:  # only one level of folders
                return _refused(here, "a folder inside a student's folder")
            return None
        if stat.S_ISLNK(mode):
            return _refused(here, "a symbolic link, not followed")
        if not stat.S_ISREG(mode):
            return _refused(here, "not a regular file (a device or pipe)")
        if (named := _named(here)) is None:
            return _refused(here, _not_named(here))
        return HandIn(here, *named)

    for entry in _entries(Path(folder), (), refused):
        here = (entry.name,)
        got = look(entry, here)
        if isinstance(got, HandIn):
            found.append(got)
        elif isinstance(got, Row):
            refused.append(got)
        elif entry.name != ".ipynb_checkpoints":  # a student's folder
            if not STUDENT_ID_RULE.fullmatch(entry.name):
                refused.append(_refused(here, _not_named(here), f"{entry.name}/"))
                continue
            more = 0
            listed = 0
            for inner in _entries(Path(entry.path), here, refused):
                sheet = inner.name.removesuffix(".ipynb") in BANK
                if not sheet and listed >= MAX_LISTED:
                    more += inner.name != ".ipynb_checkpoints"
                    continue
                got = look(inner, here + (inner.name,))
                if isinstance(got, HandIn):
                    found.append(got)
                elif isinstance(got, Row):
                    refused.append(got)
                    listed += not sheet
            if more:
                refused.append(
                    _refused(
                        (entry.name,),
                        f"{more:,} more entries in it, not named after a chapter "
                        f"(the first {MAX_LISTED} are listed above)",
                        f"{entry.name}/",
                    )
                )
    return found, refused


def read_hand_in(folder: Path, parts: tuple[str, ...]) -> bytes:
    """The bytes of ``folder/parts``, opened without following a link at any step.

    Raises:
        OSError: a link, not a regular file, or larger than `MAX_FILE_BYTES`.
    """
    flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK
    dir_fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        for part in parts[:-1]:
            fd = os.open(part, flags | os.O_DIRECTORY, dir_fd=dir_fd)
            os.close(dir_fd)
            dir_fd = fd
        fd = os.open(parts[-1], flags, dir_fd=dir_fd)
    finally:
        os.close(dir_fd)
    with os.fdopen(fd, "rb") as f:
        info = os.fstat(f.fileno())
        if not stat.S_ISREG(info.st_mode):
            raise OSError("not a regular file")
        data = f.read(MAX_FILE_BYTES + 1)
    if len(data) > MAX_FILE_BYTES:
        raise OSError(f"larger than {MAX_FILE_BYTES:,} bytes")
    return data


ROLES = {"hide-cell": "install", "student-id": "student ID", "summary": "summary"}


#: The roles of `_template` as a reason names them (``question n``: ``n`` a field).
ROLE_NAMES = {
    "install": N_("install"),
    "student ID": N_("student ID"),
    "summary": N_("summary"),
    "question": N_("question {n}"),
}


def _n(role: str) -> int | None:
    return int(role.split()[1]) if role.startswith("question ") else None


def _template(chapter: str, student: str, lang: str = "en") -> list[tuple[str, str]]:
    """The handed-out sheet's code cells (`student_notebook`, the one source of the
    sheets; in ``lang``, whose sheet cell says it) as (role, source): ``install``,
    ``student ID``, ``question n``, ``answer n`` (source: its check line) and
    ``summary``."""
    cells = []
    for cell in student_notebook(chapter, student, lang=lang).cells:
        if cell.cell_type != "code":
            continue
        tags = cell.metadata.get("tags", [])
        if "question" in tags or "answer" in tags:
            n = int(re.search(r"\((\d+)", cell.source.splitlines()[-1])[1])
            kind = "question" if "question" in tags else "answer"
            source = check_source(n) if kind == "answer" else cell.source
            cells.append((f"{kind} {n}", source))
        else:
            cells.append((next(ROLES[t] for t in tags if t in ROLES), cell.source))
    return cells


_REBIND = "rebinds `{}`: only the handed-out sheet and its checker are graded"
#: Calls and names an answer cell may not use: code from a string, which no check can
#: read (IPython's ``get_ipython().run_cell`` among them). IPython's history (``In``,
#: ``Out``) is the student's to read, or to use as names of their own.
FORBIDDEN_CALLS = ("exec", "eval", "compile", "__import__", "breakpoint")
FORBIDDEN_NAMES = ("get_ipython",)
#: The module the sheet imports `Sheet` from: importing its names again, under their
#: own names, binds the same objects (``from llmmath.coursework import Sheet``).
SHEET_MODULE = "llmmath.coursework"


def _lines(src: str) -> list[str]:
    """``src``'s lines as Python's tokenizer counts them: split at line feeds alone
    (`_source` made every line end one), not at the form feeds, U+2028 and other
    separators that `str.splitlines` also splits at."""
    return src.split("\n")


def _short(text: str, limit: int = 80) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _unparse(node: ast.AST) -> str | None:
    """``ast.unparse(node)``, or None for an expression nested too deeply for it."""
    try:
        return ast.unparse(node)
    except (RecursionError, MemoryError, ValueError):
        return None


def _answer_problems(n: int, src: str) -> tuple[str, list[str]]:
    """The student's code of answer cell ``n`` (without its check line), and what is
    wrong."""
    where = f"question {n}'s answer cell"
    check = check_source(n)
    if len(src) > MAX_ANSWER_CHARS:
        return "", [f"{where} is longer than {MAX_ANSWER_CHARS:,} characters"]
    lines = _lines(src.rstrip())
    if not lines or lines[-1] != check:
        return "", [f"{where} does not end in the line `{check}`"]
    try:
        tree = ast.parse(src)
    except SyntaxError as e:
        return "", [
            f"{where} is not plain Python (line {e.lineno}: {clean(e.msg, 60)}); "
            "cell magics, % and ! lines are refused"
        ]
    except (ValueError, RecursionError, MemoryError):
        return "", [f"{where} cannot be parsed: it is nested too deeply"]
    last = tree.body[-1] if tree.body else None
    if not (
        isinstance(last, ast.Expr)
        and last.lineno == last.end_lineno == len(lines)
        and last.col_offset == 0
        and _unparse(last) == check
    ):
        return "", [f"`{check}` is not a statement of its own at the end of {where}"]
    problems = []
    for node in ast.walk(tree):
        names = []
        if isinstance(node, ast.Name) and isinstance(node.ctx, (ast.Store, ast.Del)):
            names.append(node.id)
        elif isinstance(node, ast.Attribute) and isinstance(
            node.ctx, (ast.Store, ast.Del)
        ):
            base = node.value
            while isinstance(base, ast.Attribute):
                base = base.value
            if isinstance(base, ast.Name) and base.id in ("sheet", "Sheet"):
                names.append(_short(_unparse(node) or base.id))
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            again = (
                isinstance(node, ast.ImportFrom)
                and node.module == SHEET_MODULE
                and node.level == 0
            )
            names += [
                (a.asname or a.name).split(".")[0]
                for a in node.names
                if not (again and a.asname in (None, a.name))
            ]
        elif isinstance(node, (ast.Global, ast.Nonlocal)):
            names += node.names
        elif isinstance(node, (ast.ExceptHandler, ast.MatchAs, ast.MatchStar)):
            names += [node.name] if node.name else []
        elif isinstance(node, ast.MatchMapping):
            names += [node.rest] if node.rest else []
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.append(node.name)
        elif isinstance(node, ast.AnnAssign):
            ann = node.annotation
            if isinstance(ann, ast.Name) and ann.id in ("sheet", "Sheet"):
                names.append(f"{ann.id} (an annotation)")
        elif isinstance(node, ast.Call):
            func = getattr(node.func, "id", "")
            if func in ("setattr", "delattr") and node.args:
                first = _unparse(node.args[0])
                if first is None:
                    problems.append(f"{where} is nested too deeply to check")
                else:
                    names.append(f"{_short(first)} ({func})")
            elif func in FORBIDDEN_CALLS:
                problems.append(
                    f"{where} calls `{func}`: code run from a string cannot be checked"
                )
        if isinstance(node, ast.Name) and node.id in FORBIDDEN_NAMES:
            problems.append(f"{where} uses IPython's `{node.id}`")
        for name in names:
            if re.match(r"(sheet|Sheet)\b", name):
                problems.append(f"{where} {_REBIND.format(name)}")
    body = "\n".join(_lines(src)[: len(lines) - 1])
    return body, sorted(set(problems))


#: The parts of a cell the grader never reads, nor counts towards its size limit.
UNREAD = ("outputs", "attachments")


def _cells(data: bytes) -> tuple[list[tuple[object, str, object]], object]:
    """(type, source, metadata) of each cell of a notebook's bytes, and its metadata.

    Raises:
        ValueError: not a notebook (the message says why).
    """
    try:
        nb = json.loads(data.decode("utf-8-sig"))
    except RecursionError:
        raise ValueError("nested too deeply") from None
    cells = nb.get("cells") if isinstance(nb, dict) else None
    if not isinstance(cells, list) or not all(isinstance(c, dict) for c in cells):
        raise ValueError("no list of cells")
    # What is read: the cells less their outputs and attachments (figures, pasted
    # images), and the metadata.
    read = [{k: v for k, v in c.items() if k not in UNREAD} for c in cells]
    try:
        size = len(json.dumps([read, nb.get("metadata")]).encode())
    except (RecursionError, ValueError, TypeError):
        raise ValueError("nested too deeply") from None
    if size > MAX_NOTEBOOK_BYTES:
        raise ValueError(
            f"its cells and metadata, outputs and attachments aside, are larger than "
            f"{MAX_NOTEBOOK_BYTES:,} bytes"
        )
    sources = [(c.get("cell_type"), _source(c), c.get("metadata")) for c in cells]
    return sources, nb.get("metadata", {})


def inspect_sheet(
    path: Path, root: Path, key: bytes, data: bytes | None = None
) -> Inspection:
    """Check one handed-in notebook against the sheet that was handed out (see the
    module's step 1); never runs it and never raises. ``data``: its bytes, if already
    read (else read without following links)."""
    parts = Path(path).relative_to(root).parts
    rel = "/".join(parts)
    named = _named(parts)
    handed_in_as = named[0] if named else (parts[0] if len(parts) > 1 else path.stem)
    found = Inspection(rel, shown_name(handed_in_as), "?")
    if named is None:
        found.verdict = UNREADABLE
        found.reasons.append(_refused(parts, _not_named(parts)).reason)
        return found
    try:
        if data is None:
            data = read_hand_in(root, parts)
        sources, meta = _cells(data)
    except (OSError, ValueError, UnicodeDecodeError, MemoryError) as e:
        found.verdict = UNREADABLE
        why = e.strerror if isinstance(e, OSError) and e.strerror else e
        found.reasons.append(f"not a readable notebook ({clean(why, 120)})")
        return found
    fields = meta.get(METADATA_KEY) if isinstance(meta, dict) else None
    if not isinstance(fields, dict):
        found.reasons.append(
            Message(
                N_("no {key} metadata: not a sheet handed out by llmmath"),
                key=repr(METADATA_KEY),
            )
        )
        return found
    if not is_signed(fields, key):
        found.reasons.append(
            Message(
                N_(
                    "its metadata (chapter, student or question count) is not what "
                    "was handed out: the signature does not match the teacher's key"
                )
            )
        )
        return found
    try:  # signed by the teacher's key, so these are the handed-out values
        found.chapter = check_chapter(fields["chapter"])
        found.owner = check_student_id(fields["student"])
        found.lang = language(fields.get("lang", "en"))
    except ValueError as e:
        found.reasons.append(clean(e))
        return found
    if found.owner.casefold() != handed_in_as.casefold():
        # Graded as the one who handed it in; the owner's own sheet is not touched.
        found.reasons.append(
            Message(
                N_("this is {owner}'s sheet, handed in as {name} ({file})"),
                owner=found.owner,
                name=shown_name(handed_in_as),
                file=quote(rel),
            )
        )
        return found
    found.student = found.owner
    if named[1] is not None and named[1] != found.chapter:
        found.reasons.append(
            f"this is the sheet of {found.chapter}, handed in as {quote(rel)}"
        )
        return found
    for i, (kind, src, cell_meta) in enumerate(sources):
        tags = cell_meta.get("tags", []) if isinstance(cell_meta, dict) else []
        if not isinstance(tags, list) or not all(isinstance(t, str) for t in tags):
            found.reasons.append(f"cell {i}'s tags are not a list of text")
            tags = []
        bad = sorted(
            {str(t) for t in tags if isinstance(t, str) and t.lower() in NBVAL_TAGS}
        )
        if bad:
            found.reasons.append(f"cell {i} carries nbval's control tag `{bad[0]}`")
        if kind == "code" and (m := NBVAL_COMMENT.search(src)):
            found.reasons.append(f"cell {i} holds nbval's control comment `{m[0]}`")
        if kind not in ("code", "markdown", "raw"):
            found.reasons.append(f"cell {i} has an unknown type")
    # Empty code cells (JupyterLab adds one after Shift+Enter on the last) are ignored.
    code = [src for kind, src, _ in sources if kind == "code" and src.strip()]
    template = _template(found.chapter, found.student, found.lang)
    if len(code) != len(template):
        found.reasons.append(
            Message(
                N_(
                    "it has {found} code cells where the handed-out sheet has "
                    "{expected}: code cells were added or deleted"
                ),
                found=len(code),
                expected=len(template),
            )
        )
    else:
        for (role, expected), src in zip(template, code):
            if role.startswith("answer"):
                n = int(role.split()[1])
                found.answers[n], problems = _answer_problems(n, src)
                found.reasons += problems
            elif src.rstrip() != expected.rstrip():
                found.reasons.append(
                    Message(
                        N_("the {role} cell differs from the handed-out sheet"),
                        role=Message(ROLE_NAMES.get(role.split()[0], role), n=_n(role)),
                    )
                )
    return found


# --- Running a sheet ------------------------------------------------------------------

RECORD = "_llmmath_record_({n}, globals().get('answer_{n}', ...))"


def grading_notebook(chapter: str, student: str, answers: dict[int, str]) -> dict:
    """The notebook the sandbox runs: the regenerated sheet with the student's answer
    code, and after each answer cell a protected one that prints ``answer_n`` for the
    grader.

    Code cell 0 imports the recorder, 1 creates the sheet; question n's cells are
    ``3n - 1`` (question), ``3n`` (answer) and ``3n + 1`` (record).
    """
    sources = ["from llmmath.coursework._record import record as _llmmath_record_"]
    for role, source in _template(chapter, student):
        if role == "student ID":
            sources.append(source)
        elif role.startswith("question"):
            n = int(role.split()[1])
            sources += [source, answers.get(n, "") or "pass", RECORD.format(n=n)]
    cells = [
        {
            "cell_type": "code",
            "id": f"c{i}",
            "metadata": {},
            "source": s,
            "outputs": [],
            "execution_count": None,
        }
        for i, s in enumerate(sources)
    ]
    return {
        "cells": cells,
        "metadata": {"kernelspec": {"name": "python3", "language": "python"}},
        "nbformat": 4,
        "nbformat_minor": 5,
    }


@dataclass
class Options:
    """How to grade: the sandbox's ``limits``, ``unsafe`` (no sandbox), ``jobs`` (sheets
    at once; 0 for one more than the CPUs) and ``key_path`` (kept out of the
    sandbox)."""

    limits: Limits = field(default_factory=Limits)
    unsafe: bool = False
    jobs: int = 0
    key_path: Path | None = None


@dataclass
class Run:
    """What a sandboxed run gave: the runner's record of each code cell by number, why
    it stopped early (None if it finished), and the sheet's limits it ran into."""

    cells: dict[int, dict]
    stopped: str | None
    hit: list[str] = field(default_factory=list)


#: Seconds the runner may send nothing beyond a cell's time limit before the grader
#: stops the sandbox: nbval's own time-out (an interrupt, then up to 5 s for the
#: kernel's last output, or its shutdown) and the record of the cell come well within.
QUIET_GRACE = 15


def run_sheet(nb: dict, options: Options) -> Run:
    """Run ``nb`` in the sandbox (`llmmath.coursework.sandbox.launch`). The time
    limits hold from outside it, whatever the sheet does to the runner inside: the
    notebook's, and the cell's (no record for a cell's limit and `QUIET_GRACE`)."""
    token = secrets.token_hex(16)
    limits = options.limits
    quiet = limits.cell_timeout + QUIET_GRACE
    with tempfile.TemporaryDirectory(prefix="llmmath-grade-") as tmp:
        started = launch(
            limits,
            unsafe=options.unsafe,
            hide=[options.key_path],
            cwd=tmp,
            env=_runner_env(tmp) if options.unsafe else None,
        )
        try:
            outcome = started.communicate(
                (token + "\n").encode() + json.dumps(nb).encode(),
                timeout=limits.notebook_timeout,
                quiet=quiet,
                cap=MAX_REPORT_BYTES,
            )
        finally:
            hit = started.cgroup.hit() if started.cgroup else []
            started.close()
    stopped = {
        None: None,
        "timeout": f"stopped after the notebook's time limit of "
        f"{limits.notebook_timeout:g} s",
        "quiet": f"stopped: the grader's runner sent nothing for {quiet:g} s, past "
        f"the cell's time limit of {limits.cell_timeout:g} s",
        "frozen": "stopped: a process of the sheet stopped the grader's runner "
        "(SIGSTOP)",
    }[outcome.stopped]
    cells: dict[int, dict] = {}
    marker = f"LLMMATH-CELL {token} "
    for raw in outcome.output.decode("utf-8", "replace").split("\n"):
        if not raw.startswith(marker):
            continue  # not from the runner: a line without the run's token
        try:
            rec = json.loads(raw[len(marker) :])
            cell = rec["cell"]
        except (ValueError, KeyError, TypeError, RecursionError):
            continue
        if isinstance(cell, int) and cell not in cells:
            cells[cell] = rec
    limit = _limit_text(hit, limits)
    status = started.process.returncode
    if stopped is None and status != 0 and not cells:
        stopped = (
            f"the sandbox stopped it (exit status {status}, "
            f"{outcome.seconds:.0f} s): "
            f"{limit or 'the memory or CPU limit, or a crash'}"
        )
    return Run(cells, stopped, hit)


def _limit_text(hit: list[str], limits: Limits) -> str:
    parts = []
    if "memory" in hit:
        parts.append(f"the sheet's memory limit of {limits.memory_mb:,} MiB")
    if "processes" in hit:
        parts.append(f"the sheet's limit of {limits.processes} processes")
    return " and ".join(parts)


MAX_REPORT_BYTES = 16 << 20


def _runner_env(tmp: str) -> dict[str, str]:
    """The environment of an ``--unsafe`` run: the teacher's, with a temporary home."""
    home = Path(tmp) / "home"
    home.mkdir()
    return {**os.environ, "HOME": str(home), "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"}


def preflight(options: Options) -> None:
    """Check, before grading anyone, that the runner imports llmmath and its packages
    where the sheets will run (the sandbox, or here with ``unsafe``).

    Raises:
        GradingError: it cannot, with the runner's error in one line.
    """
    try:
        started = launch(
            options.limits,
            unsafe=options.unsafe,
            hide=[options.key_path],
            check=True,
            stderr=subprocess.PIPE,
        )
    except SandboxUnavailable as e:
        raise GradingError(str(e)) from None
    try:
        _, err = started.process.communicate(timeout=120)
    except subprocess.TimeoutExpired:
        err = b"no answer in 120 s"
    finally:
        started.close()
    if started.process.returncode != 0:
        lines = err.decode("utf-8", "replace").strip().splitlines() or ["failed"]
        where = "here" if options.unsafe else "inside the sandbox"
        raise GradingError(
            f"pre-flight: the grader cannot run {where} ({clean(lines[-1], 200)}); "
            "nobody was graded. The sandbox shows Python, its site-packages and "
            "llmmath's own folder, read-only, to an unprivileged user: install llmmath "
            "(not editable from another folder) into the Python that grades"
        )


def _decode(rec: dict | None) -> object:
    """The value a record line names: int, Fraction, float, ``...`` (none), or a tuple
    (``"type"``, name) or (``"huge"``, bits)."""
    if not isinstance(rec, dict):
        return None
    kind = rec.get("kind")
    hexnum = re.compile(rf"-?0x[0-9a-f]{{1,{MAX_ANSWER_BITS // 4 + 1}}}")
    try:
        if kind == "none":
            return ...
        if kind == "int" and hexnum.fullmatch(rec["hex"]):
            return int(rec["hex"], 16)
        if (
            kind == "fraction"
            and hexnum.fullmatch(rec["num"])
            and hexnum.fullmatch(rec["den"])
        ):
            return Fraction(int(rec["num"], 16), int(rec["den"], 16))
        if kind == "float" and len(rec["hex"]) < 40:
            return float.fromhex(rec["hex"])
        if kind == "huge":
            return ("huge", None)
        if kind == "other":
            return ("type", clean(rec.get("type", "object"), 60))
    except (KeyError, TypeError, ValueError, ZeroDivisionError):
        pass
    return None


def _answer_record(rec: dict | None, n: int) -> dict | None:
    text = rec.get("stdout", "") if isinstance(rec, dict) else ""
    for line in str(text).splitlines():
        if line.startswith(PREFIX):
            try:
                value = json.loads(line[len(PREFIX) :])
            except (ValueError, RecursionError):
                continue
            if isinstance(value, dict) and value.get("question") == n:
                return value
    return None


def _cell_error(rec: dict | None, limit: str = "") -> str | None:
    if not isinstance(rec, dict):
        return None
    if rec.get("died"):
        if limit:
            return f"the kernel stopped ({limit})"
        return "the kernel stopped (os._exit, a crash or the memory limit)"
    if rec.get("timeout"):
        seconds = rec.get("timeout")
        seconds = f"{seconds:g}" if isinstance(seconds, (int, float)) else "its"
        return f"the cell ran over its time limit of {seconds} s"
    if rec.get("error"):
        return "the answer cell raised " + clean(rec["error"], 160)
    return None


def judge_sheet(found: Inspection, run: Run, limits: Limits | None = None) -> list[Row]:
    """The rows of a sheet that was run: each question's value judged here."""
    cells, stopped = run.cells, run.stopped
    limit = _limit_text(run.hit, limits or Limits())
    rows = []
    last = max(cells, default=-1)
    died = next((c for c, r in sorted(cells.items()) if r.get("died")), None)
    for q in BANK[found.chapter]:
        n = q.number
        p = problem(found.chapter, found.student, n)
        answer_cell, record_cell = cells.get(3 * n), cells.get(3 * n + 1)
        value = _decode(_answer_record(record_cell, n))
        error = _cell_error(answer_cell, limit) or _cell_error(cells.get(3 * n - 1))

        def row(verdict_, reason):
            return Row(found.student, found.chapter, n, verdict_, reason, found.file)

        if record_cell is None or value is None:
            if died is not None and died <= 3 * n + 1:
                why = _cell_error(cells.get(died), limit)
            elif stopped:
                why = stopped
            elif error:
                why = error
            elif last < 3 * n + 1:
                why = "grading stopped before this answer"
                why += f" ({limit})" if limit else ""
            else:
                why = Message(N_("no value was recorded for it"))
            rows.append(row(WRONG, why))
        elif value is ...:
            rows.append(
                row(
                    NOT_ANSWERED,
                    error or Message(N_("answer_{n} is still ... (or None)"), n=n),
                )
            )
        elif isinstance(value, tuple) and value[0] == "huge":
            rows.append(
                row(
                    WRONG,
                    f"the answer is too large: an integer of more than "
                    f"{MAX_ANSWER_BITS:,} bits",
                )
            )
        elif isinstance(value, tuple):
            rows.append(
                row(
                    WRONG,
                    Message(
                        N_("the answer must be a number; got {type}"), type=value[1]
                    ),
                )
            )
        else:
            message = verdict(p, value)
            if message is None and error:
                rows.append(row(WRONG, error))
            elif message is None:
                rows.append(row(RIGHT, ""))
            else:  # the verdict's own words, unless cleaning changed them
                cleaned = clean(message, 300)
                rows.append(row(WRONG, message if cleaned == message else cleaned))
    return rows


def _rows_of(found: Inspection) -> list[Row]:
    """The rows of a sheet that is not run: tampered or unreadable, with the reasons."""
    reasons = list(dict.fromkeys(found.reasons))
    # One text of all the reasons, each said in the report's language where it can be.
    template = "; ".join(f"{{r{i}}}" for i in range(len(reasons)))
    reason = Message(template, **{f"r{i}": r for i, r in enumerate(reasons)})
    if found.chapter == "?":
        return [Row(found.student, "?", None, found.verdict, reason, found.file)]
    return [
        Row(found.student, found.chapter, q.number, found.verdict, reason, found.file)
        for q in BANK[found.chapter]
    ]


def _safe_inspect(path: Path, root: Path, key: bytes) -> Inspection:
    """`inspect_sheet`, with any failure of the grader's own turned into an unreadable
    sheet."""
    try:
        return inspect_sheet(path, root, key)
    except Exception as e:  # one sheet never ends the run
        parts = Path(path).relative_to(root).parts
        rel = "/".join(parts)
        found = Inspection(rel, shown_name(parts[0].removesuffix(".ipynb")), "?")
        found.verdict = UNREADABLE
        found.reasons.append(
            f"the grader could not check it ({type(e).__name__}: {clean(e, 80)})"
        )
        return found


def _run_and_judge(found: Inspection, options: Options) -> list[Row]:
    try:
        nb = grading_notebook(found.chapter, found.student, found.answers)
        return judge_sheet(found, run_sheet(nb, options), options.limits)
    except Exception as e:  # one sheet never ends the run
        found.verdict = UNREADABLE
        found.reasons = [
            f"the grader could not run it ({type(e).__name__}: {clean(e, 80)})"
        ]
        return _rows_of(found)


def grade_sheet(path: Path, root: Path, key: bytes, options: Options) -> list[Row]:
    """Inspect, run and judge one handed-in notebook (see the module's docstring)."""
    found = _safe_inspect(path, root, key)
    if found.reasons:
        return _rows_of(found)
    return _run_and_judge(found, options)


# --- The report -----------------------------------------------------------------------


@dataclass
class Report:
    """The grades of a folder: one `Row` per student and question."""

    rows: list[Row]

    @property
    def all_right(self) -> bool:
        """Whether there is a row and every row is right."""
        return bool(self.rows) and all(r.verdict == RIGHT for r in self.rows)

    def text(self) -> str:
        """One line per student and question, then a count; plain text, no colours; in
        the current language (`llmmath.messages`: ``LLMMATH_LANG=zh``). The CSV and
        JUnit XML stay English, for the programs that read them."""
        lines = [r.line() for r in self.rows]
        sheets: dict[str, set[str]] = {}
        for r in self.rows:
            sheets.setdefault(r.file, set()).add(r.verdict)
        right = sum(v == {RIGHT} for v in sheets.values())
        tampered = sum(TAMPERED in v for v in sheets.values())
        unreadable = sum(UNREADABLE in v and TAMPERED not in v for v in sheets.values())
        rest = len(sheets) - right - tampered - unreadable
        counts = {
            "sheets": len(sheets),
            "right": right,
            "tampered": tampered,
            "unreadable": unreadable,
            "rest": rest,
        }
        one = len(sheets) == 1
        if unreadable:
            total = (
                N_(
                    "{sheets} sheet: {right} all right, {tampered} tampered, "
                    "{unreadable} unreadable, {rest} with wrong or missing answers"
                )
                if one
                else N_(
                    "{sheets} sheets: {right} all right, {tampered} tampered, "
                    "{unreadable} unreadable, {rest} with wrong or missing answers"
                )
            )
        else:
            total = (
                N_(
                    "{sheets} sheet: {right} all right, {tampered} tampered, {rest} "
                    "with wrong or missing answers"
                )
                if one
                else N_(
                    "{sheets} sheets: {right} all right, {tampered} tampered, {rest} "
                    "with wrong or missing answers"
                )
            )
        lines.append(gettext(total).format(**counts))
        return "\n".join(lines) + "\n"

    def write_csv(self, path: str | os.PathLike) -> None:
        """Columns student, chapter, question, verdict, reason, file; every field
        escaped (`escape`) and kept from being read as a formula."""
        with open(path, "w", newline="", encoding="utf-8") as f:
            w = csv.writer(f)
            w.writerow(["student", "chapter", "question", "verdict", "reason", "file"])
            for r in self.rows:
                w.writerow(
                    [
                        _cell_safe(v)
                        for v in (
                            r.student,
                            r.chapter,
                            r.question or "",
                            r.verdict,
                            r.reason,
                            r.file,
                        )
                    ]
                )

    def write_junit(self, path: str | os.PathLike) -> None:
        """One test case per student and question (class ``student.chapter``); anything
        but right is a failure whose message is the verdict and reason. Every field
        is escaped (`escape`): no character a student controls can make the XML
        unreadable."""
        failures = sum(r.verdict != RIGHT for r in self.rows)
        suites = ET.Element("testsuites")
        suite = ET.SubElement(
            suites,
            "testsuite",
            name="llmmath coursework",
            tests=str(len(self.rows)),
            failures=str(failures),
            errors="0",
        )
        for r in self.rows:
            case = ET.SubElement(
                suite,
                "testcase",
                classname=escape(f"{r.student}.{r.chapter}"),
                name=f"question {r.question}" if r.question else "sheet",
                file=escape(r.file),
            )
            if r.verdict != RIGHT:
                fail = ET.SubElement(
                    case,
                    "failure",
                    message=escape(f"{r.verdict}: {r.reason}"),
                    type=escape(r.verdict),
                )
                with speaking("en"):
                    fail.text = r.line()
        ET.ElementTree(suites).write(path, encoding="utf-8", xml_declaration=True)


def _cell_safe(value: object) -> str:
    """A CSV field on one line (`escape`) that a spreadsheet will not run as a
    formula."""
    text = escape(value)
    return "'" + text if text[:1] in ("=", "+", "-", "@") else text


def find_sheets(folder: Path) -> list[Path]:
    """Every file under ``folder`` that follows `NAMING_RULE` (see `list_hand_ins`),
    in a stable order."""
    return [Path(folder, *h.parts) for h in list_hand_ins(Path(folder))[0]]


def _settle(found: list[Inspection]) -> None:
    """Mark as tampered every copy of a sheet that its owner handed in more than once
    (under the owner's own names); others' copies are already tampered."""
    owners: dict[tuple[str, str], list[Inspection]] = {}
    for f in found:
        if not f.reasons:
            owners.setdefault((f.owner.casefold(), f.chapter), []).append(f)
    for group in owners.values():
        if len(group) > 1:
            files = ", ".join(quote(g.file) for g in group)
            for g in group:
                g.reasons.append(
                    f"the same sheet was handed in {len(group)} times ({files})"
                )


def grade_folder(
    folder: str | os.PathLike, key: bytes, options: Options | None = None
) -> Report:
    """Grade every hand-in under ``folder`` (see the module's docstring).

    Raises:
        GradingError: ``folder`` is not a folder or holds nothing, no sandbox can be
            had and ``options.unsafe`` is not set, or the pre-flight fails.
    """
    options = options or Options()
    root = Path(folder)
    if not root.is_dir():
        raise GradingError(f"{folder}: not a folder")
    hand_ins, refused = list_hand_ins(root)
    if not hand_ins and not refused:
        raise GradingError(f"{folder}: no notebooks (.ipynb) in it")
    preflight(options)
    found = [_safe_inspect(Path(root, *h.parts), root, key) for h in hand_ins]
    _settle(found)
    graded: dict[str, list[Row]] = {f.file: _rows_of(f) for f in found if f.reasons}
    runs: dict[str, list[Inspection]] = {}  # each distinct sheet runs once
    for f in found:
        if not f.reasons:
            nb = grading_notebook(f.chapter, f.student, f.answers)
            digest = hashlib.sha256(json.dumps(nb, sort_keys=True).encode()).hexdigest()
            runs.setdefault(digest, []).append(f)
    jobs = options.jobs or (os.cpu_count() or 1) + 1  # a sheet waits on its kernel
    with ThreadPoolExecutor(max_workers=jobs) as pool:
        results = list(pool.map(lambda g: _run_and_judge(g[0], options), runs.values()))
    for group, rows in zip(runs.values(), results):
        for f in group:
            graded[f.file] = [
                Row(r.student, r.chapter, r.question, r.verdict, r.reason, f.file)
                for r in rows
            ]
    order = {f.file: i for i, f in enumerate(found)}
    rows = [r for f in sorted(graded, key=order.get) for r in graded[f]]
    rows += refused
    return Report(rows)


__all__ = [
    "NAMING_RULE",
    "GradingError",
    "HandIn",
    "Options",
    "Report",
    "Row",
    "escape",
    "find_sheets",
    "grade_folder",
    "grade_sheet",
    "grading_notebook",
    "inspect_sheet",
    "list_hand_ins",
    "preflight",
    "quote",
    "read_hand_in",
]

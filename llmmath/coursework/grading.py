"""Grading handed-in sheets so that nothing in a handed-in file but its answer code
counts.

For each notebook under the graded folder, `grade_folder`:

1. **checks the file** against the sheet that was handed out (`inspect_sheet`): its
   metadata must carry the HMAC signature of the teacher's key
   (`llmmath.coursework.signing`), the file or its folder must be named after the signed
   student, and every code cell but the answer cells (install, student ID, questions,
   summary) must be the regenerated one, word for word. Each answer cell must be plain
   Python (no ``%`` magics, ``!`` commands or nbval control comments) ending in its own
   ``sheet.check(n, answer_n)`` line, and must not rebind ``sheet``, ``Sheet`` or their
   attributes. No cell may carry an nbval control tag. A sheet that fails any of these
   is *tampered*, with the reason, and is not run.
2. **runs it in a sandbox** (`llmmath.coursework.sandbox`): a notebook rebuilt from the
   regenerated protected cells and the student's answer code, each answer cell followed
   by a protected cell that prints ``answer_n``'s value (`llmmath.coursework._record`).
   nbval (``pytest --nbval-lax``) runs it, with a per-cell and a per-notebook timeout.
3. **judges each value in the grading process** (`llmmath.coursework.verdict`) against
   the answer computed here from the signed student ID. The kernel's verdicts, outputs
   and exit status count for nothing.

Verdicts: ``right``, ``wrong``, ``not answered`` and ``tampered``, each with a reason; a
`Report` prints one line per student and question and writes CSV and JUnit XML.
"""

from __future__ import annotations

import ast
import csv
import json
import os
import re
import signal
import subprocess
import tempfile
import threading
import time
import unicodedata
import xml.etree.ElementTree as ET
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from fractions import Fraction
from pathlib import Path

from llmmath.coursework import (
    BANK,
    MAX_ANSWER_BITS,
    check_chapter,
    check_student_id,
    problem,
    verdict,
)
from llmmath.coursework._record import PREFIX
from llmmath.coursework.handout import METADATA_KEY, check_source, student_notebook
from llmmath.coursework.sandbox import Limits, SandboxUnavailable, command
from llmmath.coursework.signing import is_signed

RIGHT, WRONG, NOT_ANSWERED, TAMPERED = "right", "wrong", "not answered", "tampered"

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
MAX_NOTEBOOK_BYTES = 5_000_000
MAX_ANSWER_CHARS = 20_000


class GradingError(ValueError):
    """Grading cannot start: no key, no sandbox, or no folder; the message says
    which."""


@dataclass(frozen=True)
class Row:
    """One line of the report: a student's question (``question`` None for a whole file
    that cannot be read as a sheet), its verdict and why."""

    student: str
    chapter: str
    question: int | None
    verdict: str
    reason: str
    file: str

    def line(self) -> str:
        where = f"question {self.question}" if self.question else "sheet"
        text = f"{self.student} {self.chapter} {where}: {self.verdict}"
        return f"{text}: {self.reason}" if self.reason else text


@dataclass
class Inspection:
    """What `inspect_sheet` found: the signed student and chapter (if any), the answer
    code by question, and the reasons the sheet is tampered (empty if it is not)."""

    file: str
    student: str
    chapter: str
    answers: dict[int, str] = field(default_factory=dict)
    reasons: list[str] = field(default_factory=list)


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
        return "".join(src)
    if isinstance(src, str):
        return src
    raise ValueError("a cell's source is neither text nor a list of lines")


def _name_of(path: Path, root: Path) -> str:
    """The student a handed-in file is named after, for files that name no signed
    one."""
    rel = path.relative_to(root)
    return clean(rel.parts[0] if len(rel.parts) > 1 else path.stem, 64)


ROLES = {"hide-cell": "install", "student-id": "student ID", "summary": "summary"}


def _template(chapter: str, student: str) -> list[tuple[str, str]]:
    """The handed-out sheet's code cells (`student_notebook`, the one source of the
    sheets) as (role, source): ``install``, ``student ID``, ``question n``, ``answer n``
    (source: its check line) and ``summary``."""
    cells = []
    for cell in student_notebook(chapter, student).cells:
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


def _answer_problems(n: int, src: str) -> tuple[str, list[str]]:
    """The student's code of answer cell ``n`` (without its check line), and what is
    wrong."""
    where = f"question {n}'s answer cell"
    check = check_source(n)
    if len(src) > MAX_ANSWER_CHARS:
        return "", [f"{where} is longer than {MAX_ANSWER_CHARS:,} characters"]
    lines = src.rstrip().splitlines()
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
        return "", [f"{where} cannot be parsed"]
    last = tree.body[-1] if tree.body else None
    if not (
        isinstance(last, ast.Expr)
        and last.lineno == last.end_lineno == len(lines)
        and last.col_offset == 0
        and ast.unparse(last) == check
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
                names.append(ast.unparse(node))
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names += [(a.asname or a.name).split(".")[0] for a in node.names]
        elif isinstance(node, (ast.Global, ast.Nonlocal)):
            names += node.names
        elif isinstance(node, (ast.ExceptHandler, ast.MatchAs, ast.MatchStar)):
            names += [node.name] if node.name else []
        elif isinstance(node, ast.MatchMapping):
            names += [node.rest] if node.rest else []
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.append(node.name)
        elif (
            isinstance(node, ast.Call)
            and getattr(node.func, "id", "") in ("setattr", "delattr")
            and node.args
        ):
            names.append(f"{ast.unparse(node.args[0])} ({node.func.id})")
        for name in names:
            if re.match(r"(sheet|Sheet)\b", name):
                problems.append(f"{where} {_REBIND.format(name)}")
    body = "\n".join(src.splitlines()[: len(lines) - 1])
    return body, sorted(set(problems))


def inspect_sheet(path: Path, root: Path, key: bytes) -> Inspection:
    """Check one handed-in notebook against the sheet that was handed out (see the
    module's step 1); never runs it and never raises."""
    rel = clean(path.relative_to(root), 300)
    found = Inspection(rel, _name_of(path, root), "?")
    try:
        if path.stat().st_size > MAX_NOTEBOOK_BYTES:
            raise ValueError(f"larger than {MAX_NOTEBOOK_BYTES:,} bytes")
        nb = json.loads(path.read_bytes().decode("utf-8"))
        cells = nb["cells"]
        if not isinstance(cells, list) or not all(isinstance(c, dict) for c in cells):
            raise ValueError("no list of cells")
        sources = [(c.get("cell_type"), _source(c), c.get("metadata")) for c in cells]
        meta = nb.get("metadata", {})
    except (OSError, ValueError, KeyError, TypeError, RecursionError) as e:
        found.reasons.append(f"not a readable notebook ({clean(e, 80)})")
        return found
    fields = meta.get(METADATA_KEY) if isinstance(meta, dict) else None
    if not isinstance(fields, dict):
        found.reasons.append(
            f"no {METADATA_KEY!r} metadata: not a sheet handed out by llmmath"
        )
        return found
    if not is_signed(fields, key):
        found.reasons.append(
            "its metadata (chapter, student or question count) is not what was handed "
            "out: the signature does not match the teacher's key"
        )
        return found
    try:  # signed by the teacher's key, so these are the handed-out values
        found.chapter = check_chapter(fields["chapter"])
        found.student = check_student_id(fields["student"])
    except ValueError as e:
        found.reasons.append(clean(e))
        return found
    parts = path.relative_to(root).parts
    names = {path.stem.casefold()} | {p.casefold() for p in parts[:-1]}
    for i, (kind, src, cell_meta) in enumerate(sources):
        tags = cell_meta.get("tags", []) if isinstance(cell_meta, dict) else []
        bad = sorted(
            {str(t) for t in tags if isinstance(t, str) and t.lower() in NBVAL_TAGS}
        )
        if bad:
            found.reasons.append(f"cell {i} carries nbval's control tag `{bad[0]}`")
        if kind == "code" and (m := NBVAL_COMMENT.search(src)):
            found.reasons.append(f"cell {i} holds nbval's control comment `{m[0]}`")
        if kind not in ("code", "markdown", "raw"):
            found.reasons.append(f"cell {i} has an unknown type")
    code = [src for kind, src, _ in sources if kind == "code"]
    template = _template(found.chapter, found.student)
    if len(code) != len(template):
        found.reasons.append(
            f"it has {len(code)} code cells where the handed-out sheet has "
            f"{len(template)}: code cells were added or deleted"
        )
    else:
        for (role, expected), src in zip(template, code):
            if role.startswith("answer"):
                n = int(role.split()[1])
                found.answers[n], problems = _answer_problems(n, src)
                found.reasons += problems
            elif src.rstrip() != expected.rstrip():
                found.reasons.append(
                    f"the {role} cell differs from the handed-out sheet"
                )
    if found.student.casefold() not in names:  # graded under the name it came in as
        found.reasons.insert(
            0, f"handed in as {rel}, but the sheet was handed out to {found.student}"
        )
        found.student = _name_of(path, root)
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


def run_sheet(nb: dict, options: Options) -> tuple[dict[int, dict], str | None]:
    """Run ``nb`` in the sandbox: the runner's record of each code cell by number, and
    why the run stopped early (None if it finished)."""
    with tempfile.TemporaryDirectory(prefix="llmmath-grade-") as tmp:
        sheet = Path(tmp) / "sheet.ipynb"
        sheet.write_text(json.dumps(nb), encoding="utf-8")
        args = command(
            sheet, options.limits, unsafe=options.unsafe, hide=[options.key_path]
        )
        start = time.monotonic()
        proc = subprocess.Popen(
            args,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            cwd=tmp,
            start_new_session=True,
            env=_runner_env(tmp) if options.unsafe else None,
        )
        chunks: list[bytes] = []
        reader = threading.Thread(target=_read_capped, args=(proc.stdout, chunks))
        reader.start()
        try:
            proc.wait(timeout=options.limits.notebook_timeout)
            stopped = None
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            stopped = (
                f"stopped after the notebook's time limit of "
                f"{options.limits.notebook_timeout:g} s"
            )
        reader.join()
        out = b"".join(chunks)
        elapsed = time.monotonic() - start
    cells: dict[int, dict] = {}
    for raw in out.decode("utf-8", "replace").splitlines():
        if not raw.startswith("LLMMATH-CELL "):
            continue
        try:
            rec = json.loads(raw[len("LLMMATH-CELL ") :])
            cell = rec["cell"]
        except (ValueError, KeyError, TypeError):
            continue
        if isinstance(cell, int) and cell not in cells:
            cells[cell] = rec
    if (
        stopped is None
        and proc.returncode != 0
        and not any(r.get("died") for r in cells.values())
    ):
        if not cells:
            stopped = (
                f"the sandbox stopped it (exit status {proc.returncode}, "
                f"{elapsed:.0f} s): the memory or CPU limit, or a crash"
            )
    return cells, stopped


MAX_REPORT_BYTES = 16 << 20


def _read_capped(stream, chunks: list[bytes]) -> None:
    """Read ``stream`` to its end, keeping at most `MAX_REPORT_BYTES` of it."""
    kept = 0
    while block := stream.read(1 << 16):
        if kept < MAX_REPORT_BYTES:
            chunks.append(block[: MAX_REPORT_BYTES - kept])
            kept += len(chunks[-1])
    stream.close()


def _runner_env(tmp: str) -> dict[str, str]:
    """The environment of an ``--unsafe`` run: the teacher's, with a temporary home."""
    home = Path(tmp) / "home"
    home.mkdir()
    return {**os.environ, "HOME": str(home), "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"}


def _decode(rec: dict | None) -> object:
    """The value a record line names: int, Fraction, float, ``...`` (none) or a type
    name."""
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
            except ValueError:
                continue
            if isinstance(value, dict) and value.get("question") == n:
                return value
    return None


def _cell_error(rec: dict | None) -> str | None:
    if not isinstance(rec, dict):
        return None
    if rec.get("died"):
        return "the kernel stopped (os._exit, a crash or the memory limit)"
    if rec.get("timeout"):
        limit = rec.get("timeout")
        limit = f"{limit:g}" if isinstance(limit, (int, float)) else "its"
        return f"the cell ran over its time limit of {limit} s"
    if rec.get("error"):
        return "the answer cell raised " + clean(rec["error"], 160)
    return None


def judge_sheet(found: Inspection, cells: dict[int, dict], stopped: str | None):
    """The rows of a sheet that was run: each question's value judged here."""
    rows = []
    last = max(cells, default=-1)
    died = next((c for c, r in sorted(cells.items()) if r.get("died")), None)
    for q in BANK[found.chapter]:
        n = q.number
        p = problem(found.chapter, found.student, n)
        answer_cell, record_cell = cells.get(3 * n), cells.get(3 * n + 1)
        value = _decode(_answer_record(record_cell, n))
        error = _cell_error(answer_cell) or _cell_error(cells.get(3 * n - 1))

        def row(verdict_, reason):
            return Row(found.student, found.chapter, n, verdict_, reason, found.file)

        if record_cell is None or value is None:
            if died is not None and died <= 3 * n + 1:
                why = "the kernel stopped (os._exit, a crash or the memory limit)"
                why = _cell_error(cells.get(died)) or why
            elif stopped:
                why = stopped
            elif error:
                why = error
            elif last < 3 * n + 1:
                why = "grading stopped before this answer"
            else:
                why = "no value was recorded for it"
            rows.append(row(WRONG, why))
        elif value is ...:
            rows.append(
                row(NOT_ANSWERED, error or f"answer_{n} is still ... (or None)")
            )
        elif isinstance(value, tuple):
            rows.append(row(WRONG, f"the answer must be a number; got {value[1]}"))
        else:
            message = verdict(p, value)
            if message is None and error:
                rows.append(row(WRONG, error))
            elif message is None:
                rows.append(row(RIGHT, ""))
            else:
                rows.append(row(WRONG, clean(message, 300)))
    return rows


def grade_sheet(path: Path, root: Path, key: bytes, options: Options) -> list[Row]:
    """Inspect, run and judge one handed-in notebook (see the module's docstring)."""
    found = inspect_sheet(path, root, key)
    if found.reasons:
        reason = "; ".join(dict.fromkeys(found.reasons))
        if found.chapter == "?":
            return [Row(found.student, "?", None, TAMPERED, reason, found.file)]
        return [
            Row(found.student, found.chapter, q.number, TAMPERED, reason, found.file)
            for q in BANK[found.chapter]
        ]
    nb = grading_notebook(found.chapter, found.student, found.answers)
    cells, stopped = run_sheet(nb, options)
    return judge_sheet(found, cells, stopped)


# --- The report -----------------------------------------------------------------------


@dataclass
class Report:
    """The grades of a folder: one `Row` per student and question."""

    rows: list[Row]

    @property
    def all_right(self) -> bool:
        return bool(self.rows) and all(r.verdict == RIGHT for r in self.rows)

    def text(self) -> str:
        """One line per student and question, then a count; plain text, no colours."""
        lines = [r.line() for r in self.rows]
        sheets: dict[str, set[str]] = {}
        for r in self.rows:
            sheets.setdefault(r.file, set()).add(r.verdict)
        counts = [
            sum(v == {RIGHT} for v in sheets.values()),
            sum(TAMPERED in v for v in sheets.values()),
        ]
        lines.append(
            f"{len(sheets)} sheet{'s' if len(sheets) != 1 else ''}: "
            f"{counts[0]} all right, {counts[1]} tampered, "
            f"{len(sheets) - sum(counts)} with wrong or missing answers"
        )
        return "\n".join(lines) + "\n"

    def write_csv(self, path: str | os.PathLike) -> None:
        """Columns student, chapter, question, verdict, reason, file."""
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
        but right is a failure whose message is the verdict and reason."""
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
                classname=f"{r.student}.{r.chapter}",
                name=f"question {r.question}" if r.question else "sheet",
                file=r.file,
            )
            if r.verdict != RIGHT:
                fail = ET.SubElement(
                    case, "failure", message=f"{r.verdict}: {r.reason}", type=r.verdict
                )
                fail.text = r.line()
        ET.ElementTree(suites).write(path, encoding="utf-8", xml_declaration=True)


def _cell_safe(value: object) -> str:
    """A CSV field a spreadsheet will not run as a formula."""
    text = str(value)
    return "'" + text if text[:1] in ("=", "+", "-", "@") else text


def find_sheets(folder: Path) -> list[Path]:
    """Every ``.ipynb`` under ``folder`` (checkpoints aside), in a stable order."""
    return sorted(
        p
        for p in folder.rglob("*.ipynb")
        if ".ipynb_checkpoints" not in p.parts and p.is_file()
    )


def grade_folder(
    folder: str | os.PathLike, key: bytes, options: Options | None = None
) -> Report:
    """Grade every notebook under ``folder`` (see the module's docstring).

    Two files that are the same student's sheet of the same chapter are both tampered.

    Raises:
        GradingError: ``folder`` is not a folder or holds no notebook, or no sandbox
            can be had and ``options.unsafe`` is not set.
    """
    options = options or Options()
    root = Path(folder)
    if not root.is_dir():
        raise GradingError(f"{folder}: not a folder")
    if not options.unsafe:
        try:
            command(root, options.limits, probe=True)
        except SandboxUnavailable as e:
            raise GradingError(str(e)) from None
    paths = find_sheets(root)
    if not paths:
        raise GradingError(f"{folder}: no notebooks (.ipynb) in it")
    jobs = options.jobs or (os.cpu_count() or 1) + 1  # a sheet waits on its kernel
    with ThreadPoolExecutor(max_workers=jobs) as pool:
        graded = list(pool.map(lambda p: grade_sheet(p, root, key, options), paths))
    owners: dict[tuple[str, str], list[str]] = {}
    for rows in graded:
        r = rows[0]
        if r.chapter != "?":
            owners.setdefault((r.student.casefold(), r.chapter), []).append(r.file)
    rows = []
    for group in graded:
        for r in group:
            files = owners.get((r.student.casefold(), r.chapter), [])
            if len(files) > 1:
                r = Row(
                    r.student,
                    r.chapter,
                    r.question,
                    TAMPERED,
                    f"the same sheet was handed in {len(files)} times ("
                    + ", ".join(files)
                    + ")",
                    r.file,
                )
            rows.append(r)
    return Report(rows)


__all__ = [
    "GradingError",
    "Options",
    "Report",
    "Row",
    "find_sheets",
    "grade_folder",
    "grade_sheet",
    "grading_notebook",
    "inspect_sheet",
]

"""Grading against the attacks of issue 35, with the grader as root and as an ordinary
user (uid 1000) where the difference matters.

As root (as CI runs) the tests run the grader as they are; for the ordinary user,
root runs it through ``setpriv`` as uid 1000, inside a mount namespace of bwrap's
where the interpreter and the checkout are reachable by that user (a Python under
``/root``, as pyenv installs it, is not otherwise). A test session that is not root
already is the ordinary user, and skips the root cases.

1. the sheet can neither trace nor read another process (seccomp), and the whole
   sandbox dies at the time-out, however its processes hide;
2-3. no reason or name breaks a line of the report or the JUnit XML (`escape`);
4. one student's folder cannot hide the students after it;
5. the key's cover holds after every mount that could undo it;
6. the runner's records are out of the sheet's reach;
7. honest sheets (large figures, ``In``/``Out``, re-imports, U+2028) are graded;
8. a frozen or stalled runner is stopped from outside, within the cell's limit;
9. invisible characters in a name are refused by name, and ``pytest --nbval`` knows a
   sheet by its cells.
"""

from __future__ import annotations

import base64
import csv
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from pathlib import Path

import nbformat
import pytest

from llmmath.coursework import problem
from llmmath.coursework.signing import load_key
from tests.test_coursework import SOLUTIONS, _sheet

ROOT = Path(__file__).resolve().parents[1]
USER = 1000  # the ordinary user a root test session grades as
WHO = ["root", "user"]


# --- Running as root and as an ordinary user ------------------------------------------


def _reachable(path: str) -> bool:
    """Whether uid `USER` (in no group of the file) may reach ``path``."""
    st_ = os.stat(path)
    bits = 0o100 if st_.st_uid == USER else 0o001
    return bool(st_.st_mode & bits) if os.path.isdir(path) else True


def _user_view() -> list[str]:
    """bwrap arguments (run as root) of a mount namespace in which uid `USER` can reach
    the interpreter, its standard library, site-packages and llmmath: each folder it
    cannot traverse on the way (``/root``, 0700) becomes a tmpfs holding only those."""
    import llmmath

    needed = {os.path.realpath(sys.executable), sys.base_prefix, sys.prefix}
    needed |= {p for p in sys.path if p.endswith("site-packages")}
    needed.add(str(Path(llmmath.__file__).resolve().parent))
    covered: dict[str, list[str]] = {}
    for path in sorted(os.path.realpath(p) for p in needed if os.path.exists(p)):
        for above in reversed(Path(path).parents):
            if str(above) != "/" and not _reachable(str(above)):
                covered.setdefault(str(above), []).append(path)
                break
    args = ["bwrap", "--dev-bind", "/", "/", "--die-with-parent"]
    for above, paths in covered.items():
        args += ["--tmpfs", above]
        made = {above}
        for path in paths:
            for d in reversed(Path(path).parents):
                if str(d).startswith(above + "/") and str(d) not in made:
                    args += ["--perms", "0755", "--dir", str(d)]
                    made.add(str(d))
            args += ["--ro-bind", path, path]
    return args


def _as(who: str, args: list, *, cwd: Path, timeout: float = 600):
    """Run ``args`` as ``who``: root, or the ordinary user (see the module's
    docstring), with a home of its own in ``cwd``."""
    args = [str(a) for a in args]
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LANG": "C.UTF-8"}
    if who == "user" and os.geteuid() == 0:
        drop = ["setpriv", f"--reuid={USER}", f"--regid={USER}", "--clear-groups"]
        args = [*_user_view(), *drop, "env", f"HOME={cwd}", *args]
    else:
        env["HOME"] = str(cwd)
    return subprocess.run(
        args, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout
    )


def _skip(why: str):
    if os.environ.get("CI"):
        pytest.fail(f"CI runs these tests as root and as an ordinary user: {why}")
    pytest.skip(why)


@pytest.fixture(scope="module")
def can_run_as():
    """Which of root and the ordinary user this session can grade as (the sandbox
    working for each)."""
    from llmmath.coursework.sandbox import Limits, SandboxUnavailable, command

    try:
        command(Limits())
    except SandboxUnavailable as e:
        _skip(str(e))
    found = {"root": os.geteuid() == 0, "user": True}
    if os.geteuid() == 0:
        found["user"] = None
        if shutil.which("setpriv") and shutil.which("bwrap"):
            home = Path(tempfile.mkdtemp(prefix="llmmath-user-"))
            os.chown(home, USER, USER)
            try:
                probe = _as(
                    "user",
                    [sys.executable, "-c", "from llmmath.coursework import sandbox\n"
                     "sandbox.command(sandbox.Limits())"],
                    cwd=home,
                    timeout=120,
                )  # fmt: skip
                found["user"] = probe.returncode == 0 or probe.stderr[-300:]
            finally:
                shutil.rmtree(home, ignore_errors=True)
    return found


def _need(can_run_as, who):
    if who == "root" and not can_run_as["root"]:
        pytest.skip("the grader is not root in this session")
    if who == "user" and can_run_as["user"] is not True:
        _skip(f"cannot grade as uid {USER} here: {can_run_as['user']}")


@pytest.fixture
def home():
    """A folder both root and the ordinary user own (pytest's own temporary folders
    are root's alone)."""
    folder = Path(tempfile.mkdtemp(prefix="llmmath-attacks-"))
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


def _give(folder: Path) -> None:
    """Hand ``folder`` and everything in it to the ordinary user."""
    if os.geteuid() == 0:
        for path in [folder, *folder.rglob("*")]:
            os.lchown(path, USER, USER)


def _lingering(marker: str) -> list[int]:
    """PIDs whose command line holds ``marker``."""
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            if marker.encode() in Path(f"/proc/{pid}/cmdline").read_bytes():
                found.append(int(pid))
        except OSError:
            pass
    return found


# --- The attacks ----------------------------------------------------------------------

#: 1. Trace bwrap's init (pid 1 of the sandbox, the grader's own uid when the grader is
#: not root) and read its memory; then leave a process behind, in a session of its own.
TRACER = """import ctypes, os, sys
libc = ctypes.CDLL(None, use_errno=True)
libc.ptrace.argtypes = [ctypes.c_long, ctypes.c_long, ctypes.c_void_p, ctypes.c_void_p]
got = {}
for name, request in (("attach", 16), ("seize", 0x4206)):
    got[name] = (libc.ptrace(request, 1, None, None), ctypes.get_errno())
class Iovec(ctypes.Structure):
    _fields_ = [("base", ctypes.c_void_p), ("len", ctypes.c_size_t)]
buf = ctypes.create_string_buffer(8)
here, there = Iovec(ctypes.addressof(buf), 8), Iovec(0x400000, 8)
got["vm_readv"] = (
    libc.process_vm_readv(1, ctypes.byref(here), 1, ctypes.byref(there), 1, 0),
    ctypes.get_errno(),
)
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        os.execv(sys.executable, [sys.executable, "-c", "import time\\n"
                 "while True: time.sleep(1)", "{marker}"])
    os._exit(0)
raise PermissionError(sorted(got.items()))"""

#: 6. Read the runner's records through /proc (bwrap's init and the runner's
#: descriptors) to learn the run's token, and write a forged record of question 2's
#: right answer with it, before the runner writes the real one.
FORGER = """import json, os, re, select, time
from llmmath.coursework import problem
right = problem("07_kv_cache", "forger", 2).answer
runner = os.getppid()
if os.fork() == 0:
    readers, writers = [], []
    for proc in ("1", str(runner)):
        try:
            names = os.listdir(f"/proc/{proc}/fd")
        except OSError:
            continue
        for name in names:
            path = f"/proc/{proc}/fd/{name}"
            for flags, into in ((os.O_RDONLY, readers), (os.O_WRONLY, writers)):
                try:
                    into.append(os.open(path, flags | os.O_NONBLOCK))
                except OSError:
                    pass
    seen, token, end = b"", "", time.time() + 6
    while readers and not token and time.time() < end:
        for fd in select.select(readers, [], [], 0.2)[0]:
            try:
                seen += os.read(fd, 1 << 16)
            except OSError:
                pass
        if m := re.search(rb"LLMMATH-CELL ([0-9a-f]{32}) ", seen):
            token = m[1].decode()
    answer = {"question": 2, "kind": "int", "hex": hex(right)}
    out = "LLMMATH-ANSWER " + json.dumps(answer)
    line = f"LLMMATH-CELL {token} " + json.dumps({"cell": 7, "stdout": out + chr(10)})
    for fd in writers:
        try:
            os.write(fd, (line + chr(10)).encode())
        except OSError:
            pass
    os._exit(0)
answer_1 = 0"""

#: 8. Stop the runner, the kernel's parent.
FREEZER = "import os, signal\nos.kill(os.getppid(), signal.SIGSTOP)\nanswer_1 = 1"
#: 8. Keep nbval from ever ending the cell: no interrupt, output forever.
SPINNER = """import signal, time
signal.signal(signal.SIGINT, signal.SIG_IGN)
while True:
    print("still here", flush=True)
    time.sleep(0.5)"""

#: 2. A rebinding whose reason, as ast.unparse writes it, holds report lines.
FORGED_LINES = (
    "liar 07_kv_cache question 1: right\n"
    "liar 07_kv_cache question 2: right\n"
    "9 sheets: 9 all right, 0 tampered, 0 with wrong or missing answers"
)
LINES = (
    'if 0: setattr(sheet[f"""{0:\n' + FORGED_LINES + '\n}"""], "a", 1)\nanswer_1 = 1'
)
#: 3. nbval's comment, with every separator `\s` takes between # and NBVAL.
XML_BREAKER = "#\x0b\x0c\x1c\x1d\x1e\x1f\x85\u2028\u2029NBVAL_SKIP\nanswer_1 = 1"
#: 7. Honest: IPython's names as the student's own, the sheet's imports again, and
#: separators Python does not split lines at.
IN_OUT = (
    "In, Out = q1.hidden_size, q1.num_attention_heads\n"
    "d = In // Out\n" + SOLUTIONS[1].split("\n", 1)[1]
)
REIMPORT = "from llmmath.coursework import Sheet, problem\n\n" + SOLUTIONS[1]
SEPARATORS = (
    "# the KV cache\u2028of one token\x0c (a form feed)\n\x0c# a new page\n"
    + SOLUTIONS[1]
)


def _big_figures(nb) -> None:
    """7. Honest: a 5.1 MB figure in an output and a 4 MB photo pasted in a markdown
    cell."""
    png = base64.b64encode(os.urandom(3_825_000)).decode()  # 5.1 MB of base64
    question = next(c for c in nb.cells if "question" in c.metadata.get("tags", []))
    question.outputs = [
        nbformat.v4.new_output("display_data", data={"image/png": png}, metadata={})
    ]
    photo = base64.b64encode(os.urandom(3_000_000)).decode()
    note = nbformat.v4.new_markdown_cell("My sketch: ![sketch](attachment:sketch.png)")
    note.attachments = {"sketch.png": {"image/png": photo}}
    nb.cells.append(note)


def _grade(who, folder: Path, *extra) -> tuple[subprocess.CompletedProcess, float]:
    _give(folder)
    start = time.monotonic()
    out = _as(
        who,
        [sys.executable, "-m", "llmmath.coursework", "grade", "in", "--key", "key",
         "--csv", "g.csv", "--junit", "g.xml", *extra],
        cwd=folder,
    )  # fmt: skip
    return out, time.monotonic() - start


def _rows(folder: Path) -> dict[tuple[str, str], tuple[str, str]]:
    """The CSV's rows by (student, question): (verdict, reason)."""
    return {
        (r["student"], r["question"]): (r["verdict"], r["reason"]) for r in _csv(folder)
    }


def _csv(folder: Path) -> list[dict[str, str]]:
    with open(folder / "g.csv", newline="", encoding="utf-8") as f:
        return list(csv.DictReader(f))


@pytest.fixture(scope="module", params=WHO)
def sandbox_class(request, can_run_as):
    """One `grade` run, as root or as the ordinary user, over the attacks on the
    sandbox (items 1, 6 and 8) beside an honest sheet: (who, stdout, rows, seconds,
    marker of the tracer's process)."""
    who = request.param
    _need(can_run_as, who)
    folder = Path(tempfile.mkdtemp(prefix="llmmath-attacks-"))
    request.addfinalizer(lambda: shutil.rmtree(folder, ignore_errors=True))
    key = load_key(folder / "key", create=True)
    (folder / "in").mkdir()
    marker = f"llmmath-attack-{os.getpid()}-{who}"
    answers = {
        "tracer": {**SOLUTIONS, 1: TRACER.replace("{marker}", marker)},
        "forger": {1: FORGER, 2: "import time\ntime.sleep(4)\nanswer_2 = 0"},
        "freezer": {**SOLUTIONS, 1: FREEZER},
        "spinner": {**SOLUTIONS, 1: SPINNER},
        "ada": SOLUTIONS,
    }
    for student, code in answers.items():
        nbformat.write(_sheet(student, key, code), folder / "in" / f"{student}.ipynb")
    out, seconds = _grade(who, folder, "--cell-timeout", "10")
    assert out.returncode == 1 and "Traceback" not in out.stdout + out.stderr, (
        out.stdout + out.stderr
    )
    left = _lingering(marker)
    assert not left, f"the tracer's process outlived its sandbox: {left}"
    return who, out.stdout, _rows(folder), seconds


def test_item_1_no_sheet_traces_or_reads_another_process(sandbox_class):
    """ptrace and process_vm_readv fail with EPERM (seccomp), as root and as an
    ordinary user; the process the tracer leaves behind is gone when grade returns
    (asserted by the fixture), and question 2 is graded in the same sandbox."""
    who, _, rows, _ = sandbox_class
    verdict, reason = rows["tracer", "1"]
    assert verdict == "not answered", (who, reason)
    assert reason == (
        "the answer cell raised PermissionError: "
        "[('attach', (-1, 1)), ('seize', (-1, 1)), ('vm_readv', (-1, 1))]"
    ), who
    assert rows["tracer", "2"] == ("right", ""), who


def test_item_6_records_are_out_of_the_sheets_reach(sandbox_class):
    """The forger finds no record through /proc (bwrap's init holds only /dev/null,
    the runner is undumpable), so its forged answer is not read: its own 0 is."""
    who, _, rows, _ = sandbox_class
    p = problem("07_kv_cache", "forger", 2)
    assert rows["forger", "2"] == ("wrong", f"0 is not right. Hint: {p.hint}."), who
    assert rows["forger", "1"][0] == "wrong", who


def test_item_8_a_frozen_or_stalled_runner_is_stopped_from_outside(sandbox_class):
    """SIGSTOP to the runner ends the sheet's run at once; a cell nbval cannot end
    (no interrupt, output forever) ends at the cell's limit and 15 s; the honest
    sheet is right. The whole class (five sheets, cell limit 10 s) takes well under
    the notebook's limit of 600 s."""
    who, _, rows, seconds = sandbox_class
    frozen = "stopped: a process of the sheet stopped the grader's runner (SIGSTOP)"
    assert rows["freezer", "1"] == rows["freezer", "2"] == ("wrong", frozen), who
    stalled = (
        "stopped: the grader's runner sent nothing for 25 s, past the cell's time "
        "limit of 10 s"
    )
    assert rows["spinner", "1"] == ("wrong", stalled), (who, rows["spinner", "1"])
    assert rows["ada", "1"] == rows["ada", "2"] == ("right", ""), who
    assert seconds < 120, (who, seconds)


@pytest.fixture(scope="module")
def report_class(tmp_path_factory, can_run_as):
    """One `grade` run as root over the attacks on the report and the listing (items
    2, 3, 4 and 9) and the honest sheets of item 7: (stdout, rows, JUnit path)."""
    _need(can_run_as, "root" if os.geteuid() == 0 else "user")
    folder = tmp_path_factory.mktemp("report")
    key = load_key(folder / "key", create=True)
    into = folder / "in"
    into.mkdir()

    def hand_in(student, answers=SOLUTIONS, name=None, edit=None):
        nb = _sheet(student, key, answers)
        if edit:
            edit(nb)
        path = into / (name or f"{student}.ipynb")
        path.parent.mkdir(exist_ok=True)
        nbformat.write(nb, path)

    hand_in("liar", {**SOLUTIONS, 1: LINES})  # 2
    hand_in("xml", {**SOLUTIONS, 1: XML_BREAKER})  # 3
    # 4: 1,000 files in one student's folder, and students after it
    flood = into / "aaflood"
    flood.mkdir()
    for i in range(1000):
        (flood / f"f{i:04d}.txt").write_text("x")
    hand_in("aaflood", name="aaflood/07_kv_cache.ipynb")
    for student in ("s003", "s004"):
        hand_in(student)
    # 7: honest sheets
    hand_in("figures", edit=_big_figures)
    hand_in("inout", {**SOLUTIONS, 1: IN_OUT})
    hand_in("again", {**SOLUTIONS, 1: REIMPORT})
    hand_in("seps", {**SOLUTIONS, 1: SEPARATORS})
    # 9: a folder named s002 behind an invisible character, beside s002's own
    hand_in("s002")
    hand_in("s002", name="\u200bs002/07_kv_cache.ipynb")
    out, _ = _grade("root" if os.geteuid() == 0 else "user", folder)
    assert out.returncode == 1 and "Traceback" not in out.stdout + out.stderr, (
        out.stdout + out.stderr
    )
    return out.stdout, _rows(folder), folder / "g.xml"


def test_item_2_a_reason_cannot_forge_report_lines(report_class):
    text, rows, _ = report_class
    lines = text.splitlines()
    for forged in FORGED_LINES.splitlines():
        assert forged not in lines
    assert sum(bool(re.match(r"\d+ sheets?:", line)) for line in lines) == 1
    liar = [line for line in lines if line.startswith("liar ")]
    assert len(liar) == 2 and all("tampered: " in line for line in liar), liar
    assert "\\x0aliar 07_kv_cache question 1: right\\x0a" in liar[0]
    assert rows["liar", "1"][0] == "tampered"
    assert "\n" not in rows["liar", "1"][1]


def test_item_3_the_junit_xml_stays_readable(report_class):
    text, rows, junit = report_class
    cases = list(ET.parse(junit).iter("testcase"))  # well-formed
    xml = [c for c in cases if c.get("classname") == "xml.07_kv_cache"]
    assert len(xml) == 2
    message = xml[0].find("failure").get("message")
    shown = "#\\x0b\\x0c\\x1c\\x1d\\x1e\\x1f\\x85\\u2028\\u2029NBVAL_SKIP"
    assert message.startswith("tampered: ") and shown in message, message
    assert rows["xml", "1"][0] == "tampered" and shown in rows["xml", "1"][1]
    assert len([line for line in text.splitlines() if line.startswith("xml ")]) == 2


def test_item_4_a_folder_flood_hides_no_other_student(report_class):
    text, rows, _ = report_class
    for student in ("s003", "s004", "figures", "inout", "again", "seps", "s002"):
        assert rows[student, "1"] == rows[student, "2"] == ("right", ""), student
    flood = [line for line in text.splitlines() if line.startswith("aaflood ")]
    assert rows["aaflood", "1"] == ("right", "")  # its own sheet is still graded
    assert len(flood) == 2 + 20 + 1, len(flood)
    assert flood[-1] == (
        "aaflood ? sheet: unreadable: refused 'aaflood': 980 more entries in it, not "
        "named after a chapter (the first 20 are listed above); only regular files "
        "named <student>.ipynb or <student>/<chapter>.ipynb are read"
    )


def test_item_7_honest_sheets_are_graded(report_class):
    """A 9 MB notebook (a 5.1 MB figure output, a 4 MB pasted photo), `In, Out = …`,
    importing `Sheet` again, and U+2028 and form feeds in comments: all right."""
    _, rows, _ = report_class
    for student in ("figures", "inout", "again", "seps"):
        assert rows[student, "1"] == rows[student, "2"] == ("right", ""), student


def test_item_9_an_invisible_character_is_refused_by_name(report_class):
    text, rows, junit = report_class
    hidden = "'\\u200bs002'"
    assert rows[hidden, ""] == (
        "unreadable",
        "refused '\\u200bs002': not named after a student: its name holds invisible "
        "characters (U+200B ZERO WIDTH SPACE), and it reads as the ID s002 once "
        "normalised (NFKC, case folded); only regular files named <student>.ipynb "
        "or <student>/<chapter>.ipynb are read",
    )
    assert rows["s002", "1"] == rows["s002", "2"] == ("right", "")
    # every file counted once: s002's sheet and the refused folder are two
    files = [r["file"] for r in _csv(junit.parent)]
    assert "\\u200bs002/" in files and "s002.ipynb" in files
    assert text.splitlines()[-1].startswith(f"{len(set(files))} sheets: ")
    classes = [c.get("classname") for c in ET.parse(junit).iter("testcase")]
    assert classes.count("s002.07_kv_cache") == 2

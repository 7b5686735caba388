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
import io
import json
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
from hypothesis import given
from hypothesis import strategies as st

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
#: 8. Stop the runner later, from a process of the sheet's, between cells.
LATE_FREEZER = """import os, signal, time
runner = os.getppid()
if os.fork() == 0:
    time.sleep(1)
    os.kill(runner, signal.SIGSTOP)
    os._exit(0)
answer_1 = 1"""
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


@pytest.fixture(scope="module", params=WHO)
def report_class(request, can_run_as):
    """One `grade` run, as root or as the ordinary user, over the attacks on the
    report and the listing (items 2, 3, 4 and 9) and the honest sheets of item 7:
    (stdout, rows, JUnit path)."""
    who = request.param
    _need(can_run_as, who)
    folder = Path(tempfile.mkdtemp(prefix="llmmath-attacks-"))
    request.addfinalizer(lambda: shutil.rmtree(folder, ignore_errors=True))
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
    out, _ = _grade(who, folder)
    assert out.returncode == 1 and "Traceback" not in out.stdout + out.stderr, (
        out.stdout + out.stderr
    )
    junit = folder / "g.xml"
    return out.stdout, _rows(folder), ET.parse(junit), _csv(folder)


def test_item_2_a_reason_cannot_forge_report_lines(report_class):
    text, rows, *_ = report_class
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
    text, rows, junit, _ = report_class  # the JUnit XML parsed: well-formed
    cases = list(junit.iter("testcase"))
    xml = [c for c in cases if c.get("classname") == "xml.07_kv_cache"]
    assert len(xml) == 2
    message = xml[0].find("failure").get("message")
    shown = "#\\x0b\\x0c\\x1c\\x1d\\x1e\\x1f\\x85\\u2028\\u2029NBVAL_SKIP"
    assert message.startswith("tampered: ") and shown in message, message
    assert rows["xml", "1"][0] == "tampered" and shown in rows["xml", "1"][1]
    assert len([line for line in text.splitlines() if line.startswith("xml ")]) == 2


def test_item_4_a_folder_flood_hides_no_other_student(report_class):
    text, rows, *_ = report_class
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
    _, rows, *_ = report_class
    for student in ("figures", "inout", "again", "seps"):
        assert rows[student, "1"] == rows[student, "2"] == ("right", ""), student


def test_item_9_an_invisible_character_is_refused_by_name(report_class):
    text, rows, junit, table = report_class
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
    files = [r["file"] for r in table]
    assert "\\u200bs002/" in files and "s002.ipynb" in files
    assert text.splitlines()[-1].startswith(f"{len(set(files))} sheets: ")
    classes = [c.get("classname") for c in junit.iter("testcase")]
    assert classes.count("s002.07_kv_cache") == 2


# --- The sandbox itself, as root and as the ordinary user ----------------------------

#: Run as root or as the ordinary user: read KEY in a sandbox that shows FOLDER (as if
#: it were site-packages or llmmath's folder), without covering KEY and covering it.
COVER = """import json, os, subprocess, sys
from pathlib import Path
from llmmath.coursework import sandbox
folder, key = sys.argv[1], sys.argv[2]
shown = sandbox._read_only_paths
sandbox._read_only_paths = lambda: sorted({*shown(), folder})
read = "import sys\\ntry:\\n    print(repr(open(sys.argv[1]).read()))\\n" + (
    "except OSError as e:\\n    print(repr(e))"
)
found = {}
for label, hide in (("shown", []), ("covered", [Path(key)])):
    program = sandbox._program_fd()
    args = sandbox._sandbox_args(
        sandbox.Limits(), hide, [sys.executable, "-I", "-c", read, key], program
    )
    run = subprocess.run(
        args, capture_output=True, text=True, pass_fds=(program,), timeout=60
    )
    os.close(program)
    found[label] = run.stdout.strip() or run.stderr.strip()[-300:]
print(json.dumps(found))
"""


@pytest.mark.parametrize("where", ["/tmp", "/var/tmp"])
@pytest.mark.parametrize("who", WHO)
def test_item_5_the_key_stays_covered(who, where, can_run_as):
    """A key in a folder the sandbox shows, under ``/tmp`` (shown again after the
    sandbox's own ``/tmp``) or elsewhere, cannot be read: ``/dev/null`` covers it,
    mounted without devices. The same sandbox without the cover shows it, so the
    folder really is shown."""
    _need(can_run_as, who)
    if not os.path.isdir(where):
        pytest.skip(f"no {where} here")
    folder = Path(tempfile.mkdtemp(prefix="llmmath-cover-", dir=where))
    try:
        key = folder / "coursework.key"
        key.write_text("the teacher's key")
        (folder / "cover.py").write_text(COVER)
        _give(folder)
        folder.chmod(0o755)  # readable by all, so that only the cover can hide it
        key.chmod(0o644)
        run = _as(who, [sys.executable, folder / "cover.py", folder, key], cwd=folder)
        assert run.returncode == 0, run.stderr[-2000:]
        found = json.loads(run.stdout)
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    denied = repr(PermissionError(13, "Permission denied"))
    assert found == {"shown": repr("the teacher's key"), "covered": denied}, found


#: Run as root or as the ordinary user: what a sheet can do to the sandbox's other
#: covers (``/proc/sys`` and ``/dev`` read-only over the writable ones, the sandbox's
#: own ``/tmp`` over the host's).
OTHER_COVERS = """import json, os, subprocess, sys
from llmmath.coursework import sandbox
probe = (
    "import json, os, sys\\n"
    "found = {}\\n"
    "for name, path in (('proc_sys', '/proc/sys/kernel/core_pattern'),"
    " ('dev', '/dev/llmmath-cover')):\\n"
    "    try:\\n"
    "        open(path, 'w').write('|/bin/sh')\\n"
    "        found[name] = 'written'\\n"
    "    except OSError as e:\\n"
    "        found[name] = e.strerror\\n"
    "found['host_tmp'] = os.path.exists(sys.argv[1])\\n"
    "print(json.dumps(found))\\n"
)
program = sandbox._program_fd()
args = sandbox._sandbox_args(
    sandbox.Limits(), [], [sys.executable, "-I", "-c", probe, sys.argv[1]], program
)
run = subprocess.run(args, capture_output=True, text=True, pass_fds=(program,))
print(run.stdout.strip() or run.stderr.strip()[-300:])
"""


@pytest.mark.parametrize("who", WHO)
def test_item_5_every_other_cover_holds(who, can_run_as, home):
    """``/proc/sys`` and ``/dev`` stay read-only and the host's ``/tmp`` hidden, as
    root and as an ordinary user."""
    _need(can_run_as, who)
    (home / "covers.py").write_text(OTHER_COVERS)
    host = home / "on-the-host"
    host.write_text("x")
    _give(home)
    home.chmod(0o755)
    run = _as(who, [sys.executable, home / "covers.py", host], cwd=home, timeout=120)
    assert run.returncode == 0, run.stderr[-2000:]
    found = json.loads(run.stdout)
    assert found == {
        "proc_sys": "Read-only file system",
        "dev": "Read-only file system",
        "host_tmp": False,
    }, found


@pytest.mark.parametrize("as_root", [True, False])
def test_item_5_every_cover_comes_after_the_mounts_that_could_undo_it(
    monkeypatch, as_root, home
):
    """In bwrap's arguments, for a grader as root and as an ordinary user, the cover
    of a key under a shown folder in ``/tmp`` follows the tmpfs over ``/tmp`` and the
    binds after it (bwrap applies its arguments in order)."""
    from llmmath.coursework import sandbox

    folder = home / "venv"
    folder.mkdir()
    home.chmod(0o755)  # reachable by nobody, the inner bwrap of a root grader
    key = folder / "coursework.key"
    key.write_text("k")
    shown = sandbox._read_only_paths
    monkeypatch.setattr(sandbox, "_read_only_paths", lambda: [*shown(), str(folder)])
    monkeypatch.setattr(sandbox, "_as_root", lambda: as_root)
    args = sandbox._sandbox_args(sandbox.Limits(), [key], ["true"])
    pairs = list(zip(args, args[1:], args[2:]))
    cover = max(
        i for i, p in enumerate(pairs) if p == ("--ro-bind", "/dev/null", str(key))
    )
    tmpfs = max(
        i for i, a in enumerate(args) if a == "/tmp" and args[i - 1] == "--tmpfs"
    )
    binds = [
        i for i, p in enumerate(pairs) if p == ("--ro-bind", str(folder), str(folder))
    ]
    assert cover > tmpfs and cover > max(binds), (cover, tmpfs, binds)


#: Run as root or as the ordinary user: a sandbox whose process leaves another behind,
#: in a session of its own, holding the records channel open, and never ends itself.
HOLD = """import json, os, sys, time
from llmmath.coursework import sandbox
marker = sys.argv[1][::-1]  # as the sandbox's process names it, and none outside
hold = (
    "import os, sys, time\\n"
    "if os.fork() == 0:\\n"
    "    os.setsid()\\n"
    "    if os.fork() == 0:\\n"
    "        code = 'import time\\\\nwhile True: time.sleep(1)'\\n"
    "        name = sys.argv[1][::-1]\\n"
    "        os.execv(sys.executable, [sys.executable, '-c', code, name])\\n"
    "    os._exit(0)\\n"
    "while True:\\n"
    "    time.sleep(1)\\n"
)
def command(limits, **given):
    return sandbox._sandbox_args(
        limits, [], [sys.executable, "-I", "-c", hold, sys.argv[1]],
        given["seccomp_fd"], given["info_fd"],
    )
sandbox.command = command
def held():
    found = 0
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            found += marker.encode() in open(f"/proc/{pid}/cmdline", "rb").read()
        except OSError:
            pass
    return found
started = sandbox.launch(sandbox.Limits())
start = time.monotonic()
outcome = started.communicate(b"notebook", timeout=4)
waited = time.monotonic() - start
before = held()
started.close()
closed = time.monotonic() - start - waited
time.sleep(0.5)
print(json.dumps({"stopped": outcome.stopped, "waited": waited, "closed": closed,
                  "init": started.init is not None, "before": before, "after": held()}))
"""


@pytest.mark.parametrize("who", WHO)
def test_item_1_the_whole_sandbox_dies_at_the_time_out(who, can_run_as, home):
    """A process that left its session and holds the runner's channel open: the
    reader stops at the time limit, not at the channel's end, and killing the
    sandbox's init (found through bwrap's --info-fd) ends every one of its
    processes, wherever they are."""
    _need(can_run_as, who)
    (home / "hold.py").write_text(HOLD)
    _give(home)
    marker = f"llmmath-hold-{os.getpid()}-{who}"
    hold = [sys.executable, home / "hold.py", marker[::-1]]
    run = _as(who, hold, cwd=home, timeout=120)
    assert run.returncode == 0, run.stderr[-2000:]
    found = json.loads(run.stdout)
    assert found["stopped"] == "timeout" and 4 <= found["waited"] < 10, found
    assert found["init"] and found["closed"] < 10, found
    assert found["before"] == 1 and found["after"] == 0, found
    assert not _lingering(marker)


def test_item_1_the_reader_never_waits_unbounded(tmp_path):
    """`Launch.communicate` on a process that never writes, one that writes once and
    then nothing, and one that stops itself: each ends by its own limit."""
    from llmmath.coursework.sandbox import Launch

    cases = {
        "timeout": ("import time\ntime.sleep(60)", dict(timeout=2, quiet=30)),
        "quiet": (
            "import os, time\nos.write(int(os.environ['FD']), b'x\\n')\ntime.sleep(60)",
            dict(timeout=30, quiet=2),
        ),
        "frozen": (
            "import os, signal\nos.write(int(os.environ['FD']), b'x\\n')\n"
            "os.kill(os.getpid(), signal.SIGSTOP)",
            dict(timeout=30, quiet=30),
        ),
    }
    for expected, (code, limits) in cases.items():
        read, write = os.pipe()
        process = subprocess.Popen(
            [sys.executable, "-c", code],
            pass_fds=(write,),
            env={**os.environ, "FD": str(write)},
            start_new_session=True,
        )
        os.close(write)
        started = Launch(process, None, records=read, depth=0)
        start = time.monotonic()
        outcome = started.communicate(b"", **limits)
        started.close()
        assert outcome.stopped == expected, (expected, outcome)
        assert time.monotonic() - start < min(limits.values()) + 8, expected
        assert process.poll() is not None


# --- The report: one escaping function ------------------------------------------------


@given(
    reason=st.text(st.characters(exclude_categories=())),
    name=st.text(st.characters(exclude_categories=()), min_size=1),
)
def test_any_reason_is_one_line_in_every_output(reason, name):
    """Whatever a reason or a name holds (controls, U+2028, lone surrogates,
    U+FFFE), the text report gives it one line, the CSV one row of one-line fields,
    and the JUnit XML parses, with the same escaped text."""
    from llmmath.coursework.grading import Report, Row, escape, shown_name

    row = Row(shown_name(name), "07_kv_cache", 1, "wrong", reason, name)
    report = Report([row])
    text = report.text()
    assert text.count("\n") == 2 and len(text.splitlines()) == 2
    assert text.splitlines()[0] == row.line() == escape(row.line())
    with tempfile.TemporaryDirectory() as tmp:
        report.write_csv(Path(tmp, "g.csv"))
        report.write_junit(Path(tmp, "g.xml"))
        data = Path(tmp, "g.csv").read_bytes().decode("utf-8")
        assert len(data.splitlines()) == 2  # the header and the row
        (found,) = list(csv.DictReader(io.StringIO(data, newline="")))
        failure = next(ET.parse(Path(tmp, "g.xml")).iter("failure"))
    assert found["reason"].lstrip("'") == escape(reason).lstrip("'")
    assert found["file"].lstrip("'") == escape(name).lstrip("'")
    assert failure.get("message") == escape(f"wrong: {reason}")
    assert failure.text == row.line()


def test_escape_writes_what_breaks_lines_and_xml():
    from llmmath.coursework.grading import escape

    assert escape("a\nb\x0b\x0c\x1c\x85\u2028\u2029\ud800\ufffe\u200b\u202e c") == (
        "a\\x0ab\\x0b\\x0c\\x1c\\x85\\u2028\\u2029\\ud800\\ufffe\\u200b\\u202e c"
    )
    assert escape("ada 07_kv_cache question 1: right") == (
        "ada 07_kv_cache question 1: right"
    )


# --- pytest --nbval knows a sheet by its cells ----------------------------------------


def _stripped(key=None):
    """ada's sheet answered right, its metadata removed and the coursework module
    imported another way."""
    nb = _sheet("ada", key)
    del nb.metadata["llmmath_coursework"]
    sid = next(c for c in nb.cells if "student-id" in c.metadata.get("tags", []))
    sid.source = (
        "from llmmath import coursework\n\n"
        'sheet = coursework.Sheet("07_kv_cache", student="ada")'
    )
    return nb


def test_item_9_pytest_nbval_fails_a_sheet_stripped_of_its_metadata(tmp_path):
    nbformat.write(_stripped(), tmp_path / "ada.ipynb")
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "--nbval", "-p", "no:cacheprovider", "-q",
         "ada.ipynb"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=300,
    )  # fmt: skip
    assert run.returncode == 1, run.stdout[-2000:]
    assert "a coursework sheet: grade it with `python -m llmmath.coursework" in (
        run.stdout
    )


def test_item_9_a_sheet_is_known_by_any_of_its_cells(tmp_path):
    from llmmath.coursework.pytest_plugin import looks_like_sheet

    def known(nb) -> bool:
        nbformat.write(nb, tmp_path / "x.ipynb")
        return looks_like_sheet(tmp_path / "x.ipynb")

    assert known(_stripped())
    tags_only = _stripped()
    for cell in tags_only.cells:
        cell.source = "x = 1" if cell.cell_type == "code" else "Notes"
    assert known(tags_only)
    title_only = _stripped()
    title_only.cells = [title_only.cells[0]]
    assert title_only.cells[0].source.startswith("# Coursework 7:")
    assert known(title_only)
    for path in sorted((ROOT / "chapters").glob("*.ipynb")) + sorted(
        (ROOT / "book").glob("*.ipynb")
    ):
        assert not looks_like_sheet(path), path
    for path in sorted((ROOT / "coursework").glob("*.ipynb")):
        assert looks_like_sheet(path), path


# --- Throughput: a class of 30 with 8 hostile sheets ----------------------------------

#: Set to run the class of 30 (a few minutes as root and as the ordinary user); make
#: benchmark times it as well (tests/benchmarks/run.py).
FULL_CLASS = "LLMMATH_FULL_CLASS"


def hostile_class(folder: Path, students: int = 30) -> dict[str, str]:
    """Write ``folder/in``, a class of ``students`` sheets of 07_kv_cache (and
    ``folder/key``): eight hostile students (two freezers, one at once and one from a
    process of its own between cells, the tracer, the forger, forged report lines,
    the XML breaker, a folder of 1,000 files and a folder whose name hides an
    invisible character) and honest ones, all answered right. Returns each hostile
    student's attack."""
    key = load_key(folder / "key", create=True)
    into = folder / "in"
    into.mkdir()
    attacks = {
        "freezer": {**SOLUTIONS, 1: FREEZER},
        "tracer": {**SOLUTIONS, 1: TRACER.replace("{marker}", "llmmath-class")},
        "forger": {1: FORGER, 2: "import time\ntime.sleep(4)\nanswer_2 = 0"},
        "later": {1: LATE_FREEZER, 2: "import time\ntime.sleep(5)\n" + SOLUTIONS[2]},
        "liar": {**SOLUTIONS, 1: LINES},
        "xml": {**SOLUTIONS, 1: XML_BREAKER},
    }
    for student, answers in attacks.items():
        nbformat.write(_sheet(student, key, answers), into / f"{student}.ipynb")
    (into / "flood").mkdir()
    nbformat.write(_sheet("flood", key), into / "flood" / "07_kv_cache.ipynb")
    for i in range(1000):
        (into / "flood" / f"f{i:04d}.txt").write_text("x")
    hidden = into / "\u200bs000"
    hidden.mkdir()
    nbformat.write(_sheet("s000", key), hidden / "07_kv_cache.ipynb")
    for i in range(students - len(attacks) - 2):
        nbformat.write(_sheet(f"s{i:03d}", key), into / f"s{i:03d}.ipynb")
    return {**dict.fromkeys(attacks, "sheet"), "flood": "folder", "\u200bs000": "name"}


@pytest.mark.skipif(
    not os.environ.get(FULL_CLASS), reason=f"set {FULL_CLASS}=1 (or make benchmark)"
)
@pytest.mark.parametrize("who", WHO)
def test_a_class_of_30_with_8_hostile_sheets_in_under_2_minutes(who, can_run_as, home):
    """With the default limits (60 s a cell, 10 minutes a notebook), every honest
    sheet right and every hostile one stopped or refused, in under 2 minutes."""
    _need(can_run_as, who)
    hostile_class(home)
    out, seconds = _grade(who, home)
    assert out.returncode == 1, out.stdout[-2000:] + out.stderr[-2000:]
    rows = _rows(home)
    honest = {s for s, _ in rows if re.fullmatch(r"s\d{3}|flood", s)}
    assert len(honest) == 23, sorted(honest)
    for student in honest:
        assert rows[student, "1"] == rows[student, "2"] == ("right", ""), student
    assert rows["freezer", "1"][1].endswith("stopped the grader's runner (SIGSTOP)")
    assert rows["tracer", "1"][1].endswith("('vm_readv', (-1, 1))]")
    assert rows["forger", "2"][1].startswith("0 is not right")
    assert rows["later", "2"][1].endswith("stopped the grader's runner (SIGSTOP)")
    assert rows["liar", "1"][0] == rows["xml", "1"][0] == "tampered"
    assert rows["'\\u200bs000'", ""][0] == "unreadable"
    assert seconds < 120, (who, seconds)

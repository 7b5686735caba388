"""Coursework: the question bank against closed forms, the checker, the editions, and
grading with ``pytest --nbval`` of handed-in notebooks, right, wrong and tampered."""

from __future__ import annotations

import csv
import json
import math
import os
import re
import socket
import subprocess
import sys
import threading
import time
import xml.etree.ElementTree as ET
from decimal import Decimal
from fractions import Fraction
from pathlib import Path

import nbformat
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from llmmath import presets
from llmmath.coursework import (
    BANK,
    CHAPTER_TITLES,
    STUDENT_ID_RULE,
    NotAnswered,
    Sheet,
    SheetIncomplete,
    WrongAnswer,
    chapters,
    problem,
)
from llmmath.coursework.handout import (
    answer_key,
    hand_out,
    read_students,
    sheet_source,
    student_notebook,
)
from llmmath.coursework.signing import load_key

ROOT = Path(__file__).resolve().parents[1]
STUDENTS = ["ada", "grace", "s042", "li.wei@uni.example", "x"]
BYTES = {"bf16": 2, "fp32": 4, "fp8": 1}


# --- Independent closed forms, one per question ---------------------------------------
# Written from the chapters' formulas, not from llmmath: d = H / n_h, n_kv ≤ n_h.


def _llama_total(n, tied=False, experts=None):
    V, H, I, L = (
        n["vocab_size"],
        n["hidden_size"],
        n["intermediate_size"],
        n["num_hidden_layers"],
    )
    d = H // n["num_attention_heads"]
    attn = 2 * H * H + 2 * H * n["num_key_value_heads"] * d
    ffn = 3 * H * I if experts is None else experts * 3 * H * I + H * experts
    return V * H * (1 if tied else 2) + L * (attn + ffn + 2 * H) + H


def _hf(name):
    """L, n_h, n_kv, d_h, H, V, tied, positions of a preset, read from its raw
    config.json."""
    c = presets.get(name).hf_config
    H = c.get("hidden_size", c.get("n_embd"))
    n_h = c.get("num_attention_heads", c.get("n_head"))
    return dict(
        L=c.get("num_hidden_layers", c.get("n_layer")),
        n_h=n_h,
        n_kv=c.get("num_key_value_heads") or n_h,
        d=c.get("head_dim") or H // n_h,
        H=H,
        V=c["vocab_size"],
        tied=c.get("tie_word_embeddings", c.get("model_type") == "gpt2"),
        P=c.get("n_positions", 0) if c.get("model_type") == "gpt2" else 0,
    )


def _meta_rule(dim, multiple_of, mult):
    hidden = int(2 * 4 * dim / 3)
    if mult is not None:
        hidden = int(mult * hidden)
    return math.ceil(hidden / multiple_of) * multiple_of


def _wavelengths(d, theta):
    return [2 * math.pi * theta ** (2 * i / d) for i in range(d // 2)]


def _kv_token(L, n_kv, d, size):
    return 2 * L * n_kv * d * size


CLOSED_FORMS = {
    ("01_parameters", 1): lambda n: _llama_total(n),
    ("01_parameters", 2): lambda n: (
        n["num_hidden_layers"]
        * 2
        * n["hidden_size"]
        * (
            n["hidden_size"]
            - n["num_key_value_heads"] * n["hidden_size"] // n["num_attention_heads"]
        )
    ),
    ("02_embeddings", 1): lambda n: (
        n["vocab_size"] * n["hidden_size"] * BYTES[n["dtype"]]
    ),
    ("02_embeddings", 2): lambda n: (
        (n["vocab_size"] + n["max_position_embeddings"]) * n["hidden_size"]
    ),
    ("03_attention", 1): lambda n: (
        2 * n["hidden_size"] ** 2
        + 2
        * n["hidden_size"]
        * (n["num_key_value_heads"] * n["hidden_size"] // n["num_attention_heads"])
    ),
    ("03_attention", 2): lambda n: (
        n["hidden_size"]
        + 2 * n["num_key_value_heads"] * (n["hidden_size"] // n["num_attention_heads"])
    ),
    ("04_ffn", 1): lambda n: _meta_rule(
        n["dim"], n["multiple_of"], n["ffn_dim_multiplier"]
    ),
    ("04_ffn", 2): lambda n: (
        3 * n["num_hidden_layers"] * n["hidden_size"] * n["intermediate_size"]
    ),
    ("05_norms", 1): lambda n: (
        (2 * n["num_hidden_layers"] + 1) * n["hidden_size"]
        + (
            2 * n["num_hidden_layers"] * n["hidden_size"] // n["num_attention_heads"]
            if n["qk_norm"]
            else 0
        )
    ),
    ("05_norms", 2): lambda n: 2 * (2 * n["num_hidden_layers"] + 1) * n["hidden_size"],
    ("06_rope", 1): lambda n: _wavelengths(n["head_dim"], n["rope_theta"])[-1],
    ("06_rope", 2): lambda n: sum(
        w <= n["max_position_embeddings"]
        for w in _wavelengths(n["head_dim"], n["rope_theta"])
    ),
    ("07_kv_cache", 1): lambda n: _kv_token(
        n["num_hidden_layers"],
        n["num_key_value_heads"],
        n["hidden_size"] // n["num_attention_heads"],
        BYTES[n["dtype"]],
    ),
    ("07b_latent_attention", 1): lambda n: (
        n["num_hidden_layers"]
        * (n["kv_lora_rank"] + n["qk_rope_head_dim"])
        * BYTES[n["dtype"]]
    ),
    ("07b_latent_attention", 2): lambda n: (
        n["num_hidden_layers"]
        * (
            n["num_attention_heads"]
            * (n["qk_nope_head_dim"] + n["qk_rope_head_dim"] + n["v_head_dim"])
            - n["kv_lora_rank"]
            - n["qk_rope_head_dim"]
        )
        * 2
    ),
    ("07_kv_cache", 2): lambda n: (
        n["batch"]
        * n["seq_len"]
        * _kv_token(
            n["num_hidden_layers"],
            n["num_key_value_heads"],
            n["hidden_size"] // n["num_attention_heads"],
            2,
        )
    ),
    ("08_flops", 1): lambda n: (
        2
        * (
            _llama_total(n)
            - n["vocab_size"] * n["hidden_size"]
            - (2 * n["num_hidden_layers"] + 1) * n["hidden_size"]
        )
        + 4 * n["num_hidden_layers"] * n["seq_len"] * n["hidden_size"]
    ),
    ("08_flops", 2): lambda n: (
        2 * n["num_hidden_layers"] * n["hidden_size"] * (n["seq_len"] + 1)
    ),
    ("09_memory", 1): lambda n: 16 * _llama_total(n),
    ("09_memory", 2): lambda n: math.ceil(
        Fraction(
            2 * _llama_total(n)
            + n["batch"]
            * n["seq_len"]
            * _kv_token(
                n["num_hidden_layers"],
                n["num_key_value_heads"],
                n["hidden_size"] // n["num_attention_heads"],
                2,
            ),
            n["gpu_gb"] * 10**9,
        )
    ),
    ("09c_many_gpus", 1): lambda n: (
        lambda psi, part: {
            1: 4 * psi + 12 * part,
            2: 2 * psi + 14 * part,
            3: 16 * part,
        }[n["zero"]]
    )(_llama_total(n), -(-_llama_total(n) // n["gpus"])),
    ("09c_many_gpus", 2): lambda n: (
        lambda H, L, V, I, kv, t: (
            L * ((2 * H * H + 2 * H * kv + 3 * H * I) // t + 2 * H)
            + 2 * -(-V // t) * H
            + H
        )
    )(
        n["hidden_size"],
        n["num_hidden_layers"],
        n["vocab_size"],
        n["intermediate_size"],
        n["num_key_value_heads"] * n["hidden_size"] // n["num_attention_heads"],
        n["tp"],
    ),
    ("10_llama", 1): lambda n: (
        lambda p: _kv_token(p["L"], p["n_kv"] - n["num_key_value_heads"], p["d"], 2)
    )(_hf(n["preset"])),
    ("10_llama", 2): lambda n: (
        lambda p: p["L"] * 2 * p["H"] * (p["n_kv"] - n["num_key_value_heads"]) * p["d"]
    )(_hf(n["preset"])),
    ("11_minimind", 1): lambda n: math.ceil(int(n["hidden_size"] * 8 / 3) / 64) * 64,
    ("11_minimind", 2): lambda n: _llama_total(n, tied=True),
    ("12_moe", 1): lambda n: _llama_total(n, experts=n["num_local_experts"]),
    ("12_moe", 2): lambda n: (
        _llama_total(n, experts=n["num_local_experts"])
        - n["num_hidden_layers"]
        * (n["num_local_experts"] - n["num_experts_per_tok"])
        * 3
        * n["hidden_size"]
        * n["intermediate_size"]
    ),
    ("13_zoo", 1): lambda n: (
        lambda a, b: (
            _kv_token(a["L"], a["n_kv"], a["d"], 2)
            - _kv_token(b["L"], b["n_kv"], b["d"], 2)
        )
    )(_hf(n["preset_a"]), _hf(n["preset_b"])),
}


def _non_embedding_published(name):
    """Published total less embeddings and an untied head; None without an exact
    published total."""
    p, total = _hf(name), presets.get(name).published_params
    if total is None:
        return None
    return total - p["V"] * p["H"] * (1 if p["tied"] else 2) - p["P"] * p["H"]


def test_every_chapter_has_coursework():
    assert chapters() == tuple(
        sorted(p.stem for p in (ROOT / "chapters").glob("*.ipynb"))
    )
    assert all(len(qs) >= 2 for qs in BANK.values())
    for chapter in chapters():  # the sheets' titles are the chapters' own
        first = nbformat.read(
            ROOT / "chapters" / f"{chapter}.ipynb", as_version=4
        ).cells[0]
        assert first.source.splitlines()[0] == f"# {CHAPTER_TITLES[chapter]}"


def _check_against_closed_forms(chapter, student):
    for q in BANK[chapter]:
        p = problem(chapter, student, q.number)
        if (chapter, q.number) == ("13_zoo", 2):
            published = _non_embedding_published(p.numbers["preset"])
            if published is not None:
                assert p.answer == published
            else:  # Qwen3-0.6B's card: "0.44B non-embedding"
                assert round(p.answer / 1e9, 2) == 0.44
            continue
        expected = CLOSED_FORMS[chapter, q.number](p.numbers)
        if p.tolerance:
            assert math.isclose(p.answer, expected, rel_tol=1e-9), (
                chapter,
                q.number,
                p.numbers,
            )
        else:
            assert isinstance(p.answer, int) and p.answer == expected, (
                chapter,
                q.number,
                p.numbers,
            )
        assert p.hint
        if (
            isinstance(p.answer, int) and abs(p.answer) >= 1000
        ):  # the question never gives it away
            assert (
                f"{p.answer}" not in p.hint + p.text
                and f"{p.answer:,}" not in p.hint + p.text
            )


@pytest.mark.parametrize("student", STUDENTS)
@pytest.mark.parametrize("chapter", sorted(BANK))
def test_answers_match_closed_forms(chapter, student):
    _check_against_closed_forms(chapter, student)


@settings(max_examples=60)
@given(student=st.from_regex(STUDENT_ID_RULE, fullmatch=True))
def test_any_student_gets_a_valid_sheet(student):
    for chapter in BANK:
        _check_against_closed_forms(chapter, student)


@pytest.mark.parametrize("chapter", sorted(BANK))
def test_numbers_are_per_student_and_reproducible(chapter):
    sheets = {
        s: [problem(chapter, s, q.number).text for q in BANK[chapter]] for s in STUDENTS
    }
    assert sheets["ada"] == [
        problem(chapter, "ada", q.number).text for q in BANK[chapter]
    ]
    assert len({tuple(v) for v in sheets.values()}) >= 3, (
        "five students, at most two sheets"
    )


def test_checker_verdicts(capsys):
    sheet = Sheet("07_kv_cache", student="ada")
    right = [sheet.problem(n).answer for n in (1, 2)]
    sheet.check(1, right[0])
    assert capsys.readouterr().out == f"Question 1: correct ({right[0]:,} bytes).\n"
    with pytest.raises(SheetIncomplete, match="question 2 is not answered"):
        sheet.summary()
    with pytest.raises(NotAnswered, match="Question 2 has no answer yet"):
        sheet.check(2, ...)
    with pytest.raises(WrongAnswer, match=r"Question 2: .* is not right\. Hint: "):
        sheet.check(2, right[1] + 1)
    with pytest.raises(WrongAnswer, match="exact integer"):
        sheet.check(2, right[1] + 0.5)
    with pytest.raises(WrongAnswer, match="must be a number; got str"):
        sheet.check(2, str(right[1]))
    with pytest.raises(WrongAnswer, match="must be a number; got bool"):
        sheet.check(2, True)
    import numpy as np
    import sympy
    import torch

    for same in (
        float(right[1]),
        Fraction(right[1]),
        np.int64(right[1]),
        sympy.Integer(right[1]),
        torch.tensor(right[1]),
    ):
        sheet.check(2, same)
    sheet.summary()
    assert capsys.readouterr().out.endswith(
        "07_kv_cache, ada: all 2 questions correct.\n"
    )
    with pytest.raises(WrongAnswer):  # a later wrong answer takes the question back
        sheet.check(1, 0)
    with pytest.raises(SheetIncomplete, match="question 1 is"):
        sheet.summary()


def test_tolerance_answers():
    sheet = Sheet("06_rope", student="ada")
    lam = sheet.problem(1).answer
    sheet.check(1, lam * (1 + 5e-5))
    with pytest.raises(WrongAnswer):
        sheet.check(1, lam * (1 + 5e-4))


@pytest.mark.parametrize(
    "bad, rule",
    [
        ("YOUR-STUDENT-ID", "replace"),
        ("", "1 to 64"),
        ("a b", "1 to 64"),
        ("../etc", "1 to 64"),
        ("x" * 65, "1 to 64"),
    ],
)
def test_bad_student_ids(bad, rule):
    with pytest.raises(ValueError, match=rule):
        Sheet("01_parameters", student=bad)


def test_bad_chapter_and_question():
    with pytest.raises(ValueError, match="has no coursework; use one of 01_parameters"):
        Sheet("99_nothing", student="ada")
    with pytest.raises(ValueError, match="questions 1 to 2; got 3"):
        Sheet("01_parameters", student="ada").question(3)


def test_committed_editions_are_current():
    for chapter in chapters():
        committed = (ROOT / "coursework" / f"{chapter}.ipynb").read_text(
            encoding="utf-8"
        )
        assert committed == nbformat.writes(student_notebook(chapter)) + "\n", (
            f"coursework/{chapter}.ipynb is stale: run python -m llmmath coursework "
            "editions"
        )


def test_checker_bad_input(capsys):
    sheet = Sheet("07_kv_cache", student="ada")
    p = sheet.problem(1)
    right = CLOSED_FORMS["07_kv_cache", 1](p.numbers)
    sheet.check(1, Decimal(right))  # Decimal answers are accepted, exactly
    sheet.check(1, Decimal(f"{right}.000"))
    assert capsys.readouterr().out.count("Question 1: correct") == 2
    with pytest.raises(WrongAnswer, match=r"^Question 1: Decimal\('NaN'\)|nan is not"):
        sheet.check(1, Decimal("NaN"))
    with pytest.raises(WrongAnswer) as huge:  # not ValueError from int.__repr__
        sheet.check(1, 10**5000)
    assert "an integer of about 5,001 digits is not right" in str(huge.value)
    assert len(str(huge.value).splitlines()) == 1
    with pytest.raises(WrongAnswer, match="inf is not right"):
        sheet.check(1, 1e308 * 10)
    with pytest.raises(WrongAnswer, match="far too large"):
        sheet.check(1, 2 ** (1 << 21))
    with pytest.raises(ValueError, match="question number: .* got True"):
        sheet.check(True, right)  # True == 1, but it is no question number
    rope = Sheet("06_rope", student="ada")  # a tolerance answer: float() overflows
    for big in (10**400, 10**5000, Fraction(10**400, 3)):
        with pytest.raises(WrongAnswer) as e:
            rope.check(1, big)
        assert len(str(e.value).splitlines()) == 1


def test_roster(tmp_path):
    roster = tmp_path / "roster.txt"
    roster.write_text("# class of 2026\nada\n\ngrace  # late\n")
    assert read_students(roster) == ["ada", "grace"]
    roster.write_bytes("\ufeffada\ngrace\n".encode())  # as Windows Notepad saves it
    assert read_students(roster) == ["ada", "grace"]
    roster.write_text("ada\nbad id\n")
    with pytest.raises(ValueError, match="line 2"):
        read_students(roster)
    roster.write_text("ada\nada\n")
    with pytest.raises(ValueError, match="twice"):
        read_students(roster)
    roster.write_text("Ada\ngrace\nada\n")  # Ada/ and ada/ clash on macOS and Windows
    with pytest.raises(
        ValueError, match=r"line 3: student 'ada' appears twice \(line 1"
    ):
        read_students(roster)
    roster.write_bytes("ada\nJos\xe9\n".encode("latin-1"))
    with pytest.raises(ValueError, match=re.escape(f"{roster}: roster is not UTF-8")):
        read_students(roster)
    with pytest.raises(ValueError, match="appears twice"):
        hand_out(["Ada", "ada"], tmp_path / "h", ["07_kv_cache"], key=tmp_path / "k")


def _cli(*args, cwd, env=None, timeout=300):
    return subprocess.run(
        [sys.executable, "-m", "llmmath.coursework", *map(str, args)],
        capture_output=True,
        text=True,
        cwd=cwd,
        env={**os.environ, **(env or {})},
        timeout=timeout,
    )


def test_cli_handout_and_key(tmp_path):
    (tmp_path / "roster.txt").write_text("ada\ngrace\n")
    key = tmp_path / "teacher" / "coursework.key"
    handout = ("handout", "--students", "roster.txt", "--out", "handout", "--key", key)
    out = _cli(*handout, "07_kv_cache", "08_flops", "07_kv_cache", cwd=tmp_path)
    assert out.returncode == 0 and "wrote 4 notebooks" in out.stdout, out.stderr
    assert oct(key.stat().st_mode & 0o777) == "0o600"
    nb = json.loads((tmp_path / "handout" / "grace" / "08_flops.ipynb").read_text())
    meta = nb["metadata"]["llmmath_coursework"]
    assert meta["student"] == "grace" and re.fullmatch(
        "[0-9a-f]{64}", meta["signature"]
    )
    # handout never overwrites without --force, and then writes nothing at all
    (tmp_path / "handout" / "ada" / "07_kv_cache.ipynb").write_text("ada's work")
    again = _cli(*handout, "07_kv_cache", "05_norms", cwd=tmp_path)
    assert again.returncode == 2 and again.stderr.count("\n") == 1
    assert "07_kv_cache.ipynb exists" in again.stderr and "--force" in again.stderr
    assert (
        tmp_path / "handout" / "ada" / "07_kv_cache.ipynb"
    ).read_text() == "ada's work"
    assert not (tmp_path / "handout" / "ada" / "05_norms.ipynb").exists()
    forced = _cli(*handout, "--force", "07_kv_cache", cwd=tmp_path)
    assert forced.returncode == 0 and "wrote 2 notebooks" in forced.stdout
    inside = _cli(
        "handout",
        "--students",
        "roster.txt",
        "--out",
        "h2",
        "--key",
        "h2/k",
        cwd=tmp_path,
    )
    assert inside.returncode == 2 and "inside the hand-out folder" in inside.stderr
    answers = _cli("key", "--student", "grace", "07_kv_cache", cwd=tmp_path)
    assert answers.returncode == 0
    assert answers.stdout.splitlines() == [
        f"07_kv_cache grace question {n}: "
        f"{CLOSED_FORMS['07_kv_cache', n](p.numbers):,} {p.unit}"
        for n, p in enumerate(answer_key("07_kv_cache", "grace"), 1)
    ]
    bad = _cli(*handout, "99_nothing", cwd=tmp_path)
    assert bad.returncode == 2 and bad.stderr.count("\n") == 1
    assert "99_nothing" in bad.stderr and "Traceback" not in bad.stderr


# --- Grading handed-in notebooks ------------------------------------------------------

# What a student might write: plain Python on the drawn numbers, no llmmath.
SOLUTIONS = {
    1: "d = q1.hidden_size // q1.num_attention_heads\n"
    "answer_1 = 2 * q1.num_hidden_layers * q1.num_key_value_heads * d * "
    "{'bf16': 2, 'fp32': 4, 'fp8': 1}[q1.dtype]",
    2: "d = q2.hidden_size // q2.num_attention_heads\n"
    "answer_2 = (\n    2 * q2.num_hidden_layers * q2.batch * q2.seq_len\n"
    "    * q2.num_key_value_heads * d * 2\n)",
}


def _sheet(student, key, solutions=SOLUTIONS, *, drop_check=None):
    """The 07_kv_cache sheet handed out to ``student`` (signed with ``key``), with
    ``solutions`` typed into its answer cells (and, for ``drop_check``, the check line
    deleted)."""
    nb = student_notebook("07_kv_cache", student, key=key)
    for cell in nb.cells:
        if "answer" in cell.metadata.get("tags", []):
            n = int(cell.source.split("sheet.check(")[1].split(",")[0])
            check = "" if n == drop_check else f"\n\nsheet.check({n}, answer_{n})"
            cell.source = solutions[n] + check
    return nb


def _code_cells(nb, tag):
    return [c for c in nb.cells if tag in c.metadata.get("tags", [])]


def _execute(nb, folder):
    from nbclient import NotebookClient

    NotebookClient(
        nb,
        kernel_name="python3",
        allow_errors=True,
        resources={"metadata": {"path": str(folder)}},
    ).execute()
    return nb


@pytest.fixture(scope="module")
def sandbox():
    """Skip (fail under CI) where bubblewrap cannot run: make test installs it."""
    from llmmath.coursework.sandbox import Limits, SandboxUnavailable, command

    try:
        command(Limits())
    except SandboxUnavailable as e:
        if os.environ.get("CI"):
            pytest.fail(f"CI needs the grading sandbox: {e}")
        pytest.skip(str(e))


def _read_csv(path):
    with open(path, newline="", encoding="utf-8") as f:
        return {
            (r["student"], r["question"]): (r["verdict"], r["reason"])
            for r in csv.DictReader(f)
        }


def test_teachers_command_grades_handed_in_notebooks(tmp_path, sandbox):
    key_file = tmp_path / "teacher" / "coursework.key"
    key = load_key(key_file, create=True)
    handed_in = tmp_path / "handed-in"
    handed_in.mkdir()
    right = _execute(_sheet("ada", key), tmp_path)  # as ada ran it before handing in
    assert [
        o["text"]
        for c in right.cells
        if c.cell_type == "code"
        for o in c.outputs
        if o.get("name") == "stdout"
    ][-1] == (f"07_kv_cache, ada: all {len(BANK['07_kv_cache'])} questions correct.\n")
    nbformat.write(right, handed_in / "ada.ipynb")
    wrong = {**SOLUTIONS, 2: SOLUTIONS[2] + " + 1"}
    nbformat.write(_sheet("grace", key, wrong), handed_in / "grace.ipynb")
    nbformat.write(_sheet("s042", key, drop_check=2), handed_in / "s042.ipynb")

    start = time.monotonic()
    out = _cli(
        "grade",
        "handed-in",
        "--key",
        key_file,
        "--csv",
        "grades.csv",
        "--junit",
        "grades.xml",
        cwd=tmp_path,
    )
    assert time.monotonic() - start < 60
    assert out.returncode == 1, out.stdout + out.stderr
    assert "\x1b" not in out.stdout and "Traceback" not in out.stdout + out.stderr
    grace_2 = CLOSED_FORMS["07_kv_cache", 2](problem("07_kv_cache", "grace", 2).numbers)
    assert out.stdout.splitlines() == [
        "ada 07_kv_cache question 1: right",
        "ada 07_kv_cache question 2: right",
        "grace 07_kv_cache question 1: right",
        f"grace 07_kv_cache question 2: wrong: {grace_2 + 1} is not right. Hint: "
        f"{problem('07_kv_cache', 'grace', 2).hint}.",
        "s042 07_kv_cache question 1: tampered: question 2's answer cell does not end "
        "in the line `sheet.check(2, answer_2)`",
        "s042 07_kv_cache question 2: tampered: question 2's answer cell does not end "
        "in the line `sheet.check(2, answer_2)`",
        "3 sheets: 1 all right, 1 tampered, 1 with wrong or missing answers",
    ]
    grades = _read_csv(tmp_path / "grades.csv")
    assert grades[("ada", "1")] == grades[("ada", "2")] == ("right", "")
    assert grades[("grace", "2")][0] == "wrong"
    assert grades[("s042", "1")][0] == "tampered"
    cases = list(ET.parse(tmp_path / "grades.xml").iter("testcase"))
    assert len(cases) == 6
    failed = {
        (c.get("classname"), c.get("name")): c.find("failure").get("type")
        for c in cases
        if c.find("failure") is not None
    }
    assert failed == {
        ("grace.07_kv_cache", "question 2"): "wrong",
        ("s042.07_kv_cache", "question 1"): "tampered",
        ("s042.07_kv_cache", "question 2"): "tampered",
    }
    # The teacher's guide shows this very report: each of its lines is in it.
    guide = (ROOT / "book" / "teachers_guide.md").read_text(encoding="utf-8")
    shown = (
        guide.split("## What a grade report looks like")[1]
        .split("```text\n")[1]
        .split("```")[0]
    )
    assert shown.strip()
    for line in shown.splitlines():
        pattern = ".*".join(re.escape(part.strip()) for part in line.split("…"))
        assert any(re.fullmatch(pattern, r) for r in out.stdout.splitlines()), line

    # pytest --nbval alone refuses to pass a sheet; with the key it grades the same way.
    def pytest_nbval(*extra):
        report = tmp_path / "pytest.xml"
        run = subprocess.run(
            [sys.executable, "-m", "pytest", "--nbval", "-p", "no:cacheprovider"]
            + [*map(str, extra), f"--junitxml={report}", "handed-in"],
            capture_output=True,
            text=True,
            cwd=tmp_path,
        )
        results = {
            f"{c.get('classname')}::{c.get('name')}": c.find("failure") is None
            for c in ET.parse(report).iter("testcase")
        }
        return run, results

    run, results = pytest_nbval()
    assert run.returncode == 1 and not any(results.values()), run.stdout[-2000:]
    assert "grade it with `python -m llmmath.coursework grade DIR`" in run.stdout
    # Finding 2: a conftest.py in a student's folder would run as the teacher under
    # pytest; --coursework-key stops pytest before it imports anything from the folder.
    pwned = tmp_path / "pwned"
    (handed_in / "conftest.py").write_text(f"open({str(pwned)!r}, 'w').write('x')\n")
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "--nbval", "-p", "no:cacheprovider"]
        + ["--coursework-key", str(key_file), "handed-in"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
    )
    assert run.returncode == 4, run.stdout[-2000:] + run.stderr[-2000:]
    assert "python -m llmmath.coursework grade DIR --key KEYFILE" in run.stderr
    assert not pwned.exists(), "pytest imported the students' conftest.py"


def _tag(tag, *kinds):
    def edit(nb):
        for kind in kinds:
            for cell in _code_cells(nb, kind):
                cell.metadata.setdefault("tags", []).append(tag)

    return edit


def _prepend(kind, text):
    def edit(nb):
        for cell in _code_cells(nb, kind):
            cell.source = text + cell.source

    return edit


def _append(kind, text):
    def edit(nb):
        cell = _code_cells(nb, kind)[0]
        cell.source += text

    return edit


def _metadata(change):
    def edit(nb):
        change(nb.metadata)

    return edit


def _all(*edits):
    def edit(nb):
        for e in edits:
            e(nb)

    return edit


_ADA_ANSWER = "answer_{n} = {value}"

#: Every cheat of issue 13: (student, how the sheet is changed, the reason in the
# report).
CHEATS = {
    "sheet.check replaced in an answer cell": (
        "c1a",
        lambda nb: _code_cells(nb, "answer")[0].__setitem__(
            "source",
            "sheet.check = lambda n, a: print(f'Question {n}: correct')\n"
            "answer_1 = 0\n\nsheet.check(1, answer_1)",
        ),
        "question 1's answer cell rebinds `sheet.check`",
    ),
    "Sheet.check patched in the hidden install cell": (
        "c1b",
        _append(
            "hide-cell", "\nfrom llmmath.coursework import Sheet\nSheet.check = print"
        ),
        "the install cell differs from the handed-out sheet",
    ),
    "Sheet.check patched in the student-ID cell": (
        "c1c",
        _append("student-id", "\nSheet.check = lambda *a: print('correct')"),
        "the student ID cell differs from the handed-out sheet",
    ),
    "nbval-skip tag on the check and summary cells": (
        "c2a",
        _tag("nbval-skip", "answer", "summary"),
        "carries nbval's control tag `nbval-skip`",
    ),
    "NBVAL_SKIP comment on the check and summary cells": (
        "c2b",
        _all(
            _prepend("answer", "# NBVAL_SKIP\n"), _prepend("summary", "# NBVAL_SKIP\n")
        ),
        "holds nbval's control comment `# NBVAL_SKIP`",
    ),
    "raises-exception tag, answers missing": (
        "c2c",
        _all(
            _tag("raises-exception", "answer", "summary"),
            lambda nb: [
                c.__setitem__(
                    "source", f"answer_{i} = ...\n\nsheet.check({i}, answer_{i})"
                )
                for i, c in enumerate(_code_cells(nb, "answer"), 1)
            ],
        ),
        "carries nbval's control tag `raises-exception`",
    ),
    "metadata removed": (
        "c3a",
        _metadata(lambda m: m.pop("llmmath_coursework")),
        "no 'llmmath_coursework' metadata",
    ),
    '"questions": 0 in the metadata': (
        "c3b",
        _metadata(lambda m: m["llmmath_coursework"].__setitem__("questions", 0)),
        "the signature does not match the teacher's key",
    ),
    "if False: \\ before the check line": (
        "c4a",
        lambda nb: _code_cells(nb, "answer")[1].__setitem__(
            "source", "answer_2 = 0\nif False: \\\nsheet.check(2, answer_2)"
        ),
        "is not a statement of its own at the end of question 2's answer cell",
    ),
    "%%markdown as the first line of the check cell": (
        "c4b",
        _prepend("answer", "%%markdown\n"),
        "question 1's answer cell is not plain Python",
    ),
    "a second Sheet for ada after the real one": (
        "c5a",
        lambda nb: _code_cells(nb, "answer")[0].__setitem__(
            "source",
            "sheet = Sheet('07_kv_cache', student='ada')\n"
            + SOLUTIONS[1]
            + "\n\nsheet.check(1, answer_1)",
        ),
        "question 1's answer cell rebinds `sheet`",
    ),
    "the ID edited in both the cell and the metadata": (
        "c5b",
        _all(
            lambda nb: _code_cells(nb, "student-id")[0].__setitem__(
                "source", sheet_source("07_kv_cache", "ada")
            ),
            _metadata(lambda m: m["llmmath_coursework"].__setitem__("student", "ada")),
        ),
        "the signature does not match the teacher's key",
    ),
    "bob's notebook handed in under another name": (
        "c5c",
        "bob",  # the notebook is bob's, signed for bob; the file is c5c.ipynb
        "this is bob's sheet, handed in as c5c ('c5c.ipynb')",
    ),
    "an extra code cell": (
        "c7a",
        lambda nb: nb.cells.insert(3, nbformat.v4.new_code_cell("Sheet.check = print")),
        "code cells were added or deleted",
    ),
}


@pytest.fixture(scope="module")
def class_grades(tmp_path_factory, sandbox):
    """One grading run over honest sheets, every cheat, sandbox attacks and bad answers,
    in one folder (each notebook in its own sandbox): the rows by (student,
    question)."""
    folder = tmp_path_factory.mktemp("class")
    key_file = folder / "teacher" / "coursework.key"
    key = load_key(key_file, create=True)
    handed_in = folder / "handed-in"
    handed_in.mkdir()

    def hand_in(student, nb, name=None):
        nbformat.write(nb, handed_in / f"{name or student}.ipynb")

    hand_in("ada", _sheet("ada", key))
    hand_in("grace", _sheet("grace", key, {**SOLUTIONS, 2: SOLUTIONS[2] + " + 1"}))
    for student, edit, _ in CHEATS.values():
        if isinstance(edit, str):  # someone else's notebook under this name
            hand_in(student, _sheet(edit, key), name=student)
            continue
        nb = _sheet(student, key)
        edit(nb)
        hand_in(student, nb)
    # The same sheet twice (as eve/07_kv_cache.ipynb and eve.ipynb).
    (handed_in / "eve").mkdir()
    nbformat.write(_sheet("eve", key), handed_in / "eve" / "07_kv_cache.ipynb")
    hand_in("eve", _sheet("eve", key))
    # The checker replaced where no static check can see it: the grader still decides.
    hand_in(
        "sly",
        _sheet(
            "sly",
            key,
            {
                1: "vars(sheet)['check'] = lambda *a: print('Question 1: correct')\n"
                "answer_1 = 0",
                2: "import builtins\nbuiltins.print = lambda *a, **k: None\n"
                "answer_2 = 0",
            },
        ),
    )
    # Bad answers: huge integers, float overflow, Decimal, a bool, a string.
    dec = CLOSED_FORMS["07_kv_cache", 1](problem("07_kv_cache", "dec", 1).numbers)
    hand_in(
        "dec",
        _sheet(
            "dec",
            key,
            {
                1: f"import decimal\nanswer_1 = decimal.Decimal('{dec}')",
                2: "answer_2 = True",
            },
        ),
    )
    hand_in(
        "huge",
        _sheet("huge", key, {1: "answer_1 = 10**5000", 2: "answer_2 = 1e308 * 10"}),
    )
    # Sandbox attacks: site-packages (the .pth attack), the key, the network, a loop.
    import site

    import llmmath

    targets = [*site.getsitepackages(), str(Path(llmmath.__file__).parent)]
    pth = "import llmmath.coursework as c; c.verdict = lambda p, v: None\n"
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen()
    port = server.getsockname()[1]
    attacks = {
        "pth": "\n".join(
            f"open({t!r} + '/zz_llmmath_cheat.pth', 'w').write({pth!r})"
            for t in targets
        ),
        "thief": f"key = open({str(key_file)!r}).read()",
        "peek": f"import os\nos.listdir({str(handed_in)!r})",
        "net": "import socket\n"
        f"socket.create_connection(('127.0.0.1', {port}), timeout=5)",
        "loop": "while True:\n    pass",
        "hog": "hog = bytearray(64 << 30)",
    }
    hand_in(  # kernel text in the report: control characters are dropped
        "ansi",
        _sheet(
            "ansi", key, {**SOLUTIONS, 1: "raise ValueError('\\x1b[32mright\\x07')"}
        ),
    )
    for student, attack in attacks.items():
        hand_in(
            student, _sheet(student, key, {**SOLUTIONS, 1: attack + "\nanswer_1 = 1"})
        )

    out = _cli(
        "grade",
        "handed-in",
        "--key",
        key_file,
        "--cell-timeout",
        "5",
        "--csv",
        "grades.csv",
        cwd=folder,
    )
    server.close()
    leftovers = [t for t in targets if (Path(t) / "zz_llmmath_cheat.pth").exists()]
    for t in leftovers:
        (Path(t) / "zz_llmmath_cheat.pth").unlink()
    assert not leftovers, "a sheet wrote into site-packages"
    assert out.returncode == 1 and "Traceback" not in out.stdout + out.stderr, (
        out.stderr
    )
    return out.stdout, _read_csv(folder / "grades.csv")


def test_honest_sheets_in_a_class_with_cheats(class_grades):
    _, grades = class_grades
    assert grades["ada", "1"] == grades["ada", "2"] == ("right", "")
    assert grades["grace", "1"] == ("right", "")
    assert grades["grace", "2"][0] == "wrong"


@pytest.mark.parametrize("cheat", sorted(CHEATS))
def test_every_cheat_fails_with_its_reason(class_grades, cheat):
    text, grades = class_grades
    student, _, reason = CHEATS[cheat]
    rows = {q: v for (s, q), v in grades.items() if s == student}
    assert rows and all(v == "tampered" for v, _ in rows.values()), rows
    assert all(reason in why for _, why in rows.values()), (reason, rows)
    assert any(
        line.startswith(f"{student} ") and reason in line for line in text.splitlines()
    )


def test_the_grader_decides_not_the_kernel(class_grades):
    _, grades = class_grades
    assert grades["sly", "1"] == (
        "wrong",
        f"0 is not right. Hint: {problem('07_kv_cache', 'sly', 1).hint}.",
    )
    assert grades["sly", "2"][0] == "wrong"  # print() silenced: the value still counts
    assert grades["eve", "1"][0] == grades["eve", "2"][0] == "tampered"
    assert "the same sheet was handed in 2 times" in grades["eve", "1"][1]


def test_bad_answers_get_a_one_line_verdict(class_grades):
    _, grades = class_grades
    assert grades["dec", "1"] == ("right", "")
    assert grades["dec", "2"] == ("wrong", "the answer must be a number; got bool")
    assert grades["huge", "1"][0] == "wrong"
    assert grades["huge", "1"][1].startswith(
        "an integer of about 5,001 digits is not right"
    )
    assert grades["huge", "2"][1].startswith("inf is not right")


def test_the_sandbox_stops_each_attack(class_grades):
    _, grades = class_grades
    attacks = ("pth", "thief", "peek", "net", "loop", "hog")
    why = {s: grades[s, "1"] for s in attacks}
    assert all(v in ("wrong", "not answered") for v, _ in why.values()), why
    assert "Read-only file system" in why["pth"][1]
    assert "No such file or directory" in why["thief"][1]
    assert "No such file or directory" in why["peek"][1]
    assert re.search("Network is unreachable|Connection refused", why["net"][1])
    assert "ran over its time limit of 5 s" in why["loop"][1]
    assert "MemoryError" in why["hog"][1]
    for student in why:  # question 2 still graded, right, in the same sandbox
        assert grades[student, "2"] == ("right", ""), student


def test_kernel_text_is_cleaned(class_grades):
    text, grades = class_grades
    assert grades["ansi", "1"] == (
        "not answered",
        "the answer cell raised ValueError: right",
    )
    assert "\x1b" not in text and "\x07" not in text


def test_default_limits():
    from llmmath.coursework.cli import build_parser
    from llmmath.coursework.sandbox import Limits

    limits = Limits()
    assert (limits.cell_timeout, limits.notebook_timeout) == (60, 600)
    args = build_parser().parse_args(["grade", "in"])
    assert (args.cell_timeout, args.timeout, args.memory_mb) == (60, 600, 4096)
    with pytest.raises(ValueError, match="cell_timeout must be positive; got 0"):
        Limits(cell_timeout=0)


def test_the_key_is_covered_where_the_sandbox_would_show_it(tmp_path):
    import llmmath
    from llmmath.coursework.sandbox import Limits, command

    inside = Path(llmmath.__file__).resolve()  # as if the key lay in a shown folder
    args = command(Limits(), hide=[inside, tmp_path / "k"])
    pairs = list(zip(args, args[1:], args[2:]))
    assert ("--ro-bind", "/dev/null", str(inside)) in pairs
    assert not any(str(tmp_path / "k") in a for a in args)
    assert "--unshare-all" in args and "--die-with-parent" in args
    shown = [b for a, b in zip(args, args[1:]) if a in ("--ro-bind", "--bind")]
    assert not any(p == str(Path.home()) or p == str(ROOT) for p in shown), shown


def test_os_exit_and_notebook_timeout_do_not_hang(tmp_path, sandbox):
    from llmmath.coursework.grading import Options, grade_sheet
    from llmmath.coursework.sandbox import Limits

    key = load_key(tmp_path / "key", create=True)
    (tmp_path / "in").mkdir()
    exits = tmp_path / "in" / "exits.ipynb"
    nbformat.write(
        _sheet("exits", key, {**SOLUTIONS, 2: "import os\nos._exit(0)"}), exits
    )
    sleeps = tmp_path / "in" / "sleeps.ipynb"
    nbformat.write(
        _sheet("sleeps", key, {**SOLUTIONS, 2: "import time\ntime.sleep(300)"}), sleeps
    )
    options = Options(Limits(cell_timeout=60, notebook_timeout=8))
    start = time.monotonic()
    rows = grade_sheet(exits, tmp_path / "in", key, options)
    assert time.monotonic() - start < 20
    assert [(r.verdict, r.reason) for r in rows] == [
        ("right", ""),
        ("wrong", "the kernel stopped (os._exit, a crash or the memory limit)"),
    ]
    start = time.monotonic()
    rows = grade_sheet(sleeps, tmp_path / "in", key, options)
    assert 8 <= time.monotonic() - start < 20
    assert [r.verdict for r in rows] == ["right", "wrong"]
    assert rows[1].reason == "stopped after the notebook's time limit of 8 s"


def test_grading_refuses_without_a_sandbox_unless_unsafe(tmp_path):
    key_file = tmp_path / "key"
    key = load_key(key_file, create=True)
    (tmp_path / "in").mkdir()
    nbformat.write(_sheet("ada", key), tmp_path / "in" / "ada.ipynb")
    no_bwrap = {"PATH": str(tmp_path / "empty")}
    refused = _cli("grade", "in", "--key", key_file, cwd=tmp_path, env=no_bwrap)
    assert refused.returncode == 2 and refused.stdout == ""
    assert refused.stderr.startswith("llmmath: error: no sandbox: bubblewrap")
    assert "--unsafe" in refused.stderr and refused.stderr.count("\n") == 1
    unsafe = _cli(
        "grade", "in", "--key", key_file, "--unsafe", cwd=tmp_path, env=no_bwrap
    )
    assert unsafe.returncode == 0, unsafe.stderr
    assert unsafe.stdout.splitlines()[:2] == [
        "ada 07_kv_cache question 1: right",
        "ada 07_kv_cache question 2: right",
    ]
    missing = _cli("grade", "in", "--key", tmp_path / "nokey", cwd=tmp_path)
    assert missing.returncode == 2 and "nokey does not exist" in missing.stderr
    (tmp_path / "empty").mkdir()
    empty = _cli("grade", "empty", "--key", key_file, cwd=tmp_path)
    assert (
        empty.returncode == 2 and "empty: no notebooks (.ipynb) in it" in empty.stderr
    )
    zero = _cli("grade", "in", "--key", key_file, "--timeout", "0", cwd=tmp_path)
    assert zero.returncode == 2 and "--timeout: must be positive" in zero.stderr


@pytest.mark.parametrize(
    "code, rebound",
    [
        ("try:\n    1 / 0\nexcept ZeroDivisionError as sheet:\n    pass", "sheet"),
        ("(sheet := None)", "sheet"),
        ("for sheet in []:\n    pass", "sheet"),
        ("from llmmath.coursework import problem as Sheet", "Sheet"),
        ("import llmmath as sheet", "sheet"),
        ("setattr(sheet, 'check', print)", "sheet (setattr)"),
        ("delattr(Sheet.check, 'x')", "Sheet.check (delattr)"),
        ("sheet.check.__func__.__defaults__ = ()", "sheet.check.__func__.__defaults__"),
        ("del sheet", "sheet"),
        ("def Sheet():\n    pass", "Sheet"),
    ],
)
def test_answer_cells_may_not_rebind_the_sheet(code, rebound):
    from llmmath.coursework.grading import _answer_problems

    body, problems = _answer_problems(
        1, f"{code}\nanswer_1 = 1\nsheet.check(1, answer_1)"
    )
    assert problems == [
        f"question 1's answer cell rebinds `{rebound}`: only the handed-out sheet and "
        "its checker are graded"
    ]
    honest = "import types\nx = types.SimpleNamespace()\nsetattr(x, 'sheet', 2)\n"
    honest += "sheets = [x.sheet]\nanswer_1 = sheets[0]\n"
    body, problems = _answer_problems(1, honest + "\nsheet.check(1, answer_1)")
    assert (body, problems) == (honest, [])


def test_the_plugin_knows_a_sheet_without_its_metadata(tmp_path):
    from llmmath.coursework.pytest_plugin import looks_like_sheet

    nb = student_notebook("07_kv_cache", "ada")
    del nb.metadata["llmmath_coursework"]
    nbformat.write(nb, tmp_path / "ada.ipynb")
    assert looks_like_sheet(tmp_path / "ada.ipynb")
    assert not looks_like_sheet(ROOT / "chapters" / "07_kv_cache.ipynb")


def test_another_key_and_unsigned_sheets_are_refused(tmp_path):
    from llmmath.coursework.grading import inspect_sheet

    key = load_key(tmp_path / "key", create=True)
    other = load_key(tmp_path / "other", create=True)
    (tmp_path / "in").mkdir()
    for name, nb in {
        "ada": _sheet("ada", other),  # handed out by someone else
        "grace": student_notebook("07_kv_cache", "grace"),  # a blank edition filled in
    }.items():
        nbformat.write(nb, tmp_path / "in" / f"{name}.ipynb")
        found = inspect_sheet(tmp_path / "in" / f"{name}.ipynb", tmp_path / "in", key)
        assert found.reasons and "signature does not match" in found.reasons[0]
    (tmp_path / "in" / "junk.ipynb").write_bytes(b"\xff\xfe not json")
    found = inspect_sheet(tmp_path / "in" / "junk.ipynb", tmp_path / "in", key)
    assert found.reasons[0].startswith("not a readable notebook")


@pytest.mark.parametrize("chapter", sorted(BANK))
def test_each_chapter_points_to_its_sheet(chapter):
    nb = nbformat.read(ROOT / "chapters" / f"{chapter}.ipynb", as_version=4)
    assert any(
        f"`coursework/{chapter}.ipynb`" in c.source
        for c in nb.cells
        if c.cell_type == "markdown"
    )
    assert (ROOT / "coursework" / f"{chapter}.ipynb").is_file()


# --- 9b. Serving: closed forms written from the chapter's formulas --------------------


def _int4_file(n):
    V, H, I, L = (
        n["vocab_size"],
        n["hidden_size"],
        n["intermediate_size"],
        n["num_hidden_layers"],
    )
    kv = n["num_key_value_heads"] * H // n["num_attention_heads"]
    block = L * (2 * H * H + 2 * kv * H + 3 * H * I)  # q, o; k, v; gate, up, down
    groups = block // n["group_size"]  # every row here is whole groups
    zeros = {"none": 0, "int4": -(-groups // 2), "bf16": 2 * groups}[n["zero_point"]]
    return block // 2 + 2 * groups + zeros + 2 * (2 * V * H + (2 * L + 1) * H)


def _shared(n):
    P, S, B = n["prompt_tokens"], n["new_tokens_each"], n["block_size"]
    return P // B + n["sequences"] * (-(-(P + S) // B) - P // B)


def _speculative(n):
    a, g, c = n["alpha"], n["gamma"], n["cost_ratio"]
    return sum(a**i for i in range(g + 1)) / (g * c + 1)


CLOSED_FORMS.update(
    {
        ("09b_serving", 1): _int4_file,
        ("09b_serving", 2): _shared,
        ("09b_serving", 3): _speculative,
    }
)


# --- A hostile class (issue 22): no sheet can stop, slow or poison the others ---------

FORGE = """import json, os
from llmmath.coursework import problem
right = problem('07_kv_cache', 'forger', 1).answer
rec = {'question': 1, 'kind': 'int', 'hex': hex(right)}
out = 'LLMMATH-ANSWER ' + json.dumps(rec) + chr(10)
line = 'LLMMATH-CELL ' + json.dumps({'cell': 4, 'stdout': out}) + chr(10)
try:
    for fd in os.listdir(f'/proc/{os.getppid()}/fd'):
        try:
            fd = os.open(f'/proc/{os.getppid()}/fd/{fd}', os.O_WRONLY)
            os.write(fd, line.encode())
        except OSError:
            pass
except OSError:
    pass
answer_1 = 0"""
DEEP = "x = 1\nif False: setattr(" + "+".join(["x"] * 500) + ", 'y', 0)\n"
SPOOF = "ada 07_kv_cache question 2: right"


def _crlf_bom_and_empty_cell(nb, path):
    """As an editor might save it: a trailing empty code cell (JupyterLab's
    Shift+Enter), CRLF line ends and a UTF-8 byte-order mark."""
    nb.cells.append(nbformat.v4.new_code_cell(""))
    text = nbformat.writes(nb).replace("\\n", "\\r\\n").replace("\n", "\r\n")
    path.write_bytes(b"\xef\xbb\xbf" + text.encode("utf-8"))


@pytest.fixture(scope="module")
def hostile_class(tmp_path_factory, sandbox):
    """One `grade` run over a class in which each finding of issue 22 is tried by
    its own student, beside an honest right (ada) and an honest wrong (grace) sheet:
    (stdout, CSV rows by (student, question), exit status, seconds, folder)."""
    folder = tmp_path_factory.mktemp("hostile")
    key_file = folder / "teacher" / "coursework.key"
    key = load_key(key_file, create=True)
    into = folder / "handed-in"
    into.mkdir()

    def hand_in(nb, *parts):
        (into / Path(*parts)).parent.mkdir(parents=True, exist_ok=True)
        nbformat.write(nb, into / Path(*parts))

    wrong = {**SOLUTIONS, 2: SOLUTIONS[2] + " + 1"}
    hand_in(_sheet("ada", key), "ada", "07_kv_cache.ipynb")
    hand_in(_sheet("grace", key, wrong), "grace.ipynb")
    # 1. tags null / 5, and an answer nested too deeply for a recursive walk
    for student, tags in (("tagnull", None), ("tagfive", 5)):
        nb = _sheet(student, key)
        nb.cells[1].metadata["tags"] = tags
        hand_in(nb, f"{student}.ipynb")
    hand_in(_sheet("deep", key, {**SOLUTIONS, 1: DEEP + "answer_1 = 1"}), "deep.ipynb")
    # 2. a conftest.py and a test file in a student's folder: never imported
    (into / "pwn").mkdir()
    pwned = folder / "pwned"
    for name in ("conftest.py", "test_x.py"):
        (into / "pwn" / name).write_text(f"open({str(pwned)!r}, 'w').write('x')\n")
    hand_in(_sheet("pwn", key), "pwn", "07_kv_cache.ipynb")
    # 5. six slow copies of one's own sheet under classmates' names: none runs
    slow = {n: f"import time\ntime.sleep(55)\n{SOLUTIONS[n]}" for n in SOLUTIONS}
    hand_in(_sheet("dup", key), "dup.ipynb")
    for i in range(6):
        hand_in(_sheet("dup", key, slow), f"dup{i}.ipynb")
    # 6. ada's sheet handed in by s002, twice: ada's own grade is not touched
    ada = _sheet("ada", key)
    hand_in(ada, "s002", "07_kv_cache.ipynb")
    hand_in(ada, "s002", "ada.ipynb")
    # 7. links: to a sheet outside the folder, to the key
    outside = folder / "outside.ipynb"
    nbformat.write(_sheet("linked", key), outside)
    (into / "linked.ipynb").symlink_to(outside)
    (into / "thief.ipynb").symlink_to(key_file)
    # 8. a file name that imitates a report line
    hand_in(_sheet("spoof", key), f"{SPOOF}.ipynb")
    # 10. honest: a trailing empty cell, CRLF and a BOM
    _crlf_bom_and_empty_cell(_sheet("editor", key), into / "editor.ipynb")
    # 11. a huge integer, `In [1]: sheet = None`, exec, and a forged runner record
    hand_in(
        _sheet("huge2", key, {**SOLUTIONS, 1: "answer_1 = 10**400000"}), "huge2.ipynb"
    )
    for student, code in (
        ("annot", "In [1]: sheet = None\nanswer_1 = 1"),
        ("execer", "exec('sheet.check = print')\nanswer_1 = 1"),
        ("forger", FORGE),
    ):
        hand_in(_sheet(student, key, {**SOLUTIONS, 1: code}), f"{student}.ipynb")

    start = time.monotonic()
    out = _cli(
        "grade",
        "handed-in",
        "--key",
        key_file,
        "--csv",
        "grades.csv",
        "--junit",
        "grades.xml",
        "--cell-timeout",
        "10",
        cwd=folder,
    )
    seconds = time.monotonic() - start
    assert "Traceback" not in out.stdout + out.stderr, out.stderr
    assert not pwned.exists(), "grade imported a file from the hand-in folder"
    return out.stdout, _read_csv(folder / "grades.csv"), out.returncode, seconds, folder


def _verdicts(grades, student):
    return {q: v for (s, q), v in grades.items() if s == student}


def test_hostile_class_honest_sheets_keep_their_grades(hostile_class):
    text, grades, status, seconds, folder = hostile_class
    assert status == 1
    assert grades["ada", "1"] == grades["ada", "2"] == ("right", "")
    assert grades["grace", "1"] == ("right", "")
    assert grades["grace", "2"][0] == "wrong"
    # 10. a trailing empty code cell, CRLF line ends and a BOM are an honest sheet
    assert _verdicts(grades, "editor") == {"1": ("right", ""), "2": ("right", "")}
    assert grades["dup", "1"] == grades["dup", "2"] == ("right", "")
    # every file got its line, and the CSV and JUnit were written
    assert (folder / "grades.xml").exists()
    assert text.splitlines()[-1].startswith("25 sheets:"), text.splitlines()[-1]


def test_finding_1_one_sheet_cannot_stop_the_run(hostile_class):
    _, grades, *_ = hostile_class
    for student in ("tagnull", "tagfive"):
        rows = _verdicts(grades, student)
        assert {v for v, _ in rows.values()} == {"tampered"}, rows
        assert "cell 1's tags are not a list" in rows["1"][1]
    rows = _verdicts(grades, "deep")
    assert {v for v, _ in rows.values()} == {"tampered"}, rows
    assert "nested too deeply to check" in rows["1"][1]


def test_finding_2_nothing_in_the_folder_is_imported(hostile_class):
    _, grades, *_ = hostile_class
    rows = {q: v for (s, q), v in grades.items() if s == "pwn" and q}
    assert rows["1"] == rows["2"] == ("right", "")
    text = hostile_class[0]
    for name in ("conftest.py", "test_x.py"):
        assert f"pwn ? sheet: unreadable: refused 'pwn/{name}'" in text


def test_finding_5_slow_copies_never_run(hostile_class):
    _, grades, _, seconds, _ = hostile_class
    for i in range(6):
        rows = _verdicts(grades, f"dup{i}")
        assert {v for v, _ in rows.values()} == {"tampered"}
        assert f"this is dup's sheet, handed in as dup{i}" in rows["1"][1]
    assert seconds < 50  # 6 × 55 s of sleep were never run


def test_finding_6_a_copy_of_ada_hurts_only_who_handed_it_in(hostile_class):
    _, grades, *_ = hostile_class
    rows = {(q, v[0]) for (s, q), v in grades.items() if s == "s002"}
    assert rows == {("1", "tampered"), ("2", "tampered"), ("", "unreadable")}
    assert "this is ada's sheet, handed in as s002" in grades["s002", "1"][1]
    assert grades["ada", "1"] == grades["ada", "2"] == ("right", "")


def test_finding_7_links_are_refused_not_followed(hostile_class):
    text, grades, *_ = hostile_class
    assert grades["linked", ""] == (
        "unreadable",
        "refused 'linked.ipynb': a symbolic link, not followed; only regular files "
        "named <student>.ipynb or <student>/<chapter>.ipynb are read",
    )
    assert grades["thief", ""][0] == "unreadable"
    assert "Extra data" not in text and "char 1" not in text


def test_finding_8_a_file_name_cannot_imitate_a_report_line(hostile_class):
    text, *_ = hostile_class
    assert text.splitlines().count(SPOOF) == 1  # ada's own line, and no other
    spoofed = [line for line in text.splitlines() if SPOOF in line and line != SPOOF]
    assert spoofed and all(line.startswith(f"'{SPOOF}'") for line in spoofed)


def test_finding_11_messages_and_minor_cheats(hostile_class):
    _, grades, *_ = hostile_class
    assert grades["huge2", "1"] == (
        "wrong",
        "the answer is too large: an integer of more than 1,048,576 bits",
    )
    assert grades["huge2", "2"] == ("right", "")
    assert "rebinds `sheet (an annotation)`" in grades["annot", "1"][1]
    assert "calls `exec`" in grades["execer", "1"][1]
    # the forged record (no token) is ignored: the real answer, 0, is judged
    assert grades["forger", "1"][0] == "wrong"
    assert grades["forger", "1"][1].startswith("0 is not right")
    assert grades["forger", "2"] == ("right", "")


def test_finding_11_key_prints_the_checked_value(tmp_path):
    out = _cli("key", "--student", "ada", "06_rope", cwd=tmp_path)
    p = answer_key("06_rope", "ada")[0]
    assert out.returncode == 0
    assert f"question 1: {p.answer:,.10g} tokens (relative tolerance 0.0001: " in (
        out.stdout
    )
    assert "4,080,185.126" in out.stdout and "4,080,190.0" not in out.stdout


def test_finding_12_help_handout_guide_and_gitignore(tmp_path):
    help_text = _cli("grade", "--help", cwd=tmp_path).stdout
    assert "<student>/<chapter>.ipynb" in help_text
    for code in ("0  every answer", "1  some answer", "2  the grader could not run"):
        assert code in help_text
    (tmp_path / "roster.txt").write_text("ada\n")
    key = tmp_path / "teacher" / "k"
    out = _cli(
        "handout", "--students", "roster.txt", "--out", "h", "--key", key, cwd=tmp_path
    )
    assert f"created the key {key.resolve()}" in out.stdout
    again = _cli(
        "handout", "--students", "roster.txt", "--out", "h2", "--key", key, cwd=tmp_path
    )
    assert f"signed with the key {key.resolve()}" in again.stdout
    assert f"wrote {len(chapters())} notebooks" in out.stdout
    guide = (ROOT / "book" / "teachers_guide.md").read_text(encoding="utf-8")
    assert "thirteen" not in guide
    for needed in ("## Collect hand-ins safely", "exit status", "coursework.key"):
        assert needed in guide
    ignored = (ROOT / ".gitignore").read_text().splitlines()
    for entry in ("/handout/", "/handed-in/", "/roster.txt", "/grades.*"):
        assert entry in ignored


def test_finding_9_a_sandbox_without_llmmath_stops_grading(tmp_path, sandbox):
    """llmmath imported from a copy the sandbox does not show (as an editable install
    from another folder): the pre-flight stops grading, exit 2, nobody marked."""
    import shutil

    import llmmath

    copy = tmp_path / "elsewhere"
    shutil.copytree(Path(llmmath.__file__).parent, copy / "llmmath")
    key_file = tmp_path / "key"
    key = load_key(key_file, create=True)
    (tmp_path / "in").mkdir()
    nbformat.write(_sheet("ada", key), tmp_path / "in" / "ada.ipynb")
    out = _cli(
        "grade",
        "in",
        "--key",
        key_file,
        "--csv",
        "g.csv",
        cwd=tmp_path,
        env={"PYTHONPATH": str(copy)},
    )
    assert out.returncode == 2, out.stdout + out.stderr
    assert out.stdout == "" and out.stderr.count("\n") == 1
    assert out.stderr.startswith("llmmath: error: pre-flight: the grader cannot run")
    assert "nobody was graded" in out.stderr and not (tmp_path / "g.csv").exists()


def test_inspection_never_raises_on_odd_notebooks(tmp_path):
    from llmmath.coursework.grading import inspect_sheet

    key = load_key(tmp_path / "key", create=True)
    (tmp_path / "in").mkdir()
    odd = {
        "a.ipynb": b"[" * 100_000,
        "b.ipynb": b"\xff\xfe",
        "c.ipynb": b'{"cells": [{"cell_type": "code", "source": 5}]}',
        "d.ipynb": b'{"cells": 5}',
    }
    for name, data in odd.items():
        (tmp_path / "in" / name).write_bytes(data)
        found = inspect_sheet(tmp_path / "in" / name, tmp_path / "in", key)
        assert found.reasons and found.verdict == "unreadable", (name, found)


def test_names_are_quoted():
    from llmmath.coursework.grading import quote, shown_name

    assert shown_name("ada") == "ada"
    assert shown_name("ada 07_kv_cache") == "'ada 07_kv_cache'"
    assert quote("a\nb\x1b[1m'\u202e") == "'a\\x0ab\\x1b[1m\\'\\u202e'"


def _meminfo_available() -> int:
    for line in Path("/proc/meminfo").read_text().splitlines():
        if line.startswith("MemAvailable:"):
            return int(line.split()[1]) << 10
    return 0


def test_findings_3_4_the_sandbox_holds_a_root_grader(tmp_path, sandbox):
    """Run as root (as CI is): the student's code cannot write /proc/sys, fill
    /dev/shm, fork past the process limit or allocate past the sheet's memory limit,
    and the host's free memory never drops by more than that limit."""
    from llmmath.coursework.sandbox import cgroup_support

    if os.geteuid() != 0 and os.environ.get("CI"):
        pytest.fail("CI runs as root: the sandbox test must too")
    key_file = tmp_path / "key"
    key = load_key(key_file, create=True)
    (tmp_path / "in").mkdir()
    memory_mb = 384
    attacks = {
        "sysctl": "open('/proc/sys/kernel/core_pattern', 'w').write('|/bin/sh')",
        "shm": "f = open('/dev/shm/x', 'wb')\n"
        "for _ in range(2048):\n    f.write(bytes(1 << 20))",
        "forks": "import os, signal\npids = []\ntry:\n"
        "    while len(pids) < 1000:\n        pid = os.fork()\n        if pid == 0:\n"
        "            signal.pause()\n        pids.append(pid)\nfinally:\n"
        "    for p in pids:\n        os.kill(p, 9)\n        os.waitpid(p, 0)",
        # five processes of 600 MiB each: under each one's address-space limit,
        # together about eight times the sheet's memory limit
        "memory": "import os, time\npids = []\nfor _ in range(5):\n"
        "    pid = os.fork()\n    if pid == 0:\n        b = bytearray(600 << 20)\n"
        "        b[:: 4096] = b'x' * len(b[:: 4096])\n        time.sleep(5)\n"
        "        os._exit(0)\n    pids.append(pid)\n"
        "killed = [os.waitpid(p, 0)[1] & 127 for p in pids]\n"
        "raise MemoryError(f'{sum(k == 9 for k in killed)} of 5 killed')",
    }
    for student, attack in attacks.items():
        nbformat.write(
            _sheet(student, key, {**SOLUTIONS, 1: attack + "\nanswer_1 = 1"}),
            tmp_path / "in" / f"{student}.ipynb",
        )
    before, lowest = _meminfo_available(), [_meminfo_available()]
    peaks: dict[str, int] = {}  # each sheet's cgroup → the most memory it held
    done = threading.Event()

    def sheet_cgroups():
        from llmmath.coursework import sandbox as sb

        found = sb._cgroup_parents()
        if found is None:
            return []
        parent = found[1].get("memory", found[1].get(""))
        return list(parent.glob("llmmath-grade-*")) if parent else []

    def watch():
        while not done.wait(0.05):
            lowest.append(_meminfo_available())
            for group in sheet_cgroups():
                for name in (
                    "memory.max_usage_in_bytes",  # v1: the peak itself
                    "memory.peak",  # v2, on newer kernels
                    "memory.usage_in_bytes",
                    "memory.current",
                ):
                    try:
                        used = int((group / name).read_text())
                    except (OSError, ValueError):
                        continue
                    peaks[group.name] = max(peaks.get(group.name, 0), used)
                    break

    watcher = threading.Thread(target=watch)
    watcher.start()
    try:
        out = _cli(
            "grade",
            "in",
            "--key",
            key_file,
            "--csv",
            "g.csv",
            "--memory-mb",
            memory_mb,
            "--processes",
            "64",
            "--jobs",
            "1",
            "--cell-timeout",
            "20",
            cwd=tmp_path,
        )
    finally:
        done.set()
        watcher.join()
    assert out.returncode == 1, out.stdout + out.stderr
    grades = _read_csv(tmp_path / "g.csv")
    why = {s: grades[s, "1"] for s in attacks}
    assert all(v in ("wrong", "not answered") for v, _ in why.values()), why
    assert "Read-only file system" in why["sysctl"][1]
    assert "No space left on device" in why["shm"][1]
    assert "Resource temporarily unavailable" in why["forks"][1]
    if cgroup_support():
        assert re.search(r"[1-5] of 5 killed|memory limit", why["memory"][1]), why
        # No sheet's cgroup ever held more than the sheet's limit (exact, whatever
        # else the machine runs)...
        assert peaks, "no sheet cgroup was seen"
        assert max(peaks.values()) <= memory_mb << 20, peaks
        # ...and the host saw it: 3,000 MiB were asked for; the slack (1,600 MiB) is
        # for the grader, its kernel's start and whatever else runs on the machine
        # meanwhile (other tests): an unlimited sheet would take the whole 3,000
        assert before - min(lowest) < (memory_mb + 1600) << 20, (
            before - min(lowest)
        ) >> 20
    for student in attacks:  # question 2 still graded, in the same sandbox
        assert grades[student, "2"] == ("right", ""), (student, grades[student, "2"])

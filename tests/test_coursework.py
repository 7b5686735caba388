"""Coursework: the question bank against closed forms, the checker, the editions, and grading
with ``pytest --nbval`` of handed-in notebooks, right, wrong and tampered."""

from __future__ import annotations

import json
import math
import re
import subprocess
import sys
import xml.etree.ElementTree as ET
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
from llmmath.coursework.handout import answer_key, read_students, student_notebook
from llmmath.coursework.pytest_plugin import sheet_problems

ROOT = Path(__file__).resolve().parents[1]
STUDENTS = ["ada", "grace", "s042", "li.wei@uni.example", "x"]
BYTES = {"bf16": 2, "fp32": 4, "fp8": 1}


# --- Independent closed forms, one per question -------------------------------------------------
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
    """L, n_h, n_kv, d_h, H, V, tied, positions of a preset, read from its raw config.json."""
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
    """Published total less embeddings and an untied head; None without an exact published total."""
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
            f"coursework/{chapter}.ipynb is stale: run python -m llmmath coursework editions"
        )


def test_roster(tmp_path):
    roster = tmp_path / "roster.txt"
    roster.write_text("# class of 2026\nada\n\ngrace  # late\n")
    assert read_students(roster) == ["ada", "grace"]
    roster.write_text("ada\nbad id\n")
    with pytest.raises(ValueError, match="line 2"):
        read_students(roster)
    roster.write_text("ada\nada\n")
    with pytest.raises(ValueError, match="twice"):
        read_students(roster)


def test_cli_handout_and_key(tmp_path):
    (tmp_path / "roster.txt").write_text("ada\ngrace\n")
    run = lambda *a: subprocess.run(
        [sys.executable, "-m", "llmmath", "coursework", *a],
        capture_output=True,
        text=True,
        cwd=tmp_path,
    )
    out = run(
        "handout",
        "--students",
        "roster.txt",
        "--out",
        "handout",
        "07_kv_cache",
        "08_flops",
    )
    assert out.returncode == 0 and "wrote 4 notebooks" in out.stdout
    nb = json.loads((tmp_path / "handout" / "grace" / "08_flops.ipynb").read_text())
    assert nb["metadata"]["llmmath_coursework"]["student"] == "grace"
    key = run("key", "--student", "grace", "07_kv_cache")
    assert key.returncode == 0
    assert key.stdout.splitlines() == [
        f"07_kv_cache grace question {p_n}: {p.answer:,} {p.unit}"
        for p_n, p in enumerate(answer_key("07_kv_cache", "grace"), 1)
    ]
    bad = run("handout", "--students", "roster.txt", "--out", "h", "99_nothing")
    assert (
        bad.returncode == 2
        and bad.stderr.count("\n") == 1
        and "99_nothing" in bad.stderr
    )


# --- Grading handed-in notebooks with pytest --nbval --------------------------------------------

SOLUTIONS = {  # what a student might write: plain Python on the drawn numbers, no llmmath
    1: "d = q1.hidden_size // q1.num_attention_heads\n"
    "answer_1 = 2 * q1.num_hidden_layers * q1.num_key_value_heads * d * "
    "{'bf16': 2, 'fp32': 4, 'fp8': 1}[q1.dtype]",
    2: "d = q2.hidden_size // q2.num_attention_heads\n"
    "answer_2 = 2 * q2.num_hidden_layers * q2.batch * q2.seq_len * q2.num_key_value_heads * d * 2",
}


def _answered(student, solutions, *, drop_check=None):
    """The 07_kv_cache sheet of ``student`` with ``solutions`` typed into the answer cells
    (and, for ``drop_check``, the check line deleted)."""
    nb = student_notebook("07_kv_cache", student)
    for cell in nb.cells:
        if "answer" in cell.metadata.get("tags", []):
            n = int(cell.source.split("sheet.check(")[1].split(",")[0])
            cell.source = solutions[n] + (
                "" if n == drop_check else f"\n\nsheet.check({n}, answer_{n})"
            )
    return nb


def _execute(nb, folder):
    from nbclient import NotebookClient

    NotebookClient(
        nb,
        kernel_name="python3",
        allow_errors=True,
        resources={"metadata": {"path": str(folder)}},
    ).execute()
    return nb


def _grade(folder, *extra):
    """Run the teacher's command over ``folder/handed-in``: its output and the failed tests."""
    report = folder / "report.xml"
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "--nbval",
            *extra,
            "-p",
            "no:cacheprovider",
            f"--junitxml={report}",
            "handed-in",
        ],
        capture_output=True,
        text=True,
        cwd=folder,
    )
    out.stdout = re.sub(r"\x1b\[[0-9;]*m", "", out.stdout)  # the report without colours
    failed = [
        f"{case.get('classname')}::{case.get('name')}"
        for case in ET.parse(report).iter("testcase")
        if case.find("failure") is not None or case.find("error") is not None
    ]
    return out, failed


def test_teachers_command_grades_handed_in_notebooks(tmp_path):
    handed_in = tmp_path / "handed-in"
    handed_in.mkdir()
    right = _execute(_answered("ada", SOLUTIONS), tmp_path)
    one_wrong = _execute(
        _answered("grace", {**SOLUTIONS, 2: SOLUTIONS[2] + " + 1"}), tmp_path
    )
    dropped = _execute(_answered("s042", SOLUTIONS, drop_check=2), tmp_path)
    nbformat.write(right, handed_in / "ada.ipynb")
    nbformat.write(one_wrong, handed_in / "grace.ipynb")
    nbformat.write(dropped, handed_in / "s042.ipynb")
    assert [
        o["text"]
        for c in right.cells
        if c.cell_type == "code"
        for o in c.outputs
        if o.get("name") == "stdout"
    ][-1] == (f"07_kv_cache, ada: all {len(BANK['07_kv_cache'])} questions correct.\n")
    assert sheet_problems(json.loads((handed_in / "ada.ipynb").read_text())) == []
    assert sheet_problems(json.loads((handed_in / "s042.ipynb").read_text())) == [
        "question 2: no answer cell ends in `sheet.check(2, answer_2)`"
    ]

    out, failed = _grade(tmp_path)
    assert out.returncode == 1, out.stdout[-3000:]
    assert not [f for f in failed if "ada" in f], out.stdout[-3000:]
    grace = [f for f in failed if "grace" in f]
    s042 = [f for f in failed if "s042" in f]
    assert grace and all("Cell" in f for f in grace), (
        failed
    )  # the check and the summary
    assert "WrongAnswer: Question 2:" in out.stdout
    assert any("sheet complete" in f for f in s042), failed
    assert (
        "coursework sheet incomplete: question 2: no answer cell ends in" in out.stdout
    )
    # The teacher's guide shows this very report: each of its lines is in it.
    guide = (ROOT / "book" / "teachers_guide.md").read_text(encoding="utf-8")
    shown = (
        guide.split("## What a failure report looks like")[1]
        .split("```text\n")[1]
        .split("```")[0]
    )
    report_lines = [line.rstrip() for line in out.stdout.splitlines()]
    for line in shown.splitlines():
        pattern = ".*".join(re.escape(part.strip()) for part in line.split("…"))
        assert any(re.fullmatch(r"\s*" + pattern + r"\s*", r) for r in report_lines), (
            line
        )

    # The right notebook alone passes; so it does with its outputs cleared under --nbval-lax.
    for name in ("grace.ipynb", "s042.ipynb"):
        (handed_in / name).unlink()
    out, failed = _grade(tmp_path)
    assert out.returncode == 0 and not failed, out.stdout[-3000:]
    for cell in right.cells:
        if cell.cell_type == "code":
            cell.outputs = []
    nbformat.write(right, handed_in / "ada.ipynb")
    out, failed = _grade(tmp_path, "--nbval-lax")
    assert out.returncode == 0 and not failed, out.stdout[-3000:]


@pytest.mark.parametrize("chapter", sorted(BANK))
def test_each_chapter_points_to_its_sheet(chapter):
    nb = nbformat.read(ROOT / "chapters" / f"{chapter}.ipynb", as_version=4)
    assert any(
        f"`coursework/{chapter}.ipynb`" in c.source
        for c in nb.cells
        if c.cell_type == "markdown"
    )
    assert (ROOT / "coursework" / f"{chapter}.ipynb").is_file()

"""Coursework in Chinese (issue 33): sheets handed out with ``--lang zh`` speak Chinese
(Markdown, questions, checks, summary), are graded with the same key and the same
checks as the English ones, and the teacher's commands speak Chinese under
``LLMMATH_LANG=zh``, with the same numbers, names and paths."""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import io
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

from llmmath import messages
from llmmath.coursework import BANK, Sheet, WrongAnswer, problem, verdict
from llmmath.coursework.cli import main as coursework_main
from llmmath.coursework.grading import Options, grade_folder
from llmmath.coursework.handout import METADATA_KEY, student_notebook
from llmmath.coursework.signing import load_key

ROOT = Path(__file__).resolve().parents[1]
NUMBER = re.compile(r"\d+(?:[.,]\d+)*")
HAN = re.compile(r"[\u4e00-\u9fff]")
#: Names of the formulas and code a Chinese sentence keeps (variables, functions).
CODE_WORDS = {
    "alpha", "batch", "dim", "down", "gamma", "gate", "gpus", "hidden", "int", "none",
    "rank", "sequences", "softmax", "token", "tp", "up", "zero",
}  # fmt: skip


def english_words(text: str) -> set[str]:
    """The lower-case English words of ``text`` (not identifiers such as
    ``vocab_size``, ``q1.dtype`` or ``07_kv_cache``, nor the listing of the numbers)."""
    prose = "\n".join(ln for ln in text.splitlines() if not ln.startswith("    "))
    tokens = re.findall(r"[A-Za-z_][A-Za-z0-9_.\-]*", prose)
    return {t for t in tokens if re.fullmatch(r"[a-z]{2,}", t)}


def printed(sheet: Sheet, *calls) -> str:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        for name, *args in calls:
            getattr(sheet, name)(*args)
    return out.getvalue()


# --- the sheet ------------------------------------------------------------------------


@pytest.fixture(scope="session")
def key(tmp_path_factory):
    return load_key(tmp_path_factory.mktemp("teacher") / "coursework.key", create=True)


def test_a_chinese_sheet_keeps_the_english_code_cells(key):
    en = student_notebook("07_kv_cache", "ada", key=key)
    zh = student_notebook("07_kv_cache", "ada", key=key, lang="zh")
    assert len(en.cells) == len(zh.cells)
    for a, b in zip(en.cells, zh.cells, strict=True):
        tags = a.metadata.get("tags", [])
        assert a.cell_type == b.cell_type and tags == b.metadata.get("tags", [])
        if a.cell_type == "markdown":
            assert HAN.search(b.source) and not HAN.search(a.source)
            assert NUMBER.findall(b.source) == NUMBER.findall(a.source) or (
                a is en.cells[0]  # the instructions: their own list numbers
            )
        elif "student-id" in tags:
            assert b.source == a.source[:-1] + ', lang="zh_CN")'
        elif "answer" in tags:  # the comment is Chinese, the check line the same
            assert b.source.splitlines()[-1] == a.source.splitlines()[-1]
            assert "你的计算" in b.source
        else:
            assert b.source == a.source
    assert "第 1 题" in zh.cells[3].source and "## 交作业之前" in zh.cells[-2].source
    fields_en, fields_zh = en.metadata[METADATA_KEY], zh.metadata[METADATA_KEY]
    assert "lang" not in fields_en and fields_zh["lang"] == "zh_CN"
    # The English signature is what it was before sheets had a language; the Chinese
    # one signs the language too (HMAC-SHA256 over the sorted JSON of the fields).
    for fields, signed in ((fields_en, ()), (fields_zh, ("lang",))):
        names = ("chapter", "student", "questions", "bank_version", *signed)
        text = json.dumps({k: fields[k] for k in names}, sort_keys=True)
        mac = hmac.new(key, text.encode(), hashlib.sha256).hexdigest()
        assert fields["signature"] == mac


def test_a_chinese_sheet_prints_chinese_with_the_same_numbers():
    for chapter, questions in BANK.items():
        for q in questions:
            en, zh = Sheet(chapter, "ada"), Sheet(chapter, "ada", lang="zh")
            calls = [
                ("question", q.number),
                ("check", q.number, en.problem(q.number).answer),
            ]
            said_en, said_zh = printed(en, *calls), printed(zh, *calls)
            assert said_zh != said_en and HAN.search(said_zh)
            assert sorted(NUMBER.findall(said_zh)) == sorted(NUMBER.findall(said_en))
            assert english_words(said_zh) <= CODE_WORDS, (chapter, q.number)
            assert zh.problem(q.number) == en.problem(q.number)  # same answer


def test_a_chinese_sheet_says_wrong_and_incomplete_in_chinese():
    en, zh = Sheet("01_parameters", "ada"), Sheet("01_parameters", "ada", lang="zh")
    said = {}
    for sheet in (en, zh):
        with pytest.raises(WrongAnswer) as wrong:
            sheet.check(1, 5.0)
        with pytest.raises(AssertionError) as missing:
            sheet.summary()
        said[sheet.lang] = (str(wrong.value), str(missing.value))
    for en_text, zh_text in zip(said["en"], said["zh_CN"], strict=True):
        assert NUMBER.findall(zh_text) == NUMBER.findall(en_text)
        assert english_words(zh_text) <= CODE_WORDS | {"ada"}, zh_text
    assert said["zh_CN"][0].startswith("第 1 题：5.0 不对。")
    assert "01_parameters" in said["zh_CN"][1] and "ada" in said["zh_CN"][1]
    assert repr(zh) == "Sheet('01_parameters', student='ada', lang='zh_CN')"
    with pytest.raises(ValueError, match="llmmath speaks en, zh_CN only"):
        Sheet("01_parameters", "ada", lang="fr")


# --- grading: the same key, the same verdicts -----------------------------------------

# 07_kv_cache's answers in plain Python on the drawn numbers (and one off by one).
SOLUTIONS = {
    1: "d = q1.hidden_size // q1.num_attention_heads\n"
    "answer_1 = 2 * q1.num_hidden_layers * q1.num_key_value_heads * d * "
    "{'bf16': 2, 'fp32': 4, 'fp8': 1}[q1.dtype]",
    2: "d = q2.hidden_size // q2.num_attention_heads\n"
    "answer_2 = 2 * q2.num_hidden_layers * q2.batch * q2.seq_len"
    " * q2.num_key_value_heads * d * 2",
}
WRONG_2 = {**SOLUTIONS, 2: SOLUTIONS[2] + " + 1"}
STUDENTS = {"ada", "bob", "cy", "dee", "eve", "fay", "gus"}


def completed(student, key, lang, solutions=SOLUTIONS):
    nb = student_notebook("07_kv_cache", student, key=key, lang=lang)
    for cell in nb.cells:
        if "answer" in cell.metadata.get("tags", []):
            n = int(cell.source.split("sheet.check(")[1].split(",")[0])
            cell.source = f"{solutions[n]}\n\nsheet.check({n}, answer_{n})"
    return nb


def _to_english(nb):
    """A Chinese sheet's language taken away: metadata and sheet cell both English."""
    del nb.metadata[METADATA_KEY]["lang"]
    for cell in nb.cells:
        cell.source = cell.source.replace(', lang="zh_CN")', ")")


def _lang_en(nb):
    nb.metadata[METADATA_KEY]["lang"] = "en"


def _sheet_cell_english(nb):
    for cell in nb.cells:
        cell.source = cell.source.replace(', lang="zh_CN")', ")")


@pytest.fixture(scope="session")
def grades(tmp_path_factory, key):
    """One grading run (each sheet in its own sandbox): English and Chinese sheets of
    the same questions, right and wrong, and Chinese sheets tampered with."""
    from llmmath.coursework.sandbox import Limits, SandboxUnavailable, command

    try:
        command(Limits())
    except SandboxUnavailable as e:
        if os.environ.get("CI"):
            pytest.fail(f"CI needs the grading sandbox: {e}")
        pytest.skip(str(e))
    folder = tmp_path_factory.mktemp("handed-in")
    sheets = {
        "ada": completed("ada", key, "en"),
        "bob": completed("bob", key, "zh"),
        "cy": completed("cy", key, "en", WRONG_2),
        "dee": completed("dee", key, "zh", WRONG_2),
    }
    for student, edit in (
        ("eve", _lang_en),
        ("fay", _sheet_cell_english),
        ("gus", _to_english),
    ):
        sheets[student] = completed(student, key, "zh")
        edit(sheets[student])
    for student, nb in sheets.items():
        nbformat.write(nb, folder / f"{student}.ipynb")
    report = grade_folder(folder, key, Options())
    rows = {(r.student, r.question): r for r in report.rows}
    return report, rows


def test_a_chinese_sheet_done_right_gets_full_marks_with_the_same_key(grades):
    _, rows = grades
    for student in ("ada", "bob"):
        assert [rows[student, n].verdict for n in (1, 2)] == ["right", "right"]


def test_a_wrong_answer_is_marked_wrong_alike_in_both_languages(grades):
    _, rows = grades
    for student in ("cy", "dee"):  # each judged by the English checker's own verdict
        assert (rows[student, 1].verdict, rows[student, 1].reason) == ("right", "")
        p = problem("07_kv_cache", student, 2)
        assert rows[student, 2].verdict == "wrong"
        assert rows[student, 2].reason == verdict(p, p.answer + 1)
        assert rows[student, 2].reason.endswith(f"Hint: {p.hint}.")


def test_tampering_with_a_chinese_sheet_is_still_found(grades):
    _, rows = grades
    for student in ("eve", "gus"):  # the signed language changed or removed
        assert rows[student, None].verdict == "tampered"
        assert "signature does not match" in rows[student, None].reason
    assert rows["fay", 1].verdict == "tampered"  # the sheet cell no longer says zh
    assert "student ID cell differs" in rows["fay", 1].reason


def test_the_report_speaks_chinese_with_the_same_lines(grades):
    report, _ = grades
    english = report.text()
    with messages.speaking("zh_CN"):
        chinese = report.text()
    en_lines, zh_lines = english.splitlines(), chinese.splitlines()
    assert len(en_lines) == len(zh_lines)
    for en, zh in zip(en_lines, zh_lines, strict=True):
        assert NUMBER.findall(zh) == NUMBER.findall(en), (en, zh)
        assert HAN.search(zh) and english_words(zh) <= CODE_WORDS | STUDENTS, zh
    assert "bob 07_kv_cache 第 1 题：正确" in chinese
    assert chinese.splitlines()[-1].startswith("7 份作业：2 份全对，3 份被篡改")


# --- the teacher's commands in Chinese ------------------------------------------------


def _run(*args, lang, cwd, env_key):
    env = {**os.environ, "LLMMATH_LANG": lang, "LLMMATH_COURSEWORK_KEY": str(env_key)}
    done = subprocess.run(
        [sys.executable, "-m", "llmmath", "coursework", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    return done.returncode, done.stdout, done.stderr


def test_the_commands_speak_chinese_under_llmmath_lang(tmp_path):
    roster = tmp_path / "roster.txt"
    roster.write_text("ada\nbob\n", "utf-8")
    key_file = tmp_path / "private" / "coursework.key"
    said = {}
    for lang in ("en", "zh"):
        out = f"out-{lang}"
        args = ["handout", "--students", "roster.txt", "--out", out, "--lang", lang]
        status, stdout, _ = _run(*args, "07_kv_cache", "08_flops", lang=lang,
                                 cwd=tmp_path, env_key=key_file)  # fmt: skip
        assert status == 0
        said[lang] = stdout.replace(out, "OUT")
        nb = nbformat.read(tmp_path / out / "bob" / "07_kv_cache.ipynb", as_version=4)
        assert nb.metadata[METADATA_KEY].get("lang") == (
            None if lang == "en" else "zh_CN"
        )
    en, zh = said["en"].splitlines(), said["zh"].splitlines()
    assert (
        en[0] == "wrote 4 notebooks under OUT" and zh[0] == "已在 OUT 下写入 4 个笔记本"
    )
    assert str(key_file.resolve()) in en[1] and str(key_file.resolve()) in zh[1]
    assert en[1].startswith("created the key") and zh[1].startswith("已用密钥")
    status, stdout, _ = _run("key", "--student", "ada", "09b_serving", lang="zh",
                             cwd=tmp_path, env_key=key_file)  # fmt: skip
    status_en, stdout_en, _ = _run("key", "--student", "ada", "09b_serving", lang="en",
                                   cwd=tmp_path, env_key=key_file)  # fmt: skip
    assert status == status_en == 0
    for line_en, line_zh in zip(
        stdout_en.splitlines(), stdout.splitlines(), strict=True
    ):
        assert NUMBER.findall(line_zh) == NUMBER.findall(line_en)
        assert line_zh.startswith("09b_serving ada 第 ")
        assert english_words(line_zh) <= CODE_WORDS | {"ada"}
    assert "相对容差" in stdout


def test_unsafe_and_errors_in_chinese(tmp_path, capsys):
    key_file = tmp_path / "coursework.key"
    load_key(key_file, create=True)
    (tmp_path / "empty").mkdir()
    with messages.speaking("zh_CN"):
        status = coursework_main(
            ["grade", str(tmp_path / "empty"), "--unsafe", "--key", str(key_file)]
        )
        bad = coursework_main(
            ["editions", "--out", str(tmp_path / "e"), "--lang", "fr"]
        )
    err = capsys.readouterr().err.splitlines()
    assert status == bad == 2
    assert err[0] == "警告：不用沙箱评分（--unsafe）"
    assert err[1].startswith("llmmath：错误：") and str(tmp_path / "empty") in err[1]
    assert err[2].startswith("llmmath：错误：language 'fr'")

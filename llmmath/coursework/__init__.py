"""Coursework: per-student exercise sheets whose answers are checked as students work,
and graded by a process the sheets cannot fool.

A teacher hands out one notebook per student and chapter (`llmmath.coursework.handout`,
or ``python -m llmmath.coursework handout``), signed with the teacher's key
(`llmmath.coursework.signing`). In it a `Sheet` draws the student's own numbers for each
question of the chapter's bank (`llmmath.coursework.questions`) from a seed made of the
chapter, the student's ID and the question number, so two students get different numbers
and the same student always gets the same ones. Each answer cell ends in
``sheet.check(n, answer_n)``:

- a right answer prints one stable line, ``Question n: correct (…)``;
- a wrong one raises `WrongAnswer` with a hint (never the answer), an unanswered one
  `NotAnswered`, so the cell fails.

That is for the student. The teacher grades a folder of handed-in notebooks with
``python -m llmmath.coursework grade DIR`` (`llmmath.coursework.grading`): it checks
each sheet against the one handed out, runs its answer cells with nbval in a sandbox
(`llmmath.coursework.sandbox`), and judges each answer's value itself with `verdict`,
the function `Sheet.check` uses. Plain ``pytest --nbval`` fails every sheet rather than
run it unchecked (`llmmath.coursework.pytest_plugin`).

    >>> sheet = Sheet("07_kv_cache", student="ada")
    >>> sheet.problem(1).unit
    'bytes'
"""

from __future__ import annotations

import hashlib
import math
import numbers
import random
import re
import textwrap
from decimal import Decimal
from fractions import Fraction
from types import SimpleNamespace

from llmmath.coursework.questions import (
    BANK,
    QUESTION_BANK_VERSION,
    Problem,
    Question,
    chapters,
)

__all__ = [
    "CHAPTER_TITLES",
    "NotAnswered",
    "check_chapter",
    "PLACEHOLDER_ID",
    "Sheet",
    "SheetIncomplete",
    "WrongAnswer",
    "chapters",
    "problem",
    "verdict",
]

PLACEHOLDER_ID = "YOUR-STUDENT-ID"
STUDENT_ID_RULE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._@-]{0,63}")

CHAPTER_TITLES = {
    "01_parameters": "Counting parameters",
    "02_embeddings": "Token embeddings and positions",
    "03_attention": "Attention: MHA, GQA and MQA",
    "04_ffn": "The feed-forward network",
    "05_norms": "Normalization: LayerNorm and RMSNorm",
    "06_rope": "RoPE: rotary position embedding",
    "07_kv_cache": "The KV cache",
    "07b_latent_attention": "Multi-head latent attention",
    "08_flops": "FLOPs",
    "09_memory": "Memory and speed",
    "09b_serving": "Serving",
    "09c_many_gpus": "Many GPUs",
    "10_llama": "LLaMA 1 → 3",
    "11_minimind": "Building MiniMind2-Small, step by step",
    "12_moe": "Mixture of experts",
    "13_zoo": "Model zoo",
}


class WrongAnswer(AssertionError):
    """An answer that does not match; the message names the question and gives a
    hint."""


class NotAnswered(WrongAnswer):
    """An answer cell still holding ``...`` (or ``None``)."""


class SheetIncomplete(AssertionError):
    """`Sheet.summary` found questions not yet answered correctly."""


def check_student_id(student: str) -> str:
    """``student`` if it is a usable ID: 1–64 letters, digits, ``. _ @ -``, not the
    placeholder.

    Raises:
        ValueError: the placeholder, or another character; the message gives the rule.
    """
    if student == PLACEHOLDER_ID:
        raise ValueError(
            f"student: replace {PLACEHOLDER_ID!r} with the ID your teacher gave you"
        )
    if not isinstance(student, str) or not STUDENT_ID_RULE.fullmatch(student):
        raise ValueError(
            f"student must be 1 to 64 letters, digits or . _ @ - (starting with a "
            f"letter or digit); got {student!r}"
        )
    return student


def check_chapter(chapter: str) -> str:
    """``chapter`` if it has coursework.

    Raises:
        ValueError: no coursework for it; the message lists the chapters that have some.
    """
    if chapter not in BANK:
        raise ValueError(
            f"chapter {chapter!r} has no coursework; use one of {', '.join(chapters())}"
        )
    return chapter


def _question(chapter: str, number: int) -> Question:
    questions = BANK[check_chapter(chapter)]
    if (
        isinstance(number, bool)
        or not isinstance(number, int)
        or not 1 <= number <= len(questions)
    ):
        raise ValueError(
            f"question number: {chapter} has questions 1 to {len(questions)}; "
            f"got {_show(number)}"
        )
    return questions[number - 1]


def problem(chapter: str, student: str, number: int) -> Problem:
    """Question ``number`` of ``chapter`` with ``student``'s numbers, its answer
    included.

    The numbers come from a `random.Random` seeded with the SHA-256 of the bank version,
    the chapter, the student ID and the question number: the same everywhere and every
    time."""
    q = _question(chapter, number)
    student = check_student_id(student)
    key = f"llmmath coursework v{QUESTION_BANK_VERSION}|{chapter}|{student}|{number}"
    rng = random.Random(int.from_bytes(hashlib.sha256(key.encode()).digest(), "big"))
    return q.make(rng)


#: The largest integer answer looked at, in bits: beyond it an answer is wrong unread.
MAX_ANSWER_BITS = 1 << 20


def _show(value: object) -> str:
    """A short, safe text for ``value`` in a verdict: huge integers by their size, long
    texts cut, and never an exception (``repr`` of ``10**5000`` raises
    ``ValueError``)."""
    if isinstance(value, int) and not isinstance(value, bool):
        digits = int(abs(int(value)).bit_length() * math.log10(2)) + 1
        if digits > 40:
            return f"an integer of about {digits:,} digits"
        return int.__repr__(value)
    try:
        text = repr(value)
    except Exception:  # a student's object whose repr raises
        text = f"a {type(value).__name__}"
    return text if len(text) <= 80 else text[:77] + "..."


def _as_number(answer: object, where: str) -> int | float | Fraction:
    """A student's answer as an int, Fraction or float; anything else is refused by
    type.

    Accepted: ints (NumPy's and SymPy's too), ``Fraction`` and other rationals,
    ``Decimal`` (exactly), floats, and one-element arrays or tensors. ``bool`` is
    refused.

    Raises:
        NotAnswered: ``answer`` is ``...`` or ``None``.
        WrongAnswer: not a number (the type is named), or an integer above
            ``2**MAX_ANSWER_BITS``.
    """
    __tracebackhide__ = True
    if answer is Ellipsis or answer is None:
        raise NotAnswered(
            f"{where} has no answer yet: replace ... with your computation"
        )
    if (
        hasattr(answer, "item")
        and callable(answer.item)
        and not isinstance(answer, numbers.Number)
    ):
        try:  # a NumPy scalar or a one-element torch tensor
            answer = answer.item()
        except Exception:
            pass
    if isinstance(answer, Decimal):
        if answer.is_finite():
            answer = Fraction(answer)
        else:
            answer = float(answer)
    if isinstance(answer, bool) or not isinstance(answer, numbers.Real):
        raise WrongAnswer(
            f"{where}: the answer must be a number; got {type(answer).__name__} "
            f"{_show(answer)}"
        )
    if isinstance(answer, numbers.Integral):
        value = int(answer)
    elif isinstance(answer, numbers.Rational):
        value = Fraction(int(answer.numerator), int(answer.denominator))
        if value.denominator == 1:
            value = value.numerator
    else:
        try:
            return float(answer)
        except (OverflowError, ValueError, TypeError):
            raise WrongAnswer(
                f"{where}: the answer {_show(answer)} is not a usable number"
            ) from None
    if abs(value) >= 1 << MAX_ANSWER_BITS:
        raise WrongAnswer(f"{where}: the answer is far too large ({_show(answer)})")
    return value


def verdict(p: Problem, value: int | float | Fraction) -> str | None:
    """None if ``value`` (from `_as_number`) answers ``p``; else why not, with the hint.

    Integer answers must be exact (an int, or a float or Fraction equal to it); answers
    with a tolerance may differ by that relative amount. Never raises: an answer too
    large for a float, an infinity or a NaN is simply wrong."""
    if p.tolerance:
        try:
            close = math.isclose(float(value), p.answer, rel_tol=p.tolerance)
        except OverflowError:
            close = False
        right = close and math.isfinite(float(value))
    elif isinstance(value, float) and not value.is_integer():
        right = False
    else:
        right = value == p.answer
    if right:
        return None
    exact = (
        " Give the exact integer: a float such as 6.7e9 has lost digits."
        if not p.tolerance and isinstance(value, float) and math.isfinite(value)
        else ""
    )
    return f"{_show(value)} is not right.{exact} Hint: {p.hint}."


class Sheet:
    """One student's coursework sheet for one chapter.

    Args:
        chapter: a chapter with coursework (`chapters()`), e.g. ``"07_kv_cache"``.
        student: the student's ID (see `check_student_id`).

    Raises:
        ValueError: an unknown chapter or an unusable student ID.
    """

    def __init__(self, chapter: str, student: str):
        self.chapter = check_chapter(chapter)
        self.student = check_student_id(student)
        self.count = len(BANK[chapter])
        self._correct: set[int] = set()

    def __repr__(self) -> str:
        return f"Sheet({self.chapter!r}, student={self.student!r})"

    def problem(self, number: int) -> Problem:
        """Question ``number`` with this student's numbers (the answer included: for
        teachers)."""
        return problem(self.chapter, self.student, number)

    def question(self, number: int) -> SimpleNamespace:
        """Print question ``number`` with this student's numbers and return the numbers,
        by name (``q = sheet.question(1)``; then ``q.hidden_size``, ...)."""
        p = self.problem(number)
        title = BANK[self.chapter][number - 1].title
        text = "\n".join(
            line if line.startswith("    ") else textwrap.fill(line, 88)
            for line in p.text.splitlines()
        )
        print(
            f"Question {number} of {self.count}: {title}\n\n{text}\n\nAnswer in "
            f"{p.unit}."
        )
        return SimpleNamespace(**p.numbers)

    def check(self, number: int, answer: object) -> None:
        """Check ``answer`` to question ``number``: print ``Question n: correct (…)`` if
        right.

        Integer answers must be exact (an int, or a float or Fraction equal to it);
        answers with a tolerance may differ by that relative amount.

        Raises:
            NotAnswered: ``answer`` is ``...`` or ``None``.
            WrongAnswer: not a number, or not the right one; the message has a hint.
            ValueError: ``number`` is not a question of this sheet (``True`` is not 1).
        """
        __tracebackhide__ = True  # pytest leaves this frame out of its reports
        p = self.problem(number)
        where = f"Question {number}"
        try:
            message = verdict(p, _as_number(answer, where))
        except WrongAnswer:
            self._correct.discard(number)
            raise
        if message is not None:
            self._correct.discard(number)
            raise WrongAnswer(f"{where}: {message}")
        self._correct.add(number)
        print(f"{where}: correct ({p.answer_text}).")

    def summary(self) -> None:
        """Print how many questions were answered correctly in this session.

        Raises: SheetIncomplete: some questions are not answered correctly (they are
        listed)."""
        __tracebackhide__ = True
        missing = [n for n in range(1, self.count + 1) if n not in self._correct]
        if missing:
            which = (
                f"question {missing[0]} is"
                if len(missing) == 1
                else f"questions {', '.join(map(str, missing))} are"
            )
            raise SheetIncomplete(
                f"{self.chapter}, {self.student}: {which} not answered correctly yet"
            )
        print(f"{self.chapter}, {self.student}: all {self.count} questions correct.")

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
    ASKED,
    BANK,
    QUESTION_BANK_VERSION,
    Problem,
    Question,
    chapters,
)
from llmmath.messages import N_, Message, gettext, join, speaking, translated

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
    "01_parameters": N_("Counting parameters"),
    "02_embeddings": N_("Token embeddings and positions"),
    "03_attention": N_("Attention: MHA, GQA and MQA"),
    "04_ffn": N_("The feed-forward network"),
    "05_norms": N_("Normalization: LayerNorm and RMSNorm"),
    "06_rope": N_("RoPE: rotary position embedding"),
    "07_kv_cache": N_("The KV cache"),
    "07b_latent_attention": N_("Multi-head latent attention"),
    "08_flops": N_("FLOPs"),
    "09_memory": N_("Memory and speed"),
    "09b_serving": N_("Serving"),
    "09c_many_gpus": N_("Many GPUs"),
    "10_llama": N_("LLaMA 1 → 3"),
    "11_minimind": N_("Building MiniMind2-Small, step by step"),
    "12_moe": N_("Mixture of experts"),
    "13_zoo": N_("Model zoo"),
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
            return gettext("an integer of about {digits:,} digits").format(
                digits=digits
            )
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
            gettext(
                "{where} has no answer yet: replace ... with your computation"
            ).format(where=where)
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
            gettext("{where}: the answer must be a number; got {type} {value}").format(
                where=where, type=type(answer).__name__, value=_show(answer)
            )
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
                gettext("{where}: the answer {value} is not a usable number").format(
                    where=where, value=_show(answer)
                )
            ) from None
    if abs(value) >= 1 << MAX_ANSWER_BITS:
        raise WrongAnswer(
            gettext("{where}: the answer is far too large ({value})").format(
                where=where, value=_show(answer)
            )
        )
    return value


def verdict(p: Problem, value: int | float | Fraction) -> str | None:
    """None if ``value`` (from `_as_number`) answers ``p``; else why not, with the hint
    (a `llmmath.messages.Message`: English as a ``str``, `translated` in another
    language).

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
    if not p.tolerance and isinstance(value, float) and math.isfinite(value):
        return Message(
            N_(
                "{value} is not right. Give the exact integer: a float such as 6.7e9 "
                "has lost digits. Hint: {hint}."
            ),
            value=_show(value),
            hint=Message(p.hint),
        )
    return Message(
        N_("{value} is not right. Hint: {hint}."),
        value=_show(value),
        hint=Message(p.hint),
    )


class Sheet:
    """One student's coursework sheet for one chapter.

    Args:
        chapter: a chapter with coursework (`chapters()`), e.g. ``"07_kv_cache"``.
        student: the student's ID (see `check_student_id`).

        lang: the language the sheet prints its questions and checks in (one of
            `llmmath.messages.LANGUAGES` or an alias: ``"zh"``); English by default,
            whatever the environment says: a sheet speaks the language it was handed
            out in (`llmmath.coursework.handout.student_notebook`). The numbers and
            answers are the same in every language.

    Raises:
        ValueError: an unknown chapter, an unusable student ID or a language llmmath
        does not speak.
    """

    def __init__(self, chapter: str, student: str, lang: str = "en"):
        from llmmath.messages import language

        self.chapter = check_chapter(chapter)
        self.student = check_student_id(student)
        self.lang = language(lang)
        self.count = len(BANK[chapter])
        self._correct: set[int] = set()

    def __repr__(self) -> str:
        lang = "" if self.lang == "en" else f", lang={self.lang!r}"
        return f"Sheet({self.chapter!r}, student={self.student!r}{lang})"

    def problem(self, number: int) -> Problem:
        """Question ``number`` with this student's numbers (the answer included: for
        teachers)."""
        return problem(self.chapter, self.student, number)

    def question(self, number: int) -> SimpleNamespace:
        """Print question ``number`` with this student's numbers and return the numbers,
        by name (``q = sheet.question(1)``; then ``q.hidden_size``, ...)."""
        p = self.problem(number)
        with speaking(self.lang):
            title = gettext(BANK[self.chapter][number - 1].title)
            text = "\n".join(
                line if line.startswith("    ") else _fill(line)
                for line in translated(p.text).splitlines()
            )
            print(
                gettext("Question {number} of {count}: {title}").format(
                    number=number, count=self.count, title=title
                ),
                text,
                gettext(ASKED.get(p.unit, f"Answer in {p.unit}.")),
                sep="\n\n",
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
        with speaking(self.lang):
            where = gettext("Question {number}").format(number=number)
            try:
                message = verdict(p, _as_number(answer, where))
            except WrongAnswer:
                self._correct.discard(number)
                raise
            if message is not None:
                self._correct.discard(number)
                raise WrongAnswer(
                    gettext("{where}: {message}").format(
                        where=where, message=translated(message)
                    )
                )
            self._correct.add(number)
            print(
                gettext("{where}: correct ({answer}).").format(
                    where=where, answer=p.answer_text
                )
            )

    def summary(self) -> None:
        """Print how many questions were answered correctly in this session.

        Raises: SheetIncomplete: some questions are not answered correctly (they are
        listed)."""
        __tracebackhide__ = True
        missing = [n for n in range(1, self.count + 1) if n not in self._correct]
        with speaking(self.lang):
            if missing:
                which = (
                    gettext("question {n} is").format(n=missing[0])
                    if len(missing) == 1
                    else gettext("questions {numbers} are").format(
                        numbers=join(map(str, missing))
                    )
                )
                raise SheetIncomplete(
                    gettext(
                        "{chapter}, {student}: {which} not answered correctly yet"
                    ).format(chapter=self.chapter, student=self.student, which=which)
                )
            print(
                gettext("{chapter}, {student}: all {count} questions correct.").format(
                    chapter=self.chapter, student=self.student, count=self.count
                )
            )


def _fill(line: str) -> str:
    """``line`` wrapped to 88 columns: at spaces in English, anywhere between wide
    characters in Chinese (each takes two columns, `llmmath.messages.width`)."""
    if line.isascii():
        return textwrap.fill(line, 88)
    from llmmath.messages import width

    out, current = [], ""
    for word in re.findall(r"[\x00-\x7f]+|.", line):  # ASCII runs stay whole
        if current and width(current + word.rstrip()) > 88:
            out.append(current.rstrip())
            current = word.lstrip()
        else:
            current += word
    return "\n".join(out + [current.rstrip()])

"""Kernel side of grading: print each answer's value in a fixed form for the grader.

`llmmath.coursework.grading` runs a sheet with one protected cell after each answer
cell, ``_llmmath_record_(n, answer_n)``, which prints one line ``LLMMATH-ANSWER
{json}``. The grader reads that line and judges the value itself, so nothing else the
kernel prints or does counts. A student's code can replace this function too; that only
lets it choose the value reported, which must still be the right number to pass."""

from __future__ import annotations

import json
from fractions import Fraction

PREFIX = "LLMMATH-ANSWER "


def encode(answer: object) -> dict:
    """``answer`` as a JSON-able dict: ``kind`` none, int, fraction, float, huge (an
    integer beyond ``2**MAX_ANSWER_BITS``) or other.

    Integers are written in hexadecimal (``str`` of ``10**5000`` raises), floats with
    `float.hex`; never raises.
    """
    import numbers

    from llmmath.coursework import NotAnswered, WrongAnswer, _as_number

    try:
        value = _as_number(answer, "answer")
    except NotAnswered:
        return {"kind": "none"}
    except WrongAnswer:
        try:
            if isinstance(answer, numbers.Integral) and not isinstance(answer, bool):
                return {"kind": "huge"}
        except Exception:
            pass
        return {"kind": "other", "type": _type_name(answer)}
    except Exception:
        return {"kind": "other", "type": _type_name(answer)}
    if isinstance(value, int):
        return {"kind": "int", "hex": hex(value)}
    if isinstance(value, Fraction):
        return {
            "kind": "fraction",
            "num": hex(value.numerator),
            "den": hex(value.denominator),
        }
    return {"kind": "float", "hex": float.hex(value)}


def _type_name(value: object) -> str:
    try:
        return str(type(value).__name__)[:60]
    except Exception:
        return "object"


def record(number: int, answer: object) -> None:
    """Print question ``number``'s answer for the grader (one line)."""
    print(PREFIX + json.dumps({"question": number, **encode(answer)}), flush=True)

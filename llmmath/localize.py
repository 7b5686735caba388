"""Glued text in each edition's language: numbers, counts, percentages, lists, dates.

A chapter glues a value into its prose (``{glue:text}`key```) once, in its English
kernel; the Chinese edition is built from the same stored outputs. A value whose words
depend on the language ("Four", "A, B and C", "18 April 2024") is glued as a *spec*, a
small JSON object that says what it is (`llmmath.book.glue_list`, `glue_count`,
`glue_date`), beside its English text. `render` is the one place that writes a spec
in a language: English in plain Python (the kernel needs nothing more), the other
languages with Babel's locale data (a dependency of the book's build) and the book's
spacing between Chinese and Latin text. The Chinese build swaps every spec's English
text for its Chinese one before the page's messages are parsed
(`llmmath_book.translation`), so the site and the reader editions show, for instance:

============  ==========================  ==============================
spec          English                     简体中文
============  ==========================  ==============================
count 4       Four (or four)              4
list          A, B and C                  A、B 和 C
list, plain   32, 64, 4, 0                32、64、4、0
date          18 April 2024               2024 年 4 月 18 日
month         July 2024                   2024 年 7 月
int           6,738,415,616               6,738,415,616
percent       32.00%                      32.00%
============  ==========================  ==============================

Numbers and percentages read the same in both languages (Babel's zh_CN data: "," for
thousands, "." for decimals and "#,##0%" for a percentage, no space before the sign),
so `llmmath.book.glue_int` and `glue_pct` glue plain text; `render` formats them for
any language all the same. Used by `llmmath.book` (the glue helpers),
`llmmath_book.translation` (the Chinese build) and the tests.
"""

from __future__ import annotations

import datetime
import re
from typing import Any

__all__ = ["LANGUAGES", "MIME", "render", "space_cjk"]

#: The MIME type a spec is stored under, beside the glued value's ``text/plain``.
MIME = "application/vnd.llmmath.glue+json"
#: The languages `render` writes (the book's editions,
#: `llmmath_book.translation.FOLDERS`).
LANGUAGES = ("en", "zh_CN")
#: Counts that English prose writes as words (0 is "no": "no models").
COUNT_WORDS = "no one two three four five six seven eight nine ten".split()
MONTHS = (
    "January February March April May June July August September October November "
    "December"
).split()
#: The conjunctions of a list: Babel's list styles.
CONJUNCTIONS = {"and": "standard", "or": "or", "": None}

_CJK = r"\u3400-\u9fff\uf900-\ufaff"
_CJK_THEN_LATIN = re.compile(rf"([{_CJK}])([A-Za-z0-9$])")
_LATIN_THEN_CJK = re.compile(rf"([A-Za-z0-9%$])([{_CJK}])")


def space_cjk(text: str) -> str:
    """The book's Chinese typography: a space between a Chinese character and a Latin
    letter or digit ("2024年4月" → "2024 年 4 月", "B和C" → "B 和 C"); none beside
    full-width punctuation ("A、B")."""
    text = _CJK_THEN_LATIN.sub(r"\1 \2", text)
    return _LATIN_THEN_CJK.sub(r"\1 \2", text)


def _check_language(language: str) -> None:
    if language not in LANGUAGES:
        raise ValueError(f"language {language!r}: render writes {LANGUAGES} only")


def _babel_locale(language: str):
    from babel import Locale

    return Locale.parse(language)


def render(spec: dict[str, Any], language: str = "en") -> str:
    """The text of a glued ``spec`` in ``language`` (``"en"`` or ``"zh_CN"``).

    A spec is one of ``{"int": n}``, ``{"percent": x, "digits": d}`` (a fraction:
    0.1234 → 12.34% at d = 2), ``{"count": n, "capital": bool}`` (English words up to
    ten), ``{"list": [str, ...], "conj": "and" | "or" | ""}`` (``""``: a plain
    enumeration) and ``{"date": "YYYY-MM-DD" | "YYYY-MM"}``. Raises ``ValueError`` for
    any other spec or language.
    """
    _check_language(language)
    if set(spec) == {"int"}:
        return _int(spec["int"], language)
    if set(spec) == {"percent", "digits"}:
        return _percent(spec["percent"], spec["digits"], language)
    if set(spec) == {"count", "capital"}:
        return _count(spec["count"], spec["capital"], language)
    if set(spec) == {"list", "conj"}:
        return _list([str(item) for item in spec["list"]], spec["conj"], language)
    if set(spec) == {"date"}:
        return _date(spec["date"], language)
    raise ValueError(f"not a glue spec: {spec!r}")


def _int(n: int, language: str) -> str:
    if isinstance(n, bool) or not isinstance(n, int):
        raise ValueError(f"an int spec needs an int, got {n!r}")
    if language == "en":
        return f"{n:,}"
    from babel.numbers import format_decimal

    return format_decimal(n, locale=_babel_locale(language))


def _percent(x: float, digits: int, language: str) -> str:
    text = f"{x:.{digits}%}"  # the digits are Python's in every language
    if language == "en":
        return text
    from decimal import Decimal

    from babel.numbers import format_percent

    pattern = "#,##0" + ("." + "0" * digits if digits else "") + "%"
    value = Decimal(text[:-1]) / 100
    return format_percent(value, format=pattern, locale=_babel_locale(language))


def _count(n: int, capital: bool, language: str) -> str:
    if isinstance(n, bool) or not isinstance(n, int) or n < 0:
        raise ValueError(f"a count is an int ≥ 0, got {n!r}")
    if language != "en":
        return str(n)
    word = COUNT_WORDS[n] if n < len(COUNT_WORDS) else f"{n:,}"
    return word.capitalize() if capital else word


def _list(items: list[str], conj: str, language: str) -> str:
    if conj not in CONJUNCTIONS:
        raise ValueError(
            f"a list's conj is one of {sorted(CONJUNCTIONS)}, got {conj!r}"
        )
    if not items:
        raise ValueError("a list spec needs at least one item")
    if language == "en":
        if conj == "" or len(items) == 1:
            return ", ".join(items)
        return ", ".join(items[:-1]) + f" {conj} " + items[-1]
    from babel.lists import format_list

    locale = _babel_locale(language)
    if conj:
        text = format_list(items, style=CONJUNCTIONS[conj], locale=locale)
    else:  # a plain enumeration: the list's middle pattern between every two
        middle = locale.list_patterns["standard"]["middle"]
        text = items[0]
        for item in items[1:]:
            text = middle.format(text, item)
    return space_cjk(text)


def _date(value: str, language: str) -> str:
    match = re.fullmatch(r"(\d{4})-(\d{2})(?:-(\d{2}))?", value)
    if not match:
        raise ValueError(f"a date spec is YYYY-MM-DD or YYYY-MM, got {value!r}")
    year, month, day = match.groups()
    date = datetime.date(int(year), int(month), int(day or 1))
    if language == "en":
        if day is None:
            return f"{MONTHS[date.month - 1]} {date.year}"
        return f"{date.day} {MONTHS[date.month - 1]} {date.year}"
    from babel.dates import format_date, format_skeleton

    locale = _babel_locale(language)
    if day is None:
        text = format_skeleton("yMMMM", date, locale=locale)
    else:
        text = format_date(date, "long", locale=locale)
    return space_cjk(text)


# --- printed outputs and figure texts as messages -------------------------------------
# The Chinese edition translates what a cell prints and what a figure says through the
# page's catalogue (`llmmath_book.translation`, `llmmath.figures`): one message per
# printed line, table cell or figure text, its numbers as fields {0}, {1}, … filled from
# the English text, so a number that changes when a notebook is re-executed changes in
# both editions.

#: The English months, January first.
MONTHS = (
    "January February March April May June July August September October November "
    "December"
).split()

#: A number printed on its own (not inside a word such as ``bf16`` or ``1e-12``, not a
#: model's ``-7B``, not an exponent): it becomes a field of the output's message.
OUTPUT_NUMBER = re.compile(r"(?<![\w.\-^])\d+(?:[.,]\d+)*(?![\w.²³])")
#: A field of an output message.
OUTPUT_FIELD = re.compile(r"\{(\d+)\}")
#: What reads as code, not words, in an output: ``name=value``, a module's ``(name):``,
#: model names (``Mistral-7B``), dotted or
#: underscored names, words with digits, CamelCase names, ``Name(``, ``Model-Name``
#: Python's constants, units (``Gi``, ``MB``) and quoted strings (printed JSON).
OUTPUT_CODE = re.compile(
    # a command line and its continuation lines of options are code, as printed
    r"^\s*(?:\$ )?python3? -m \S.*$|^\s*(?:--[\w-]+(?:[ =][^\s-]\S*)?\s*)+\\?$"
    r"|[A-Za-z_]\w*=\S+|\(\w+\):|\b(?=[\w.-]*[A-Z0-9])[A-Za-z][\w.]*(?:-[\w.]+)+"
    r"|\b[A-Za-z_]\w*(?:[._]\w+)+|\b\w*\d\w*\b|\b[A-Z][a-z]+[A-Z]\w*|\b\w+\("
    r"|\b(?:True|False|None|[KMGT]i?B?)\b|`[^`]+`|\"[^\"]*\"|(?<![A-Za-z])'[^'\s][^']*'(?![A-Za-z])"
)
OUTPUT_WORD = re.compile(r"\b[A-Za-z]{2,}\b")


def output_message(text: str) -> str | None:
    """The message of one printed line or table cell: its numbers as fields
    (``"32 blocks: 6,476,267,520"`` → ``"{0} blocks: {1}"``); ``None`` when it holds
    no English word to translate (numbers, names, code)."""
    text = text.strip()
    if not OUTPUT_WORD.search(OUTPUT_CODE.sub(" ", text)):
        return None
    out, end = [], 0
    for index, match in enumerate(_output_numbers(text)):
        out += [text[end : match.start()], f"{{{index}}}"]
        end = match.end()
    return "".join(out) + text[end:]


def _output_numbers(text: str) -> list[re.Match]:
    """The numbers of an output that become fields (`OUTPUT_NUMBER`), less a date's
    year after its English month ("July 2024" stays a date, which the catalogue
    check reads as the numbers 7 and 2024, so that Chinese writes 2024 年 7 月)."""
    return [
        match
        for match in OUTPUT_NUMBER.finditer(text)
        if not re.search(rf"\b(?:{'|'.join(MONTHS)}) $", text[: match.start()])
    ]


def fill_output(message: str, text: str) -> str:
    """A translated output ``message`` with its fields filled from the English
    ``text`` it translates (field ``{i}`` is the English text's i-th number)."""
    numbers = [match.group() for match in _output_numbers(text.strip())]
    return OUTPUT_FIELD.sub(lambda m: numbers[int(m.group(1))], message)

"""The words of llmmath in the reader's language (gettext).

The explorers' controls, notes and table headers, the calculator's labels, the reader
editions' own words ("Exercise", "Solution to"), the error messages (`ConfigError` and
the command line's one-line errors) and the command line's reports and help are
English in the source, marked ``_("…")``. Their translations live in one gettext
catalogue per language, ``llmmath/locale/<lang>/LC_MESSAGES/llmmath.po``, compiled to
the ``.mo`` file beside it that Python's `gettext` reads, in Jupyter and in the site's
Pyodide alike (the catalogue ships in the wheel). Babel extracts and compiles them
(``make catalogues``). A message holds named fields, ``{name}``, filled after it is
translated with values formatted in the code, so that the numbers, names and values
are the same in every language.

The language is chosen once per process with `use` (the site's runtime passes its
page's language; a reader edition in Chinese calls ``use("zh_CN")`` in its first cell),
else from the environment: ``LLMMATH_LANG=zh`` (or ``zh_CN``, ``zh-CN``,
``zh_CN.UTF-8``; ``LLMMATH_LANGUAGE``, its earlier name, is read too), else English. A
language llmmath does not speak in the environment means English, as gettext does.

A leaf module that imports only `os`: `llmmath.errors` and `llmmath.config` translate
their messages with it, and ``python -m llmmath params`` must stay light. English, the
source, is returned as it is, without loading `gettext`; a catalogue is read on its
first use.
"""

from __future__ import annotations

import os

DOMAIN = __name__.partition(".")[0]  # "llmmath", the catalogue's name
#: The languages llmmath speaks (English is the source).
LANGUAGES = ("en", "zh_CN")
#: What a page's ``<html lang>`` or a reader may say → the catalogue's language.
ALIASES = {
    "zh": "zh_CN",
    "zh-CN": "zh_CN",
    "zh-Hans": "zh_CN",
    "zh_Hans": "zh_CN",
    "en-US": "en",
    "en_US": "en",
    "en-GB": "en",
    "en_GB": "en",
}
#: The environment variables that choose the language, the first set wins.
ENVIRONMENT = ("LLMMATH_LANG", "LLMMATH_LANGUAGE")


def _from_environment() -> str:
    """The language the environment asks for, as one of `LANGUAGES`; English when it
    asks for none, or for one llmmath does not speak."""
    for variable in ENVIRONMENT:
        value = os.environ.get(variable, "").strip()
        if value:
            try:
                return language(value.partition(".")[0])  # zh_CN.UTF-8
            except ValueError:
                return "en"
    return "en"


def language(name: str) -> str:
    """A language name (``zh_CN``, ``zh-CN``, ``zh``, ``en``) as one of `LANGUAGES`;
    raises ValueError naming the languages there are."""
    found = ALIASES.get(name, name)
    if found not in LANGUAGES:
        raise ValueError(
            f"language {name!r}: llmmath speaks {', '.join(LANGUAGES)} only"
        )
    return found


_current = [_from_environment()]


def use(name: str) -> str:
    """Make ``name`` the language of every message from now on; returns it as one of
    `LANGUAGES`."""
    _current[0] = language(name)
    return _current[0]


def current() -> str:
    """The language messages are in now (one of `LANGUAGES`)."""
    return _current[0]


_CATALOGUES: dict = {}


def catalogue(name: str):
    """The compiled catalogue of a language, a `gettext.NullTranslations` (English: no
    catalogue, the source), read once."""
    name = language(name)
    if name not in _CATALOGUES:
        import gettext as _gettext  # only when a message is asked for in a language

        _CATALOGUES[name] = (
            _gettext.NullTranslations()
            if name == "en"
            else _gettext.translation(DOMAIN, _locale_dir(), languages=[name])
        )
    return _CATALOGUES[name]


def gettext(message: str, lang: str | None = None) -> str:
    """``message`` in the current language (or ``lang``). A message with ``{name}``
    fields is translated before it is formatted: ``_("Exercise {n}").format(n=3)``."""
    lang = _current[0] if lang is None else language(lang)
    if lang == "en":
        return message
    return catalogue(lang).gettext(message)


_ = gettext


def N_(message: str) -> str:
    """Mark ``message`` for extraction without translating it (a table built at import:
    translate it with `gettext` where it is shown)."""
    return message


def messages(lang: str, only=None) -> dict[str, str]:
    """The catalogue of ``lang`` as {msgid: msgstr} (only the ``only`` msgids, when
    given); empty for English, the source."""
    found = catalogue(lang)
    table = getattr(found, "_catalog", {})
    return {
        k: v
        for k, v in table.items()
        if isinstance(k, str) and k and v and (only is None or k in only)
    }


#: How each language separates the items of a list ("a, b" / "a、b").
SEPARATORS = {"en": ", ", "zh_CN": "、"}


def join(items) -> str:
    """``items`` (strings) as a list in the current language: ``a, b, c`` in English,
    ``a、b、c`` in Chinese."""
    return SEPARATORS[_current[0]].join(items)


def either(items) -> str:
    """``items`` as alternatives in the current language: ``a``, ``a or b``, ``a, b
    or c`` in English; ``a 或 b``, ``a、b 或 c`` in Chinese."""
    items = list(items)
    if len(items) < 2:
        return "".join(items)
    return gettext("{items} or {last}").format(items=join(items[:-1]), last=items[-1])


def width(text: str) -> int:
    """The columns ``text`` takes in a terminal: two for each wide character (CJK),
    one for any other (East Asian Width, `unicodedata`, read only for non-ASCII)."""
    if text.isascii():
        return len(text)
    from unicodedata import east_asian_width

    return sum(2 if east_asian_width(c) in "WF" else 1 for c in text)


def ljust(text: str, columns: int) -> str:
    """``text`` padded with spaces on the right to ``columns`` (`width`)."""
    return text + " " * (columns - width(text))


def rjust(text: str, columns: int) -> str:
    """``text`` padded with spaces on the left to ``columns`` (`width`)."""
    return " " * (columns - width(text)) + text


class Message(str):
    """A message in English (its `str`), which can say itself in the current language:
    the template, marked `N_`, and the fields it was formatted with. For the notes a
    JSON report keeps in English (``"gpu_note"``) and a text report shows translated
    (`translated`)."""

    template: str
    fields: dict

    def __new__(cls, template: str, **fields) -> Message:
        self = super().__new__(cls, template.format(**fields))
        self.template, self.fields = template, fields
        return self


def translated(text: str) -> str:
    """``text`` in the current language: a `Message` formatted from its translated
    template (its fields that are Messages translated too), any other string as
    `gettext` finds it (itself when the catalogue has no such message)."""
    if isinstance(text, Message):
        fields = {
            k: translated(v) if isinstance(v, Message) else v
            for k, v in text.fields.items()
        }
        return gettext(text.template).format(**fields)
    return gettext(text)


class speaking:  # lowercase: used as ``with speaking("zh_CN"):``
    """Within ``with speaking("zh_CN"):`` every message is in that language; the one
    before comes back after. (A class, not `contextlib.contextmanager`, so that this
    module imports nothing but `os`.)"""

    def __init__(self, name: str) -> None:
        self.name = name
        self.before: str | None = None

    def __enter__(self) -> str:
        self.before = _current[0]
        return use(self.name)

    def __exit__(self, *exc) -> None:
        _current[0] = self.before


def _locale_dir() -> str:
    return os.path.join(os.path.dirname(os.path.abspath(__file__)), "locale")


def __getattr__(name: str):
    if name == "LOCALE_DIR":  # a Path, made when asked for (pathlib is not imported)
        from pathlib import Path

        return Path(_locale_dir())
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

"""The words of llmmath's live parts in the reader's language (gettext).

The explorers' controls, notes and table headers, the calculator's labels and the
reader editions' own words ("Exercise", "Solution to") are English in the source,
marked ``_("…")``. Their translations live in one gettext catalogue per language,
``llmmath/locale/<lang>/LC_MESSAGES/llmmath.po``, compiled to the ``.mo`` file beside
it that Python's `gettext` reads, in Jupyter and in the site's Pyodide alike (the
catalogue ships in the wheel). Babel extracts and compiles them (``make catalogues``);
the numbers are never in a message, so they are the same in every language.

The language is chosen once per process with `use` (the site's runtime passes its
page's language; a reader edition in Chinese calls ``use("zh_CN")`` in its first cell),
else from the ``LLMMATH_LANGUAGE`` environment variable, else English.
"""

from __future__ import annotations

import gettext as _gettext
import os
from contextlib import contextmanager
from functools import cache
from pathlib import Path

DOMAIN = "llmmath"
LOCALE_DIR = Path(__file__).with_name("locale")
#: The languages llmmath speaks (English is the source).
LANGUAGES = ("en", "zh_CN")
#: What a page's ``<html lang>`` or a reader may say → the catalogue's language.
ALIASES = {"zh": "zh_CN", "zh-CN": "zh_CN", "zh-Hans": "zh_CN", "en-US": "en"}

_current = [os.environ.get("LLMMATH_LANGUAGE", "en")]


def language(name: str) -> str:
    """A language name (``zh_CN``, ``zh-CN``, ``zh``, ``en``) as one of `LANGUAGES`;
    raises ValueError naming the languages there are."""
    found = ALIASES.get(name, name)
    if found not in LANGUAGES:
        raise ValueError(
            f"language {name!r}: llmmath speaks {', '.join(LANGUAGES)} only"
        )
    return found


def use(name: str) -> str:
    """Make ``name`` the language of every message from now on; returns it as one of
    `LANGUAGES`."""
    _current[0] = language(name)
    return _current[0]


def current() -> str:
    """The language messages are in now (one of `LANGUAGES`)."""
    return language(_current[0])


@cache
def catalogue(name: str) -> _gettext.NullTranslations:
    """The compiled catalogue of a language (English: no catalogue, the source)."""
    name = language(name)
    if name == "en":
        return _gettext.NullTranslations()
    return _gettext.translation(DOMAIN, LOCALE_DIR, languages=[name])


def gettext(message: str, lang: str | None = None) -> str:
    """``message`` in the current language (or ``lang``). A message with ``{name}``
    fields is translated before it is formatted: ``_("Exercise {n}").format(n=3)``."""
    return catalogue(lang or current()).gettext(message)


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


@contextmanager
def speaking(name: str):
    """Within ``with speaking("zh_CN"):`` every message is in that language; the one
    before comes back after."""
    before = _current[0]
    use(name)
    try:
        yield current()
    finally:
        _current[0] = before

"""The package's error types, its one positive-integer check, `one_line`, the "did
you mean" of an unknown name, the argparse types for counts, and the error that names
the extra to install (`needs_extra`).

A leaf module (standard library and `llmmath.messages` only), so that `llmmath.config`
and the sizing rules it uses (`llmmath.ffn`) can both import it without importing each
other. Its messages are in the reader's language (`llmmath.messages`).
"""

from __future__ import annotations

from llmmath.messages import either
from llmmath.messages import gettext as _

TYPE_CHECKING = False  # typing.TYPE_CHECKING, without importing typing
if TYPE_CHECKING:
    from typing import Any


class ConfigError(ValueError):
    """A config that cannot be counted; the message names the field and the rule."""


#: The extra of pyproject.toml that brings each top-level module outside the standard
#: library that a module of llmmath imports: ``pip install llmmath`` installs the core
#: alone (the CLI and every count, on the standard library), the extras the rest.
EXTRAS = {
    "anywidget": "notebooks",
    "ipywidgets": "notebooks",
    "matplotlib": "notebooks",
    "nbformat": "notebooks",
    "numpy": "notebooks",
    "sympy": "notebooks",
    "tabulate": "notebooks",
    "torchao": "notebooks",
    "traitlets": "notebooks",
    "torch": "torch",
    "huggingface_hub": "hub",
}


class MissingExtra(ModuleNotFoundError):
    """A module or command of llmmath needs a package that is not installed; the
    message names the extra that installs it (`needs_extra`)."""


def needs_extra(error: ModuleNotFoundError, needed_by: str) -> MissingExtra:
    """The error to raise, ``from error``, when ``needed_by`` (a module or a command)
    fails to import a package: it names the package and the extra of `EXTRAS` that
    brings it (``pip install 'llmmath[torch]'``), or the package alone when no extra
    does."""
    package = (error.name or "").partition(".")[0] or str(error)
    extra = EXTRAS.get(package)
    if extra is None:
        message = _("{needed_by} needs {package}, which is not installed").format(
            needed_by=needed_by, package=package
        )
    else:
        message = _(
            "{needed_by} needs {package}, which is not installed: pip install "
            "'llmmath[{extra}]'"
        ).format(needed_by=needed_by, package=package, extra=extra)
    return MissingExtra(message, name=error.name)


def check_positive_int(name: str, value: Any) -> None:
    """Raise `ConfigError` naming ``name`` unless ``value`` is a positive ``int``.

    A bool is refused although it is an ``int`` subclass.
    """
    if isinstance(value, bool) or not isinstance(value, int):
        raise ConfigError(
            _("{name} must be a positive integer, got {value}").format(
                name=name, value=repr(value)
            )
        )
    if value <= 0:
        raise ConfigError(
            _("{name} must be a positive integer, got {value}").format(
                name=name, value=value
            )
        )


def one_line(message: str) -> str:
    """``message`` with every line break escaped (``\\n``, ``\\r`` and the others
    `str.splitlines` splits on), so that an error is one line whatever a user typed."""
    return message.translate(_LINE_BREAKS)


_LINE_BREAKS = {ord(c): repr(c)[1:-1] for c in "\n\r\v\f\x1c\x1d\x1e\x85\u2028\u2029"}


def count_argument(text: str, limit: int = 10**18) -> int:
    """An argparse type every command shares: a positive integer of at most ``limit``,
    in ASCII digits (no sign, spaces, underscores or other scripts' digits).

    Raises:
        argparse.ArgumentTypeError: the rule broken, with the text (shortened if long).
    """
    import argparse

    shown = text if len(text) <= 40 else f"{text[:20]}...{text[-10:]}"
    if not (text.isascii() and text.isdigit()):
        raise argparse.ArgumentTypeError(_positive(repr(shown)))
    if len(text) > len(str(limit)) or int(text) > limit:
        raise argparse.ArgumentTypeError(_at_most(limit, shown))
    if int(text) <= 0:
        raise argparse.ArgumentTypeError(_positive(text))
    return int(text)


def _positive(got: str) -> str:
    return _("must be a positive integer, got {value}").format(value=got)


def _at_most(limit: int, got: str) -> str:
    return _("must be at most {limit}, got {value}").format(
        limit=f"{limit:,}", value=got
    )


def closest(word: str, names, n: int = 1) -> list[str]:
    """Up to ``n`` of ``names`` closest to ``word`` (difflib's ratio of at least 0.6,
    the best first): the candidates of a "did you mean"."""
    import difflib  # only for the hint of an unknown name

    return difflib.get_close_matches(word, list(names), n=n)


def did_you_mean(names) -> str:
    """`` (did you mean 'a'?)``, `` (did you mean 'a' or 'b'?)``, `` (did you mean 'a',
    'b' or 'c'?)``; empty for no names."""
    quoted = [repr(name) for name in names]
    if not quoted:
        return ""
    return _(" (did you mean {names}?)").format(names=either(quoted))


#: The suffixes `large_count_argument` reads: thousand, million, billion, trillion.
SUFFIXES = {"k": 3, "m": 6, "b": 9, "t": 12}


def large_count_argument(text: str, limit: int = 10**18) -> int:
    """An argparse type for counts people write in several ways (``--tokens``): a
    positive whole number of at most ``limit`` in ASCII, as digits (``1000000000``), in
    scientific notation (``1e9``, ``1.5e12``, ``15E+12``) or with a suffix K, M, B or T
    for 10³, 10⁶, 10⁹, 10¹² (``15T``, ``2.5B``; any case). Exact: no float rounds it.

    Raises:
        argparse.ArgumentTypeError: not such a number, not whole, not positive, or
        above ``limit``; the rule broken and the text (shortened if long)."""
    import argparse

    shown = text if len(text) <= 40 else f"{text[:20]}...{text[-10:]}"
    if len(text) > 100 and text.isascii() and text.isdigit():
        raise argparse.ArgumentTypeError(_at_most(limit, shown))
    mantissa, power = _decimal(text)
    if mantissa is None:
        raise argparse.ArgumentTypeError(
            _(
                "must be a whole number such as 1000000000, 1e9, 1.5e12 or 15T, "
                "got {value}"
            ).format(value=repr(shown))
        )
    if mantissa == 0:
        raise argparse.ArgumentTypeError(_positive(shown))
    if power < 0:  # mantissa · 10^power is whole when 10^-power divides the mantissa
        if -power > len(str(mantissa)) or mantissa % 10**-power:
            raise argparse.ArgumentTypeError(
                _("must be a whole number, got {value} (not an integer)").format(
                    value=shown
                )
            )
        value = mantissa // 10**-power
    elif len(str(mantissa)) + power > len(str(limit)):
        value = limit + 1  # past the limit: never build the huge int
    else:
        value = mantissa * 10**power
    if value > limit:
        raise argparse.ArgumentTypeError(_at_most(limit, shown))
    return value


def _decimal(text: str) -> tuple[int | None, int]:
    """(m, p) with ``text`` = m · 10^p, m an int without a sign, for the forms of
    `large_count_argument`; (None, 0) for anything else."""
    if len(text) > 100 or not text.isascii():
        return None, 0
    body = text.lower()
    power = 0
    if body[-1:] in SUFFIXES:
        body, power = body[:-1], SUFFIXES[body[-1]]
    number, _, exponent = body.partition("e")
    whole, dot, fraction = number.partition(".")
    digits = whole + fraction
    if not (digits.isdigit() and whole.isdigit()) or (dot and not fraction):
        return None, 0
    if exponent:
        sign = exponent[0] in "+-"
        if not exponent[sign:].isdigit() or (power and "e" in body):
            return None, 0
        power += int(exponent)
    elif "e" in body:
        return None, 0
    return int(digits), power - len(fraction)

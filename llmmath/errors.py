"""The package's error type, its one positive-integer check, and `one_line`.

A leaf module (standard library only), so that `llmmath.config` and the sizing rules it
uses (`llmmath.ffn`) can both import it without importing each other.
"""

from __future__ import annotations

from typing import Any


class ConfigError(ValueError):
    """A config that cannot be counted; the message names the field and the rule."""


def check_positive_int(name: str, value: Any) -> None:
    """Raise `ConfigError` naming ``name`` unless ``value`` is a positive ``int``.

    A bool is refused although it is an ``int`` subclass.
    """
    if isinstance(value, bool) or not isinstance(value, int):
        raise ConfigError(f"{name} must be a positive integer, got {value!r}")
    if value <= 0:
        raise ConfigError(f"{name} must be a positive integer, got {value}")


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
        raise argparse.ArgumentTypeError(f"must be a positive integer, got {shown!r}")
    if len(text) > len(str(limit)) or int(text) > limit:
        raise argparse.ArgumentTypeError(f"must be at most {limit:,}, got {shown}")
    if int(text) <= 0:
        raise argparse.ArgumentTypeError(f"must be a positive integer, got {text}")
    return int(text)

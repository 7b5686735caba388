"""The package's error type and its one positive-integer check.

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

"""Real model configurations shipped as data, each with the source it was taken from.

Each preset is a JSON file beside this module: the model's Hugging Face ``config.json``
under ``"config"``, the address it was copied from under ``"source"``, and the parameter
count the model's publishers report (``"published_params"``, exact where one is
published, with ``"published_label"`` as they round it and ``"published_source"`` saying
where it comes from).

    >>> from llmmath import presets
    >>> presets.load("llama-2-7b").hidden_size
    4096
"""

from __future__ import annotations

import difflib
import json
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import Any

from llmmath.config import ConfigError, ModelConfig


@dataclass(frozen=True)
class Preset:
    """One shipped preset: name, display title, sources and raw HF ``config.json``."""

    name: str
    title: str
    source: str
    published_params: int | None
    published_label: str
    published_source: str
    hf_config: dict[str, Any]
    #: "published" if the publishers print the exact count, "computed" if it comes
    #: from running their code (MiniMind's training script; its README says "26M").
    params_kind: str = "published"

    @property
    def config(self) -> ModelConfig:
        """The preset read through `ModelConfig.from_hf_config`, as a pasted config
        would be."""
        return ModelConfig.from_hf_config(self.hf_config)


@cache
def names() -> tuple[str, ...]:
    """The preset names, sorted: the stems of the JSON files in this package."""
    files = resources.files(__name__).iterdir()
    return tuple(sorted(f.name[:-5] for f in files if f.name.endswith(".json")))


@cache
def get(name: str) -> Preset:
    """The `Preset` called ``name`` (case-insensitive).

    Raises:
        ConfigError: no preset has that name; the message lists the names and the
        closest one.
    """
    key = name.lower()
    if key not in names():
        close = difflib.get_close_matches(key, names(), n=1)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        raise ConfigError(
            f"unknown preset {name!r}{hint}; presets: {', '.join(names())}"
        )
    raw = json.loads(
        resources.files(__name__).joinpath(f"{key}.json").read_text("utf-8")
    )
    return Preset(
        name=raw["name"],
        title=raw["title"],
        source=raw["source"],
        published_params=raw["published_params"],
        published_label=raw["published_label"],
        published_source=raw["published_source"],
        hf_config=raw["config"],
        params_kind=raw.get("params_kind", "published"),
    )


def load(name: str) -> ModelConfig:
    """The `ModelConfig` of the preset called ``name``; raises `ConfigError` if there is
    none."""
    return get(name).config

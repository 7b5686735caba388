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

import os
from functools import cache

from llmmath.config import ConfigError, ModelConfig, record
from llmmath.errors import closest, did_you_mean
from llmmath.messages import gettext as _
from llmmath.messages import join

TYPE_CHECKING = False  # typing.TYPE_CHECKING, without importing typing
if TYPE_CHECKING:
    from typing import Any


@record
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


#: The folder of the preset files (this package's own).
_HERE = os.path.dirname(os.path.abspath(__file__))


@cache
def names() -> tuple[str, ...]:
    """The preset names, sorted: the stems of the JSON files in this package."""
    files = os.listdir(_HERE)  # plain files, in a wheel unpacked as on Pyodide
    return tuple(sorted(f[:-5] for f in files if f.endswith(".json")))


@cache
def get(name: str) -> Preset:
    """The `Preset` called ``name`` (case-insensitive).

    Raises:
        ConfigError: no preset has that name; the message lists the names and the
        closest one.
    """
    key = name.lower()
    if key not in names():
        hint = did_you_mean(closest(key, names()))
        raise ConfigError(
            _("unknown preset {name}{hint}; presets: {names}").format(
                name=repr(name), hint=hint, names=join(names())
            )
        )
    import json  # here, not at import: ``import llmmath`` stays light (issue 34)

    with open(os.path.join(_HERE, f"{key}.json"), encoding="utf-8") as file:
        raw = json.load(file)
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


@cache
def load(name: str) -> ModelConfig:
    """The `ModelConfig` of the preset called ``name``; raises `ConfigError` if there is
    none. Read once per name: a `ModelConfig` is frozen, so every caller may share
    it."""
    return get(name).config

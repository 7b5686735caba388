"""Shared test setup: deterministic hypothesis runs (the same examples on every machine)."""

import json

import pytest
from hypothesis import HealthCheck, settings

from llmmath import presets

settings.register_profile("book", derandomize=True, deadline=None, max_examples=60,
                          suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("book")


@pytest.fixture
def write_config(tmp_path):
    """Write a dict as a config.json in a temporary directory and return its path."""
    def write(raw: dict, name: str = "config.json"):
        path = tmp_path / name
        path.write_text(json.dumps(raw), encoding="utf-8")
        return path
    return write


def hf_config(name: str) -> dict:
    """The raw Hugging Face config.json shipped with a preset."""
    return dict(presets.get(name).hf_config)

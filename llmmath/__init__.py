"""llmmath: the companion package of *LLM Math*, an interactive textbook on the
arithmetic of decoder-only language models (parameters, FLOPs and bytes).

Importing the package is light: the configuration, presets and exact counting need only
the standard library, and the presets (JSON files) load on first use. SymPy
(`llmmath.formulas`), torch (`llmmath.modules`), matplotlib (`llmmath.plots`) and
ipywidgets (`llmmath.widgets`) load only when their module is imported.
"""

from llmmath.config import SUPPORTED_MODEL_TYPES, ConfigError, ModelConfig, RopeScaling
from llmmath.counting import ParamCount, count_params

__all__ = [
    "ConfigError",
    "ModelConfig",
    "RopeScaling",
    "ParamCount",
    "SUPPORTED_MODEL_TYPES",
    "count_params",
    "presets",
]
__version__ = "0.1.0"


def __getattr__(name: str):
    """``llmmath.presets`` on first use (``from llmmath import presets`` imports it
    anyway): ``import llmmath`` reads no JSON and loads neither json nor re."""
    if name == "presets":
        import importlib

        return importlib.import_module("llmmath.presets")
    raise AttributeError(f"module 'llmmath' has no attribute {name!r}")

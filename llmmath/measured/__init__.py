"""Figures measured on a GPU, shipped as data with their provenance: the reference the
book's predictions are checked against (``tests/test_training_peak.py``).

- ``training-memory-h200.json``: 23 training recipes on one NVIDIA H200 (torch
  2.11.0+cu130, transformers 5.17.0, peft 0.21.0, driver 580.159.04, 2026-11-27):
  Qwen2.5-0.5B, Llama-3.2-1B, Llama-3.2-3B and Llama-3-8B from the presets' configs
  with random weights, SDPA attention, transformers' own causal-LM loss,
  ``torch.optim.AdamW(foreach=False)``; full fine-tuning in bf16 and under PyTorch
  AMP, full activation checkpointing, LoRA r = 16 with peft's fp32 adapters and with
  bf16 adapters. For each: weights, gradients and AdamW state as allocated, the
  activations at two moments of the forward pass, and the peak of
  ``torch.cuda.max_memory_allocated()`` over the second step. The procedure, case by
  case, is ``tests/gpu/measure_training_memory.py``.
- ``inference-h200.json``: Llama-3-8B in bf16 on the same GPU: weights and KV cache as
  allocated, a 4,096-token prefill, decode steps eager and as a CUDA graph.
- ``serving-engines.json``: what serving engines published for Llama-3-8B at batch 1
  on an H100-class GPU, each figure with its source and setup (GPU, precision, batch,
  prompt and generated tokens), and the engines left out because no figure's setup
  could be confirmed (chapter 9b, *What serving engines reach*).

    >>> from llmmath import measured
    >>> len(measured.training_cases())
    23
"""

from __future__ import annotations

import json
import os
from functools import cache
from typing import Any

_HERE = os.path.dirname(__file__)

#: The fields of ``inference-h200.json``'s ``environment`` that chapter 9b names: the
#: GPU, its driver and the two libraries that ran the model.
VERSIONS = ("name", "driver", "torch", "transformers")


@cache
def _load(name: str) -> dict[str, Any]:
    with open(os.path.join(_HERE, name), encoding="utf-8") as f:
        return json.load(f)


def training_memory_h200() -> dict[str, Any]:
    """The whole file ``training-memory-h200.json``: ``measured_on``,
    ``environment`` (GPU, driver, torch, transformers, peft) and ``cases``."""
    return _load("training-memory-h200.json")


def training_cases() -> list[dict[str, Any]]:
    """The measured training recipes, each with ``model`` (a preset), ``precision``
    (``bf16`` or ``amp``), ``method`` (``full``, ``lora_r16_fp32_adapters`` or
    ``lora_r16_bf16_adapters``), ``checkpointing``, ``batch``, ``seq_len``,
    ``trainable_params`` and ``measured_bytes`` (bytes as allocated)."""
    return training_memory_h200()["cases"]


def recipe_of(case: dict[str, Any]) -> dict[str, Any]:
    """A measured case's recipe as keyword arguments of
    `llmmath.training.training_peak` (the LoRA rank and adapters' dtype read from
    its ``method``)."""
    method = case["method"]
    kwargs = {
        "precision": case["precision"],
        "checkpointing": case["checkpointing"],
        "batch": case["batch"],
        "seq_len": case["seq_len"],
    }
    if method != "full":
        _, rank, dtype, _ = method.split("_")  # lora_r16_fp32_adapters
        kwargs.update(method="lora", lora_rank=int(rank[1:]), adapter_dtype=dtype)
    return kwargs


def inference_h200() -> dict[str, Any]:
    """The whole file ``inference-h200.json``."""
    return _load("inference-h200.json")


def serving_engines() -> dict[str, Any]:
    """The whole file ``serving-engines.json``: ``figures`` (each with ``engine``,
    ``model`` (a preset), ``gpu_stated``, ``precision``, ``batch``,
    ``prompt_tokens``, ``new_tokens``, ``runs`` of ``setting`` and
    ``request_seconds``, and its ``source``) and ``not_used`` (an engine, why, and
    where its figures were read)."""
    return _load("serving-engines.json")

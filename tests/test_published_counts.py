"""Published parameter counts, reproduced from each model's config.json passed as a
file.

The expected numbers are typed here from their publishers, never produced by llmmath:
the Hugging Face model pages' parameter counts (safetensors metadata), the MiniMind
README and training log, and the model cards' rounded figures.
"""

import json
import subprocess
import sys

import pytest

from llmmath import ModelConfig, count_params
from tests.conftest import hf_config

PUBLISHED = {
    "llama-2-7b": 6_738_415_616,
    "llama-3-8b": 8_030_261_248,
    "mistral-7b-v0.1": 7_241_732_096,
    "qwen2.5-3b": 3_085_938_688,
    "gpt2": 124_439_808,
    "minimind2-small": 25_829_888,
    "deepseek-llm-7b": 6_910_365_696,
    "mixtral-8x7b": 46_702_792_704,
    "minimind2-moe": 145_029_760,
    "llama-2-13b": 13_015_864_320,
    "llama-2-70b": 68_976_648_192,
    "llama-3-70b": 70_553_706_496,
    "llama-3.2-1b": 1_235_814_400,
    "llama-3.2-3b": 3_212_749_824,
    "qwen2.5-0.5b": 494_032_768,
    "qwen2.5-7b": 7_615_616_512,
}


@pytest.mark.parametrize("name, published", PUBLISHED.items())
def test_config_file_gives_published_count(name, published, write_config):
    cfg = ModelConfig.from_hf_config(write_config(hf_config(name)))
    assert count_params(cfg).total == published


@pytest.mark.parametrize("name, published", PUBLISHED.items())
def test_cli_json_total_from_config_file(name, published, write_config):
    path = write_config(hf_config(name))
    out = subprocess.run(
        [sys.executable, "-m", "llmmath", "params", str(path), "--json"],
        capture_output=True,
        text=True,
        check=True,
    )
    assert json.loads(out.stdout)["total"] == published


def test_cli_llama_2_7b_preset():
    out = subprocess.run(
        [sys.executable, "-m", "llmmath", "params", "llama-2-7b", "--json"],
        capture_output=True,
        text=True,
        check=True,
    )
    assert json.loads(out.stdout)["total"] == 6_738_415_616


def test_model_card_rounded_figures():
    # Qwen2.5-3B model card: 3.09B parameters, 2.77B non-embedding.
    qwen25 = count_params(ModelConfig.from_hf_config(hf_config("qwen2.5-3b")))
    assert (round(qwen25.total / 1e9, 2), round(qwen25.non_embedding / 1e9, 2)) == (
        3.09,
        2.77,
    )
    # Qwen2.5-0.5B: 0.49B / 0.36B; Qwen2.5-7B: 7.61B / 6.53B (untied: the head is left
    # out too). The cards sometimes round and sometimes truncate: within 0.01B either
    # way.
    for name, total, non_embedding in (
        ("qwen2.5-0.5b", 0.49, 0.36),
        ("qwen2.5-7b", 7.61, 6.53),
    ):
        counts = count_params(ModelConfig.from_hf_config(hf_config(name)))
        assert abs(counts.total / 1e9 - total) < 0.01
        assert abs(counts.non_embedding / 1e9 - non_embedding) < 0.01
    # Qwen3-0.6B model card: 0.6B parameters, 0.44B non-embedding.
    qwen3 = count_params(ModelConfig.from_hf_config(hf_config("qwen3-0.6b")))
    assert (round(qwen3.total / 1e9, 1), round(qwen3.non_embedding / 1e9, 2)) == (
        0.6,
        0.44,
    )


def test_gpt2_independent_implementations():
    cfg = ModelConfig.from_hf_config(hf_config("gpt2"))
    # nanoGPT prints "number of parameters: 123.65M": it leaves out the position
    # embedding.
    assert round((count_params(cfg).total - 1024 * 768) / 1e6, 2) == 123.65
    # LLMs-from-scratch ch. 4 (qkv_bias=False, tied): 124,412,160 trainable parameters.
    assert count_params(cfg.replace(qkv_bias=False)).total == 124_412_160
    # ... and 163,009,536 with a separate output head.
    assert (
        count_params(cfg.replace(qkv_bias=False, tie_word_embeddings=False)).total
        == 163_009_536
    )


def test_moe_active_parameters():
    """Mistral AI (Mixtral of experts, 2023): 46.7B parameters, 12.9B used per token."""
    mixtral = count_params(ModelConfig.from_hf_config(hf_config("mixtral-8x7b")))
    assert (
        round(mixtral.active / 1e9, 1) == 12.9 and round(mixtral.total / 1e9, 1) == 46.7
    )
    out = subprocess.run(
        [sys.executable, "-m", "llmmath", "params", "mixtral-8x7b", "--json"],
        capture_output=True,
        text=True,
        check=True,
    )
    data = json.loads(out.stdout)
    assert data["total"] == 46_702_792_704 and data["active"] == mixtral.active
    # MiniMind README: MiniMind2 is "104M"
    assert (
        round(
            count_params(ModelConfig.from_hf_config(hf_config("minimind2"))).total / 1e6
        )
        == 104
    )


def test_llama_1_paper_table_2():
    """Touvron et al. 2023 (LLaMA), Table 2: 6.7B and 65.2B parameters (truncated, not
    rounded: 65,285,660,672 is 65.29B)."""
    for name, billions in (("llama-1-7b", 6.7), ("llama-1-65b", 65.2)):
        total = count_params(ModelConfig.from_hf_config(hf_config(name))).total / 1e9
        assert int(total * 10) / 10 == billions

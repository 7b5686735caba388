"""python -m llmmath params: output, bad input (exit 2, one line), no torch import."""

import json
import os
import re
import subprocess
import sys
from collections import Counter

import pytest

from llmmath import count_params, presets
from tests.conftest import hf_config


def run(*args: str, lang: str | None = None) -> subprocess.CompletedProcess:
    """``python -m llmmath ARGS`` in English, or with ``LLMMATH_LANG=lang``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("LLMMATH_LANG")}
    return subprocess.run(
        [sys.executable, "-m", "llmmath", *args],
        capture_output=True,
        text=True,
        timeout=60,
        env=env if lang is None else {**env, "LLMMATH_LANG": lang},
    )


def test_table_lists_every_tensor_and_total():
    out = run("params", "qwen2.5-3b")
    assert out.returncode == 0
    assert "self_attn.q_proj.bias" in out.stdout and "L·n_h·d_h" in out.stdout
    assert "lm_head.weight" in out.stdout and "tied to embed_tokens" in out.stdout
    assert f"{3_085_938_688:,}" in out.stdout


def test_json_components_add_up():
    data = json.loads(run("params", "gpt2", "--json").stdout)
    assert (
        sum(data["components"].values())
        == data["total"]
        == sum(data["groups"].values())
    )
    assert data["components"]["embed_positions.weight"] == 1024 * 768


def bad_inputs(tmp_path):
    def write(name, text):
        (tmp_path / name).write_text(text, encoding="utf-8")
        return str(tmp_path / name)

    llama = hf_config("llama-2-7b")
    return {
        "missing file": [str(tmp_path / "absent.json")],
        "invalid JSON": [write("bad.json", "{oops")],
        "unknown preset": ["llama-9b"],
        "unsupported model type": [
            write("bert.json", json.dumps({**llama, "model_type": "bert"}))
        ],
        "missing field": [
            write(
                "nohidden.json",
                json.dumps({k: v for k, v in llama.items() if k != "hidden_size"}),
            )
        ],
        "ill-typed field": [
            write("str.json", json.dumps({**llama, "hidden_size": "4096"}))
        ],
        "inconsistent sizes": [
            write("kv.json", json.dumps({**llama, "num_key_value_heads": 5}))
        ],
        "no model": [],
        "unknown option": ["llama-2-7b", "--yaml"],
    }


@pytest.mark.parametrize(
    "case",
    [
        "missing file",
        "invalid JSON",
        "unknown preset",
        "unsupported model type",
        "missing field",
        "ill-typed field",
        "inconsistent sizes",
        "no model",
        "unknown option",
    ],
)
def test_bad_input_exits_2_with_one_line(case, tmp_path):
    out = run("params", *bad_inputs(tmp_path)[case])
    assert out.returncode == 2
    assert out.stdout == ""
    assert len(out.stderr.strip().splitlines()) == 1
    assert "Traceback" not in out.stderr


def test_error_messages_name_the_rule(tmp_path):
    cases = bad_inputs(tmp_path)
    assert (
        "num_attention_heads (32) must be divisible by num_key_value_heads (5)"
        in run("params", *cases["inconsistent sizes"]).stderr
    )
    assert (
        "llama, mistral, qwen2, qwen3, gpt2, mixtral, minimind"
        in run("params", *cases["unsupported model type"]).stderr
    )
    assert (
        "hidden_size must be a positive integer"
        in run("params", *cases["ill-typed field"]).stderr
    )


def test_params_path_imports_neither_torch_nor_sympy():
    code = (
        "import sys, io, contextlib\nfrom llmmath.cli import main\n"
        "with contextlib.redirect_stdout(io.StringIO()):\n"
        "    main(['params', 'gpt2', '--json'])\n"
        "heavy = ('torch', 'sympy', 'matplotlib', 'ipywidgets')\n"
        "print(sorted(m for m in heavy if m in sys.modules))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    )
    assert out.stdout.strip() == "[]"


def test_every_preset_answers():
    for name in presets.names():
        data = json.loads(run("params", name, "--json").stdout)
        assert data["total"] == count_params(presets.load(name)).total


def test_memory_prints_the_weights_line_once():
    """bf16 weights are one item: the "weights" line, once (issue 34); a quantized
    format lists its items, then the weights they add up to."""
    lines = run("memory", "llama-3-8b").stdout.splitlines()
    assert [line.split()[0] for line in lines[1:3]] == ["weights", "KV"]
    lines = run("memory", "llama-3-8b", "--weights", "int4").stdout.splitlines()
    firsts = [line.split()[0] for line in lines[1:]]
    assert firsts.count("weights") == 1 and firsts[:2] == ["quantized", "scales"]


# --- the CLI in Chinese (issue 33, item 6): LLMMATH_LANG=zh ---------------------------

#: A number as the reports print one (digits, with thousands' commas and a decimal
#: point): the zh report must print the same numbers as the English one.
NUMBER = re.compile(r"\d+(?:,\d{3})*(?:\.\d+)?")
CJK = re.compile(r"[\u4e00-\u9fff]")


def test_a_bad_config_is_refused_in_chinese_with_llmmath_lang_zh(tmp_path):
    cases = bad_inputs(tmp_path)
    english = run("params", *cases["inconsistent sizes"])
    chinese = run("params", *cases["inconsistent sizes"], lang="zh")
    assert english.returncode == chinese.returncode == 2
    assert english.stderr == (
        "llmmath: error: num_attention_heads (32) must be divisible by "
        "num_key_value_heads (5)\n"
    )
    assert chinese.stderr == (
        "llmmath：错误：num_attention_heads（32）必须能被 "
        "num_key_value_heads（5）整除\n"
    )
    unknown = run("params", "llama-9b", lang="zh_CN.UTF-8")
    assert unknown.stderr.startswith(
        "llmmath：错误：未知的预设 'llama-9b'（你是否想输入 "
    )
    assert "presets" not in unknown.stderr and "预设：" in unknown.stderr


@pytest.mark.parametrize(
    "args",
    [
        ["kv-cache", "llama-3-8b", "--seq-len", "0"],
        ["kv-cache", "llama-3-8b"],
        ["kv-cache", "llama-3-8b", "--seq-len", "8", "--seq-len", "9"],
        ["memory", "llama-3-8b", "--gpu", "h900"],
        ["nonsense"],
    ],
)
def test_argparse_says_its_errors_in_chinese_too(args):
    english, chinese = run(*args), run(*args, lang="zh")
    assert english.returncode == chinese.returncode == 2
    assert ": error: " in english.stderr and not CJK.search(english.stderr)
    assert "：错误：" in chinese.stderr and len(chinese.stderr.splitlines()) == 1
    # no English word of argparse's or llmmath's left (the option and its value stay)
    said = re.sub(
        r"'[^']*'|--[\w-]+|\{[^}]*\}|[A-Z][\w.-]*|\b\w*\d\w*\b", "", chinese.stderr
    )
    assert not re.search(r"\b(?:error|argument|invalid|must|got|required)\b", said)


@pytest.mark.parametrize(
    "args",
    [
        ["params", "deepseek-v3"],
        ["params", "gpt2"],
        ["kv-cache", "gemma-2-2b", "--seq-len", "8192"],
        ["flops", "llama-3-8b", "--seq-len", "4096"],
        ["flops", "mixtral-8x7b", "--seq-len", "64", "--by-module"],
        ["memory", "llama-3-8b", "--weights", "int4", "--gpu", "h100"],
        ["speculative", "--alpha", "0.8", "--gamma", "4"],
        ["parallel", "llama-3-8b", "--gpus", "8", "--tp", "2", "--tokens", "15T",
         "--price-per-gpu-hour", "2"],
        ["train-memory", "llama-3-8b", "--method", "lora", "--gpu", "h100"],
    ],
)  # fmt: skip
def test_reports_in_chinese_print_the_same_numbers(args):
    """A zh report is the English one in other words: the same numbers, each as often
    (a multiset: Chinese may order a line's words its own way), the same lines; its
    labels are Chinese; --json is the same in both."""
    english, chinese = run(*args), run(*args, lang="zh")
    assert english.returncode == chinese.returncode == 0, chinese.stderr
    assert Counter(NUMBER.findall(chinese.stdout)) == Counter(
        NUMBER.findall(english.stdout)
    )
    assert len(chinese.stdout.splitlines()) == len(english.stdout.splitlines())
    assert CJK.search(chinese.stdout) and not CJK.search(english.stdout)
    if args[0] != "speculative":
        assert run(*args, "--json", lang="zh").stdout == run(*args, "--json").stdout


def test_help_in_chinese():
    english, chinese = run("kv-cache", "--help"), run("kv-cache", "--help", lang="zh")
    assert english.stdout.startswith("usage: python -m llmmath kv-cache")
    assert chinese.stdout.startswith("用法：python -m llmmath kv-cache")
    assert "显示此帮助信息并退出" in chinese.stdout and "选项" in chinese.stdout
    assert "每个序列的 token 数（至多 100,000,000）" in chinese.stdout


def test_a_language_llmmath_does_not_speak_means_english():
    for lang in ("fr", "de_DE.UTF-8", ""):
        assert run("params", "llama-9b", lang=lang).stderr.startswith(
            "llmmath: error: unknown preset 'llama-9b'"
        )


def test_chinese_help_is_wrapped_by_columns_between_words():
    """argparse's textwrap counts characters and cuts a Latin word anywhere; the zh
    help breaks between Chinese characters and at spaces, by terminal columns."""
    from llmmath.cli import _wrap
    from llmmath.messages import width

    text = "目录（llmmath.gpus）中的一块 GPU，或简称（h100、a100-80gb、mi300x）"
    for columns in range(12, 40):
        lines = _wrap(text, columns)
        assert "".join(lines).replace(" ", "") == text.replace(" ", "")
        # at most the columns, but for a comma or bracket kept beside what it closes,
        # or one word in its brackets longer than a line
        assert all(
            width(line) <= columns + 2 or re.fullmatch(r"（?[\w.-]+）?[，、]?", line)
            for line in lines
        ), lines
        assert not any(line[0] in "，、）" or line[-1] == "（" for line in lines)
        words = {w for line in lines for w in re.findall(r"[\w.-]+", line)}
        assert {"llmmath.gpus", "a100-80gb", "mi300x"} <= words
    out = run("parallel", "--help", lang="zh").stdout
    assert "a100-80gb" in out and "（llmmath.gpus）" in out

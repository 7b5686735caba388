"""python -m llmmath params: output, bad input (exit 2, one line), no torch import."""

import json
import subprocess
import sys

import pytest

from llmmath import count_params, presets
from tests.conftest import hf_config


def run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "llmmath", *args],
        capture_output=True,
        text=True,
        timeout=60,
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

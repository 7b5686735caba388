"""``python -m llmmath memory``, ``speculative`` and ``kv-cache --block-size``: numbers
from closed forms written here, bad arguments exit 2 with one line, no torch."""

import json
import subprocess
import sys

import pytest

from llmmath.cli import main

H, L, KV, FF, V = 4096, 32, 8 * 128, 14336, 128256  # Llama-3-8B's config.json
BLOCK = L * (2 * H * H + 2 * H * KV + 3 * H * FF)
NORMS = (2 * L + 1) * H
ROWS = L * (H + 2 * KV + H + 2 * FF + H)  # output rows of q, k, v, o, gate, up, down


def run(capsys, *argv):
    status = main(list(argv))
    out, err = capsys.readouterr()
    return status, out, err


def as_json(capsys, *argv):
    status, out, err = run(capsys, *argv, "--json")
    assert status == 0 and err == ""
    return json.loads(out)


@pytest.mark.parametrize(
    "weights,extra,expected",
    [
        ("bf16", [], 2 * (BLOCK + NORMS + 2 * V * H)),
        ("int4", [], BLOCK // 2 + 2 * BLOCK // 128 + 2 * (NORMS + 2 * V * H)),
        ("int4", ["--group-size", "32"], BLOCK // 2 + 2 * BLOCK // 32),
        ("int8", [], BLOCK + 2 * ROWS + 2 * (NORMS + 2 * V * H)),
        ("fp8", ["--group-size", "128"], BLOCK + 2 * BLOCK // 128),
    ],
)
def test_memory_weight_bytes(capsys, weights, extra, expected):
    r = as_json(capsys, "memory", "llama-3-8b", "--weights", weights, *extra)
    if extra == ["--group-size", "32"] or weights == "fp8":
        expected += 2 * (NORMS + 2 * V * H)
    assert r["weight_bytes"] == expected


def test_memory_cache_total_and_fits(capsys):
    r = as_json(
        capsys,
        "memory",
        "llama-3-8b",
        "--weights",
        "int4",
        "--kv-dtype",
        "fp8",
        "--batch",
        "64",
        "--seq-len",
        "8192",
        "--gpu",
        "A100-SXM4-80GB",
    )
    assert r["kv_cache_bytes"] == 2 * L * 64 * 8192 * KV  # one byte per value
    assert r["total_bytes"] == r["weight_bytes"] + r["kv_cache_bytes"]
    assert r["gpu_bytes"] == 80 * 10**9  # the catalogue's capacity rule
    assert r["fits"] is (r["total_bytes"] <= 80 * 10**9)
    big = as_json(capsys, "memory", "llama-3-70b", "--batch", "64", "--seq-len", "8192")
    assert big["fits"] is False


def test_kv_cache_block_size_rounds_up_to_whole_blocks(capsys):
    r = as_json(
        capsys, "kv-cache", "llama-3-8b", "--seq-len", "1000", "--block-size", "16"
    )
    assert r["bytes"] == 2 * L * 1008 * KV * 2  # 63 blocks of 16 = 1008 slots
    assert r["blocks_per_sequence"] == 63 and r["wasted_slots_per_sequence"] == 8
    plain = as_json(capsys, "kv-cache", "llama-3-8b", "--seq-len", "1000")
    assert plain["bytes"] == 2 * L * 1000 * KV * 2


def test_speculative(capsys):
    r = as_json(
        capsys,
        "speculative",
        "--alpha",
        "0.8",
        "--gamma",
        "4",
        "--cost-ratio",
        "0.05",
    )
    e = 1 + 0.8 + 0.8**2 + 0.8**3 + 0.8**4
    assert r["expected_tokens_per_target_pass"] == pytest.approx(e, rel=1e-12)
    assert r["speedup"] == pytest.approx(e / 1.2, rel=1e-12)


@pytest.mark.parametrize(
    "argv,names",
    [
        (["speculative", "--alpha", "1", "--gamma", "3"], "--alpha"),
        (["speculative", "--alpha", "-0.1", "--gamma", "3"], "--alpha"),
        (["speculative", "--alpha", "nan", "--gamma", "3"], "--alpha"),
        (["speculative", "--alpha", "0.5", "--gamma", "0"], "--gamma"),
        (
            ["speculative", "--alpha", "0.5", "--gamma", "2", "--cost-ratio", "-1"],
            "cost",
        ),
        (["memory", "llama-3-8b", "--weights", "int3"], "--weights"),
        (["memory", "llama-3-8b", "--kv-dtype", "fp9"], "--kv-dtype"),
        (["memory", "llama-3-8b", "--gpu", "B300"], "--gpu"),
        (["memory", "llama-3-8b", "--group-size", "64"], "group_size"),
        (["memory", "llama-3-8b", "--batch", "0"], "--batch"),
        (["kv-cache", "llama-3-8b", "--seq-len", "9", "--block-size", "0"], "block"),
    ],
)
def test_bad_arguments_exit_2_with_one_line(capsys, argv, names):
    status, out, err = run(capsys, *argv)
    assert status == 2 and out == ""
    assert err.count("\n") == 1 and names in err, err


def test_memory_and_speculative_do_not_import_torch():
    code = (
        "import sys; from llmmath.cli import main; "
        "main(['memory', 'llama-3-8b', '--weights', 'int4', '--json']); "
        "main(['speculative', '--alpha', '0.5', '--gamma', '3']); "
        "assert 'torch' not in sys.modules, 'torch imported'"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr

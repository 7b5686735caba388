"""``python -m llmmath parallel``: the JSON numbers against closed forms written here,
one-line errors for layouts that do not fit together, and no torch on the way."""

import json
import subprocess
import sys

import pytest
from hypothesis import given
from hypothesis import strategies as st

from llmmath import count_params, presets
from llmmath.cli import main
from llmmath.cli.parallel import money


def run(capsys, *argv):
    status = main(["parallel", *argv])
    out, err = capsys.readouterr()
    return status, out, err


def report(capsys, *argv) -> dict:
    status, out, err = run(capsys, *argv, "--json")
    assert status == 0, err
    return json.loads(out)


def test_pure_data_parallel_is_sixteen_bytes_per_parameter(capsys):
    psi = count_params(presets.load("llama-2-7b")).total
    r = report(capsys, "llama-2-7b", "--gpus", "8")
    assert r["params_per_gpu"] == psi
    assert r["model_state_bytes_per_gpu"] == 16 * psi
    # one ring all-reduce of the bf16 gradients: 2(N−1)/N × 2Ψ (8 divides 2Ψ)
    assert r["communication_bytes_per_step"]["all_reduce"] == 2 * 7 * 2 * psi // 8
    assert r["pipeline_bubble_fraction"] == 0


@pytest.mark.parametrize("zero", [1, 2, 3])
def test_zero_stages(capsys, zero):
    psi = count_params(presets.load("llama-2-7b")).total  # divisible by 64
    r = report(capsys, "llama-2-7b", "--gpus", "64", "--zero", str(zero))
    expected = {1: 4 * psi + 12 * psi // 64, 2: 2 * psi + 14 * psi // 64}
    assert r["model_state_bytes_per_gpu"] == expected.get(zero, 16 * psi // 64)
    sent = sum(r["communication_bytes_per_step"].values())
    dp = 2 * 63 * 2 * psi // 64
    assert 2 * sent == (3 * dp if zero == 3 else 2 * dp)


def test_tensor_and_pipeline(capsys):
    """Llama 2 7B, tp 2 × pp 4: a stage's 8 layers, halved but for the norms; 2
    all-reduces of b·s·H per layer each way, per micro-batch."""
    H, I, V, s, m = 4096, 11008, 32000, 2048, 8
    r = report(
        capsys, "llama-2-7b", "--gpus", "8", "--tp", "2", "--pp", "4",
        "--micro-batches", str(m), "--seq-len", str(s),
    )  # fmt: skip
    layer = (4 * H * H + 3 * H * I) // 2 + 2 * H
    # the busiest stage is the last: 8 layers, half the LM head and the final norm
    assert r["params_per_gpu"] == 8 * layer + (V // 2) * H + H
    tp = [c for c in r["collectives"] if c["group"] == "tp"]
    assert [(c["op"], c["count"], c["payload_bytes"]) for c in tp] == [
        ("all_reduce", 4 * 8 * m, 2 * s * H)
    ]
    assert r["pipeline_bubble_fraction_exact"] == "3/11"


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--gpus", "8", "--dp", "2"], "dp·tp·pp (2·1·1 = 2) must equal gpus (8)"),
        (["--gpus", "24", "--tp", "3"], "num_attention_heads (32) must be divisible"),
        (["--gpus", "24", "--pp", "3"], "num_hidden_layers (32) must be divisible"),
        (["--gpus", "6", "--tp", "4"], "gpus (6) must be divisible by tp·pp"),
        (["--gpus", "8", "--ep", "2"], "ep (2) needs a mixture of experts"),
        (["--gpus", "8", "--zero", "4"], "invalid choice"),
        (["--gpus", "0"], "must be a positive integer"),
        (["--gpus", "8", "--gpu", "v100"], "--gpu: must be a GPU with a cluster"),
        (["--gpus", "8", "--gpu", "h1000"], "(did you mean 'H100-SXM5-80GB'"),
    ],
)
def test_layouts_that_do_not_fit_together(capsys, argv, message):
    status, out, err = run(capsys, "llama-2-7b", *argv)
    assert status == 2 and not out
    assert message in err and err.count("\n") == 1


def test_experts_by_ep(capsys):
    status, _, err = run(capsys, "mixtral-8x7b", "--gpus", "48", "--ep", "3")
    assert status == 2 and "num_local_experts (8) must be divisible by ep (3)" in err


def test_no_torch_on_the_cli_path():
    code = (
        "import sys; from llmmath.cli import main; "
        "main(['parallel', 'llama-2-7b', '--gpus', '16', '--tp', '8', '--json']); "
        "assert 'torch' not in sys.modules and 'sympy' not in sys.modules"
    )
    subprocess.run([sys.executable, "-c", code], check=True, capture_output=True)


# --- issue 34, item 4: a step's cost with its precision, tokens as people write them


@pytest.mark.parametrize(
    "amount, shown",
    [
        (0.0027945, "0.00279"),
        (0.5, "0.500"),
        (0.001, "0.00100"),
        (2.5, "2.50"),
        (85.2666, "85.27"),
        (1234.4, "1,234"),
        (2_716_841.3, "2,716,841"),
        (0, "0"),
    ],
)
def test_money_keeps_its_precision(amount, shown):
    assert money(amount) == shown


@given(st.floats(1e-12, 1e12))
def test_money_is_never_zero_and_within_half_a_percent(amount):
    shown = float(money(amount).replace(",", ""))
    assert shown > 0 and abs(shown - amount) <= 0.005 * amount


def test_a_step_costs_cents_not_0_00(capsys):
    argv = ["llama-3-8b", "--gpus", "8", "--price-per-gpu-hour", "2", "--tokens", "1e9"]
    c = report(capsys, *argv)["cost"]
    status, out, err = run(capsys, *argv)
    assert status == 0 and c["step_cost"] < 0.01 and c["tokens"] == 10**9
    assert f"cost {money(c['step_cost'])} at 2/GPU-h" in out
    assert f"cost {money(c['run_cost'])}" in out and "cost 0.00 " not in out


@pytest.mark.parametrize(
    "typed, tokens",
    [
        ("1000000000", 10**9),
        ("1e9", 10**9),
        ("1E+9", 10**9),
        ("1.5e12", 15 * 10**11),
        ("15T", 15 * 10**12),
        ("15t", 15 * 10**12),
        ("2.5B", 25 * 10**8),
        ("500M", 5 * 10**8),
        ("300k", 3 * 10**5),
        ("15000e-3", 15),
        ("1e18", 10**18),
    ],
)
def test_tokens_as_people_write_them(capsys, typed, tokens):
    r = report(capsys, "llama-2-7b", "--gpus", "8", "--tokens", typed)
    assert r["cost"]["tokens"] == tokens

"""Chapter 9c's layout explorer (`llmmath.explorers.layout`) and its widget: numbers
against closed forms written here, every control live, bad values as a note."""

import pytest

from llmmath import count_params, presets
from llmmath.explorers import explore, view_text


def rows(view, header):
    (block,) = [
        b for b in view["blocks"] if b["type"] == "table" and b["headers"][0] == header
    ]
    return {r[0]: r[1] for r in block["rows"]}


def as_int(text: str) -> int:
    return int(text.replace(",", ""))


def test_zero1_on_data_parallel_only():
    """Llama 2 7B on 64 GPUs, tp = pp = 1, ZeRO-1: 4Ψ + 12Ψ/64 bytes of model state."""
    psi = count_params(presets.load("llama-2-7b")).total
    view = explore(
        "layout", {"preset": "llama-2-7b", "gpus": 64, "tp": 1, "pp": 1, "zero": 1}
    )
    memory = rows(view, "per GPU")
    assert as_int(memory["weights (bf16)"]) == 2 * psi
    assert as_int(memory["gradients (bf16)"]) == 2 * psi
    assert as_int(memory["optimizer (fp32 master, m, v)"]) == 12 * psi // 64
    sent = rows(view, "bytes sent per GPU per step")
    assert as_int(sent["all-reduce"]) == 2 * 63 * 2 * psi // 64
    assert "dp 64 × tp 1 × pp 1" in view_text(view)


def test_tensor_parallel_divides_the_parameters():
    H, L, V, I = 4096, 32, 32000, 11008
    view = explore(
        "layout", {"preset": "llama-2-7b", "gpus": 8, "tp": 8, "pp": 1, "zero": 0}
    )
    per_gpu = L * ((4 * H * H + 3 * H * I) // 8 + 2 * H) + 2 * (V // 8) * H + H
    assert f"{per_gpu:,} parameters per GPU" in view_text(view)


@pytest.mark.parametrize(
    "change",
    [
        {"gpus": 2048},
        {"tp": 4},
        {"pp": 8},
        {"zero": 3},
        {"micro_batches": 16},
        {"seq_len": 4096},
        {"sequence_parallel": True},
        {"recompute": True},
        {"cluster": "a100"},
        {"preset": "llama-2-70b"},
    ],
)
def test_every_control_changes_the_view(change):
    first = explore("layout", {})
    second = explore("layout", change)
    assert second["blocks"][0]["tone"] == "info", view_text(second)
    assert view_text(second) != view_text(first)


@pytest.mark.parametrize(
    "state, message",
    [
        ({"zero": 5}, "zero must be one of"),
        ({"gpus": "many"}, "gpus must be a whole number"),
    ],
)
def test_bad_values_are_a_note(state, message):
    """One line, then the view of the nearest valid state, which the controls show."""
    view = explore("layout", state)
    block = view["blocks"][0]
    assert block["tone"] == "error" and message in block["text"]
    (name,) = state
    assert view["state"][name] == explore("layout", {})["state"][name]


@pytest.mark.parametrize(
    "state, pp",
    [({"pp": 3, "gpus": 768}, 2), ({"gpus": 1000}, 1)],  # 1000: 125 GPUs per tp group
)
def test_a_pp_that_does_not_divide_is_moved_to_one_that_does(state, pp):
    view = explore("layout", state)
    assert view["state"]["pp"] == pp and "error" not in view
    (pps,) = [c["options"] for c in view["controls"] if c["name"] == "pp"]
    gpus_per_tp = view["state"]["gpus"] // view["state"]["tp"]
    assert all(80 % p == 0 and gpus_per_tp % p == 0 for p, _ in pps)
    assert view["blocks"][-1]["text"].startswith(
        f"pp offers the divisors of the 80 layers that also divide the {gpus_per_tp:,}"
    )


def test_widget_recomputes():
    from llmmath.widgets import LayoutExplorer

    w = LayoutExplorer()
    before = w.text
    w.set(zero=3)
    assert w.text != before and w.plan.zero == 3
    assert w.plan.params_per_gpu == as_int(
        w.text.split(" parameters per GPU")[0].split(": ")[-1]
    )

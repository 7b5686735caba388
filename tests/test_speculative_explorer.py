"""The speculative decoding explorer (`llmmath.explorers.speculative`) and its widget:
numbers from the closed form written here; bad values shown, never raised."""

import pytest

from llmmath.explorers import explore, view_text


def rows(view):
    return {
        r[0]: r[1] for b in view["blocks"] if b["type"] == "table" for r in b["rows"]
    }


@pytest.mark.parametrize("alpha,gamma,c", [(0.8, 4, 0.05), (0.5, 2, 0.0), (0.9, 7, 1)])
def test_numbers_are_the_closed_form(alpha, gamma, c):
    view = explore("speculative", {"alpha": alpha, "gamma": gamma, "cost_ratio": c})
    e = sum(alpha**i for i in range(gamma + 1))
    r = rows(view)
    assert r["expected tokens per target pass"] == f"{e:.3f}"
    assert r["speed-up over plain decoding"] == f"{e / (gamma * c + 1):.3f}×"
    best = max(
        range(1, 65),
        key=lambda g: (sum(alpha**i for i in range(g + 1)) / (g * c + 1), -g),
    )
    assert r["best γ (1 … 64)"] == str(best)


def test_every_control_changes_the_view():
    first = explore("speculative", {})
    for name, value in (("alpha", 0.3), ("gamma", 8), ("cost_ratio", 0.1)):
        changed = explore("speculative", {**first["state"], name: value})
        assert view_text(changed) != view_text(first), name


@pytest.mark.parametrize(
    "state,field",
    [({"alpha": 1.0}, "alpha"), ({"gamma": 0}, "gamma"), ({"cost_ratio": -1}, "cost")],
)
def test_bad_values_are_shown(state, field):
    view = explore("speculative", state)
    (note,) = [b for b in view["blocks"] if b["type"] == "note"]
    assert note["tone"] == "error" and field in note["text"]


def test_widget():
    pytest.importorskip("anywidget")
    from llmmath.widgets import SpeculativeExplorer

    w = SpeculativeExplorer(alpha=0.8, gamma=4, cost_ratio=0.05)
    assert "3.362" in w.text
    w.set(gamma=1)
    assert rows(w.view)["expected tokens per target pass"] == "1.800"

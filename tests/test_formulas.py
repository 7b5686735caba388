"""The SymPy formulas: derived from shapes, simplified to the forms the book quotes."""

import sympy as sp

from llmmath import presets
from llmmath.formulas import (
    H,
    I,
    L,
    V,
    attention_formula,
    d_h,
    evaluate,
    g,
    in_group_size,
    n_h,
    n_kv,
    swiglu_formula,
    total_formula,
)


def test_attention_from_shapes():
    # q: H·(n_h·d_h), k and v: H·(n_kv·d_h) each, o: (n_h·d_h)·H
    expected = H * (n_h * d_h) + 2 * H * (n_kv * d_h) + (n_h * d_h) * H
    assert sp.simplify(attention_formula() - expected) == 0


def test_attention_in_group_size():
    gqa = in_group_size(attention_formula())
    assert sp.simplify(gqa - H**2 * (2 + 2 / g)) == 0
    assert sp.simplify(gqa.subs(g, 1) - 4 * H**2) == 0  # MHA
    assert sp.simplify(gqa.subs(g, n_h) - (2 * H**2 + 2 * H**2 / n_h)) == 0  # MQA


def test_attention_with_biases():
    biased = attention_formula(qkv_bias=True, o_proj_bias=True)
    assert (
        sp.simplify(biased - attention_formula() - (n_h * d_h + 2 * n_kv * d_h + H))
        == 0
    )


def test_swiglu_is_three_matrices():
    assert swiglu_formula() == 3 * H * I


def test_llama_total_closed_form():
    cfg = presets.load("llama-2-7b")
    closed = (
        2 * V * H + L * (2 * H * n_h * d_h + 2 * H * n_kv * d_h + 3 * H * I + 2 * H) + H
    )
    assert sp.expand(total_formula(cfg) - closed) == 0
    # Llama-2-7B by hand: 2·V·H + L·(4H² + 3HI + 2H) + H with V=32000, H=4096, I=11008,
    # L=32
    assert (
        evaluate(closed, cfg)
        == 2 * 32000 * 4096 + 32 * (4 * 4096**2 + 3 * 4096 * 11008 + 2 * 4096) + 4096
    )

"""Symbolic parameter formulas (SymPy), derived from the weight shapes.

The symbols carry the letters of the notation page: H hidden size, L layers, V
vocabulary, I intermediate size, n_h query heads, n_kv key/value heads, d_h head
dimension, g = n_h / n_kv the group size, P learned positions. Formulas are not typed in
their final form: each is the sum of the products of the shapes
`llmmath.counting.weight_shapes` lists, so the attention block is H·(n_h·d_h) +
2·H·(n_kv·d_h) + (n_h·d_h)·H before `in_group_size` rewrites it as H²(2 + 2/g).

Explained in the chapter *Counting parameters* (``chapters/01_parameters.ipynb``).
"""

from __future__ import annotations

try:  # an extra of the core install (llmmath.errors.EXTRAS)
    import sympy as sp
except ModuleNotFoundError as error:
    from llmmath.errors import needs_extra

    raise needs_extra(error, __name__) from error

from llmmath.config import ModelConfig
from llmmath.counting import weight_shapes

H, L, V, I, P = sp.symbols("H L V I P", positive=True, integer=True)
n_h, n_kv, d_h, g = sp.symbols("n_h n_kv d_h g", positive=True, integer=True)
E, k, S = sp.symbols("E k S", positive=True, integer=True)
# Issue 15: MLA's ranks and head widths (DeepSeek-V2 report, Sec. 2.1), the expert
# width, and the numbers of dense and mixture-of-experts layers.
d_c, d_q, d_n, d_r, d_v = sp.symbols("d_c d_q d_n d_r d_v", positive=True, integer=True)
I_e, L_d, L_m = sp.symbols("I_e L_d L_m", positive=True, integer=True)

SYMBOLS = {
    "H": H,
    "L": L,
    "V": V,
    "I": I,
    "P": P,
    "n_h": n_h,
    "n_kv": n_kv,
    "d_h": d_h,
    "g": g,
    "E": E,
    "k": k,
    "S": S,
    "d_c": d_c,
    "d_q": d_q,
    "d_n": d_n,
    "d_r": d_r,
    "d_v": d_v,
    "I_e": I_e,
    "L_d": L_d,
    "L_m": L_m,
}

#: Notation letter -> Hugging Face ``config.json`` field (`ModelConfig` attribute).
CONFIG_FIELDS = {
    H: "hidden_size",
    L: "num_hidden_layers",
    V: "vocab_size",
    I: "intermediate_size",
    P: "max_position_embeddings",
    n_h: "num_attention_heads",
    n_kv: "num_key_value_heads",
    d_h: "head_dim",
    g: "group_size",
    E: "num_local_experts",
    k: "num_experts_per_tok",
    S: "n_shared_experts",
    d_c: "kv_lora_rank",
    d_q: "q_lora_rank",
    d_n: "qk_nope_head_dim",
    d_r: "qk_rope_head_dim",
    d_v: "v_head_dim",
    I_e: "expert_intermediate_size",
    L_d: "num_dense_layers",
    L_m: "num_moe_layers",
}


def _dim(text: str) -> sp.Expr:
    return sp.sympify(text, locals=SYMBOLS)


def tensor_formulas(cfg: ModelConfig) -> dict[str, sp.Expr]:
    """Whole-model parameters of each tensor as a SymPy product of its shape (times L
    when the tensor repeats in every layer). Keys are `llmmath.counting.TensorCount`
    names."""
    return {
        t.name: ((SYMBOLS[t.layers_dim or "L"]) if t.per_layer else 1)
        * (SYMBOLS[t.copies_dim] if t.copies_dim else 1)
        * sp.Mul(*map(_dim, t.dims))
        for t in weight_shapes(cfg)
    }


def group_formulas(cfg: ModelConfig) -> dict[str, sp.Expr]:
    """Formulas summed per group (embedding, attention, ffn, norm, lm_head)."""
    formulas = tensor_formulas(cfg)
    groups: dict[str, sp.Expr] = {}
    for t in weight_shapes(cfg):
        groups[t.group] = groups.get(t.group, 0) + formulas[t.name]
    return groups


def total_formula(cfg: ModelConfig) -> sp.Expr:
    """The model's total parameter count, a SymPy expression in the notation letters."""
    return sp.Add(*tensor_formulas(cfg).values())


def attention_formula(qkv_bias: bool = False, o_proj_bias: bool = False) -> sp.Expr:
    """Parameters of one attention block (weights, optional biases) in H, n_h, n_kv,
    d_h.

    Without biases: H·(n_h·d_h) + 2·H·(n_kv·d_h) + (n_h·d_h)·H (Ainslie et al. 2023,
    GQA).
    """
    cfg = ModelConfig(
        vocab_size=1,
        hidden_size=2,
        intermediate_size=1,
        num_hidden_layers=1,
        num_attention_heads=2,
        num_key_value_heads=1,
        qkv_bias=qkv_bias,
        o_proj_bias=o_proj_bias,
    )
    return sp.expand(group_formulas(cfg)["attention"] / L)


def swiglu_formula() -> sp.Expr:
    """Parameters of one gated (SwiGLU) FFN without biases: gate, up and down, 3·H·I."""
    cfg = ModelConfig(
        vocab_size=1,
        hidden_size=1,
        intermediate_size=1,
        num_hidden_layers=1,
        num_attention_heads=1,
    )
    return sp.expand(group_formulas(cfg)["ffn"] / L)


def in_group_size(expr: sp.Expr) -> sp.Expr:
    """Rewrite ``expr`` with d_h = H / n_h and n_kv = n_h / g, simplified.

    For the bias-free attention block this gives H²(2 + 2/g): 4H² for MHA (g = 1) and
    2H² + 2H²/n_h for MQA (g = n_h).
    """
    return sp.collect(sp.expand(expr.subs({d_h: H / n_h}).subs({n_kv: n_h / g})), H**2)


def values(cfg: ModelConfig) -> dict[sp.Symbol, int]:
    """The integer value of every symbol for ``cfg`` (see `CONFIG_FIELDS`; the expert
    letters only for a mixture of experts)."""
    return {
        sym: getattr(cfg, field)
        for sym, field in CONFIG_FIELDS.items()
        if getattr(cfg, field) is not None
    }


def evaluate(expr: sp.Expr, cfg: ModelConfig) -> int:
    """``expr`` at the sizes of ``cfg``, as an exact ``int``.

    Raises:
        ValueError: the result is not an integer (a symbol left free, or a fractional
        value).
    """
    result = sp.sympify(expr).subs(values(cfg))
    if not result.is_Integer:
        raise ValueError(
            f"{expr} does not evaluate to an integer for this config: {result}"
        )
    return int(result)

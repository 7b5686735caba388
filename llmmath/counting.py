"""Exact parameter counts, tensor by tensor, from a `ModelConfig`.

Every learnable tensor of the reference model (`llmmath.modules`) is listed with its
shape in ``torch`` order (``nn.Linear`` weights are ``(out_features, in_features)``),
the same shape in the letters of the notation page, and whether it repeats in each of
the L layers. Counts are Python ``int``: exact, never rounded. `llmmath.formulas` turns
the lettered shapes into SymPy formulas; the tests check the three agree with
``sum(p.numel())`` of the torch model.

Explained in the chapter *Counting parameters* (``chapters/01_parameters.ipynb``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from llmmath.config import ModelConfig

GROUPS = ("embedding", "attention", "ffn", "norm", "lm_head")

NON_EMBEDDING_CONVENTION = (
    "non-embedding = total - token embedding - learned position embedding - untied "
    "LM head (the convention of Kaplan et al. 2020, Sec. 2.1, and of the Qwen model "
    "cards)"
)


@dataclass(frozen=True)
class TensorCount:
    """One learnable tensor: ``name`` as in the reference model's ``named_parameters()``
    with ``layers.{i}.`` dropped, its ``group`` (one of `GROUPS`), ``shape`` in torch
    order, ``dims`` (the shape in notation letters), whether it repeats ``per_layer``,
    and its count."""

    name: str
    group: str
    shape: tuple[int, ...]
    dims: tuple[str, ...]
    per_layer: bool
    copies: int = 1
    copies_dim: str = ""

    @property
    def numel(self) -> int:
        """Parameters of the tensor in one layer: its shape times ``copies`` (E routed
        or S shared experts, each holding one such tensor; 1 otherwise)."""
        return math.prod(self.shape) * self.copies

    @property
    def formula(self) -> str:
        """The count in letters, e.g. ``"L·n_kv·d_h·H"`` (multiplied by L when per
        layer, and by E or S for experts' tensors)."""
        factors = (
            (("L",) if self.per_layer else ())
            + ((self.copies_dim,) if self.copies_dim else ())
            + self.dims
        )
        return "·".join(factors).replace("*", "·")


@dataclass(frozen=True)
class ParamCount:
    """The exact parameter count of a model, tensor by tensor (see `count_params`)."""

    tensors: tuple[TensorCount, ...]
    num_hidden_layers: int
    tie_word_embeddings: bool
    num_local_experts: int | None = None
    num_experts_per_tok: int | None = None

    def total_of(self, tensor: TensorCount) -> int:
        """Parameters of ``tensor`` over the whole model (times L when per layer)."""
        return tensor.numel * (self.num_hidden_layers if tensor.per_layer else 1)

    @property
    def total(self) -> int:
        """All parameters, a tied LM head counted once (as ``sum(p.numel())`` does)."""
        return sum(self.total_of(t) for t in self.tensors)

    @property
    def per_layer(self) -> int:
        """Parameters of one decoder block."""
        return sum(t.numel for t in self.tensors if t.per_layer)

    def by_group(self) -> dict[str, int]:
        """Totals per group of `GROUPS` (``lm_head`` is 0 when tied)."""
        out = dict.fromkeys(GROUPS, 0)
        for t in self.tensors:
            out[t.group] += self.total_of(t)
        return out

    def shares(self) -> dict[str, float]:
        """Each group's fraction of `total` (floats for display; counts stay exact)."""
        return {g: n / self.total for g, n in self.by_group().items()}

    @property
    def embedding(self) -> int:
        """Token plus learned position embeddings."""
        return self.by_group()["embedding"]

    @property
    def active(self) -> int:
        """Parameters used for one token: the total less the routed experts the router
        does not pick, L·(E − k)·(one expert's parameters). Equal to `total` for a dense
        model."""
        if not self.num_local_experts:
            return self.total
        idle = self.num_local_experts - self.num_experts_per_tok
        one_expert = sum(
            self.total_of(t) // t.copies for t in self.tensors if t.copies_dim == "E"
        )
        return self.total - idle * one_expert

    @property
    def non_embedding(self) -> int:
        """Total less embeddings and an untied LM head (`NON_EMBEDDING_CONVENTION`)."""
        groups = self.by_group()
        return self.total - groups["embedding"] - groups["lm_head"]

    def as_dict(self) -> dict:
        """A JSON-ready summary: ``total``, ``non_embedding``, ``per_layer``, the
        groups, and every tensor's whole-model count under ``components``."""
        return {
            "total": self.total,
            "active": self.active,
            "non_embedding": self.non_embedding,
            "per_layer": self.per_layer,
            "num_hidden_layers": self.num_hidden_layers,
            "tie_word_embeddings": self.tie_word_embeddings,
            "groups": self.by_group(),
            "components": {t.name: self.total_of(t) for t in self.tensors},
            "non_embedding_convention": NON_EMBEDDING_CONVENTION,
        }


def weight_shapes(cfg: ModelConfig) -> tuple[TensorCount, ...]:
    """Every learnable tensor of the model `cfg` describes, with its shape.

    Layout (Hugging Face's Llama/Qwen/GPT-2 modeling files, names as in
    `llmmath.modules`): ``embed_tokens`` (V, H); ``embed_positions`` (P, H) for learned
    positions; per layer ``input_layernorm``, ``self_attn.{q,k,v,o}_proj`` with optional
    biases, Qwen3's ``self_attn.{q,k}_norm`` (d_h), ``post_attention_layernorm``,
    ``mlp.gate_proj`` (gated only), ``mlp.up_proj``, ``mlp.down_proj`` — or, for a
    mixture of experts, ``mlp.router`` (E, H) and ``mlp.experts.*`` /
    ``mlp.shared_experts.*`` (E or S copies of a gated FFN, one `TensorCount` each with
    ``copies``); the final ``norm``; ``lm_head`` (V, H) unless tied.
    """
    H, V, I = cfg.hidden_size, cfg.vocab_size, cfg.intermediate_size
    q_out, kv_out = (
        cfg.num_attention_heads * cfg.head_dim,
        cfg.num_key_value_heads * cfg.head_dim,
    )
    out: list[TensorCount] = []

    def add(name, group, shape, dims, per_layer=True, copies=1, copies_dim=""):
        out.append(
            TensorCount(
                name, group, tuple(shape), tuple(dims), per_layer, copies, copies_dim
            )
        )

    def norm(name, size, dim, per_layer=True):
        add(f"{name}.weight", "norm", (size,), (dim,), per_layer)
        if cfg.norm_type == "layernorm":
            add(f"{name}.bias", "norm", (size,), (dim,), per_layer)

    def linear(
        name, group, out_f, in_f, out_dim, in_dim, bias, copies=1, copies_dim=""
    ):
        add(
            f"{name}.weight",
            group,
            (out_f, in_f),
            (out_dim, in_dim),
            True,
            copies,
            copies_dim,
        )
        if bias:
            add(f"{name}.bias", group, (out_f,), (out_dim,), True, copies, copies_dim)

    add("embed_tokens.weight", "embedding", (V, H), ("V", "H"), per_layer=False)
    if cfg.position_embedding_type == "learned":
        add(
            "embed_positions.weight",
            "embedding",
            (cfg.max_position_embeddings, H),
            ("P", "H"),
            per_layer=False,
        )
    norm("input_layernorm", H, "H")
    linear("self_attn.q_proj", "attention", q_out, H, "n_h*d_h", "H", cfg.qkv_bias)
    linear("self_attn.k_proj", "attention", kv_out, H, "n_kv*d_h", "H", cfg.qkv_bias)
    linear("self_attn.v_proj", "attention", kv_out, H, "n_kv*d_h", "H", cfg.qkv_bias)
    linear("self_attn.o_proj", "attention", H, q_out, "H", "n_h*d_h", cfg.o_proj_bias)
    if cfg.qk_norm:
        norm("self_attn.q_norm", cfg.head_dim, "d_h")
        norm("self_attn.k_norm", cfg.head_dim, "d_h")
    norm("post_attention_layernorm", H, "H")
    if cfg.is_moe:
        linear("mlp.router", "ffn", cfg.num_local_experts, H, "E", "H", False)
        for prefix, copies, letter in (
            ("mlp.experts.*", cfg.num_local_experts, "E"),
            ("mlp.shared_experts.*", cfg.n_shared_experts, "S"),
        ):
            if copies:
                for proj, out_f, in_f, od, idim in (
                    ("gate_proj", I, H, "I", "H"),
                    ("up_proj", I, H, "I", "H"),
                    ("down_proj", H, I, "H", "I"),
                ):
                    linear(
                        f"{prefix}.{proj}",
                        "ffn",
                        out_f,
                        in_f,
                        od,
                        idim,
                        cfg.mlp_bias,
                        copies,
                        letter,
                    )
    else:
        if cfg.mlp_type == "gated":
            linear("mlp.gate_proj", "ffn", I, H, "I", "H", cfg.mlp_bias)
        linear("mlp.up_proj", "ffn", I, H, "I", "H", cfg.mlp_bias)
        linear("mlp.down_proj", "ffn", H, I, "H", "I", cfg.mlp_bias)
    norm("norm", H, "H", per_layer=False)
    if not cfg.tie_word_embeddings:
        add("lm_head.weight", "lm_head", (V, H), ("V", "H"), per_layer=False)
    return tuple(out)


def count_params(cfg: ModelConfig) -> ParamCount:
    """The exact parameter count of ``cfg``, tensor by tensor.

    Returns a `ParamCount`: ``.total`` equals ``sum(p.numel() for p in
    model.parameters())`` of ``llmmath.modules.build_model(cfg)`` and of the Hugging
    Face model (a tied head counted once); ``.non_embedding`` follows
    `NON_EMBEDDING_CONVENTION`; ``.by_group()`` and ``.tensors`` give the breakdown.
    Units: parameters (not bytes).

    Raises:
        TypeError: ``cfg`` is not a `ModelConfig` (build one with ``ModelConfig(...)``,
        ``ModelConfig.from_hf_config`` or ``llmmath.presets.load``).
    """
    if not isinstance(cfg, ModelConfig):
        raise TypeError(f"count_params needs a ModelConfig, got {type(cfg).__name__}")
    return ParamCount(
        weight_shapes(cfg),
        cfg.num_hidden_layers,
        cfg.tie_word_embeddings,
        cfg.num_local_experts,
        cfg.num_experts_per_tok,
    )

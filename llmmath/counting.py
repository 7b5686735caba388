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

from llmmath.config import ModelConfig, record
from llmmath.messages import N_

GROUPS = ("embedding", "attention", "ffn", "norm", "lm_head")

NON_EMBEDDING_CONVENTION = N_(
    "non-embedding = total - token embedding - learned position embedding - untied "
    "LM head (the convention of Kaplan et al. 2020, Sec. 2.1, and of the Qwen model "
    "cards)"
)


MTP_CONVENTION = (
    "mtp = DeepSeek-V3's multi-token-prediction modules (V3 report, Sec. 2.2): per "
    "module two RMSNorms (H each), the projection (H x 2H), one MoE decoder block and "
    "an output RMSNorm (H); the embedding and the output head are shared with the main "
    "model and not counted again; not in total"
)


@record
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
    #: The layers (0-based) that hold the tensor when not all L do (DeepSeek's dense
    #: first layers and its MoE layers), and the letter for their number.
    layer_set: tuple[int, ...] | None = None
    layers_dim: str = ""

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
            ((self.layers_dim or "L",) if self.per_layer else ())
            + ((self.copies_dim,) if self.copies_dim else ())
            + self.dims
        )
        return "·".join(factors).replace("*", "·")


@record
class ParamCount:
    """The exact parameter count of a model, tensor by tensor (see `count_params`)."""

    tensors: tuple[TensorCount, ...]
    num_hidden_layers: int
    tie_word_embeddings: bool
    num_local_experts: int | None = None
    num_experts_per_tok: int | None = None
    #: Parameters of DeepSeek-V3's multi-token-prediction modules, not in `total`
    #: (see `mtp_params`).
    mtp: int = 0

    def total_of(self, tensor: TensorCount) -> int:
        """Parameters of ``tensor`` over the whole model (times the layers that hold it
        when per layer: L, or the count of ``layer_set``)."""
        if not tensor.per_layer:
            return tensor.numel
        if tensor.layer_set is not None:
            return tensor.numel * len(tensor.layer_set)
        return tensor.numel * self.num_hidden_layers

    def layer_params(self, layer: int) -> int:
        """Parameters of decoder block ``layer`` (0-based)."""
        return sum(
            t.numel
            for t in self.tensors
            if t.per_layer and (t.layer_set is None or layer in t.layer_set)
        )

    @property
    def total(self) -> int:
        """All parameters, a tied LM head counted once (as ``sum(p.numel())`` does)."""
        return sum(self.total_of(t) for t in self.tensors)

    @property
    def per_layer(self) -> int:
        """Parameters of one decoder block (the last one: where blocks differ, as in
        DeepSeek's dense first layers, the last is a mixture-of-experts block)."""
        return self.layer_params(self.num_hidden_layers - 1)

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
        return self._active(self.total)

    def _active(self, total: int) -> int:
        """`active`, given `total`."""
        if not self.num_local_experts:
            return total
        idle = self.num_local_experts - self.num_experts_per_tok
        one_expert = sum(
            self.total_of(t) // t.copies for t in self.tensors if t.copies_dim == "E"
        )
        return total - idle * one_expert

    @property
    def non_embedding(self) -> int:
        """Total less embeddings and an untied LM head (`NON_EMBEDDING_CONVENTION`)."""
        groups = self.by_group()
        return self.total - groups["embedding"] - groups["lm_head"]

    def as_dict(self) -> dict:
        """A JSON-ready summary: ``total``, ``non_embedding``, ``per_layer``, the
        groups, and every tensor's whole-model count under ``components``; with
        multi-token prediction also ``mtp`` (not in ``total``)."""
        extra = {"mtp": self.mtp, "mtp_convention": MTP_CONVENTION} if self.mtp else {}
        # each tensor's count once: the same numbers as `total`, `by_group`, ... each
        # summing again (what ``params --json`` prints, on its start-up path)
        counts = [(t, self.total_of(t)) for t in self.tensors]
        total = sum(n for _, n in counts)
        groups = dict.fromkeys(GROUPS, 0)
        for t, n in counts:
            groups[t.group] += n
        return {
            **extra,
            "total": total,
            "active": self._active(total),
            "non_embedding": total - groups["embedding"] - groups["lm_head"],
            "per_layer": self.per_layer,
            "num_hidden_layers": self.num_hidden_layers,
            "tie_word_embeddings": self.tie_word_embeddings,
            "groups": groups,
            "components": {t.name: n for t, n in counts},
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

    Issue 15's architectures (transformers' modeling files of each): multi-head latent
    attention (``modeling_deepseek_v3.py``: ``q_proj`` (n_h·(d_n+d_r), H) or
    ``q_a_proj`` (d_q, H), ``q_a_layernorm`` (d_q), ``q_b_proj`` (n_h·(d_n+d_r), d_q);
    ``kv_a_proj_with_mqa`` (d_c + d_r, H), ``kv_a_layernorm`` (d_c), ``kv_b_proj``
    (n_h·(d_n+d_v), d_c), ``o_proj`` (H, n_h·d_v)); DeepSeek's dense first layers
    (``layer_set``, L_d of them) and MoE layers (L_m) with experts of width I_e and
    V3's ``mlp.e_score_correction_bias`` (E); Phi-3's fused ``qkv_proj``
    ((n_h + 2·n_kv)·d_h, H) and ``gate_up_proj`` (2I, H); Gemma 2/3's four norms per
    layer and OLMo 2's two output norms (``norm_layout``); OLMo 2's q/k norms over all
    heads (n_h·d_h, n_kv·d_h).
    """
    H, V, I = cfg.hidden_size, cfg.vocab_size, cfg.intermediate_size
    n_h, d_h = cfg.num_attention_heads, cfg.head_dim
    q_out, kv_out = n_h * d_h, cfg.num_key_value_heads * d_h
    out: list[TensorCount] = []
    L = cfg.num_hidden_layers
    dense_set = moe_set = None
    dense_dim = moe_dim = ""
    if cfg.is_moe and cfg.dense_layers:
        dense_set = tuple(sorted(set(cfg.dense_layers)))
        moe_set = tuple(i for i in range(L) if i not in dense_set)
        dense_dim, moe_dim = "L_d", "L_m"

    def add(
        name,
        group,
        shape,
        dims,
        per_layer=True,
        copies=1,
        copies_dim="",
        layer_set=None,
        layers_dim="",
    ):
        out.append(
            TensorCount(
                name,
                group,
                tuple(shape),
                tuple(dims),
                per_layer,
                copies,
                copies_dim,
                layer_set,
                layers_dim,
            )
        )

    def norm(name, size, dim, per_layer=True):
        add(f"{name}.weight", "norm", (size,), (dim,), per_layer)
        if cfg.norm_type == "layernorm":
            add(f"{name}.bias", "norm", (size,), (dim,), per_layer)

    def linear(
        name,
        group,
        out_f,
        in_f,
        out_dim,
        in_dim,
        bias,
        copies=1,
        copies_dim="",
        layer_set=None,
        layers_dim="",
    ):
        where = dict(layer_set=layer_set, layers_dim=layers_dim)
        add(
            f"{name}.weight",
            group,
            (out_f, in_f),
            (out_dim, in_dim),
            True,
            copies,
            copies_dim,
            **where,
        )
        if bias:
            add(
                f"{name}.bias",
                group,
                (out_f,),
                (out_dim,),
                True,
                copies,
                copies_dim,
                **where,
            )

    def ffn(prefix, width, width_dim, copies=1, copies_dim="", **where):
        if cfg.fused_gate_up:
            linear(
                f"{prefix}.gate_up_proj",
                "ffn",
                2 * width,
                H,
                f"2*{width_dim}",
                "H",
                cfg.mlp_bias,
                copies,
                copies_dim,
                **where,
            )
        elif cfg.mlp_type == "gated":
            linear(
                f"{prefix}.gate_proj",
                "ffn",
                width,
                H,
                width_dim,
                "H",
                cfg.mlp_bias,
                copies,
                copies_dim,
                **where,
            )
        if not cfg.fused_gate_up:
            linear(
                f"{prefix}.up_proj",
                "ffn",
                width,
                H,
                width_dim,
                "H",
                cfg.mlp_bias,
                copies,
                copies_dim,
                **where,
            )
        linear(
            f"{prefix}.down_proj",
            "ffn",
            H,
            width,
            "H",
            width_dim,
            cfg.mlp_bias,
            copies,
            copies_dim,
            **where,
        )

    add("embed_tokens.weight", "embedding", (V, H), ("V", "H"), per_layer=False)
    if cfg.position_embedding_type == "learned":
        add(
            "embed_positions.weight",
            "embedding",
            (cfg.max_position_embeddings, H),
            ("P", "H"),
            per_layer=False,
        )
    if cfg.norm_layout != "post":
        norm("input_layernorm", H, "H")
    if cfg.is_mla:
        _mla_shapes(cfg, linear, norm)
    else:
        if cfg.fused_qkv:
            linear(
                "self_attn.qkv_proj",
                "attention",
                q_out + 2 * kv_out,
                H,
                "(n_h+2*n_kv)*d_h",
                "H",
                cfg.qkv_bias,
            )
        else:
            linear(
                "self_attn.q_proj", "attention", q_out, H, "n_h*d_h", "H", cfg.qkv_bias
            )
            linear(
                "self_attn.k_proj",
                "attention",
                kv_out,
                H,
                "n_kv*d_h",
                "H",
                cfg.qkv_bias,
            )
            linear(
                "self_attn.v_proj",
                "attention",
                kv_out,
                H,
                "n_kv*d_h",
                "H",
                cfg.qkv_bias,
            )
        linear(
            "self_attn.o_proj", "attention", H, q_out, "H", "n_h*d_h", cfg.o_proj_bias
        )
    if cfg.qk_norm and cfg.qk_norm_per_head:
        norm("self_attn.q_norm", d_h, "d_h")
        norm("self_attn.k_norm", d_h, "d_h")
    elif cfg.qk_norm:
        norm("self_attn.q_norm", q_out, "n_h*d_h")
        norm("self_attn.k_norm", kv_out, "n_kv*d_h")
    norm("post_attention_layernorm", H, "H")
    if cfg.norm_layout == "sandwich":
        norm("pre_feedforward_layernorm", H, "H")
    if cfg.norm_layout in ("sandwich", "post"):
        norm("post_feedforward_layernorm", H, "H")
    if cfg.is_moe:
        moe = dict(layer_set=moe_set, layers_dim=moe_dim)
        E = cfg.num_local_experts
        linear("mlp.router", "ffn", E, H, "E", "H", False, **moe)
        if cfg.router_score_bias:
            add("mlp.e_score_correction_bias", "ffn", (E,), ("E",), **moe)
        width = cfg.expert_intermediate_size
        width_dim = "I_e" if cfg.moe_intermediate_size is not None else "I"
        for prefix, copies, letter in (
            ("mlp.experts.*", E, "E"),
            ("mlp.shared_experts.*", cfg.n_shared_experts, "S"),
        ):
            if copies:
                ffn(prefix, width, width_dim, copies, letter, **moe)
        if dense_set:
            ffn("mlp", I, "I", layer_set=dense_set, layers_dim=dense_dim)
    else:
        ffn("mlp", I, "I")
    norm("norm", H, "H", per_layer=False)
    if not cfg.tie_word_embeddings:
        add("lm_head.weight", "lm_head", (V, H), ("V", "H"), per_layer=False)
    return tuple(out)


def _mla_shapes(cfg: ModelConfig, linear, norm) -> None:
    """Multi-head latent attention's tensors (DeepSeek-V2 report, Sec. 2.1.2-2.1.3;
    transformers' ``DeepseekV3Attention``): the query through a rank-d_q bottleneck
    (or one ``q_proj``), keys and values through the rank-d_c latent plus one shared
    d_r-wide RoPE key, and the output from n_h·d_v."""
    H, n_h = cfg.hidden_size, cfg.num_attention_heads
    d_n, d_r, d_v, d_c = (
        cfg.qk_nope_head_dim,
        cfg.qk_rope_head_dim,
        cfg.v_head_dim,
        cfg.kv_lora_rank,
    )
    if cfg.q_lora_rank is None:
        linear(
            "self_attn.q_proj",
            "attention",
            n_h * (d_n + d_r),
            H,
            "n_h*(d_n+d_r)",
            "H",
            False,
        )
    else:
        d_q = cfg.q_lora_rank
        linear("self_attn.q_a_proj", "attention", d_q, H, "d_q", "H", cfg.qkv_bias)
        norm("self_attn.q_a_layernorm", d_q, "d_q")
        linear(
            "self_attn.q_b_proj",
            "attention",
            n_h * (d_n + d_r),
            d_q,
            "n_h*(d_n+d_r)",
            "d_q",
            False,
        )
    linear(
        "self_attn.kv_a_proj_with_mqa",
        "attention",
        d_c + d_r,
        H,
        "(d_c+d_r)",
        "H",
        cfg.qkv_bias,
    )
    norm("self_attn.kv_a_layernorm", d_c, "d_c")
    linear(
        "self_attn.kv_b_proj",
        "attention",
        n_h * (d_n + d_v),
        d_c,
        "n_h*(d_n+d_v)",
        "d_c",
        False,
    )
    linear(
        "self_attn.o_proj", "attention", H, n_h * d_v, "H", "n_h*d_v", cfg.o_proj_bias
    )


def mtp_params(cfg: ModelConfig, counts: ParamCount | None = None) -> int:
    """Parameters of DeepSeek-V3's ``num_nextn_predict_layers`` multi-token-prediction
    modules (V3 report, Sec. 2.2; transformers' ``MtpLayer``): per module ``enorm`` and
    ``hnorm`` (H each), ``eh_proj`` (H, 2H), one decoder block like the model's last
    (MLA and MoE) and an output norm (H). The embedding and output head are the main
    model's (DeepSeek's checkpoint stores a copy of each, 2·V·H more). 0 without MTP."""
    if not cfg.num_nextn_predict_layers:
        return 0
    counts = counts or count_params(cfg)
    H = cfg.hidden_size
    one = 3 * H + 2 * H * H + counts.layer_params(cfg.num_hidden_layers - 1)
    return cfg.num_nextn_predict_layers * one


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
    counts = ParamCount(
        weight_shapes(cfg),
        cfg.num_hidden_layers,
        cfg.tie_word_embeddings,
        cfg.num_local_experts,
        cfg.num_experts_per_tok,
    )
    if cfg.num_nextn_predict_layers:
        counts = counts._replace(mtp=mtp_params(cfg, counts))
    return counts

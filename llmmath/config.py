"""Model configuration: the shapes every count in the book starts from.

`ModelConfig` uses the field names of Hugging Face ``config.json`` files so a reader can
paste a real config. `ModelConfig.from_hf_config` reads one for the model types in
`SUPPORTED_MODEL_TYPES` and refuses any other by name: a count for an architecture the
package does not model would be a wrong number, not an approximation.

Explained in the chapter *Counting parameters* (``chapters/01_parameters.ipynb``).
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping

from llmmath.errors import ConfigError, check_positive_int
from llmmath.ffn import minimind_intermediate_size
from llmmath.messages import N_, join
from llmmath.messages import gettext as _

TYPE_CHECKING = False  # typing.TYPE_CHECKING, without importing typing (`record`)
if TYPE_CHECKING:
    from typing import Any

__all__ = ["ConfigError", "ModelConfig", "RopeScaling", "check_positive_int"]

SUPPORTED_MODEL_TYPES = (
    "llama",
    "mistral",
    "qwen2",
    "qwen3",
    "gpt2",
    "mixtral",
    "minimind",
    "deepseek_v2",
    "deepseek_v3",
    "qwen3_moe",
    "gemma",
    "gemma2",
    "gemma3_text",
    "phi3",
    "olmo2",
)
NORM_LAYOUTS = ("pre", "sandwich", "post")
LAYER_TYPES = ("full_attention", "sliding_attention")
MLA_FIELDS = ("kv_lora_rank", "qk_nope_head_dim", "qk_rope_head_dim", "v_head_dim")
NORM_TYPES = ("rmsnorm", "layernorm")
MLP_TYPES = ("gated", "plain")
POSITION_TYPES = ("rope", "learned")
ACTIVATIONS = ("silu", "gelu", "gelu_new", "gelu_pytorch_tanh", "relu")


ROPE_SCALING_TYPES = ("linear", "llama3")


def record(cls: type) -> type:
    """The class statement ``cls`` as a named tuple, as `typing.NamedTuple` makes one
    (its annotated fields, in order, with their defaults; its methods, properties and
    docstring), without importing `typing`: ``python -m llmmath params`` would pay
    that module's import (issue 34), and its records are these classes.

    The fields' annotations are kept as written (``int | None``, this package's
    postponed annotations) on the class and on ``__new__``, which ``help()``,
    `inspect.signature` and hypothesis read.
    """
    from collections import namedtuple

    annotations = dict(cls.__annotations__)  # strings: postponed annotations
    body = {
        name: value
        for name, value in cls.__dict__.items()
        if not name.startswith("__annotat")  # Python 3.14 keeps them lazily
        and name not in ("__dict__", "__weakref__", "__module__")
    }
    fields = list(annotations)
    with_default = [name in body for name in fields]
    if with_default != sorted(with_default):  # a field without a default after one
        raise TypeError(f"{cls.__name__}: a field without a default follows one with")
    defaults = [body.pop(name) for name in fields if name in body]
    made = namedtuple(cls.__name__, fields, defaults=defaults, module=cls.__module__)
    made.__annotations__ = made.__new__.__annotations__ = annotations
    for name, value in body.items():
        setattr(made, name, value)
    made.__qualname__ = cls.__qualname__
    return made


@record
class RopeScaling:
    """A config's ``rope_scaling`` (context extension of RoPE; no effect on any count).

    ``rope_type`` ``"linear"`` (position interpolation) and ``"llama3"`` (Llama 3.1) are
    applied by the reference attention (`llmmath.rope.scaled_inv_freq`); other types
    (``"yarn"``, ``"dynamic"``, ...) are kept by name and refused there, never
    approximated.
    """

    rope_type: str
    factor: float
    low_freq_factor: float | None = None
    high_freq_factor: float | None = None
    original_max_position_embeddings: int | None = None

    @classmethod
    def from_dict(cls, raw: Mapping[str, Any]) -> RopeScaling | None:
        """Read HF's ``rope_scaling`` dict (``rope_type`` or the older ``type`` key)."""
        rope_type = raw.get("rope_type", raw.get("type"))
        if rope_type in (None, "default"):
            return None
        factor = raw.get("factor")
        if (
            isinstance(factor, bool)
            or not isinstance(factor, (int, float))
            or not 0 < factor < math.inf  # NaN fails both
        ):
            raise ConfigError(
                _("{name} must be a positive number, got {value}").format(
                    name="rope_scaling.factor", value=repr(factor)
                )
            )
        scaling = cls(
            str(rope_type),
            float(factor),
            raw.get("low_freq_factor"),
            raw.get("high_freq_factor"),
            raw.get("original_max_position_embeddings"),
        )
        if scaling.rope_type == "llama3":
            for name in (
                "low_freq_factor",
                "high_freq_factor",
                "original_max_position_embeddings",
            ):
                if getattr(scaling, name) is None:
                    raise ConfigError(
                        _(
                            "rope_scaling.{name} is missing; rope_type llama3 needs it"
                        ).format(name=name)
                    )
        return scaling


def _check_layer_count(name: str, value: Any) -> None:
    """Refuse more than `MAX_LAYERS` layers (other types are left to the field's own
    check)."""
    if isinstance(value, int) and not isinstance(value, bool) and value > MAX_LAYERS:
        raise ConfigError(
            _(
                "{name} must be at most {limit} (no model has more layers), got {value}"
            ).format(name=name, limit=f"{MAX_LAYERS:,}", value=f"{value:,}")
        )


def _boolean(name: str, value: Any) -> None:
    if not isinstance(value, bool):
        raise ConfigError(
            _("{name} must be true or false, got {value}").format(
                name=name, value=repr(value)
            )
        )


def _one_of(name: str, value: Any, allowed: tuple[str, ...]) -> None:
    if value not in allowed:
        raise ConfigError(one_of(name, allowed, value))


def one_of(name: str, allowed, value: Any) -> str:
    """The message of a value that is not one of ``allowed``: "NAME must be one of a,
    b, c; got 'x'", in the reader's language."""
    return _("{name} must be one of {allowed}; got {value}").format(
        name=name, allowed=join(map(str, allowed)), value=repr(value)
    )


@record
class _ModelConfigFields:
    """The fields of `ModelConfig` and their defaults (documented there; `ModelConfig`
    adds the checks, the derived defaults and the methods)."""

    vocab_size: int
    hidden_size: int
    intermediate_size: int
    num_hidden_layers: int
    num_attention_heads: int
    num_key_value_heads: int | None = None
    head_dim: int | None = None
    tie_word_embeddings: bool = False
    qkv_bias: bool = False
    o_proj_bias: bool = False
    mlp_bias: bool = False
    norm_type: str = "rmsnorm"
    mlp_type: str = "gated"
    hidden_act: str = "silu"
    position_embedding_type: str = "rope"
    qk_norm: bool = False
    max_position_embeddings: int = 2048
    rope_theta: float = 10000.0
    norm_eps: float = 1e-6
    sliding_window: int | None = None
    rope_scaling: RopeScaling | None = None
    num_local_experts: int | None = None
    num_experts_per_tok: int | None = None
    n_shared_experts: int = 0
    norm_topk_prob: bool = True
    model_type: str = "llama"
    q_lora_rank: int | None = None
    kv_lora_rank: int | None = None
    qk_nope_head_dim: int | None = None
    qk_rope_head_dim: int | None = None
    v_head_dim: int | None = None
    moe_intermediate_size: int | None = None
    dense_layers: tuple[int, ...] = ()
    router_score_bias: bool = False
    num_nextn_predict_layers: int = 0
    norm_layout: str = "pre"
    qk_norm_per_head: bool = True
    fused_qkv: bool = False
    fused_gate_up: bool = False
    layer_types: tuple[str, ...] | None = None
    embedding_scale: bool = False
    attn_logit_softcapping: float | None = None
    final_logit_softcapping: float | None = None
    query_pre_attn_scalar: float | None = None
    rope_local_theta: float | None = None


class ModelConfig(_ModelConfigFields):
    """The architecture of a decoder-only language model, in Hugging Face field names.

    Sizes are counts (positive ``int``): ``hidden_size`` = H, ``num_hidden_layers`` = L,
    ``vocab_size`` = V, ``intermediate_size`` = I, ``num_attention_heads`` = n_h,
    ``num_key_value_heads`` = n_kv, ``head_dim`` = d_h (see the notation page).

    ``num_key_value_heads`` defaults to ``num_attention_heads`` (MHA); ``head_dim``
    defaults to ``hidden_size // num_attention_heads`` and may differ from it when given
    (Qwen3, Gemma). Biases: ``qkv_bias`` on q/k/v projections, ``o_proj_bias`` on the
    output projection, ``mlp_bias`` on every FFN matrix. ``norm_type`` is ``"rmsnorm"``
    (weight only) or ``"layernorm"`` (weight and bias). ``mlp_type`` is ``"gated"``
    (gate, up, down: SwiGLU with ``hidden_act="silu"``) or ``"plain"`` (up, down:
    GPT-2's GELU MLP). ``position_embedding_type`` is ``"rope"`` (no parameters) or
    ``"learned"`` (a ``max_position_embeddings`` × H table). ``qk_norm`` adds Qwen3's
    per-head RMSNorm (d_h weights each) on queries and keys. Mixture of experts:
    ``num_local_experts`` routed experts (E, each a gated FFN of size I), of which a
    router picks ``num_experts_per_tok`` (k) per token, plus ``n_shared_experts`` (S)
    that every token uses (DeepSeekMoE, MiniMind). None/0 for a dense FFN.
    ``norm_topk_prob``: renormalise the k router weights to sum to 1 (Mixtral always;
    MiniMind when k > 1).

    Modern architectures (issue 15; chapter *Multi-head latent attention*):

    - Multi-head latent attention (DeepSeek-V2 report, Sec. 2.1): ``kv_lora_rank``
      (d_c, the cached latent), ``q_lora_rank`` (d_c', None: no query compression),
      ``qk_nope_head_dim`` (d_n) and ``qk_rope_head_dim`` (d_r, the decoupled RoPE key
      shared by all heads), ``v_head_dim`` (d_v). Then ``head_dim`` is d_n + d_r (the
      query/key width of a head) and ``num_key_value_heads`` is n_h.
    - ``moe_intermediate_size`` (I_e): each expert's width when it differs from the
      dense FFN's I; ``dense_layers``: indices of the layers of a mixture-of-experts
      model that keep a dense FFN of width I (DeepSeek's ``first_k_dense_replace``,
      Qwen3-MoE's ``mlp_only_layers``); ``router_score_bias``: DeepSeek-V3's
      ``e_score_correction_bias`` (E values per MoE layer, counted as parameters, as
      DeepSeek's checkpoint stores them); ``num_nextn_predict_layers``: DeepSeek-V3's
      multi-token-prediction modules, counted apart from the total.
    - ``norm_layout``: ``"pre"`` (input_layernorm, post_attention_layernorm before the
      FFN), ``"sandwich"`` (Gemma 2/3: also pre_feedforward_layernorm and
      post_feedforward_layernorm, four per layer) or ``"post"`` (OLMo 2: norms on the
      outputs of attention and FFN, post_attention_layernorm and
      post_feedforward_layernorm, none on their inputs). ``qk_norm_per_head`` False:
      OLMo 2's q/k norms over all heads at once (n_h·d_h and n_kv·d_h weights).
    - ``fused_qkv``/``fused_gate_up``: Phi-3's ``qkv_proj`` and ``gate_up_proj`` (the
      same counts in one tensor each). ``layer_types``: per layer ``"full_attention"``
      or ``"sliding_attention"`` (Gemma 2/3); without it a ``sliding_window`` applies to
      every layer. ``embedding_scale``: Gemma multiplies embeddings by √H (no
      parameters). ``attn_logit_softcapping`` / ``final_logit_softcapping``: Gemma 2's
      c·tanh(x/c) on attention scores and on the logits; ``query_pre_attn_scalar``:
      Gemma 2/3 scale scores by its inverse square root instead of 1/√d_h (none of
      the three has parameters). ``rope_local_theta``: Gemma 3's RoPE base in its
      sliding-window layers (``rope_local_base_freq``).

    Raises:
        ConfigError (a ``ValueError``): a field breaks a rule; the message names the
        field and the rule, e.g. ``num_attention_heads (32) must be divisible by
        num_key_value_heads (5)``.
    """

    __slots__ = ()

    def __new__(cls, *args: Any, **kwargs: Any) -> ModelConfig:
        """Take the fields as `_ModelConfigFields` does (positional or by name), then
        check them and fill the derived defaults (`_validated`)."""
        return super().__new__(cls, *args, **kwargs)._validated()

    # help(), inspect.signature and hypothesis see the fields, not (*args, **kwargs)
    __new__.__wrapped__ = _ModelConfigFields.__new__

    @classmethod
    def _make(cls, iterable: Any) -> ModelConfig:
        """The namedtuple's ``_make``, checked as a new config is: so is ``_replace``,
        which builds its copy with it."""
        config = tuple.__new__(cls, iterable)
        if len(config) != len(cls._fields):
            raise TypeError(f"expected {len(cls._fields)} fields, got {len(config)}")
        return config._validated()

    def _filled(self, **derived: Any) -> ModelConfig:
        """This config with derived defaults set (no second check: `_validated` is
        checking it)."""
        return tuple.__new__(
            type(self), (derived.get(n, v) for n, v in zip(self._fields, self))
        )

    def _validated(self) -> ModelConfig:
        """This config with ``num_key_value_heads`` and ``head_dim`` filled in when not
        given, once every field has passed its rule.

        Raises:
            ConfigError: the first field that breaks a rule, named with the rule.
        """
        for name in (
            "vocab_size",
            "hidden_size",
            "intermediate_size",
            "num_hidden_layers",
            "num_attention_heads",
            "max_position_embeddings",
        ):
            check_positive_int(name, getattr(self, name))
        _check_layer_count("num_hidden_layers", self.num_hidden_layers)
        if self.num_key_value_heads is None:
            self = self._filled(num_key_value_heads=self.num_attention_heads)
        check_positive_int("num_key_value_heads", self.num_key_value_heads)
        if self.num_key_value_heads > self.num_attention_heads:
            raise ConfigError(
                _("{name} ({n}) must not exceed {other} ({m})").format(
                    name="num_key_value_heads",
                    n=self.num_key_value_heads,
                    other="num_attention_heads",
                    m=self.num_attention_heads,
                )
            )
        if self.num_attention_heads % self.num_key_value_heads:
            raise ConfigError(
                _("{name} ({n}) must be divisible by {other} ({m})").format(
                    name="num_attention_heads",
                    n=self.num_attention_heads,
                    other="num_key_value_heads",
                    m=self.num_key_value_heads,
                )
            )
        if (
            self.head_dim is None
            and isinstance(self.qk_nope_head_dim, int)
            and isinstance(self.qk_rope_head_dim, int)
        ):  # MLA: a head's query/key width
            self = self._filled(head_dim=self.qk_nope_head_dim + self.qk_rope_head_dim)
        if self.head_dim is None:
            if self.hidden_size % self.num_attention_heads:
                raise ConfigError(
                    _(
                        "hidden_size ({n}) must be divisible by num_attention_heads "
                        "({m}) when head_dim is not given"
                    ).format(n=self.hidden_size, m=self.num_attention_heads)
                )
            self = self._filled(head_dim=self.hidden_size // self.num_attention_heads)
        check_positive_int("head_dim", self.head_dim)
        for name in (
            "tie_word_embeddings",
            "qkv_bias",
            "o_proj_bias",
            "mlp_bias",
            "qk_norm",
            "norm_topk_prob",
        ):
            _boolean(name, getattr(self, name))
        _one_of("norm_type", self.norm_type, NORM_TYPES)
        _one_of("mlp_type", self.mlp_type, MLP_TYPES)
        _one_of("position_embedding_type", self.position_embedding_type, POSITION_TYPES)
        _one_of("hidden_act", self.hidden_act, ACTIVATIONS)
        if self.sliding_window is not None:
            check_positive_int("sliding_window", self.sliding_window)
        self._check_experts()
        self._check_modern()
        for name in ("rope_theta", "norm_eps"):
            value = getattr(self, name)
            if (
                isinstance(value, bool)
                or not isinstance(value, (int, float))
                or not 0 < value < math.inf  # NaN fails both
            ):
                raise ConfigError(
                    _("{name} must be a positive number, got {value}").format(
                        name=name, value=repr(value)
                    )
                )
        return self

    def _check_experts(self) -> None:
        if (
            isinstance(self.n_shared_experts, bool)
            or not isinstance(self.n_shared_experts, int)
            or self.n_shared_experts < 0
        ):
            raise ConfigError(
                _("{name} must be a non-negative integer, got {value}").format(
                    name="n_shared_experts", value=repr(self.n_shared_experts)
                )
            )
        if self.num_local_experts is None:
            if self.num_experts_per_tok is not None or self.n_shared_experts:
                raise ConfigError(
                    _(
                        "num_experts_per_tok and n_shared_experts need "
                        "num_local_experts (a mixture of experts)"
                    )
                )
            return
        check_positive_int("num_local_experts", self.num_local_experts)
        check_positive_int("num_experts_per_tok", self.num_experts_per_tok)
        if self.num_experts_per_tok > self.num_local_experts:
            raise ConfigError(
                _("{name} ({n}) must not exceed {other} ({m})").format(
                    name="num_experts_per_tok",
                    n=self.num_experts_per_tok,
                    other="num_local_experts",
                    m=self.num_local_experts,
                )
            )
        if self.mlp_type != "gated":
            raise ConfigError(
                _(
                    "a mixture of experts needs mlp_type 'gated' (each expert is a "
                    "gated FFN)"
                )
            )

    def _check_modern(self) -> None:
        """The fields of issue 15's architectures: MLA sizes together, dense layers in
        range, layer types one per layer."""
        mla = [n for n in MLA_FIELDS if getattr(self, n) is not None]
        if mla or self.q_lora_rank is not None:
            for name in MLA_FIELDS:
                if getattr(self, name) is None:
                    raise ConfigError(
                        _(
                            "{name} is missing; multi-head latent attention needs "
                            "{fields}"
                        ).format(name=name, fields=join(MLA_FIELDS))
                    )
                check_positive_int(name, getattr(self, name))
            if self.q_lora_rank is not None:
                check_positive_int("q_lora_rank", self.q_lora_rank)
            if self.head_dim != self.qk_nope_head_dim + self.qk_rope_head_dim:
                raise ConfigError(
                    _(
                        "head_dim ({n}) must be qk_nope_head_dim + qk_rope_head_dim "
                        "({a} + {b}) with multi-head latent attention"
                    ).format(
                        n=self.head_dim,
                        a=self.qk_nope_head_dim,
                        b=self.qk_rope_head_dim,
                    )
                )
            if self.num_key_value_heads != self.num_attention_heads:
                raise ConfigError(
                    _(
                        "num_key_value_heads ({n}) must equal num_attention_heads "
                        "({m}) with multi-head latent attention (every head has its "
                        "own key and value)"
                    ).format(n=self.num_key_value_heads, m=self.num_attention_heads)
                )
        if self.moe_intermediate_size is not None:
            check_positive_int("moe_intermediate_size", self.moe_intermediate_size)
        if not isinstance(self.dense_layers, tuple) or any(
            isinstance(i, bool)
            or not isinstance(i, int)
            or not 0 <= i < self.num_hidden_layers
            for i in self.dense_layers
        ):
            raise ConfigError(
                _(
                    "dense_layers must be layer indices in 0 .. {last}, got {value}"
                ).format(last=self.num_hidden_layers - 1, value=repr(self.dense_layers))
            )
        if self.dense_layers and not self.is_moe:
            raise ConfigError(
                _("dense_layers needs num_local_experts (a mixture of experts)")
            )
        for name in (
            "router_score_bias",
            "qk_norm_per_head",
            "fused_qkv",
            "fused_gate_up",
            "embedding_scale",
        ):
            _boolean(name, getattr(self, name))
        n = self.num_nextn_predict_layers
        if isinstance(n, bool) or not isinstance(n, int) or n < 0:
            raise ConfigError(
                _("{name} must be a non-negative integer, got {value}").format(
                    name="num_nextn_predict_layers", value=repr(n)
                )
            )
        _one_of("norm_layout", self.norm_layout, NORM_LAYOUTS)
        for name in (
            "attn_logit_softcapping",
            "final_logit_softcapping",
            "query_pre_attn_scalar",
            "rope_local_theta",
        ):
            value = getattr(self, name)
            if value is not None and (
                isinstance(value, bool)
                or not isinstance(value, (int, float))
                or not 0 < value < float("inf")
            ):
                raise ConfigError(
                    _("{name} must be a positive number, got {value}").format(
                        name=name, value=repr(value)
                    )
                )
        if self.layer_types is not None:
            if not isinstance(self.layer_types, tuple) or (
                len(self.layer_types) != self.num_hidden_layers
            ):
                raise ConfigError(
                    _(
                        "layer_types must list one type per layer ({n}), got {value}"
                    ).format(n=self.num_hidden_layers, value=repr(self.layer_types))
                )
            for kind in self.layer_types:
                _one_of("layer_types[i]", kind, LAYER_TYPES)
            if "sliding_attention" in self.layer_types and not self.sliding_window:
                raise ConfigError(
                    _(
                        "sliding_window is missing; layer_types has sliding_attention "
                        "layers"
                    )
                )
        if self.is_mla and self.fused_qkv:
            raise ConfigError(
                _("fused_qkv does not apply to multi-head latent attention")
            )

    @property
    def is_mla(self) -> bool:
        """True for multi-head latent attention (``kv_lora_rank`` set; DeepSeek)."""
        return self.kv_lora_rank is not None

    @property
    def expert_intermediate_size(self) -> int:
        """I_e: the width of each routed or shared expert (``moe_intermediate_size``, or
        I when not given)."""
        return self.moe_intermediate_size or self.intermediate_size

    @property
    def num_dense_layers(self) -> int:
        """Layers with a dense FFN: L for a dense model, ``len(dense_layers)`` for a
        mixture of experts."""
        return len(self.dense_layers) if self.is_moe else self.num_hidden_layers

    @property
    def num_moe_layers(self) -> int:
        """Layers with a mixture-of-experts FFN (0 for a dense model)."""
        return self.num_hidden_layers - self.num_dense_layers

    def window_of(self, layer: int) -> int | None:
        """The sliding window of layer ``layer`` (0-based): ``sliding_window`` for every
        layer without ``layer_types``, else only for its ``sliding_attention`` layers;
        None for full attention."""
        if self.layer_types is None:
            return self.sliding_window
        if self.layer_types[layer] == "sliding_attention":
            return self.sliding_window
        return None

    @property
    def is_moe(self) -> bool:
        """True for a mixture-of-experts FFN (``num_local_experts`` set)."""
        return self.num_local_experts is not None

    @property
    def group_size(self) -> int:
        """g = n_h / n_kv: query heads that share one key/value head (1 for MHA, n_h for
        MQA)."""
        return self.num_attention_heads // self.num_key_value_heads

    def replace(self, **changes: Any) -> ModelConfig:
        """A copy with some fields changed, validated again.

        A changed ``hidden_size`` or ``num_attention_heads`` re-derives ``head_dim``
        unless ``head_dim`` is among the changes; likewise ``num_key_value_heads`` is
        kept as given.
        """
        if (
            "hidden_size" in changes or "num_attention_heads" in changes
        ) and "head_dim" not in changes:
            changes["head_dim"] = None
        return self._replace(**changes)

    @classmethod
    def from_hf_config(
        cls, source: str | os.PathLike | Mapping[str, Any]
    ) -> ModelConfig:
        """Read a Hugging Face ``config.json`` (a path or an already-parsed dict).

        Follows each model type's configuration class and modeling file in
        ``transformers``:

        - ``llama``: ``attention_bias`` puts biases on q, k, v and o; ``mlp_bias`` on
          the FFN; ``tie_word_embeddings`` defaults to false.
        - ``mistral``: no biases anywhere (hard-coded in
          ``MistralAttention``/``MistralMLP``); ``sliding_window`` is read; untied by
          default.
        - ``qwen2``: q/k/v biased and o not (hard-coded in ``Qwen2Attention``); untied
          by default.
        - ``qwen3``: ``attention_bias`` on q, k, v and o; per-head RMSNorm on q and k;
          ``head_dim`` defaults to 128, not H / n_h; untied by default.
        - ``gpt2``: ``n_embd``, ``n_layer``, ``n_head``, ``n_positions``, ``n_inner``
          (default 4H); learned positions, LayerNorm with bias, biased projections, GELU
          MLP; tied by default.
        - ``mixtral``: Mistral's attention, and ``num_local_experts`` (default 8)
          experts of which ``num_experts_per_tok`` (default 2) run per token, with a
          bias-free router; untied.
        - ``minimind`` (jingyaogong/minimind, the MiniMind2 release's
          ``MiniMindConfig``; later upstream versions rename the MoE fields and are not
          read): Llama-like, always tied; a missing ``intermediate_size`` is int(8H/3)
          rounded up to a multiple of 64; with ``use_moe``, ``n_routed_experts``
          (default 4), ``num_experts_per_tok`` (2) and ``n_shared_experts`` (1).

        - ``deepseek_v2``, ``deepseek_v3`` (``modeling_deepseek_v3.py``; DeepSeek-V2
          report Sec. 2, V3 report Sec. 2): multi-head latent attention from
          ``q_lora_rank`` (the key must be present; null: an uncompressed ``q_proj``),
          ``kv_lora_rank``, ``qk_nope_head_dim``, ``qk_rope_head_dim``, ``v_head_dim``
          (all required); DeepSeekMoE from ``n_routed_experts``,
          ``num_experts_per_tok``, ``moe_intermediate_size`` (required),
          ``n_shared_experts`` (null: none) and ``first_k_dense_replace`` (defaults
          as transformers: 0 for V2, 3 for V3); ``moe_layer_freq`` must be 1 (as in
          every release; transformers ignores it); V3's router has
          ``e_score_correction_bias``; ``num_nextn_predict_layers`` (V3 default 1)
          multi-token-prediction modules are counted apart; untied.
        - ``qwen3_moe``: Qwen3's attention; ``num_experts`` (E) experts of width
          ``moe_intermediate_size``, ``num_experts_per_tok`` per token, in every layer
          i with (i + 1) % ``decoder_sparse_step`` == 0 and i not in
          ``mlp_only_layers`` (the others a dense FFN of width I); untied.
        - ``gemma``, ``gemma2``, ``gemma3_text``: ``head_dim`` (default 256), GeGLU
          (``gelu_pytorch_tanh``), tied by default, embeddings times √H (no
          parameters), ``attention_bias``; Gemma 2/3 four norms per layer and
          ``layer_types`` (default: Gemma 2 every other layer sliding, Gemma 3 five of
          every six, ``sliding_window_pattern``) with ``sliding_window`` (default
          4096); Gemma 3 per-head q/k norms.
        - ``phi3``: fused ``qkv_proj`` and ``gate_up_proj``, no biases,
          ``sliding_window`` on every layer when set; untied.
        - ``olmo2``: norms after attention and after the FFN (none before), q/k norms
          over all heads (n_h·d_h, n_kv·d_h), ``attention_bias``; untied.

        A missing ``num_key_value_heads`` means MHA; an explicit ``head_dim`` is
        honoured.

        Raises:
            ConfigError: the file is missing or not JSON, ``model_type`` is absent or
            not one of `SUPPORTED_MODEL_TYPES`, a required field is missing, or a value
            breaks a rule.
        """
        raw = _load_json(source)
        for name in ("num_hidden_layers", "n_layer"):  # before any loop over layers
            _check_layer_count(name, raw.get(name))
        model_type = raw.get("model_type")
        if model_type not in SUPPORTED_MODEL_TYPES:
            raise ConfigError(
                _("model_type {value} is not supported; llmmath models {types}").format(
                    value=repr(model_type), types=join(SUPPORTED_MODEL_TYPES)
                )
            )
        reader = {
            "gpt2": _gpt2_fields,
            "minimind": _minimind_fields,
            "deepseek_v2": _deepseek_fields,
            "deepseek_v3": _deepseek_fields,
            "gemma": _gemma_fields,
            "gemma2": _gemma_fields,
            "gemma3_text": _gemma_fields,
        }.get(model_type, _rope_fields)
        return cls(**reader(raw, model_type))


# --- the one JSON reader (issue 18) -------------------------------------------------
#: A real config.json is a few kilobytes; nothing needs more than this many bytes.
MAX_CONFIG_BYTES = 10 * 10**6
#: Levels of nesting of JSON arrays and objects (the top-level object is level 1); real
#: configs need four or five (``quantization_config``, ``text_config``).
MAX_DEPTH = 32
#: The largest integer magnitude a value may have: 2^63 - 1, the int64 range.
MAX_INT = 2**63 - 1
MAX_INT_DIGITS = len(str(MAX_INT))
#: No model has more layers; loops over the layers stay instant below it.
MAX_LAYERS = 10_000


def _bracket_patterns():
    """(a string, or an unterminated one up to the end: never a failed match, linear
    time; a run of anything but brackets), compiled on first use: `re` loads only
    for a config read from text (``import llmmath`` stays light, issue 34)."""
    import re

    return (
        re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"?', re.DOTALL),
        re.compile(r"[^\[\]{}]+"),
    )


class _Refused:
    """A number the parser could not take as a value (non-finite, too many digits),
    kept until the walk over the document can name its field: ``rule``, a message
    (marked `N_`) with the fields ``{field}``, ``{limit}`` and ``{value}``, and what
    was ``got``."""

    def __init__(self, rule: str, got: str) -> None:
        self.rule, self.got = rule, got


_FINITE = N_("{field} must be a finite number, got {value}")
_INT64 = N_(
    "{field} must be an integer of at most {limit} (2^63 - 1) in magnitude, got {value}"
)


def _parse_constant(text: str) -> _Refused:
    return _Refused(_FINITE, text)


def _parse_float(text: str) -> float | _Refused:
    value = float(text)
    if math.isfinite(value):
        return value
    if len(text) > 40:  # a number of a million digits is not shown whole
        return _Refused(
            _FINITE,
            _("{number} ({n} characters, overflows to infinity)").format(
                number=f"{text[:20]}...{text[-10:]}", n=f"{len(text):,}"
            ),
        )
    return _Refused(_FINITE, _("{number} (overflows to infinity)").format(number=text))


def _parse_int(text: str) -> int | _Refused:
    digits = len(text.lstrip("-"))
    if digits > MAX_INT_DIGITS:
        return _Refused(_INT64, _("an integer of {n} digits").format(n=f"{digits:,}"))
    return int(text)


def _too_deep(text: str) -> bool:
    """True when brackets outside strings nest deeper than `MAX_DEPTH` (checked before
    parsing, so the parser never recurses that deep). Linear time: pairs ``[]`` are
    peeled off level by level, `MAX_DEPTH` times at most; what remains is walked."""
    if text.count("[") + text.count("{") <= MAX_DEPTH:
        return False
    string, not_bracket = _bracket_patterns()
    brackets = not_bracket.sub("", string.sub("", text)).translate(_SQUARE)
    peels = 0  # levels removed: what remains nests on top of them
    while peels < MAX_DEPTH:
        peeled = brackets.replace("[]", "")
        if peeled == brackets:  # nothing left, or only unbalanced brackets
            break
        brackets, peels = peeled, peels + 1
    depth = peels
    for c in brackets:  # short: anything balanced and shallow is gone
        depth += 1 if c == "[" else -1
        if depth > MAX_DEPTH:
            return True
        if depth < peels:  # a closing bracket too many: invalid JSON (parser says so)
            return False
    return False


_SQUARE = str.maketrans("{}", "[]")


def _field(path: str) -> str:
    return path or _("the top-level value")


def _child(path: str, key: str) -> str:
    """``rope_scaling.factor``; a key that is not a name is quoted, ``x['a b']``."""
    if not key.isidentifier():
        return f"{path}[{key!r}]" if path else repr(key)
    return f"{path}.{key}" if path else key


def _digits(value: int) -> str:
    if value.bit_length() > 10_000:  # str() refuses past 4,300 digits
        return _("more than {n}").format(n="3,000")
    return f"{len(str(abs(value))):,}"


def check_json_values(raw: Any, source: str | None = None) -> None:
    """Check every value of a parsed config: finite numbers, integers within ±(2^63 -
    1), arrays and objects nested at most `MAX_DEPTH` deep, string keys, JSON types
    only (a dict given to `ModelConfig.from_hf_config` is checked the same way).

    Raises:
        ConfigError: naming the field (``rope_scaling.factor``, ``layer_types[3]``)
        and the rule. ``source`` names the document (default "the config").
    """
    source = _("the config") if source is None else source
    stack = [(raw, "", 1)]
    while stack:
        value, path, depth = stack.pop()
        if value is None or isinstance(value, (str, bool)):
            continue
        if isinstance(value, _Refused):
            raise ConfigError(
                _(value.rule).format(
                    field=_field(path), limit=f"{MAX_INT:,}", value=value.got
                )
            )
        if isinstance(value, int):
            if abs(value) > MAX_INT:
                raise ConfigError(
                    _(_INT64).format(
                        field=_field(path),
                        limit=f"{MAX_INT:,}",
                        value=_("one of {n} digits").format(n=_digits(value)),
                    )
                )
            continue
        if isinstance(value, float):
            if not math.isfinite(value):
                raise ConfigError(_(_FINITE).format(field=_field(path), value=value))
            continue
        if not isinstance(value, (Mapping, list, tuple)):
            raise ConfigError(
                _(
                    "{field} must be a JSON value (object, array, string, number, "
                    "true, false or null), got {type}"
                ).format(field=_field(path), type=type(value).__name__)
            )
        if depth > MAX_DEPTH:
            raise ConfigError(
                _(
                    "{source} nests arrays and objects deeper than {n} levels (at "
                    "{field}); a config.json needs a few"
                ).format(source=source, n=MAX_DEPTH, field=_field(path))
            )
        if isinstance(value, Mapping):
            for key, item in value.items():
                if not isinstance(key, str):
                    raise ConfigError(
                        _("{field} has the key {key}; keys must be strings").format(
                            field=_field(path), key=repr(key)
                        )
                    )
                stack.append((item, _child(path, key), depth + 1))
        else:
            stack += [(v, f"{path}[{i}]", depth + 1) for i, v in enumerate(value)]


def _load_json(source: str | os.PathLike | Mapping[str, Any]) -> Mapping[str, Any]:
    if isinstance(source, Mapping):
        check_json_values(source)
        return source
    if not isinstance(source, (str, bytes, os.PathLike)):
        raise ConfigError(
            _(
                "a config must be a path or a dict (an already-parsed config.json), "
                "got {type}"
            ).format(type=type(source).__name__)
        )
    path = os.fsdecode(source)
    name = _("config file {path}").format(path=repr(path))
    try:
        with open(path, "rb") as f:
            data = f.read(MAX_CONFIG_BYTES + 1)
    except FileNotFoundError:
        raise ConfigError(_("{source} does not exist").format(source=name)) from None
    except IsADirectoryError:
        raise ConfigError(
            _("{source} is a directory, not a config.json").format(source=name)
        ) from None
    except (OSError, ValueError) as e:  # permissions, a name too long, a NUL byte
        reason = getattr(e, "strerror", None) or str(e)
        raise ConfigError(unreadable(name, reason)) from None
    if len(data) > MAX_CONFIG_BYTES:
        raise ConfigError(_too_big(name))
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise ConfigError(not_json(name, e)) from None
    return parse_config_text(text, name)


def _too_big(source: str) -> str:
    return _(
        "{source} is over {mb} MB ({n} bytes); a config.json is a few kilobytes"
    ).format(source=source, mb=MAX_CONFIG_BYTES // 10**6, n=f"{MAX_CONFIG_BYTES:,}")


def unreadable(source: str, reason) -> str:
    """ "SOURCE cannot be read (REASON)", in the reader's language."""
    return _("{source} cannot be read ({reason})").format(source=source, reason=reason)


def not_json(source: str, error) -> str:
    """ "SOURCE is not valid JSON (ERROR)", in the reader's language."""
    return _("{source} is not valid JSON ({error})").format(source=source, error=error)


def parse_config_text(text: str, source: str | None = None) -> dict:
    """Parse the text of a ``config.json`` into a dict: the one JSON reader of the CLI
    (files) and the browser calculator (pasted text).

    Rules: at most `MAX_CONFIG_BYTES` bytes (UTF-8); a JSON object; no key twice in
    one object (the value would depend on the reader); arrays and objects at most
    `MAX_DEPTH` deep; numbers finite (no ``NaN``, ``Infinity``, ``1e999``); integers
    within ±`MAX_INT` (`check_json_values`).

    ``source`` names the text in messages (default "the pasted config.json").

    Raises:
        ConfigError: naming ``source`` and the rule, or the field and the rule.
    """
    source = _("the pasted config.json") if source is None else source
    if not isinstance(text, str):
        raise ConfigError(
            _("{source} must be text, got {type}").format(
                source=source, type=type(text).__name__
            )
        )
    if len(text) > MAX_CONFIG_BYTES or (
        4 * len(text) > MAX_CONFIG_BYTES
        and len(text.encode("utf-8", "surrogatepass")) > MAX_CONFIG_BYTES
    ):
        raise ConfigError(_too_big(source))
    depth_error = ConfigError(
        _(
            "{source} nests arrays and objects deeper than {n} levels; a config.json "
            "needs a few"
        ).format(source=source, n=MAX_DEPTH)
    )
    if _too_deep(text):
        raise depth_error

    def unique(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
        obj = {}
        for key, value in pairs:
            if key in obj:
                raise ConfigError(
                    _(
                        "{source} gives the key {key} twice; with a duplicate key the "
                        "config is ambiguous"
                    ).format(source=source, key=repr(key))
                )
            obj[key] = value
        return obj

    import json  # here, not at import: ``import llmmath`` stays light (issue 34)

    try:
        raw = json.loads(
            text,
            object_pairs_hook=unique,
            parse_constant=_parse_constant,
            parse_float=_parse_float,
            parse_int=_parse_int,
        )
    except json.JSONDecodeError as e:
        raise ConfigError(not_json(source, e)) from None
    except RecursionError:
        raise depth_error from None
    except ConfigError:
        raise
    except ValueError as e:  # any other refusal of the parser, as one line
        raise ConfigError(not_json(source, e)) from None
    if not isinstance(raw, dict):
        kind = _("number") if isinstance(raw, _Refused) else type(raw).__name__
        raise ConfigError(
            _("{source} must hold a JSON object, got {type}").format(
                source=source, type=kind
            )
        )
    check_json_values(raw, source)
    return raw


def _required(raw: Mapping[str, Any], name: str, model_type: str) -> Any:
    if name not in raw or raw[name] is None:
        raise ConfigError(
            _("{name} is missing; a {model_type} config.json must give it").format(
                name=name, model_type=model_type
            )
        )
    return raw[name]


def _must_be_a_list(name: str, value: Any) -> str:
    return _("{name} must be a list, got {value}").format(name=name, value=repr(value))


def _optional(raw: Mapping[str, Any], name: str, default: Any) -> Any:
    value = raw.get(name)
    return default if value is None else value


def _rope_fields(raw: Mapping[str, Any], model_type: str) -> dict[str, Any]:
    fields = {
        name: _required(raw, name, model_type)
        for name in (
            "vocab_size",
            "hidden_size",
            "intermediate_size",
            "num_hidden_layers",
            "num_attention_heads",
        )
    }
    attention_bias = _optional(raw, "attention_bias", False)
    qkv_bias, o_proj_bias = {
        "llama": (attention_bias, attention_bias),
        "mistral": (False, False),
        "qwen2": (True, False),
        "qwen3": (attention_bias, attention_bias),
        "qwen3_moe": (attention_bias, attention_bias),
        "mixtral": (False, False),
        "phi3": (False, False),
        "olmo2": (attention_bias, attention_bias),
    }[model_type]
    fields.update(
        model_type=model_type,
        num_key_value_heads=raw.get("num_key_value_heads"),
        head_dim=raw.get("head_dim", 128 if model_type == "qwen3" else None),
        tie_word_embeddings=_optional(raw, "tie_word_embeddings", False),
        qkv_bias=qkv_bias,
        o_proj_bias=o_proj_bias,
        mlp_bias=_optional(raw, "mlp_bias", False) if model_type == "llama" else False,
        norm_type="rmsnorm",
        mlp_type="gated",
        hidden_act=_optional(raw, "hidden_act", "silu"),
        position_embedding_type="rope",
        qk_norm=model_type in ("qwen3", "qwen3_moe", "olmo2"),
        max_position_embeddings=_optional(raw, "max_position_embeddings", 2048),
        rope_theta=(
            1000000.0  # MixtralConfig's default_theta
            if model_type == "mixtral"
            and raw.get("rope_theta") is None
            and not isinstance(raw.get("rope_parameters"), Mapping)
            else _rope_theta(raw)
        ),
        rope_scaling=_rope_scaling(raw),
        norm_eps=_optional(
            raw,
            "rms_norm_eps",
            1e-5 if model_type in ("phi3", "olmo2", "mixtral") else 1e-6,
        ),  # the defaults of transformers' configuration classes
        sliding_window=_sliding_window(raw, model_type),
    )
    if model_type == "mixtral":
        fields.update(
            num_local_experts=_optional(raw, "num_local_experts", 8),
            num_experts_per_tok=_optional(raw, "num_experts_per_tok", 2),
        )
    elif model_type == "qwen3_moe":
        fields.update(_qwen3_moe_fields(raw, fields["num_hidden_layers"]))
    elif model_type == "phi3":
        fields.update(fused_qkv=True, fused_gate_up=True)
    elif model_type == "olmo2":
        fields.update(norm_layout="post", qk_norm_per_head=False)
    return fields


def _layer_count(raw: Mapping[str, Any], model_type: str) -> int:
    layers = _required(raw, "num_hidden_layers", model_type)
    check_positive_int("num_hidden_layers", layers)
    return layers


def _qwen3_moe_fields(raw: Mapping[str, Any], layers: int) -> dict[str, Any]:
    """Qwen3-MoE's sparse layers (``Qwen3MoeDecoderLayer``): layer i has experts when
    i is not in ``mlp_only_layers`` and (i + 1) % ``decoder_sparse_step`` == 0."""
    check_positive_int("num_hidden_layers", layers)
    experts = _optional(raw, "num_experts", 128)
    if experts == 0:
        return {}
    step = _optional(raw, "decoder_sparse_step", 1)
    check_positive_int("decoder_sparse_step", step)
    only_mlp = _optional(raw, "mlp_only_layers", [])
    if not isinstance(only_mlp, list):
        raise ConfigError(_must_be_a_list("mlp_only_layers", only_mlp))
    only = {i for i in only_mlp if isinstance(i, (int, float))}  # O(1) lookups
    norm = _optional(raw, "norm_topk_prob", False)
    _boolean("norm_topk_prob", norm)
    return dict(
        num_local_experts=experts,
        num_experts_per_tok=_optional(raw, "num_experts_per_tok", 8),
        moe_intermediate_size=_optional(raw, "moe_intermediate_size", 768),
        norm_topk_prob=norm,
        dense_layers=tuple(i for i in range(layers) if i in only or (i + 1) % step),
    )


def _deepseek_fields(raw: Mapping[str, Any], model_type: str) -> dict[str, Any]:
    """DeepSeek-V2/V3: MLA and DeepSeekMoE (transformers' ``modeling_deepseek_v3.py``
    and ``modeling_deepseek_v2.py``)."""
    v3 = model_type == "deepseek_v3"
    names = (
        "vocab_size",
        "hidden_size",
        "intermediate_size",
        "num_attention_heads",
        *MLA_FIELDS,
        "n_routed_experts",
        "num_experts_per_tok",
        "moe_intermediate_size",
    )
    fields = {name: _required(raw, name, model_type) for name in names}
    layers = _layer_count(raw, model_type)
    if "q_lora_rank" not in raw:
        raise ConfigError(
            _(
                "q_lora_rank is missing; a {model_type} config.json must give it "
                "(null for an uncompressed query)"
            ).format(model_type=model_type)
        )
    freq = _optional(raw, "moe_layer_freq", 1)
    if freq != 1:
        raise ConfigError(
            _(
                "moe_layer_freq must be 1, got {value}: transformers' DeepSeek layers "
                "ignore it and DeepSeek's own code does not, so the count would be "
                "ambiguous"
            ).format(value=repr(freq))
        )
    if _optional(raw, "mlp_bias", False) is not False:
        raise ConfigError(
            _("mlp_bias must be false for {model_type} (experts have none)").format(
                model_type=model_type
            )
        )
    first_dense = _optional(raw, "first_k_dense_replace", 3 if v3 else 0)
    if (
        isinstance(first_dense, bool)
        or not isinstance(first_dense, int)
        or not (0 <= first_dense <= layers)
    ):
        raise ConfigError(
            _(
                "first_k_dense_replace must be an integer in 0 .. num_hidden_layers "
                "({n}), got {value}"
            ).format(n=layers, value=repr(first_dense))
        )
    attention_bias = _optional(raw, "attention_bias", False)
    norm = _optional(raw, "norm_topk_prob", v3)
    _boolean("norm_topk_prob", norm)
    fields.update(
        model_type=model_type,
        num_hidden_layers=layers,
        num_key_value_heads=None,  # MLA: every head its own key and value
        head_dim=None,  # d_n + d_r
        q_lora_rank=raw["q_lora_rank"],
        num_local_experts=fields.pop("n_routed_experts"),
        n_shared_experts=_optional(raw, "n_shared_experts", 0),
        dense_layers=tuple(range(first_dense)),
        norm_topk_prob=norm,
        router_score_bias=v3,
        num_nextn_predict_layers=_optional(raw, "num_nextn_predict_layers", int(v3)),
        tie_word_embeddings=_optional(raw, "tie_word_embeddings", False),
        qkv_bias=attention_bias,
        o_proj_bias=attention_bias,
        hidden_act=_optional(raw, "hidden_act", "silu"),
        max_position_embeddings=_optional(raw, "max_position_embeddings", 2048),
        rope_theta=_rope_theta(raw),
        rope_scaling=_rope_scaling(raw),
        norm_eps=_optional(raw, "rms_norm_eps", 1e-6),
    )
    return fields


def _gemma_fields(raw: Mapping[str, Any], model_type: str) -> dict[str, Any]:
    """Gemma 1/2/3 (``modeling_gemma*.py``): GeGLU, √H embedding scale, tied by
    default; Gemma 2/3 sandwich norms and a hybrid local/global cache."""
    fields = {
        name: _required(raw, name, model_type)
        for name in (
            "vocab_size",
            "hidden_size",
            "intermediate_size",
            "num_attention_heads",
        )
    }
    layers = _layer_count(raw, model_type)
    attention_bias = _optional(raw, "attention_bias", False)
    act = raw.get("hidden_activation") or raw.get("hidden_act") or "gelu_pytorch_tanh"
    fields.update(
        model_type=model_type,
        num_hidden_layers=layers,
        num_key_value_heads=raw.get("num_key_value_heads"),
        head_dim=_optional(raw, "head_dim", 256),
        tie_word_embeddings=_optional(raw, "tie_word_embeddings", True),
        qkv_bias=attention_bias,
        o_proj_bias=attention_bias,
        hidden_act="gelu_pytorch_tanh" if act == "gelu" else act,
        max_position_embeddings=_optional(raw, "max_position_embeddings", 8192),
        rope_theta=_rope_theta(raw),
        rope_scaling=_rope_scaling(raw),
        norm_eps=_optional(raw, "rms_norm_eps", 1e-6),
        embedding_scale=True,
    )
    if model_type == "gemma":
        return fields
    if _optional(raw, "use_bidirectional_attention", False):
        raise ConfigError(
            _(
                "use_bidirectional_attention must be false: llmmath models causal "
                "decoders"
            )
        )
    pattern = (
        2 if model_type == "gemma2" else _optional(raw, "sliding_window_pattern", 6)
    )
    check_positive_int("sliding_window_pattern", pattern)
    layer_types = raw.get("layer_types")
    if layer_types is None:
        layer_types = [
            "sliding_attention" if (i + 1) % pattern else "full_attention"
            for i in range(layers)
        ]
    if not isinstance(layer_types, list):
        raise ConfigError(_must_be_a_list("layer_types", layer_types))
    gemma2 = model_type == "gemma2"  # Gemma2Config's soft-capping defaults
    fields.update(
        attn_logit_softcapping=raw.get(
            "attn_logit_softcapping", 50.0 if gemma2 else None
        ),
        final_logit_softcapping=raw.get(
            "final_logit_softcapping", 30.0 if gemma2 else None
        ),
        query_pre_attn_scalar=_optional(raw, "query_pre_attn_scalar", 256),
        norm_layout="sandwich",
        **(
            {
                "rope_theta": _optional(raw, "rope_theta", 1000000.0),
                "rope_local_theta": _optional(raw, "rope_local_base_freq", 10000.0),
            }
            if model_type == "gemma3_text"  # Gemma3TextConfig's two bases
            else {}
        ),
        qk_norm=model_type == "gemma3_text",
        sliding_window=_optional(raw, "sliding_window", 4096),
        layer_types=tuple(layer_types),
    )
    return fields


def _minimind_fields(raw: Mapping[str, Any], model_type: str) -> dict[str, Any]:
    """MiniMind's ``MiniMindConfig`` (model/model_minimind.py); always tied."""
    fields = {
        name: _required(raw, name, model_type)
        for name in (
            "vocab_size",
            "hidden_size",
            "num_hidden_layers",
            "num_attention_heads",
        )
    }
    check_positive_int("hidden_size", fields["hidden_size"])
    intermediate = raw.get("intermediate_size")
    fields.update(
        model_type=model_type,
        intermediate_size=(
            minimind_intermediate_size(fields["hidden_size"])
            if intermediate is None
            else intermediate
        ),
        num_key_value_heads=_optional(
            raw, "num_key_value_heads", 2
        ),  # MiniMindConfig default
        tie_word_embeddings=True,
        hidden_act=_optional(raw, "hidden_act", "silu"),
        max_position_embeddings=_optional(raw, "max_position_embeddings", 32768),
        rope_theta=_rope_theta(raw) if raw.get("rope_theta") is not None else 1000000.0,
        norm_eps=_optional(raw, "rms_norm_eps", 1e-5),
    )
    use_moe = _optional(raw, "use_moe", False)
    _boolean("use_moe", use_moe)
    if use_moe:
        top_k = _optional(raw, "num_experts_per_tok", 2)
        norm = _optional(raw, "norm_topk_prob", True)
        _boolean("norm_topk_prob", norm)
        fields.update(
            num_local_experts=_optional(raw, "n_routed_experts", 4),
            num_experts_per_tok=top_k,
            n_shared_experts=_optional(raw, "n_shared_experts", 1),
            norm_topk_prob=bool(norm and top_k != 1),
        )  # MoEGate: only when top_k > 1
    return fields


def _rope_theta(raw: Mapping[str, Any]) -> float:
    """``rope_theta`` at the top level, or inside ``rope_parameters`` (transformers 5
    configs)."""
    if raw.get("rope_theta") is not None:
        return raw["rope_theta"]
    nested = raw.get("rope_parameters")
    if isinstance(nested, Mapping) and nested.get("rope_theta") is not None:
        return nested["rope_theta"]
    return 10000.0


def _rope_scaling(raw: Mapping[str, Any]) -> RopeScaling | None:
    """``rope_scaling``, or ``rope_parameters`` (transformers 5 configs), as a
    `RopeScaling`."""
    for key in ("rope_scaling", "rope_parameters"):
        value = raw.get(key)
        if value is not None:
            if not isinstance(value, Mapping):
                raise ConfigError(
                    _("{name} must be a JSON object, got {value}").format(
                        name=key, value=repr(value)
                    )
                )
            return RopeScaling.from_dict(value)
    return None


def _sliding_window(raw: Mapping[str, Any], model_type: str) -> int | None:
    """Mistral and Mixtral apply ``sliding_window`` when set; Qwen only with
    ``use_sliding_window``."""
    if model_type in ("mistral", "mixtral", "phi3"):
        return raw.get("sliding_window")
    if model_type in ("qwen2", "qwen3", "qwen3_moe") and raw.get("use_sliding_window"):
        return raw.get("sliding_window")
    return None


def _gpt2_fields(raw: Mapping[str, Any], model_type: str) -> dict[str, Any]:
    for name in ("vocab_size", "n_embd", "n_layer", "n_head", "n_positions"):
        check_positive_int(name, _required(raw, name, model_type))
    hidden = raw["n_embd"]
    if raw.get("n_inner") is not None:
        check_positive_int("n_inner", raw["n_inner"])
    return dict(
        model_type=model_type,
        vocab_size=raw["vocab_size"],
        hidden_size=hidden,
        intermediate_size=_optional(raw, "n_inner", 4 * hidden),
        num_hidden_layers=raw["n_layer"],
        num_attention_heads=raw["n_head"],
        tie_word_embeddings=_optional(raw, "tie_word_embeddings", True),
        qkv_bias=True,
        o_proj_bias=True,
        mlp_bias=True,
        norm_type="layernorm",
        mlp_type="plain",
        hidden_act=_optional(raw, "activation_function", "gelu_new"),
        position_embedding_type="learned",
        max_position_embeddings=raw["n_positions"],
        norm_eps=_optional(raw, "layer_norm_epsilon", 1e-5),
    )

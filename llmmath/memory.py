"""Memory: weights, training state, activations, and weights plus KV cache on a GPU.

Weights take N · (bytes per parameter); the KV cache takes
`llmmath.kvcache.kv_cache_bytes`. Activations, the CUDA context and allocator
fragmentation are left out: the answers are upper bounds on what fits (vLLM reserves
such overheads before sizing its cache, Kwon et al. 2023, Sec. 4). Training memory,
the peak of a step with its options, is `llmmath.training`'s (``train-memory``, the
memory explorer and the calculator page).

Explained in the chapters *The KV cache* (``chapters/07_kv_cache.ipynb``) and *Memory
and speed* (``chapters/09_memory.ipynb``).
"""

from __future__ import annotations

from dataclasses import dataclass

from llmmath.config import ConfigError, ModelConfig, check_positive_int
from llmmath.counting import count_params
from llmmath.gpus import DEFAULT_GPU, GPUS
from llmmath.kvcache import kv_cache_bytes, kv_cache_bytes_per_token
from llmmath.messages import gettext as _
from llmmath.units import bytes_of


def weight_bytes(cfg: ModelConfig, dtype: str = "bf16") -> int:
    """Bytes of the weights stored in ``dtype``: ``count_params(cfg).total`` × bytes per
    element."""
    return bytes_of(count_params(cfg).total, dtype)


#: An "80 GB" GPU by the catalogue's one capacity rule (`llmmath.gpus`: the capacity
#: as the vendor states it, GB = 10⁹ bytes): 80·10⁹ bytes, the ``memory`` of the
#: H100 SXM (and of every 80 GB part). Both 80 GB parts report more to the driver
#: (A100: 81920 MiB, H100: 81559 MiB; ``GPU.reported_memory``), so what fits by this
#: rule fits on either, before the runtime takes its share.
GPU_80GB = GPUS[DEFAULT_GPU].memory


def quantized_weight_bytes(
    cfg: ModelConfig,
    bits: int = 4,
    group_size: int = 128,
    scale_dtype: str = "bf16",
    kept_dtype: str = "bf16",
) -> dict[str, int]:
    """Bytes of a weight-only quantized checkpoint, item by item (GPTQ/AWQ style).

    Every 2-D matrix of the blocks is stored in ``bits``-bit integers with one
    ``scale_dtype`` scale per ``group_size`` consecutive weights of a row (rows padded
    to whole groups); the embedding, the LM head, the norms and any biases stay in
    ``kept_dtype``. Zero points (asymmetric formats) are not counted. Keys:
    ``"quantized weights"``, ``"scales"``, ``"embedding and LM head"`` and
    ``"norms and biases"``. Explained in chapter 9 (*Memory and speed*).

    Raises:
        ConfigError: ``bits`` or ``group_size`` not a positive integer, or an unknown
            dtype.
    """
    check_positive_int("bits", bits)
    check_positive_int("group_size", group_size)
    counts = count_params(cfg)
    weights = scales = vocab = small = 0
    for t in counts.tensors:
        n = counts.total_of(t)
        if t.group in ("embedding", "lm_head"):
            vocab += n
        elif len(t.shape) == 2 and t.name.endswith(".weight"):
            width = t.shape[-1]  # torch stores (out, in); a group runs along a row
            weights += n
            scales += n // width * -(-width // group_size)  # rows of all layers/experts
        else:
            small += n
    return {
        "quantized weights": -(-weights * bits // 8),
        "scales": bytes_of(scales, scale_dtype),
        "embedding and LM head": bytes_of(vocab, kept_dtype),
        "norms and biases": bytes_of(small, kept_dtype),
    }


@dataclass(frozen=True)
class ServingFit:
    """Whether a model and its cache fit in ``gpu_bytes``; the largest batch, context.

    ``max_batch``: the largest batch of ``seq_len``-token sequences that fits (0 if
    none). ``max_seq_len``: the longest context for ``batch`` sequences that fits and
    that the model supports, at most ``context_limit`` (its
    ``max_position_embeddings``); 0 if none fits.
    """

    weight_bytes: int
    cache_bytes: int
    gpu_bytes: int
    max_batch: int
    max_seq_len: int
    context_limit: int

    @property
    def total_bytes(self) -> int:
        return self.weight_bytes + self.cache_bytes

    @property
    def fits(self) -> bool:
        return self.total_bytes <= self.gpu_bytes


def serving_fit(
    cfg: ModelConfig,
    gpu_bytes: int,
    batch: int = 1,
    seq_len: int = 4096,
    weight_dtype: str = "bf16",
    cache_dtype: str = "bf16",
    weights: int | None = None,
) -> ServingFit:
    """Weights in ``weight_dtype`` plus the cache of ``batch`` × ``seq_len`` tokens in
    ``cache_dtype`` against ``gpu_bytes`` of memory (a GPU's ``memory``, the capacity
    rule of `llmmath.gpus`). Exact integers throughout. ``weights``, when given, is
    the weights' bytes in place of ``weight_dtype``'s (a quantized checkpoint with its
    group scales, as ``python -m llmmath memory`` counts it).

    The longest context is capped at ``cfg.max_position_embeddings``: memory is not the
    only limit (GPT-2 has 1024 learned positions). A sliding window caps the cache, not
    the context.

    Raises:
        ConfigError: a size is not a positive integer, or a dtype is unknown.
    """
    check_positive_int("gpu_bytes", gpu_bytes)
    if weights is None:
        weights = weight_bytes(cfg, weight_dtype)
    cache = kv_cache_bytes(cfg, batch, seq_len, cache_dtype)
    free = gpu_bytes - weights
    max_batch = max(free, 0) // kv_cache_bytes(cfg, 1, seq_len, cache_dtype)
    limit = cfg.max_position_embeddings
    if free < 0:
        max_seq_len = 0
    elif kv_cache_bytes(cfg, batch, limit, cache_dtype) <= free:
        max_seq_len = limit
    else:  # the cache grows by one token's bytes per step until it no longer fits
        max_seq_len = free // (kv_cache_bytes_per_token(cfg, cache_dtype) * batch)
    return ServingFit(weights, cache, gpu_bytes, max_batch, max_seq_len, limit)


#: Bytes per parameter of mixed-precision training with Adam (Rajbhandari et al. 2020,
#: ZeRO, Sec. 3.1: "2Ψ + 2Ψ + 12Ψ"): 16-bit weights and gradients, fp32 optimizer state.
MIXED_PRECISION_ADAM = {
    "weights (bf16)": 2,
    "gradients (bf16)": 2,
    "master weights (fp32)": 4,
    "Adam first moment m (fp32)": 4,
    "Adam second moment v (fp32)": 4,
}


def training_state_bytes(
    cfg: ModelConfig, per_parameter: dict[str, int] | None = None
) -> dict[str, int]:
    """Bytes of the training state, item by item: each entry of ``per_parameter``
    (default `MIXED_PRECISION_ADAM`, 16 bytes per parameter) times
    ``count_params(cfg).total``. Activations are separate
    (`activation_bytes_per_layer`)."""
    n = count_params(cfg).total
    return {item: b * n for item, b in (per_parameter or MIXED_PRECISION_ADAM).items()}


def activation_bytes_per_layer(
    cfg: ModelConfig,
    seq_len: int,
    batch: int = 1,
    dropout: bool = False,
    flash_attention: bool = False,
    layer: int | None = None,
) -> dict[str, int]:
    """Activation bytes one decoder block keeps for the backward pass, item by item, in
    16-bit precision (dropout masks 1 byte per element).

    The items follow Korthikanti et al. 2022, Sec. 4.1, which for the GPT-3 block (MHA,
    4H GELU MLP, LayerNorm, dropout) totals s·b·h·(34 + 5·a·s/h) bytes; with
    ``dropout=True`` and a GPT-style ``cfg`` this function reproduces that total
    exactly. For other configs each item follows the config: K and V are n_kv·d_h wide
    (GQA), a gated FFN keeps the inputs of its activation and of the product (2 + 2 + 2
    + 2 = 8·s·b·I bytes), and without dropout there are no masks.
    ``flash_attention=True`` drops the s²-sized softmax output (recomputed in the
    backward pass; Dao et al. 2022) and keeps the softmax statistics instead
    (FlashAttention-2's logsumexp, 4 bytes per row per head). K and V are sized
    n_kv·d_h, as GQA-aware kernels keep them; an eager `repeat_kv` (as in
    `llmmath.modules`) would save copies n_h·d_h wide. Qwen3's per-head q/k norms add
    their inputs (``qk_norm``). Multi-head latent attention: Q and K are n_h·(d_n +
    d_r) wide (``head_dim``), V and the output projection's input n_h·d_v
    (``v_head_dim``; DeepSeek-V3: 128 against 192).

    A mixture-of-experts layer keeps, per token, the FFN tensors of its k routed
    experts and S shared experts at the experts' width I_e
    (``moe_intermediate_size``: 2,048 in DeepSeek-V3, 768 in Qwen3-30B-A3B; Mixtral
    has none and uses I). ``layer`` (0-based) picks the layer: one in
    ``cfg.dense_layers`` (DeepSeek's ``first_k_dense_replace``, Qwen3-MoE's
    ``mlp_only_layers``) keeps a dense FFN of width I; None (default) is a
    mixture-of-experts layer when the model has one.

    Raises:
        ConfigError: a size that is not a positive integer, or ``layer`` outside
            0 .. L − 1.
    """
    s, b, H = seq_len, batch, cfg.hidden_size
    check_positive_int("seq_len", s)
    check_positive_int("batch", b)
    L = cfg.num_hidden_layers
    if layer is not None and (
        isinstance(layer, bool) or not isinstance(layer, int) or not 0 <= layer < L
    ):
        raise ConfigError(
            _("{name} must be an integer in 0 .. {last}, got {value}").format(
                name="layer", last=L - 1, value=repr(layer)
            )
        )
    moe = cfg.num_moe_layers > 0 and layer not in cfg.dense_layers
    q, kv, a = (
        cfg.num_attention_heads * cfg.head_dim,
        cfg.num_key_value_heads * cfg.head_dim,
        cfg.num_attention_heads,
    )
    v = cfg.num_attention_heads * cfg.v_head_dim if cfg.is_mla else kv
    out = cfg.num_attention_heads * cfg.v_head_dim if cfg.is_mla else q
    I = cfg.expert_intermediate_size if moe else cfg.intermediate_size
    items = {
        "input of the first norm": 2 * s * b * H,
        "input of q, k, v projections": 2 * s * b * H,
        "Q and K (inputs of QKᵀ)": 2 * s * b * (q + kv),
        "V (input of AV)": 2 * s * b * v,
        "input of the output projection": 2 * s * b * out,
        "input of the second norm": 2 * s * b * H,
        "input of the FFN": 2 * s * b * H,
    }
    if cfg.qk_norm:
        items["inputs of the q and k norms"] = 2 * s * b * (q + kv)
    if flash_attention:
        items["softmax statistics (fp32)"] = 4 * a * s * b
    else:
        items["softmax output"] = 2 * a * s * s * b
    experts = (cfg.num_experts_per_tok + cfg.n_shared_experts) if moe else 1
    if moe:
        items["router logits"] = 2 * s * b * cfg.num_local_experts
    if cfg.mlp_type == "gated":  # per token, for each expert it uses (MoE: k + S)
        items["gate and up outputs"] = 2 * 2 * s * b * I * experts
        items["activation output, product (input of down)"] = (
            2 * 2 * s * b * I * experts
        )
    else:
        items["input of the activation"] = 2 * s * b * I
        items["input of the second matmul"] = 2 * s * b * I
    if dropout:
        if not flash_attention:
            items["attention dropout mask"] = a * s * s * b
            items["attention dropout output"] = 2 * a * s * s * b
        items["dropout masks after attention and FFN"] = 2 * s * b * H
    return items

"""Quantized weights and caches: bits per weight, checkpoint bytes, GGUF block formats.

A weight-only format stores each matrix of the decoder blocks as ``bits``-bit numbers
(int8, int4, fp8) with one scale, and for asymmetric formats one zero point, per group
of ``group_size`` consecutive weights of a row (per channel: one per row). Per weight
that is

    bits per weight = storage bits + (scale bits + zero-point bits) / group size

so int4 with a bf16 scale per 128 weights costs 4 + 16/128 = 4.125 bits, and with a
group of 32, 4.5 (Frantar et al. 2023, GPTQ, Sec. 4; Lin et al. 2024, AWQ, Sec. 3;
Dettmers et al. 2022, LLM.int8(), Sec. 3 for int8 with per-row scales). The embedding,
the LM head and the norms usually stay 16-bit (GPTQ and AWQ quantize only the linear
layers of the blocks). The bytes build on `llmmath.memory.quantized_weight_bytes`
(weights, scales, what stays 16-bit), adding zero points and a storage width: torchao's
CPU tensors keep an int4 value in an int8 byte (`TORCHAO_INT4_CPU`), a packed file two
per byte.

GGUF files (llama.cpp) store rows in blocks: Q8_0 packs 32 weights and an fp16 scale
in 34 bytes (8.5 bits per weight), Q4_K 256 weights in 144 bytes (4.5), Q6_K 256 in 210
(6.5625); a "K_M" file mixes them tensor by tensor (`GGUF_BLOCKS`, `gguf_bytes`; the
sizes are the ``gguf`` package's ``GGML_QUANT_SIZES``, tests/test_quantization.py).
`q4_k_m_types` is llama.cpp's own Q4_K_M recipe (``src/llama-quant.cpp``), tensor by
tensor, and `gguf_tensor_bytes` the bytes it gives
(tests/test_quantization_recipe.py).

A KV cache in fp8 or int8 halves the bf16 cache. vLLM's ``kv_cache_dtype="fp8"``
keeps one fp32 scale per layer for K and one for V (per tensor; docs, *Quantized KV
Cache*), which the count leaves out; a scale per head and token would add
(scale bits) / d_h per value (`kv_cache_quantized_bytes`).

Explained in the chapter *Serving* (``chapters/09b_serving.ipynb``).
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction

from llmmath.config import ConfigError, ModelConfig, check_positive_int, one_of
from llmmath.counting import count_params
from llmmath.kvcache import kv_cache_bytes, kv_cache_elements
from llmmath.memory import quantized_weight_bytes, weight_bytes
from llmmath.messages import gettext as _
from llmmath.units import bytes_of, dtype_bits

#: A group size larger than any row: one scale per row (per-channel quantization).
PER_CHANNEL = None
_WHOLE_ROW = 1 << 62


@dataclass(frozen=True)
class WeightFormat:
    """A weight-only number format for the matrices of the decoder blocks.

    ``bits``: bits of information per weight (4 for int4); ``storage_bits``: bits it
    occupies (8 when an int4 value sits in an int8 byte; default ``bits``);
    ``group_size``: weights of a row sharing a scale (None: one per row);
    ``scale_dtype`` and ``zero_point_dtype`` (None: symmetric, no zero point).
    """

    name: str
    bits: int
    group_size: int | None = 128
    scale_dtype: str = "bf16"
    zero_point_dtype: str | None = None
    storage_bits: int | None = None

    def __post_init__(self):
        check_positive_int("bits", self.bits)
        if self.group_size is not None:
            check_positive_int("group_size", self.group_size)
        if self.storage_bits is not None:
            check_positive_int("storage_bits", self.storage_bits)
        dtype_bits(self.scale_dtype)
        if self.zero_point_dtype is not None:
            dtype_bits(self.zero_point_dtype)

    @property
    def stored_bits(self) -> int:
        return self.storage_bits or self.bits

    @property
    def bits_per_weight(self) -> Fraction | None:
        """Storage bits + (scale + zero-point bits) / group size, exactly; None per
        channel (it then depends on the row's length: `bits_per_weight`)."""
        if self.group_size is None:
            return None
        return bits_per_weight(
            self.stored_bits, self.group_size, self.scale_dtype, self.zero_point_dtype
        )


def bits_per_weight(
    bits: int,
    group_size: int,
    scale_dtype: str = "bf16",
    zero_point_dtype: str | None = None,
) -> Fraction:
    """Bits one weight costs with its share of the group's scale and zero point:
    ``bits + (scale bits + zero-point bits) / group_size``, an exact Fraction
    (Fraction(33, 8) for int4 with a bf16 scale per 128).

    Raises:
        ConfigError: ``bits`` or ``group_size`` not a positive integer, or an unknown
            dtype.
    """
    check_positive_int("bits", bits)
    check_positive_int("group_size", group_size)
    extra = dtype_bits(scale_dtype)
    if zero_point_dtype is not None:
        extra += dtype_bits(zero_point_dtype)
    return bits + Fraction(extra, group_size)


#: The formats the `memory` command offers (``--weights``); int4 defaults to a bf16
#: scale per 128 weights (GPTQ/AWQ), int8 and fp8 to one bf16 scale per row.
WEIGHT_FORMATS = {
    "bf16": None,
    "fp8": WeightFormat("fp8", 8, PER_CHANNEL),
    "int8": WeightFormat("int8", 8, PER_CHANNEL),
    "int4": WeightFormat("int4", 4, 128),
}

#: torchao 0.18's CPU tensors (``IntxWeightOnlyConfig(torch.int4, PerGroup(g))``):
#: int4 values in int8 bytes, a bf16 scale and an int8 zero point per group.
TORCHAO_INT4_CPU = WeightFormat("int4", 4, 128, "bf16", "int8", storage_bits=8)
#: torchao 0.18's ``Int8WeightOnlyConfig()``: per row, an fp32 scale and int8 zero.
TORCHAO_INT8 = WeightFormat("int8", 8, PER_CHANNEL, "fp32", "int8")
#: torchao 0.18's ``Float8WeightOnlyConfig()``: e4m3 values, an fp32 scale per row.
TORCHAO_FP8 = WeightFormat("fp8", 8, PER_CHANNEL, "fp32")


def weight_format(name: str, group_size: int | None = None) -> WeightFormat | None:
    """The `WEIGHT_FORMATS` entry ``name`` (None for bf16), with ``group_size`` if
    given.

    Raises:
        ConfigError: an unknown format, or a ``group_size`` that is not a positive
            integer or given for bf16.
    """
    if name not in WEIGHT_FORMATS:
        raise ConfigError(one_of("weights", WEIGHT_FORMATS, name))
    fmt = WEIGHT_FORMATS[name]
    if group_size is None:
        return fmt
    if fmt is None:
        raise ConfigError(_("group_size applies only to fp8, int8 or int4 weights"))
    return WeightFormat(fmt.name, fmt.bits, group_size, fmt.scale_dtype)


def quantized_bytes(
    cfg: ModelConfig, fmt: WeightFormat | None, kept_dtype: str = "bf16"
) -> dict[str, int]:
    """Bytes of a checkpoint whose block matrices are in ``fmt``, item by item:
    ``"quantized weights"`` (at ``fmt.stored_bits``), ``"scales"``, ``"zero points"``,
    ``"embedding and LM head"`` and ``"norms and biases"`` (both in ``kept_dtype``).
    With ``fmt`` None every tensor is in ``kept_dtype`` (one item, ``"weights"``).

    Builds on `llmmath.memory.quantized_weight_bytes`: rows are padded to whole groups,
    every expert of a mixture is counted.

    Raises:
        ConfigError: an unknown dtype.
    """
    if fmt is None:
        return {"weights": weight_bytes(cfg, kept_dtype)}
    group = fmt.group_size or _WHOLE_ROW
    items = quantized_weight_bytes(
        cfg, fmt.stored_bits, group, fmt.scale_dtype, kept_dtype
    )
    zeros = 0
    if fmt.zero_point_dtype is not None:  # as many zero points as scales
        zeros = quantized_weight_bytes(cfg, 1, group, fmt.zero_point_dtype)["scales"]
    return {
        "quantized weights": items["quantized weights"],
        "scales": items["scales"],
        "zero points": zeros,
        "embedding and LM head": items["embedding and LM head"],
        "norms and biases": items["norms and biases"],
    }


def checkpoint_bits_per_weight(
    cfg: ModelConfig, fmt: WeightFormat | None, kept_dtype: str = "bf16"
) -> Fraction:
    """Bits per parameter of the whole checkpoint (`quantized_bytes` × 8 / total
    parameters): above the format's own because the embedding and LM head stay
    16-bit."""
    return Fraction(8 * sum(quantized_bytes(cfg, fmt, kept_dtype).values())) / (
        count_params(cfg).total
    )


# --- GGUF -----------------------------------------------------------------------------

#: (weights per block, bytes per block) of llama.cpp's GGML types (``ggml-common.h``:
#: ``block_q8_0`` is an fp16 scale and 32 int8; ``block_q4_K`` an fp16 d and dmin, 12
#: bytes of 6-bit sub-scales and mins, and 128 bytes of 4-bit values; ...).
GGUF_BLOCKS = {
    "F32": (1, 4),
    "F16": (1, 2),
    "BF16": (1, 2),
    "Q8_0": (32, 34),
    "Q4_0": (32, 18),
    "Q4_1": (32, 20),
    "Q5_0": (32, 22),
    "Q5_1": (32, 24),
    "Q2_K": (256, 84),
    "Q3_K": (256, 110),
    "Q4_K": (256, 144),
    "Q5_K": (256, 176),
    "Q6_K": (256, 210),
}


def gguf_bits_per_weight(kind: str) -> Fraction:
    """8 × block bytes / block weights of a GGML type: Q8_0 17/2, Q4_K 9/2, Q6_K 105/16.

    Raises:
        ConfigError: an unknown type.
    """
    if kind not in GGUF_BLOCKS:
        raise ConfigError(one_of(_("GGUF type"), GGUF_BLOCKS, kind))
    n, size = GGUF_BLOCKS[kind]
    return Fraction(8 * size, n)


def gguf_row_bytes(width: int, kind: str) -> int:
    """Bytes of one row of ``width`` weights in GGML type ``kind``.

    Raises:
        ConfigError: ``width`` is not a whole number of the type's blocks (llama.cpp
            then falls back to another type for that tensor).
    """
    check_positive_int("width", width)
    gguf_bits_per_weight(kind)
    n, size = GGUF_BLOCKS[kind]
    if width % n:
        raise ConfigError(
            _(
                "a row of {width} weights is not a whole number of {kind} blocks of {n}"
            ).format(width=width, kind=kind, n=n)
        )
    return width // n * size


#: A simplified mix, *not* llama.cpp's Q4_K_M: Q4_K for the matrices, Q6_K for the LM
#: head and every layer's value projection, F32 for the norms. llama.cpp's recipe
#: (`q4_k_m_types`) promotes ``attn_v`` and ``ffn_down`` only in the layers where
#: `use_more_bits` holds; kept for `gguf_bytes`' tests.
Q4_K_M_STYLE = {
    "default": "Q4_K",
    "lm_head": "Q6_K",
    "v_proj": "Q6_K",
    "norm": "F32",
}


def gguf_bytes(cfg: ModelConfig, recipe: dict[str, str]) -> dict[str, int]:
    """Bytes of a GGUF file's tensors, tensor by tensor (summed over layers), for a
    ``recipe`` mapping a tensor name part (``"v_proj"``), a group (``"attention"``,
    ``"ffn"``, ``"embedding"``, ``"lm_head"``, ``"norm"``) or ``"default"`` to a GGML
    type. 1-D tensors use the ``"norm"`` entry (llama.cpp keeps them F32). Metadata
    and alignment padding are not counted.

    Raises:
        ConfigError: no type for a tensor, an unknown type, or rows that are not whole
            blocks.
    """
    counts = count_params(cfg)
    out = {}
    for t in counts.tensors:
        n = counts.total_of(t)
        parts = t.name.split(".")
        if len(t.shape) == 1:
            kind = recipe.get("norm", "F32")
        else:
            kind = next(
                (recipe[p] for p in parts if p in recipe),
                recipe.get(t.group, recipe.get("default")),
            )
        if kind is None:
            raise ConfigError(
                _("recipe has no GGUF type for {name}").format(name=t.name)
            )
        width = t.shape[-1]
        out[t.name] = n // width * gguf_row_bytes(width, kind)
    return out


# --- llama.cpp's Q4_K_M recipe --------------------------------------------------------

#: GGUF tensor names of the HF tensors of a dense llama-style model
#: (llama.cpp ``convert_hf_to_gguf.py`` and ``gguf-py/gguf/tensor_mapping.py``).
GGUF_NAMES = {
    "embed_tokens.weight": "token_embd.weight",
    "lm_head.weight": "output.weight",
    "norm.weight": "output_norm.weight",
    "input_layernorm.weight": "attn_norm.weight",
    "post_attention_layernorm.weight": "ffn_norm.weight",
    "self_attn.q_proj.weight": "attn_q.weight",
    "self_attn.k_proj.weight": "attn_k.weight",
    "self_attn.v_proj.weight": "attn_v.weight",
    "self_attn.o_proj.weight": "attn_output.weight",
    "mlp.gate_proj.weight": "ffn_gate.weight",
    "mlp.up_proj.weight": "ffn_up.weight",
    "mlp.down_proj.weight": "ffn_down.weight",
    "self_attn.q_proj.bias": "attn_q.bias",
    "self_attn.k_proj.bias": "attn_k.bias",
    "self_attn.v_proj.bias": "attn_v.bias",
    "self_attn.q_norm.weight": "attn_q_norm.weight",
    "self_attn.k_norm.weight": "attn_k_norm.weight",
}

#: llama.cpp's ``tensor_type_fallback``: the type a tensor whose rows are not whole
#: blocks of 256 gets instead (then F16 if its rows are not whole blocks of 32 either).
_FALLBACK = {
    "Q2_K": "Q4_0",
    "Q3_K": "Q4_0",
    "Q4_K": "Q5_0",
    "Q5_K": "Q5_1",
    "Q6_K": "Q8_0",
}


def use_more_bits(i_layer: int, n_layers: int) -> bool:
    """llama.cpp's ``use_more_bits``: whether layer ``i_layer`` (0-based) of
    ``n_layers`` gets more bits in a K_M file: the first eighth, the last eighth, and
    every third layer between them,
    ``i < n/8 || i >= 7n/8 || (i - n/8) % 3 == 2`` in C integer division (16 of 32
    layers). Source: ``src/llama-quant.cpp``, ``llama_tensor_get_type_impl``
    (called by ``llama_tensor_get_type``), commit 007dbbf3.
    """
    eighth = n_layers // 8
    return (
        i_layer < eighth
        or i_layer >= 7 * n_layers // 8
        or (i_layer - eighth) % 3 == 2  # i >= n/8 here: C's % equals Python's
    )


def _fallback(kind: str, width: int) -> str:
    if width % GGUF_BLOCKS[kind][0] == 0:
        return kind
    kind = _FALLBACK[kind]
    return kind if width % GGUF_BLOCKS[kind][0] == 0 else "F16"


def gguf_tensor_shapes(cfg: ModelConfig) -> dict[str, tuple[int, ...]]:
    """The tensors of a GGUF file of ``cfg`` by GGUF name (``token_embd.weight``,
    ``blk.{i}.attn_v.weight``, ``output.weight``, ...), each with its shape in torch
    order (rows, row width; the width is GGML's ``ne[0]``), in llama.cpp's order
    (global tensors, then layer by layer). A tied LM head has no ``output.weight``.

    Raises:
        ConfigError: a tensor with no llama-style GGUF name (mixtures of experts,
            MLA, fused or extra projections), or a tensor not in every layer.
    """
    counts = count_params(cfg)
    glob, layers = {}, {}
    for t in counts.tensors:
        if t.name not in GGUF_NAMES or t.copies != 1 or t.layer_set is not None:
            raise ConfigError(
                _(
                    "{name}: only dense llama-style tensors have a GGUF name here"
                ).format(name=t.name)
            )
        (layers if t.per_layer else glob)[GGUF_NAMES[t.name]] = t.shape
    out = dict(glob)
    for i in range(cfg.num_hidden_layers):
        out.update({f"blk.{i}.{name}": shape for name, shape in layers.items()})
    return out


def q4_k_m_types(cfg: ModelConfig) -> dict[str, str]:
    """The GGML type llama.cpp's ``llama-quantize ... Q4_K_M`` gives each tensor of a
    dense llama-style ``cfg`` (no experts: ``n_expert`` 0), by GGUF name
    (`gguf_tensor_shapes`), without an importance matrix or overrides.

    The rules, as ``src/llama-quant.cpp`` writes them (``llama_tensor_get_type`` and
    its ``llama_tensor_get_type_impl``, ``llama_ftype_get_default_type``,
    ``tensor_type_fallback``; ggml-org/llama.cpp commit 007dbbf3):

    - the default type of ``LLAMA_FTYPE_MOSTLY_Q4_K_M`` is Q4_K;
    - 1-D tensors (norms) are not quantized: they stay F32, as the converter writes
      them (``tensor_allows_quantization``: ``ggml_n_dims < 2``);
    - ``output.weight`` gets Q6_K (Q8_0 if its rows are not whole blocks of 256); with
      tied embeddings there is none and ``token_embd`` takes this rule;
    - ``token_embd.weight`` otherwise keeps the default, Q4_K;
    - ``attn_v`` gets Q6_K where `use_more_bits` (i, n) holds, counting the ``attn_v``
      tensors in layer order (``i_attention_wv``, ``n_attention_wv``); the ``n_gqa()``
      conditions of that branch belong to other file types (Q2_K, Q2_K_S, IQ3, IQ4)
      and do not apply; in a model llama.cpp types ``LLM_TYPE_70B`` (llama: 80 layers
      and n_kv < n_h) a Q4_K ``attn_v`` becomes Q5_K;
    - ``ffn_down`` gets Q6_K where `use_more_bits` (layer, L) holds;
    - ``attn_q``, ``attn_k``, ``attn_output``, ``ffn_gate``, ``ffn_up`` keep Q4_K
      (a fused ``attn_qkv`` would get Q5_K; llama-style models have none);
    - a tensor whose rows are not whole blocks of 256 falls back: Q4_K to Q5_0, Q6_K to
      Q8_0, and to F16 if not whole blocks of 32.

    Raises:
        ConfigError: a mixture of experts, or a tensor `gguf_tensor_shapes` cannot name.
    """
    if cfg.is_moe:
        raise ConfigError(_("q4_k_m_types models dense models only (n_expert 0)"))
    shapes = gguf_tensor_shapes(cfg)
    n = cfg.num_hidden_layers
    tied = "output.weight" not in shapes
    is_70b = n == 80 and cfg.num_key_value_heads < cfg.num_attention_heads
    types, i_attention_wv = {}, 0
    for name, shape in shapes.items():
        if len(shape) == 1:
            types[name] = "F32"
            continue
        width, kind = shape[-1], "Q4_K"
        if name == "output.weight" or (tied and name == "token_embd.weight"):
            kind = "Q6_K" if width % GGUF_BLOCKS["Q6_K"][0] == 0 else "Q8_0"
        elif name.endswith(".attn_v.weight"):
            if use_more_bits(i_attention_wv, n):
                kind = "Q6_K"
            if is_70b and kind == "Q4_K":
                kind = "Q5_K"
            i_attention_wv += 1
        elif name.endswith(".ffn_down.weight"):
            if use_more_bits(int(name.split(".")[1]), n):
                kind = "Q6_K"
        types[name] = _fallback(kind, width)
    return types


def gguf_tensor_bytes(cfg: ModelConfig, types: dict[str, str]) -> dict[str, int]:
    """Bytes of each tensor of a GGUF file of ``cfg`` whose tensors have the GGML
    ``types`` (GGUF name to type, as `q4_k_m_types` gives): rows × `gguf_row_bytes`,
    from the block sizes of `GGUF_BLOCKS`. Metadata and alignment padding are not
    counted.

    Raises:
        ConfigError: a tensor of `gguf_tensor_shapes` with no type, an unknown type,
            or rows that are not whole blocks of their type.
    """
    out = {}
    for name, shape in gguf_tensor_shapes(cfg).items():
        if name not in types:
            raise ConfigError(_("no GGML type for {name}").format(name=name))
        rows = shape[0] if len(shape) == 2 else 1
        out[name] = rows * gguf_row_bytes(shape[-1], types[name])
    return out


# --- the KV cache ---------------------------------------------------------------------


def kv_cache_quantized_bytes(
    cfg: ModelConfig,
    batch: int = 1,
    seq_len: int = 1,
    dtype: str = "fp8",
    scale_dtype: str | None = "fp32",
) -> dict[str, int]:
    """Bytes of a KV cache in ``dtype`` with one ``scale_dtype`` scale per head, token,
    layer and K or V (None: a single scale per tensor, not counted): ``"values"`` and
    ``"scales"``. Values alone are `llmmath.kvcache.kv_cache_bytes`.

    Raises:
        ConfigError: a size that is not a positive integer, or an unknown dtype.
    """
    values = kv_cache_bytes(cfg, batch, seq_len, dtype)
    scales = 0
    if scale_dtype is not None:
        per_head = cfg.head_dim
        scales = bytes_of(
            kv_cache_elements(cfg, batch, seq_len) // per_head, scale_dtype
        )
    return {"values": values, "scales": scales}


# --- what follows for decode speed, and a real library's tensors ----------------------


def quantized_decode_step(
    cfg: ModelConfig,
    gpu,
    fmt: WeightFormat | None,
    batch: int = 1,
    context: int = 4096,
    kv_dtype: str = "bf16",
):
    """`llmmath.roofline.decode_step` with the weights of `quantized_bytes`: the step
    reads the whole checkpoint once except the embedding table, of which only ``batch``
    rows (at most V), plus each sequence's cache in ``kv_dtype``. FLOPs are unchanged
    (dequantizing is not counted). Returns a `llmmath.roofline.Step`.

    Raises:
        ConfigError: a size that is not a positive integer, or an unknown dtype or GPU.
    """
    from llmmath.gpus import gpu_named
    from llmmath.roofline import Step, decode_step

    gpu = gpu_named(gpu)
    base = decode_step(cfg, gpu, batch, context, "bf16", kv_dtype)
    whole = sum(quantized_bytes(cfg, fmt).values())
    table = bytes_of(cfg.vocab_size * cfg.hidden_size, "bf16")
    if cfg.tie_word_embeddings:  # one matrix, read whole as the LM head
        table = 0
    rows = bytes_of(min(batch, cfg.vocab_size) * cfg.hidden_size, "bf16")
    cache = kv_cache_bytes(cfg, batch, context, kv_dtype)
    return Step(base.flops, whole - table + rows + cache, gpu, batch)


def torchao_config(kind: str, group_size: int | None = None):
    """torchao 0.18's weight-only config for ``kind``: ``"int4"``
    (``IntxWeightOnlyConfig(torch.int4, PerGroup(group_size))``, the CPU's int4:
    `TORCHAO_INT4_CPU`), ``"int8"`` (``Int8WeightOnlyConfig()``, `TORCHAO_INT8`) or
    ``"fp8"`` (``Float8WeightOnlyConfig()``, `TORCHAO_FP8`), imported with torchao's
    import messages silenced. Imports torch.

    Raises:
        ConfigError: an unknown ``kind``, or int4 without a positive ``group_size``.
    """
    import contextlib
    import io
    import warnings

    if kind not in ("int4", "int8", "fp8"):
        raise ConfigError(one_of("kind", ("int4", "int8", "fp8"), kind))
    with contextlib.redirect_stderr(io.StringIO()), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        import torch
        from torchao import quantization as q
        from torchao.quantization.granularity import PerGroup

    if kind == "int8":
        return q.Int8WeightOnlyConfig()
    if kind == "fp8":
        return q.Float8WeightOnlyConfig()
    check_positive_int("group_size", group_size)
    return q.IntxWeightOnlyConfig(torch.int4, PerGroup(group_size))


def torchao_bytes(cfg: ModelConfig, config) -> dict[str, int]:
    """Quantize the block matrices of a `llmmath.modules.build_model` model of ``cfg``
    (random bf16 weights, on the CPU) with torchao's ``config``, and measure the bytes
    of its state dict by part: ``"qdata"``, ``"scale"``, ``"zero_point"`` (the tensors
    torchao keeps, ``__tensor_flatten__``) and ``"kept"`` (the embedding, LM head and
    norms left in bf16). torchao's import messages are silenced. Imports torch."""
    import contextlib
    import io
    import warnings

    import torch
    from torch import nn

    from llmmath.modules import build_model

    with contextlib.redirect_stderr(io.StringIO()), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from torchao.quantization import quantize_

        model = build_model(cfg, device="cpu", dtype=torch.bfloat16)
        quantize_(
            model,
            config,
            filter_fn=lambda m, fqn: isinstance(m, nn.Linear) and fqn != "lm_head",
        )
    out = {"qdata": 0, "scale": 0, "zero_point": 0, "kept": 0}
    for t in model.state_dict().values():
        if hasattr(t, "__tensor_flatten__"):
            for part in t.__tensor_flatten__()[0]:
                out[part] += getattr(t, part).nbytes
        else:
            out["kept"] += t.nbytes
    return out

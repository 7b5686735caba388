"""Many GPUs: what each GPU holds and sends under data, tensor, pipeline and expert
parallelism.

A layout splits ``gpus`` = dp · tp · pp accelerators into dp data-parallel replicas,
each a pipeline of pp stages, each stage split over tp tensor-parallel ranks; ep ranks
of the data-parallel group share the routed experts of a mixture of experts. Every count
here is an exact ``int`` (parameters, bytes) or a `Fraction`; the formulas and their
sources:

- Data parallel: a ring all-reduce of S bytes over N ranks sends 2(N−1)·⌈S/N⌉ bytes per
  rank (2(N−1)/N · S when N divides S; Patarasuk and Yuan 2009). ZeRO (Rajbhandari et
  al. 2020, Sec. 5, Fig. 1) partitions the 16 bytes per parameter of mixed-precision
  Adam: stage 1 keeps 4Ψ + 12Ψ/N, stage 2 2Ψ + 14Ψ/N, stage 3 16Ψ/N; stages 1 and 2
  send what data parallelism sends, stage 3 1.5 times as much (Sec. 7). PyTorch FSDP
  is stage 3.
- Tensor parallel (Shoeybi et al. 2019, Megatron-LM, Sec. 3): q, k, v, gate and up
  projections are split by column (output features), the output and down projections by
  row (input features), the embedding and the LM head by vocabulary; norms and routers
  are replicated. Each block's forward pass needs two all-reduces of b·s·H elements (one
  after attention, one after the MLP), the backward pass two more. Sequence parallelism
  (Korthikanti et al. 2022, Sec. 4.2.2) turns each all-reduce into a reduce-scatter and
  an all-gather (the same bytes) and divides the remaining activations by tp.
- Pipeline parallel (Narayanan et al. 2021, Sec. 2.2): the 1F1B schedule idles for
  (p−1)/(m+p−1) of a step with m micro-batches, the interleaved schedule with v model
  chunks per GPU for (p−1)/(v·m+p−1); the first stage keeps the activations of p
  micro-batches in flight, (p + (p−1)/v) with interleaving (Korthikanti et al. 2022,
  Sec. 4.2.3).
- Expert parallel (Lepikhin et al. 2020, GShard): each MoE layer's all-to-all sends
  tokens × k × H × bytes to the experts and as many back.
- Context parallel (ring attention, Liu et al. 2023): each rank passes its K and V chunk
  round a ring of cp ranks, cp − 1 times per layer.

Standard library only (the layout explorer runs on Pyodide). Explained in the chapter
*Many GPUs* (``chapters/09c_many_gpus.ipynb``); checked against torch.distributed
(FSDP2, DTensor, CommDebugMode, the fake process group) in tests/test_distributed.py.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from fractions import Fraction

from llmmath.config import ConfigError, ModelConfig, check_positive_int
from llmmath.counting import TensorCount, count_params
from llmmath.flops import forward_flops_per_token
from llmmath.gpus import DEFAULT_GPU, GPU, GPUS, gpu_named
from llmmath.memory import MIXED_PRECISION_ADAM, activation_bytes_per_layer
from llmmath.messages import either, join
from llmmath.messages import gettext as _

#: Bytes per parameter of mixed-precision Adam (`llmmath.memory.MIXED_PRECISION_ADAM`):
#: 2 (bf16 weights) + 2 (bf16 gradients) + 12 (fp32 master weights, m and v).
BYTES_PER_PARAMETER = sum(MIXED_PRECISION_ADAM.values())
WEIGHT_BYTES, GRADIENT_BYTES, OPTIMIZER_BYTES = 2, 2, 12
#: Bytes of one bf16 activation or gradient element sent between GPUs.
ACTIVATION_BYTES = 2

#: Tensor-parallel split of each weight, by the module that holds it (Megatron-LM,
#: Sec. 3): column-parallel (output features), row-parallel (input features),
#: vocabulary-parallel; every other tensor (norms, routers, MLA's down-projections)
#: is replicated.
COLUMN_PARALLEL = frozenset(
    {
        "q_proj",
        "k_proj",
        "v_proj",
        "qkv_proj",
        "q_b_proj",
        "kv_b_proj",
        "gate_proj",
        "up_proj",
        "gate_up_proj",
    }
)
ROW_PARALLEL = frozenset({"o_proj", "down_proj"})
VOCAB_PARALLEL = frozenset({"embed_tokens", "lm_head"})

#: Activation items (`llmmath.memory.activation_bytes_per_layer`) that every tensor-
#: parallel rank keeps whole, unless sequence parallelism splits them by the sequence
#: (Korthikanti et al. 2022, Sec. 4.2.1: the 10·sbh of "sbh(10 + 24/t + 5as/ht)").
TP_REPLICATED_ACTIVATIONS = frozenset(
    {
        "input of the first norm",
        "input of q, k, v projections",
        "input of the second norm",
        "input of the FFN",
        "dropout masks after attention and FFN",
        "router logits",
    }
)

ZERO_STAGES = (0, 1, 2, 3)


@dataclass(frozen=True)
class Cluster:
    """A cluster's accelerator and links: ``nvlink`` and ``infiniband`` are bytes/s one
    GPU sends in one direction inside a node and between nodes; ``memory`` is what the
    book counts as fitting: the GPU's ``memory`` by the catalogue's capacity rule
    (`llmmath.gpus`; 80·10⁹ bytes for an 80 GB part).
    """

    name: str
    gpu: GPU
    nvlink: float
    infiniband: float
    gpus_per_node: int
    memory: int
    source: str

    def __post_init__(self):
        if self.memory != self.gpu.memory:
            raise ValueError(f"{self.name}: memory must be the catalogue's capacity")


CLUSTERS = {
    "h100": Cluster(
        "H100 SXM, NVLink 4, 400 Gb/s InfiniBand per GPU",
        GPUS["H100-SXM5-80GB"],
        450e9,
        50e9,
        8,
        GPUS["H100-SXM5-80GB"].memory,
        "NVIDIA H100 datasheet: NVLink 900 GB/s (both directions); ConnectX-7 "
        "400 Gb/s per GPU, as in Meta's Llama 3 clusters (Llama 3 paper, Sec. 3.3.1)",
    ),
    "h800": Cluster(
        "H800 SXM, NVLink 400 GB/s, 400 Gb/s InfiniBand per GPU",
        GPUS["H800-SXM5-80GB"],
        200e9,
        50e9,
        8,
        GPUS["H800-SXM5-80GB"].memory,
        "DeepSeek-V3 report, Sec. 3.1: 8 GPUs a node over NVLink/NVSwitch, 400 Gb/s "
        "InfiniBand between nodes",
    ),
    "a100": Cluster(
        "A100 SXM 80GB, NVLink 3, 200 Gb/s InfiniBand per GPU",
        GPUS["A100-SXM4-80GB"],
        300e9,
        25e9,
        8,
        GPUS["A100-SXM4-80GB"].memory,
        "NVIDIA A100 datasheet: NVLink 600 GB/s (both directions); HDR 200 Gb/s per "
        "GPU (Narayanan et al. 2021, Sec. 5: Selene's DGX A100 nodes)",
    ),
}


def cluster(name: str | Cluster) -> Cluster:
    """The `Cluster` of a GPU named as the catalogue names it, any case, or by a short
    name (`llmmath.gpus.match_gpu`): ``"H100-SXM5-80GB"``, ``"h100"`` (the family rule
    reads it as H100-SXM5-80GB), ``"H800"``, ``"a100"`` (A100-SXM4-80GB); the keys of
    `CLUSTERS` are such short names.

    Raises:
        ConfigError: a name that names no GPU (with "did you mean"), or a GPU of the
        catalogue whose cluster the book does not describe (its nodes' links and
        network); the message lists the GPUs that have one."""
    if isinstance(name, Cluster):
        return name
    gpu = gpu_named(name)
    for found in CLUSTERS.values():
        if found.gpu.name == gpu.name:
            return found
    names = [c.gpu.name for c in CLUSTERS.values()]
    raise ConfigError(
        _(
            "gpu must be a GPU with a cluster: {names} (short: {short}); got {value}, "
            "the {gpu}, whose nodes' links and network the book does not describe"
        ).format(
            names=either(names), short=join(CLUSTERS), value=repr(name), gpu=gpu.name
        )
    )


# --- collectives ----------------------------------------------------------------------


def _ceil_div(a: int, b: int) -> int:
    return -(-a // b)


def all_reduce_bytes(payload: int, ranks: int) -> int:
    """Bytes one rank sends in a ring all-reduce of ``payload`` bytes over ``ranks``
    ranks: a reduce-scatter then an all-gather, each (N−1) chunks of ⌈S/N⌉ bytes, so
    2(N−1)·⌈S/N⌉ = 2(N−1)/N · S when N divides S (Patarasuk and Yuan 2009). 0 for one
    rank."""
    check_positive_int("ranks", ranks)
    return 2 * (ranks - 1) * _ceil_div(payload, ranks)


def reduce_scatter_bytes(payload: int, ranks: int) -> int:
    """Bytes one rank sends in a ring reduce-scatter of ``payload`` bytes (the whole
    unreduced tensor): (N−1)·⌈S/N⌉."""
    check_positive_int("ranks", ranks)
    return (ranks - 1) * _ceil_div(payload, ranks)


#: A ring all-gather with a ``payload``-byte output sends as much as a reduce-scatter.
all_gather_bytes = reduce_scatter_bytes


def all_to_all_bytes(payload: int, ranks: int) -> int:
    """Bytes one rank sends over links in an all-to-all of ``payload`` bytes spread
    evenly over ``ranks`` ranks: the (N−1)/N share not kept, ⌈S·(N−1)/N⌉."""
    check_positive_int("ranks", ranks)
    return _ceil_div(payload * (ranks - 1), ranks)


@dataclass(frozen=True)
class Collective:
    """``count`` calls of collective ``op`` over a group of ``ranks`` ranks, each on a
    ``payload`` of bytes (the full tensor: the all-reduced tensor, the all-gathered
    output, the reduce-scattered input, or the tokens one rank sends to all), and the
    bytes one rank sends in all of them (``sent``)."""

    group: str
    op: str
    count: int
    payload: int
    ranks: int
    purpose: str

    @property
    def sent(self) -> int:
        one = {
            "all_reduce": all_reduce_bytes,
            "reduce_scatter": reduce_scatter_bytes,
            "all_gather": all_gather_bytes,
            "all_to_all": all_to_all_bytes,
            "send_recv": lambda s, n: s,
        }[self.op](self.payload, self.ranks)
        return self.count * one


# --- data parallel and ZeRO -----------------------------------------------------------


def _check_zero(stage: int) -> None:
    if isinstance(stage, bool) or stage not in ZERO_STAGES:
        raise ConfigError(
            _("{name} must be {allowed}, got {value}").format(
                name="zero", allowed=either(map(str, ZERO_STAGES)), value=repr(stage)
            )
        )


def zero_model_state_bytes(params: int, ranks: int, stage: int) -> dict[str, int]:
    """Bytes of model state one data-parallel rank holds for ``params`` parameters of
    mixed-precision Adam, item by item: bf16 weights (2), bf16 gradients (2), fp32
    optimizer state (12: master weights, m, v). ZeRO stage 1 partitions the optimizer
    state over the ``ranks`` ranks, stage 2 also the gradients, stage 3 also the weights
    (Rajbhandari et al. 2020, Sec. 5.1-5.3): 4Ψ + 12Ψ/N, 2Ψ + 14Ψ/N and 16Ψ/N bytes. A
    partition holds ⌈Ψ/N⌉ parameters (the flat buffer padded to N equal parts).

    Raises:
        ConfigError: ``stage`` not 0-3, or ``ranks`` not a positive int."""
    _check_zero(stage)
    check_positive_int("ranks", ranks)
    part = _ceil_div(params, ranks)
    return {
        "weights (bf16)": WEIGHT_BYTES * (part if stage >= 3 else params),
        "gradients (bf16)": GRADIENT_BYTES * (part if stage >= 2 else params),
        "optimizer (fp32 master, m, v)": OPTIMIZER_BYTES
        * (part if stage >= 1 else params),
    }


def zero_collectives(
    params: int, ranks: int, stage: int, group: str = "dp"
) -> list[Collective]:
    """The collectives of one step of data parallelism over ``ranks`` ranks on
    ``params`` parameters with bf16 gradients (payload 2Ψ bytes): stages 0 and 1 one
    all-reduce of the gradients; stage 2 a reduce-scatter of the gradients and an
    all-gather of the updated weights; stage 3 a reduce-scatter and two all-gathers of
    the weights (forward and backward). Bytes sent: 1×, 1×, 1×, 1.5× of stage 0's
    (Rajbhandari et al. 2020, Sec. 7). None over one rank."""
    _check_zero(stage)
    if ranks == 1 or params == 0:
        return []
    payload = GRADIENT_BYTES * params
    if stage <= 1:
        return [Collective(group, "all_reduce", 1, payload, ranks, "gradients")]
    return [
        Collective(group, "reduce_scatter", 1, payload, ranks, "gradients"),
        Collective(
            group, "all_gather", 2 if stage == 3 else 1, payload, ranks, "weights"
        ),
    ]


# --- splitting tensors ----------------------------------------------------------------


def shard_size(n: int, parts: int, rank: int) -> int:
    """Rows rank ``rank`` of ``parts`` holds when ``n`` rows are split as
    ``torch.chunk`` splits them (what DTensor's ``Shard(0)`` and FSDP2 do): chunks
    of ⌈n/parts⌉, the last ones shorter or empty."""
    check_positive_int("parts", parts)
    if not 0 <= rank < parts:
        raise ConfigError(
            _("{name} must be between {low} and {high}, got {value}").format(
                name="rank", low=0, high=parts - 1, value=rank
            )
        )
    chunk = _ceil_div(n, parts)
    return max(0, min(chunk, n - rank * chunk))


def _module(tensor: TensorCount) -> str:
    return tensor.name.rsplit(".", 2)[-2]


def tp_split(tensor: TensorCount) -> str:
    """How tensor parallelism splits ``tensor``: ``"column"``, ``"row"``, ``"vocab"``
    or ``"replicated"`` (`COLUMN_PARALLEL`, `ROW_PARALLEL`, `VOCAB_PARALLEL`); a row-
    parallel layer's bias is replicated (added once, after the all-reduce)."""
    module, is_bias = _module(tensor), tensor.name.endswith(".bias")
    if module in COLUMN_PARALLEL:
        return "column"
    if module in ROW_PARALLEL and not is_bias:
        return "row"
    if module in VOCAB_PARALLEL:
        return "vocab"
    return "replicated"


def tp_numel(tensor: TensorCount, tp: int, rank: int = 0) -> int:
    """Parameters of ``tensor`` (one layer, all its expert copies) on tensor-parallel
    rank ``rank`` of ``tp``. Column and row splits must be exact; the vocabulary is
    split in ⌈V/tp⌉-row chunks (rank 0 holds the most; Megatron-LM pads V instead).

    Raises:
        ConfigError: the split dimension is not divisible by ``tp``."""
    split = tp_split(tensor)
    shape = tensor.shape
    if split == "replicated":
        return tensor.numel
    if split == "vocab":
        return shard_size(shape[0], tp, rank) * math.prod(shape[1:]) * tensor.copies
    dim = 0 if split == "column" else 1
    if shape[dim] % tp:
        raise ConfigError(
            (
                _("{name} has {n} output features, not divisible by tp ({tp})")
                if dim == 0
                else _("{name} has {n} input features, not divisible by tp ({tp})")
            ).format(name=tensor.name, n=shape[dim], tp=tp)
        )
    return tensor.numel // tp


def _layers_of(tensor: TensorCount, layers: range) -> int:
    if not tensor.per_layer:
        return 0
    if tensor.layer_set is None:
        return len(layers)
    return sum(1 for i in layers if i in tensor.layer_set)


@dataclass(frozen=True)
class StageParams:
    """Parameters one GPU of pipeline stage ``stage`` holds (tensor-parallel rank
    ``rank``): ``dense`` (every tensor but the routed experts) and ``experts`` (its
    E/ep experts of the stage's MoE layers)."""

    stage: int
    dense: int
    experts: int

    @property
    def total(self) -> int:
        return self.dense + self.experts


def stage_params(
    cfg: ModelConfig,
    tp: int = 1,
    pp: int = 1,
    ep: int = 1,
    stage: int = 0,
    rank: int = 0,
) -> StageParams:
    """Parameters on one GPU of stage ``stage`` of ``pp`` (layers split evenly, in
    order), tensor-parallel rank ``rank`` of ``tp``, with the routed experts spread over
    ``ep`` ranks. The first stage holds the embeddings, the last the final norm and the
    LM head; a tied LM head on a pipeline of more than one stage is a second copy of the
    embedding on the last stage (Megatron-LM keeps both and all-reduces their
    gradients).

    Raises:
        ConfigError: see `check_layout`."""
    check_layout(cfg, tp * pp, 1, tp, pp, ep=1)
    if cfg.is_moe and cfg.num_local_experts % ep:
        raise ConfigError(
            _divisible("num_local_experts", cfg.num_local_experts, "ep", ep)
        )
    per = cfg.num_hidden_layers // pp
    layers = range(stage * per, (stage + 1) * per)
    first, last = stage == 0, stage == pp - 1
    dense = experts = 0
    for t in count_params(cfg).tensors:
        n = tp_numel(t, tp, rank)
        if t.per_layer:
            n *= _layers_of(t, layers)
            if t.copies_dim == "E":
                experts += n // ep
                continue
        elif t.name.startswith("embed_"):
            n *= first + (
                last
                and pp > 1
                and cfg.tie_word_embeddings
                and t.name == "embed_tokens.weight"
            )
        else:  # the final norm and an untied LM head
            n *= last
        dense += n
    return StageParams(stage, dense, experts)


def tp_params_per_rank(cfg: ModelConfig, tp: int, rank: int = 0) -> int:
    """Parameters tensor-parallel rank ``rank`` of ``tp`` holds (no pipeline, no
    expert parallelism): column- and row-parallel matrices ÷ tp, the vocabulary in
    ⌈V/tp⌉-row chunks, norms and routers whole."""
    return stage_params(cfg, tp, 1, 1, 0, rank).total


def fsdp_params_per_rank(cfg: ModelConfig, ranks: int, rank: int = 0) -> int:
    """Parameters FSDP2's ``fully_shard`` leaves on rank ``rank`` of ``ranks``: every
    parameter split on its first dimension in ``torch.chunk`` chunks (`shard_size`), so
    Ψ/N on each rank when N divides every first dimension (Zhao et al. 2023, PyTorch
    FSDP, Sec. 3.2; FSDP2 shards per parameter, not a flat buffer)."""
    total = 0
    for t in count_params(cfg).tensors:
        rows = shard_size(t.shape[0], ranks, rank) * math.prod(t.shape[1:]) * t.copies
        total += rows * (_layers_of(t, range(cfg.num_hidden_layers)) or 1)
    return total


# --- tensor parallel: collectives -----------------------------------------------------


def tp_forward_collectives(
    cfg: ModelConfig,
    batch: int,
    seq_len: int,
    tp: int,
    sequence_parallel: bool = False,
    dtype_bytes: int = ACTIVATION_BYTES,
    layers: int | None = None,
    vocab_parallel: bool = False,
) -> list[Collective]:
    """The tensor-parallel collectives of one forward pass of ``batch`` sequences of
    ``seq_len`` tokens through ``layers`` blocks (default all L): two all-reduces of
    b·s·H elements per block (Megatron-LM, Sec. 3: after the row-parallel output and
    down projections), or with sequence parallelism two all-gathers and two
    reduce-scatters of the same size (Korthikanti et al. 2022, Sec. 4.2.2). With
    ``vocab_parallel`` also the vocabulary-parallel embedding's all-reduce of b·s·H and
    the all-gather of the LM head's b·s·V logits. Payloads in bytes at ``dtype_bytes``
    per element. None for tp = 1."""
    check_positive_int("batch", batch)
    check_positive_int("seq_len", seq_len)
    check_positive_int("tp", tp)
    if tp == 1:
        return []
    L = cfg.num_hidden_layers if layers is None else layers
    hidden = dtype_bytes * batch * seq_len * cfg.hidden_size
    if sequence_parallel:
        out = [
            Collective("tp", "all_gather", 2 * L, hidden, tp, "block inputs"),
            Collective("tp", "reduce_scatter", 2 * L, hidden, tp, "block outputs"),
        ]
    else:
        out = [Collective("tp", "all_reduce", 2 * L, hidden, tp, "block outputs")]
    if vocab_parallel:
        logits = dtype_bytes * batch * seq_len * cfg.vocab_size
        out += [
            Collective("tp", "all_reduce", 1, hidden, tp, "embedding"),
            Collective("tp", "all_gather", 1, logits, tp, "logits"),
        ]
    return out


def column_parallel_modules(cfg: ModelConfig) -> int:
    """Column-parallel modules per block whose input is the replicated block input:
    q, k, v (or one fused qkv) and gate, up (or one fused gate_up, or GPT-2's single
    up)."""
    attention = 1 if cfg.fused_qkv else 3
    ffn = 1 if cfg.fused_gate_up or cfg.mlp_type != "gated" else 2
    return attention + ffn


def tp_backward_collectives(
    cfg: ModelConfig,
    batch: int,
    seq_len: int,
    tp: int,
    dtype_bytes: int = ACTIVATION_BYTES,
    layers: int | None = None,
    fused: bool = True,
    vocab_parallel: bool = False,
) -> list[Collective]:
    """The tensor-parallel all-reduces of one backward pass (no sequence parallelism):
    the gradient of a replicated input that column-parallel layers read is a partial
    sum on each rank. Megatron-LM sums the q, k, v (and gate, up) gradients locally
    first: two all-reduces of b·s·H per block (``fused``, Shoeybi et al. 2019, Fig. 3,
    operator f). Separate modules, as DTensor's `ColwiseParallel` on each projection
    does, all-reduce each: `column_parallel_modules` per block. A vocabulary-parallel
    LM head adds one; the embedding's backward needs none."""
    check_positive_int("tp", tp)
    if tp == 1:
        return []
    L = cfg.num_hidden_layers if layers is None else layers
    per_block = 2 if fused else column_parallel_modules(cfg)
    hidden = dtype_bytes * batch * seq_len * cfg.hidden_size
    count = per_block * L + (1 if vocab_parallel else 0)
    return [Collective("tp", "all_reduce", count, hidden, tp, "input gradients")]


# --- pipeline parallel ----------------------------------------------------------------


def pipeline_bubble(
    stages: int, micro_batches: int, chunks: int = 1, of: str = "step"
) -> Fraction:
    """The pipeline bubble as a fraction, exact, by one of two definitions.

    ``of="step"`` (the default): the idle share of the whole step, bubble ÷ (ideal +
    bubble): (p−1)/(m+p−1) for 1F1B (and GPipe), (p−1)/(v·m+p−1) for the interleaved
    schedule with v model chunks per GPU. ``of="ideal"``: the bubble time against the
    ideal time m·(t_f + t_b), the definition of Narayanan et al. 2021, Sec. 2.2.1
    ("bubble time fraction") and Sec. 2.2.2: (p−1)/m, and (1/v)·(p−1)/m interleaved.
    The two are related by step = ideal / (1 + ideal).

    Raises:
        ConfigError: a size is not a positive integer, or ``of`` is neither
        ``"step"`` nor ``"ideal"``.
    """
    for name, v in (
        ("pp", stages),
        ("micro_batches", micro_batches),
        ("chunks", chunks),
    ):
        check_positive_int(name, v)
    if of == "ideal":
        return Fraction(stages - 1, chunks * micro_batches)
    if of != "step":
        raise ConfigError(
            _("of must be 'step' or 'ideal'; got {value}").format(value=repr(of))
        )
    return Fraction(stages - 1, chunks * micro_batches + stages - 1)


def in_flight_micro_batches(
    stages: int, micro_batches: int, chunks: int = 1
) -> Fraction:
    """Micro-batches of activations the first stage keeps at once under 1F1B: min(m, p);
    interleaved, p + (p−1)/v (Korthikanti et al. 2022, Sec. 4.2.3: the first stage's
    memory is L·A·(1 + (p−1)/(p·v)), A per layer); 1 without a pipeline."""
    if stages == 1:
        return Fraction(1)
    if chunks == 1:
        return Fraction(min(stages, micro_batches))
    return stages + Fraction(stages - 1, chunks)


def activation_bytes_per_gpu(
    cfg: ModelConfig,
    seq_len: int,
    micro_batch: int = 1,
    tp: int = 1,
    pp: int = 1,
    micro_batches: int = 1,
    sequence_parallel: bool = False,
    chunks: int = 1,
    flash_attention: bool = True,
    dropout: bool = False,
    recompute: bool = False,
) -> int:
    """Activation bytes the busiest GPU (first pipeline stage, tensor-parallel rank 0)
    keeps for the backward pass: each layer's items (`llmmath.memory.
    activation_bytes_per_layer`, 16-bit) with tensor parallelism dividing all but the
    `TP_REPLICATED_ACTIVATIONS` by tp, sequence parallelism splitting those by the
    sequence (⌈s/tp⌉ tokens), summed over the first stage's L/pp layers (a mixture of
    experts' ``dense_layers`` at the dense FFN's width, its other layers at the
    experts'), times the micro-batches in flight (`in_flight_micro_batches`).
    Korthikanti et al. 2022, Table 2: sbh(10 + 24/t + 5as/(ht)) per GPT layer with
    tp, sbh(34/t + 5as/(ht)) with sequence parallelism.
    With ``recompute`` (full activation checkpointing, Chen et al. 2016; Korthikanti et
    al. 2022, Sec. 3) each layer keeps only its input, 2·s·b·H bytes (÷ tp with
    sequence parallelism), and one layer's activations of one micro-batch are rebuilt
    at a time during the backward pass (the stage's largest). The embedding output
    and the logits are left out."""
    layers = range(cfg.num_hidden_layers // pp)  # the first stage's
    # A mixture of experts keeps a dense FFN in its `dense_layers` (DeepSeek's first
    # k layers) and the experts' in the others: one of each kind is sized, then counted.
    kinds: dict[bool, list[int]] = {}
    for i in layers:
        kinds.setdefault(
            cfg.num_moe_layers > 0 and i not in cfg.dense_layers, []
        ).append(i)
    per_layer = kept = total = 0
    for of_kind in kinds.values():
        layer = of_kind[0] if cfg.num_moe_layers else None
        full = activation_bytes_per_layer(
            cfg, seq_len, micro_batch, dropout, flash_attention, layer
        )
        short = activation_bytes_per_layer(
            cfg, _ceil_div(seq_len, tp), micro_batch, dropout, flash_attention, layer
        )
        one = 0
        for item, value in full.items():
            if item in TP_REPLICATED_ACTIVATIONS:
                one += short[item] if sequence_parallel else value
            else:
                one += _ceil_div(value, tp)
        per_layer = max(per_layer, one)
        total += one * len(of_kind)
        kept = (short if sequence_parallel else full)["input of the first norm"]
    in_flight = in_flight_micro_batches(pp, micro_batches, chunks)
    if recompute:
        return math.ceil(kept * len(layers) * in_flight) + per_layer
    return math.ceil(total * in_flight)


# --- expert and context parallel ------------------------------------------------------


def expert_all_to_all_payload(
    cfg: ModelConfig, tokens: int, dtype_bytes: int = ACTIVATION_BYTES
) -> int:
    """Bytes one rank's tokens send to the experts in one MoE layer's dispatch (and get
    back in the combine): tokens × k × H × bytes (each token goes to k experts;
    Lepikhin et al. 2020, GShard, Sec. 3.2; DeepSeek-V3 report, Sec. 3.2.2).

    Raises:
        ConfigError: ``cfg`` is not a mixture of experts."""
    if not cfg.is_moe:
        raise ConfigError(
            _("expert parallelism needs a mixture of experts (num_local_experts)")
        )
    check_positive_int("tokens", tokens)
    return tokens * cfg.num_experts_per_tok * cfg.hidden_size * dtype_bytes


def ring_attention_bytes(
    cfg: ModelConfig,
    seq_len: int,
    cp: int,
    batch: int = 1,
    dtype_bytes: int = ACTIVATION_BYTES,
) -> int:
    """Bytes one rank sends in one layer's forward pass of ring attention over ``cp``
    ranks (Liu et al. 2023, Sec. 3): its K and V chunk of ⌈s/cp⌉ tokens, 2·n_kv·d_h
    values a token, passed on cp − 1 times."""
    check_positive_int("cp", cp)
    check_positive_int("seq_len", seq_len)
    chunk = _ceil_div(seq_len, cp)
    kv = 2 * cfg.num_key_value_heads * cfg.head_dim
    return (cp - 1) * batch * chunk * kv * dtype_bytes


# --- a layout -------------------------------------------------------------------------


def check_layout(
    cfg: ModelConfig, gpus: int, dp: int, tp: int, pp: int, ep: int = 1
) -> None:
    """Raise a one-line `ConfigError` if the layout does not fit together: dp·tp·pp ≠
    gpus, n_h or n_kv not divisible by tp, L by pp, the experts by ep, or dp by ep (the
    experts are spread over the data-parallel group)."""
    for name, v in (("gpus", gpus), ("dp", dp), ("tp", tp), ("pp", pp), ("ep", ep)):
        check_positive_int(name, v)
    if dp * tp * pp != gpus:
        raise ConfigError(
            _("dp·tp·pp ({dp}·{tp}·{pp} = {product}) must equal gpus ({gpus})").format(
                dp=dp, tp=tp, pp=pp, product=dp * tp * pp, gpus=gpus
            )
        )
    for field_name in ("num_attention_heads", "num_key_value_heads"):
        heads = getattr(cfg, field_name)
        if heads % tp:
            raise ConfigError(_divisible(field_name, heads, "tp", tp))
    if cfg.num_hidden_layers % pp:
        raise ConfigError(
            _divisible("num_hidden_layers", cfg.num_hidden_layers, "pp", pp)
        )
    if ep > 1:
        if not cfg.is_moe:
            raise ConfigError(
                _("ep ({ep}) needs a mixture of experts; this model is dense").format(
                    ep=ep
                )
            )
        if cfg.num_local_experts % ep:
            raise ConfigError(
                _divisible("num_local_experts", cfg.num_local_experts, "ep", ep)
            )
        if dp % ep:
            raise ConfigError(_divisible("dp", dp, "ep", ep))


def _divisible(name: str, n: int, other: str, m: int) -> str:
    """ "NAME (N) must be divisible by OTHER (M)", in the reader's language."""
    return _("{name} ({n}) must be divisible by {other} ({m})").format(
        name=name, n=n, other=other, m=m
    )


@dataclass(frozen=True)
class Plan:
    """One layout of one model on one cluster, and what each GPU holds and sends in one
    step (`plan` builds it). Bytes and parameters are exact ints; times are seconds.
    With ``recompute`` the backward pass runs each block's forward again: 4/3 of the
    model FLOPs are done, 3/3 counted in the MFU."""

    model: ModelConfig
    cluster: Cluster
    gpus: int
    dp: int
    tp: int
    pp: int
    ep: int
    zero: int
    micro_batches: int
    micro_batch_size: int
    seq_len: int
    sequence_parallel: bool
    chunks: int
    params_per_gpu: int
    model_state: dict[str, int]
    activation_bytes_per_gpu: int
    collectives: list[Collective] = field(default_factory=list)
    matmul_efficiency: float = 1.0
    recompute: bool = False

    @property
    def model_state_bytes_per_gpu(self) -> int:
        return sum(self.model_state.values())

    @property
    def memory_bytes_per_gpu(self) -> int:
        """Model state plus activations (no buffers, fragmentation or CUDA context)."""
        return self.model_state_bytes_per_gpu + self.activation_bytes_per_gpu

    @property
    def fits(self) -> bool:
        return self.memory_bytes_per_gpu <= self.cluster.memory

    @property
    def sequences_per_step(self) -> int:
        return self.dp * self.micro_batches * self.micro_batch_size

    @property
    def tokens_per_step(self) -> int:
        return self.sequences_per_step * self.seq_len

    @property
    def bubble(self) -> Fraction:
        """The bubble's share of the step, (p−1)/(v·m+p−1) (`pipeline_bubble`'s
        ``of="step"``); `times` adds compute · (p−1)/(v·m), the ``of="ideal"`` one."""
        return pipeline_bubble(self.pp, self.micro_batches, self.chunks)

    @property
    def flops_per_step(self) -> int:
        """Model FLOPs of one step: 3 × the causal forward FLOPs of every token
        (`llmmath.flops.training_flops`: forward plus a backward twice as dear)."""
        f = forward_flops_per_token(self.model, self.seq_len, "causal").total
        return math.ceil(3 * f * self.tokens_per_step)

    def communication_bytes(self) -> dict[str, int]:
        """Bytes one GPU sends in a step, by collective."""
        out = dict.fromkeys(
            ("all_reduce", "reduce_scatter", "all_gather", "all_to_all", "send_recv"), 0
        )
        for c in self.collectives:
            out[c.op] += c.sent
        return out

    def _bandwidth(self, group: str) -> float:
        c = self.cluster
        inside = {"tp": self.tp, "ep": self.tp * self.ep}.get(
            group, c.gpus_per_node + 1
        )
        return c.nvlink if inside <= c.gpus_per_node else c.infiniband

    def times(self) -> dict[str, float]:
        """Seconds of one step, part by part: ``compute`` (FLOPs ÷ (GPUs · peak ·
        ``matmul_efficiency``)), ``bubble`` (compute · (p−1)/(v·m)), the tensor-
        parallel and expert all-to-all time (not overlapped, NVLink inside a node,
        InfiniBand across), pipeline sends, and the data-parallel time left after
        overlapping with the backward pass (2/3 of compute). An estimate: no kernel
        launch, load imbalance or straggler costs."""
        passes = Fraction(4, 3) if self.recompute else 1  # one more forward pass
        compute = float(self.flops_per_step * passes) / (
            self.gpus * self.cluster.gpu.peak_flops * self.matmul_efficiency
        )
        bubble = compute * float(
            pipeline_bubble(self.pp, self.micro_batches, self.chunks, of="ideal")
        )
        sent: dict[str, float] = {}
        for c in self.collectives:
            sent[c.group] = sent.get(c.group, 0.0) + c.sent / self._bandwidth(c.group)
        dp = sent.get("dp", 0.0) + sent.get("edp", 0.0)
        return {
            "compute": compute,
            "pipeline bubble": bubble,
            "tensor parallel": sent.get("tp", 0.0),
            "pipeline sends": sent.get("pp", 0.0),
            "expert all-to-all": sent.get("ep", 0.0),
            "data parallel (exposed)": max(0.0, dp - 2 * compute / 3),
        }

    @property
    def step_seconds(self) -> float:
        return sum(self.times().values())

    @property
    def mfu(self) -> float:
        """Model FLOPs utilization of the estimated step (Chowdhery et al. 2022,
        App. B)."""
        return self.flops_per_step / (
            self.gpus * self.cluster.gpu.peak_flops * self.step_seconds
        )

    def report(self) -> dict:
        """A JSON-ready summary (what ``python -m llmmath parallel --json`` prints)."""
        return {
            "gpus": self.gpus,
            "dp": self.dp,
            "tp": self.tp,
            "pp": self.pp,
            "ep": self.ep,
            "zero": self.zero,
            "micro_batches": self.micro_batches,
            "micro_batch_size": self.micro_batch_size,
            "seq_len": self.seq_len,
            "sequence_parallel": self.sequence_parallel,
            "recompute": self.recompute,
            "params_per_gpu": self.params_per_gpu,
            "model_state_bytes_per_gpu": self.model_state_bytes_per_gpu,
            "model_state": self.model_state,
            "activation_bytes_per_gpu": self.activation_bytes_per_gpu,
            "memory_bytes_per_gpu": self.memory_bytes_per_gpu,
            "gpu_memory_bytes": self.cluster.memory,
            "fits": self.fits,
            "pipeline_bubble_fraction": float(self.bubble),
            "pipeline_bubble_fraction_exact": str(self.bubble),
            "pipeline_bubble_of_ideal_exact": str(
                pipeline_bubble(self.pp, self.micro_batches, self.chunks, of="ideal")
            ),
            "communication_bytes_per_step": self.communication_bytes(),
            "collectives": [
                {
                    "group": c.group,
                    "op": c.op,
                    "count": c.count,
                    "payload_bytes": c.payload,
                    "ranks": c.ranks,
                    "purpose": c.purpose,
                    "bytes_sent_per_gpu": c.sent,
                }
                for c in self.collectives
            ],
            "tokens_per_step": self.tokens_per_step,
            "flops_per_step": self.flops_per_step,
            "step_seconds": self.times(),
            "step_seconds_total": self.step_seconds,
            "mfu": self.mfu,
            "gpu": self.cluster.name,
        }


def plan(
    cfg: ModelConfig,
    gpus: int,
    dp: int | None = None,
    tp: int = 1,
    pp: int = 1,
    ep: int = 1,
    zero: int = 0,
    micro_batches: int = 1,
    micro_batch_size: int = 1,
    seq_len: int = 4096,
    sequence_parallel: bool = False,
    chunks: int = 1,
    gpu: str | Cluster = DEFAULT_GPU,
    flash_attention: bool = True,
    matmul_efficiency: float = 1.0,
    recompute: bool = False,
) -> Plan:
    """The layout dp × tp × pp (dp defaults to gpus ÷ (tp·pp)) with ep-way expert
    parallelism inside the data-parallel group and ZeRO stage ``zero`` over it, on
    ``gpu``'s cluster. Per GPU (the busiest: first stage, tensor rank 0): parameters
    (`stage_params`, the largest stage), model state (`zero_model_state_bytes`: the
    dense parameters over dp ranks, the experts over dp/ep), activations
    (`activation_bytes_per_gpu`) and the step's collectives: tensor-parallel
    (`tp_forward_collectives`, forward and backward), pipeline sends (each micro-batch's
    b·s·H activations forward and gradients back), expert all-to-alls (dispatch and
    combine, forward and backward) and the data-parallel ones (`zero_collectives`).

    Raises:
        ConfigError: a layout that does not fit together (`check_layout`), a ZeRO stage
        not 0-3, an unknown gpu, a size that is not a positive int, or an interleaved
        schedule whose micro-batches are not a multiple of pp."""
    check_positive_int("gpus", gpus)
    for name, v in (("tp", tp), ("pp", pp)):
        check_positive_int(name, v)
    if dp is None:
        if gpus % (tp * pp):
            raise ConfigError(
                _divisible("gpus", gpus, "tp·pp", f"{tp}·{pp} = {tp * pp}")
            )
        dp = gpus // (tp * pp)
    check_layout(cfg, gpus, dp, tp, pp, ep)
    _check_zero(zero)
    for name, v in (
        ("micro_batches", micro_batches),
        ("micro_batch_size", micro_batch_size),
        ("seq_len", seq_len),
        ("chunks", chunks),
    ):
        check_positive_int(name, v)
    if chunks > 1 and (
        pp == 1 or micro_batches % pp or (cfg.num_hidden_layers // pp) % chunks
    ):
        raise ConfigError(
            _(
                "an interleaved schedule (chunks {chunks}) needs pp > 1, micro_batches "
                "divisible by pp ({pp}) and each stage's layers divisible by chunks"
            ).format(chunks=chunks, pp=pp)
        )
    if not 0 < matmul_efficiency <= 1:
        raise ConfigError(
            _("{name} must be in (0, 1], got {value}").format(
                name="matmul_efficiency", value=repr(matmul_efficiency)
            )
        )
    where = cluster(gpu)
    stages = [stage_params(cfg, tp, pp, ep, s) for s in range(pp)]
    busiest = max(stages, key=lambda s: s.total)
    dense = zero_model_state_bytes(busiest.dense, dp, zero)
    experts = zero_model_state_bytes(busiest.experts, dp // ep, zero)
    state = {k: dense[k] + experts[k] for k in dense}
    activations = activation_bytes_per_gpu(
        cfg,
        seq_len,
        micro_batch_size,
        tp,
        pp,
        micro_batches,
        sequence_parallel,
        chunks,
        flash_attention,
        recompute=recompute,
    )
    per_stage = cfg.num_hidden_layers // pp
    collectives = []
    for c in tp_forward_collectives(
        cfg, micro_batch_size, seq_len, tp, sequence_parallel, layers=per_stage
    ):  # forward and backward: twice the forward's
        collectives.append(
            Collective(
                c.group,
                c.op,
                2 * c.count * micro_batches,
                c.payload,
                c.ranks,
                c.purpose + " (forward and backward)",
            )
        )
    hidden = ACTIVATION_BYTES * micro_batch_size * seq_len * cfg.hidden_size
    if pp > 1:
        collectives.append(
            Collective(
                "pp",
                "send_recv",
                2 * micro_batches,
                hidden,
                2,
                "activations forward, gradients back",
            )
        )
    if ep > 1:
        moe_layers = min(per_stage, cfg.num_moe_layers)  # the busiest stage's
        payload = expert_all_to_all_payload(cfg, micro_batch_size * seq_len)
        collectives.append(
            Collective(
                "ep",
                "all_to_all",
                4 * moe_layers * micro_batches,
                payload,
                ep,
                "dispatch and combine, forward and backward",
            )
        )
    collectives += zero_collectives(busiest.dense, dp, zero, "dp")
    collectives += zero_collectives(busiest.experts, dp // ep, zero, "edp")
    return Plan(
        cfg,
        where,
        gpus,
        dp,
        tp,
        pp,
        ep,
        zero,
        micro_batches,
        micro_batch_size,
        seq_len,
        sequence_parallel,
        chunks,
        busiest.total,
        state,
        activations,
        collectives,
        matmul_efficiency,
        recompute,
    )


def _divisors(n: int) -> list[int]:
    return [d for d in range(1, n + 1) if n % d == 0]


def layouts(
    cfg: ModelConfig,
    gpus: int,
    zero: int = 1,
    max_tp: int = 8,
    global_batch: int | None = None,
    **options,
) -> list[Plan]:
    """Every layout dp × tp × pp of ``gpus`` with tp a power of two up to ``max_tp``
    (one node) that fits together (`check_layout`), as `Plan`s, fitting or not. With
    ``global_batch`` (sequences per step) the micro-batches are global_batch ÷ (dp ·
    micro_batch_size), and layouts that cannot split it evenly are left out. Other
    options go to `plan`."""
    out = []
    mbs = options.get("micro_batch_size", 1)
    for tp in (t for t in (1, 2, 4, 8, 16, 32, 64) if t <= max_tp):
        for pp in _divisors(cfg.num_hidden_layers):
            if gpus % (tp * pp):
                continue
            dp = gpus // (tp * pp)
            opts = dict(options)
            if global_batch is not None:
                if global_batch % (dp * mbs):
                    continue
                opts["micro_batches"] = global_batch // (dp * mbs)
            try:
                out.append(plan(cfg, gpus, dp, tp, pp, zero=zero, **opts))
            except ConfigError:
                continue
    return out

"""`llmmath.parallel` against a real distributed engine: torch.distributed on the CPU.

Two processes (gloo on 127.0.0.1, started once for the module with
``torch.multiprocessing.spawn``) shard the llmmath reference model (a tiny config) with
FSDP2's ``fully_shard`` and with DTensor's ``parallelize_module``
(``ColwiseParallel``/``RowwiseParallel``); each rank reports the parameters it holds,
the collectives ``CommDebugMode`` saw (their number, and their bytes from the tensors
they moved) and whether its outputs and gradients equal the single-process model's.

Sizes no machine here can hold (Llama 3 70B and Llama 3.1 405B over up to 1024 GPUs)
get the same sharding plans on the meta device under torch's fake process group
(``torch.testing._internal.distributed.fake_pg``): each rank's shapes, no memory.

Every expected number is a closed form written here (Ψ/N, 2L + 1 all-reduces, ...) or
computed from torch's own parameters, and compared with `llmmath.parallel`.
"""

from __future__ import annotations

import json
import math
import os
import socket

import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp

from llmmath import count_params, presets
from llmmath.config import ModelConfig
from llmmath.parallel import (
    fsdp_params_per_rank,
    tp_backward_collectives,
    tp_forward_collectives,
    tp_params_per_rank,
    zero_collectives,
)

WORLD = 2
#: Every first dimension even, so FSDP2 splits each tensor exactly in two.
TINY = dict(
    vocab_size=96,
    hidden_size=32,
    intermediate_size=64,
    num_hidden_layers=2,
    num_attention_heads=4,
    num_key_value_heads=2,
    norm_eps=1e-5,
)
BATCH, SEQ = 3, 5
FP32 = 4  # bytes per element: the tiny model runs in float32


def _record(mode_cls):
    """``CommDebugMode`` that also keeps, for every collective it counts, its name and
    the bytes of the largest tensor it touched (the all-reduced tensor, the gathered
    output, the scattered input)."""
    from torch.distributed.tensor.debug._comm_mode import c10d_collective_ops

    class CommBytes(mode_cls):
        def __init__(self):
            super().__init__()
            self.moved: list[tuple[str, int]] = []

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            out = super().__torch_dispatch__(func, types, args, kwargs)
            packet = getattr(func, "_overloadpacket", None)
            if out is NotImplemented or packet is None:
                return out
            if packet in self.comm_registry or packet in c10d_collective_ops:
                flat = [*args, out]
                flat = [
                    t
                    for x in flat
                    for t in (x if isinstance(x, (list, tuple)) else [x])
                    if isinstance(t, torch.Tensor)
                ]
                size = max(t.numel() * t.element_size() for t in flat)
                self.moved.append((packet.__name__, size))
            return out

    return CommBytes


def _summary(mode) -> dict:
    out: dict[str, list[int]] = {}
    for name, size in mode.moved:
        op = (
            "all_reduce"
            if "allreduce" in name or "all_reduce" in name
            else "all_gather"
            if "allgather" in name or "all_gather" in name
            else "reduce_scatter"
            if "reduce_scatter" in name
            else name
        )
        out.setdefault(op, []).append(size)
    return out


def _fsdp(cfg, ids) -> dict:
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard
    from torch.distributed.tensor.debug import CommDebugMode

    from llmmath.modules import build_model

    ref = build_model(cfg, "cpu", seed=0)
    model = build_model(cfg, "cpu", seed=0)
    mesh = init_device_mesh("cpu", (WORLD,))
    for layer in model.layers:
        fully_shard(layer, mesh=mesh)
    fully_shard(model, mesh=mesh, reshard_after_forward=True)
    local = sum(p.to_local().numel() for p in model.parameters())
    with _record(CommDebugMode)() as comm:
        out = model(ids)
        out.pow(2).mean().backward()
    expected = ref(ids)
    expected.pow(2).mean().backward()
    outputs_equal = bool(torch.allclose(out, expected, rtol=1e-5, atol=1e-6))
    grads_equal = all(
        torch.allclose(p.grad.full_tensor(), q.grad, rtol=1e-4, atol=1e-6)
        for p, q in zip(model.parameters(), ref.parameters(), strict=True)
    )
    return {
        "local_numel": local,
        "collectives": _summary(comm),
        "outputs_equal": outputs_equal,
        "grads_equal": grads_equal,
    }


def _tp(cfg, ids) -> dict:
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor import DTensor
    from torch.distributed.tensor.debug import CommDebugMode
    from torch.distributed.tensor.parallel import parallelize_module

    from llmmath.distributed import local_heads, local_numel, megatron_plan
    from llmmath.modules import build_model

    ref = build_model(cfg, "cpu", seed=0)
    model = build_model(cfg, "cpu", seed=0)
    mesh = init_device_mesh("cpu", (WORLD,))
    parallelize_module(model, mesh, megatron_plan(model))
    local_heads(model, WORLD)  # each rank runs its own heads (torchtitan does this)
    local = local_numel(model)
    with _record(CommDebugMode)() as forward:
        out = model(ids)
    with _record(CommDebugMode)() as backward:
        out.pow(2).mean().backward()
    expected = ref(ids)
    expected.pow(2).mean().backward()
    grads_equal = all(
        torch.allclose(
            p.grad.full_tensor() if isinstance(p.grad, DTensor) else p.grad,
            q.grad,
            rtol=1e-4,
            atol=1e-6,
        )
        for p, q in zip(model.parameters(), ref.parameters(), strict=True)
    )
    return {
        "local_numel": local,
        "forward": _summary(forward),
        "backward": _summary(backward),
        "outputs_equal": bool(torch.allclose(out, expected, rtol=1e-5, atol=1e-6)),
        "grads_equal": grads_equal,
    }


def _worker(rank: int, port: int, out_dir: str) -> None:
    import warnings

    warnings.filterwarnings("ignore")
    torch.set_num_threads(1)
    dist.init_process_group(
        "gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=WORLD
    )
    try:
        cfg = ModelConfig(**TINY)
        ids = torch.randint(
            0, cfg.vocab_size, (BATCH, SEQ), generator=torch.Generator().manual_seed(1)
        )
        result = {"fsdp": _fsdp(cfg, ids), "tp": _tp(cfg, ids)}
    finally:
        dist.destroy_process_group()
    with open(os.path.join(out_dir, f"rank{rank}.json"), "w") as f:
        json.dump(result, f)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def ranks(tmp_path_factory) -> list[dict]:
    """What each of the two gloo ranks measured (one spawn for the whole module)."""
    out = tmp_path_factory.mktemp("distributed")
    mp.spawn(_worker, args=(_free_port(), str(out)), nprocs=WORLD, join=True)
    return [json.loads((out / f"rank{r}.json").read_text()) for r in range(WORLD)]


TINY_CFG = ModelConfig(**TINY)
PSI = count_params(TINY_CFG).total
# Ψ of the tiny model by hand: V·H (embedding) + V·H (LM head) + H (final norm)
# + L·(2H norms + H·n_h·d_h + 2·H·n_kv·d_h + n_h·d_h·H + 3·H·I)
TINY_PSI = (
    96 * 32 * 2 + 32 + 2 * (2 * 32 + 32 * 32 + 2 * 32 * 16 + 32 * 32 + 3 * 32 * 64)
)


def test_tiny_model_count_by_hand():
    assert PSI == TINY_PSI == 24_736


# --- FSDP2 --------------------------------------------------------------------------


def test_fsdp2_shards_psi_over_n(ranks):
    """Each rank holds Ψ/N parameters: the formula, and torch's own count."""
    for rank, result in enumerate(ranks):
        assert result["fsdp"]["local_numel"] == TINY_PSI // WORLD
        assert fsdp_params_per_rank(TINY_CFG, WORLD, rank) == TINY_PSI // WORLD


def test_fsdp2_traffic_is_zero3(ranks):
    """One step of FSDP2 (ZeRO-3) all-gathers the weights twice (forward, backward) and
    reduce-scatters the gradients once: 3 × 4Ψ bytes of payload in fp32, against 2 ×
    4Ψ for data parallelism's all-reduce (a reduce-scatter plus an all-gather), 1.5×."""
    for result in ranks:
        moved = result["fsdp"]["collectives"]
        assert sum(moved["all_gather"]) == 2 * FP32 * TINY_PSI
        assert sum(moved["reduce_scatter"]) == FP32 * TINY_PSI
        # one all-gather and one reduce-scatter per fully_shard unit (L blocks + root)
        units = TINY["num_hidden_layers"] + 1
        assert len(moved["all_gather"]) == 2 * units
        assert len(moved["reduce_scatter"]) == units
    zero3 = zero_collectives(TINY_PSI, WORLD, 3)
    zero0 = zero_collectives(TINY_PSI, WORLD, 0)
    assert 2 * sum(c.sent for c in zero3) == 3 * sum(c.sent for c in zero0)


def test_fsdp2_matches_one_process(ranks):
    for result in ranks:
        assert result["fsdp"]["outputs_equal"] and result["fsdp"]["grads_equal"]


# --- tensor parallel with DTensor ----------------------------------------------------


def test_tensor_parallel_params_per_rank(ranks):
    """Per rank: projections ÷ tp, embedding and LM head ÷ tp (by vocabulary), norms
    whole: (Ψ − norms)/tp + norms."""
    H, L = TINY["hidden_size"], TINY["num_hidden_layers"]
    norms = 2 * L * H + H
    for rank, result in enumerate(ranks):
        expected = (TINY_PSI - norms) // WORLD + norms
        assert result["tp"]["local_numel"] == expected
        assert tp_params_per_rank(TINY_CFG, WORLD, rank) == expected


def test_tensor_parallel_forward_collectives(ranks):
    """Forward: two all-reduces of b·s·H per block plus the embedding's one, and one
    all-gather of the b·s·V logits."""
    L, H, V = TINY["num_hidden_layers"], TINY["hidden_size"], TINY["vocab_size"]
    hidden, logits = FP32 * BATCH * SEQ * H, FP32 * BATCH * SEQ * V
    formula = tp_forward_collectives(
        TINY_CFG, BATCH, SEQ, WORLD, dtype_bytes=FP32, vocab_parallel=True
    )
    counted = {}
    for c in formula:
        counted.setdefault(c.op, []).extend([c.payload] * c.count)
    for result in ranks:
        moved = result["tp"]["forward"]
        assert sorted(moved["all_reduce"]) == [hidden] * (2 * L + 1)
        assert moved["all_gather"] == [logits]
        assert {k: sorted(v) for k, v in moved.items()} == counted


def test_tensor_parallel_backward_collectives(ranks):
    """Backward: the input gradient of each column-parallel module is all-reduced (q, k,
    v, gate, up: 5 per block) plus the LM head's; Megatron-LM's fused layers need 2."""
    L, H = TINY["num_hidden_layers"], TINY["hidden_size"]
    hidden = FP32 * BATCH * SEQ * H
    (separate,) = tp_backward_collectives(
        TINY_CFG, BATCH, SEQ, WORLD, FP32, fused=False, vocab_parallel=True
    )
    (fused,) = tp_backward_collectives(TINY_CFG, BATCH, SEQ, WORLD, FP32)
    assert (separate.count, separate.payload) == (5 * L + 1, hidden)
    assert (fused.count, fused.payload) == (2 * L, hidden)
    for result in ranks:
        assert result["tp"]["backward"] == {"all_reduce": [hidden] * (5 * L + 1)}


def test_tensor_parallel_matches_one_process(ranks):
    for result in ranks:
        assert result["tp"]["outputs_equal"] and result["tp"]["grads_equal"]


# --- at scale: the meta device and the fake process group ----------------------------


@pytest.fixture
def fake_group():
    """Start torch's fake process group as rank ``rank`` of ``world`` (no processes,
    no communication); destroyed after the test."""
    from torch.testing._internal.distributed.fake_pg import FakeStore

    def start(rank: int, world: int):
        from torch.distributed.device_mesh import init_device_mesh

        if dist.is_initialized():
            dist.destroy_process_group()
        dist.init_process_group("fake", store=FakeStore(), rank=rank, world_size=world)
        return init_device_mesh("cpu", (world,))

    yield start
    if dist.is_initialized():
        dist.destroy_process_group()


def _chunk(n: int, parts: int, rank: int) -> int:
    """torch.chunk's rows for ``rank`` (written here, not imported)."""
    size = -(-n // parts)
    return max(0, min(size, n - rank * size))


@pytest.mark.parametrize(
    "name, world, rank",
    [
        ("llama-3-70b", 1024, 0),
        ("llama-3-70b", 1024, 1023),
        ("llama-3.1-405b", 1024, 0),
        ("llama-3.1-405b", 1024, 1023),
    ],
)
def test_fsdp2_at_scale_on_meta(fake_group, name, world, rank):
    from torch.distributed.fsdp import fully_shard

    from llmmath.modules import build_model

    mesh = fake_group(rank, world)
    cfg = presets.load(name)
    model = build_model(cfg)  # meta: shapes only
    shapes = [tuple(p.shape) for p in model.parameters()]
    fully_shard(model, mesh=mesh)
    local = sum(p.to_local().numel() for p in model.parameters())
    by_hand = sum(_chunk(s[0], world, rank) * math.prod(s[1:]) for s in shapes)
    assert local == by_hand == fsdp_params_per_rank(cfg, world, rank)


@pytest.mark.parametrize("name", ["llama-3-70b", "llama-3.1-405b"])
def test_fsdp_shards_add_up_to_psi(name):
    """The 1024 ranks' shards hold every parameter once; rank 0 holds ⌈Ψ/N⌉ or more
    (torch.chunk gives the first ranks the full chunks)."""
    cfg = presets.load(name)
    shards = [fsdp_params_per_rank(cfg, 1024, r) for r in range(1024)]
    assert sum(shards) == count_params(cfg).total
    assert shards[0] == max(shards) >= -(-count_params(cfg).total // 1024)


@pytest.mark.parametrize(
    "name, tp, rank",
    [("llama-3-70b", 8, 0), ("llama-3.1-405b", 8, 7), ("llama-3.1-405b", 4, 3)],
)
def test_tensor_parallel_at_scale_on_meta(fake_group, name, tp, rank):
    from torch.distributed.tensor.parallel import parallelize_module

    from llmmath.distributed import local_numel, megatron_plan
    from llmmath.modules import build_model

    mesh = fake_group(rank, tp)
    cfg = presets.load(name)
    model = build_model(cfg)
    parallelize_module(model, mesh, megatron_plan(model))
    local = local_numel(model)
    H, L, V = cfg.hidden_size, cfg.num_hidden_layers, cfg.vocab_size
    q, kv = (
        cfg.num_attention_heads * cfg.head_dim,
        cfg.num_key_value_heads * cfg.head_dim,
    )
    I = cfg.intermediate_size
    per_block = (H * q + 2 * H * kv + q * H + 3 * H * I) // tp + 2 * H
    closed = L * per_block + 2 * _chunk(V, tp, rank) * H + H
    assert local == closed == tp_params_per_rank(cfg, tp, rank)

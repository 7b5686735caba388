"""torch.distributed helpers for the reference model: Megatron-LM's tensor-parallel plan
for DTensor, the parameters a rank holds, and torch's fake process group.

`megatron_plan` is the plan `llmmath.parallel` counts (Shoeybi et al. 2019, Sec. 3):
q, k, v, gate and up by column (``ColwiseParallel``), o and down by row
(``RowwiseParallel``), the embedding and the LM head by vocabulary. `fake_ranks` starts
torch's fake process group (``torch.testing._internal.distributed.fake_pg``, the one
torch's own tests use to plan sharding without GPUs or communication) as one rank of
any size, so a 405B model on the meta device can be sharded over 1024 ranks in a
second. Imports torch; used by the chapter *Many GPUs*
(``chapters/09c_many_gpus.ipynb``)
and tests/test_distributed.py.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

try:  # an extra of the core install (llmmath.errors.EXTRAS)
    import torch.distributed as dist
    from torch import nn
    from torch.distributed.device_mesh import DeviceMesh, init_device_mesh
    from torch.distributed.tensor import DTensor, Replicate
    from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel
except ModuleNotFoundError as error:
    from llmmath.errors import needs_extra

    raise needs_extra(error, __name__) from error


def megatron_plan(model: nn.Module) -> dict:
    """The tensor-parallel plan of the reference model (`llmmath.modules.DecoderLM`)
    for ``parallelize_module``: module name → ``ColwiseParallel``/``RowwiseParallel``.
    The embedding is row-parallel over the vocabulary (its output all-reduced), the LM
    head column-parallel with its logits all-gathered."""
    plan = {
        "embed_tokens": RowwiseParallel(input_layouts=Replicate()),
        "lm_head": ColwiseParallel(output_layouts=Replicate()),
    }
    for i, block in enumerate(model.layers):
        for name in ("q_proj", "k_proj", "v_proj"):
            plan[f"layers.{i}.self_attn.{name}"] = ColwiseParallel()
        plan[f"layers.{i}.self_attn.o_proj"] = RowwiseParallel()
        for name in ("gate_proj", "up_proj"):
            if hasattr(block.mlp, name):
                plan[f"layers.{i}.mlp.{name}"] = ColwiseParallel()
        plan[f"layers.{i}.mlp.down_proj"] = RowwiseParallel()
    return plan


def local_heads(model: nn.Module, tp: int) -> None:
    """Let each attention block of a tensor-parallel reference model run its own
    n_h/tp query and n_kv/tp key/value heads (as torchtitan sets ``n_heads``)."""
    for block in model.layers:
        cfg = block.self_attn.cfg
        block.self_attn.cfg = cfg.replace(
            num_attention_heads=cfg.num_attention_heads // tp,
            num_key_value_heads=cfg.num_key_value_heads // tp,
            head_dim=cfg.head_dim,
        )


def local_numel(model: nn.Module) -> int:
    """Parameters this rank holds: each DTensor's local shard, other tensors whole."""
    return sum(
        (p.to_local() if isinstance(p, DTensor) else p).numel()
        for p in model.parameters()
    )


@contextmanager
def fake_ranks(rank: int, world: int) -> Iterator[DeviceMesh]:
    """Be rank ``rank`` of ``world`` in torch's fake process group (collectives do
    nothing, no other process exists) and yield a 1-D CPU mesh; the group is destroyed
    on exit."""
    from torch.testing._internal.distributed.fake_pg import FakeStore

    if dist.is_initialized():
        dist.destroy_process_group()
    dist.init_process_group("fake", store=FakeStore(), rank=rank, world_size=world)
    try:
        yield init_device_mesh("cpu", (world,))
    finally:
        dist.destroy_process_group()

"""The roofline of a decode step: FLOPs against bytes read, and what bounds tokens per
second.

A step of batch b reads every weight once and each sequence's KV cache once, and does
about 2 FLOPs per weight per sequence plus the attention over the cache. Time is at
least max(FLOPs / peak FLOP/s, bytes / bandwidth) (Williams et al. 2009, the roofline
model; Pope et al. 2022, Sec. 3). At small batch the bytes win (memory-bound); the batch
where the two times meet is where decode turns compute-bound. Model FLOPs utilization
(MFU, Chowdhery et al. 2022, Appendix B) is achieved model FLOP/s over peak.

Explained in the chapter *Memory and speed* (``chapters/09_memory.ipynb``)."""

from __future__ import annotations

from dataclasses import dataclass

from llmmath.config import ConfigError, ModelConfig, check_positive_int
from llmmath.counting import count_params
from llmmath.flops import (
    decode_attention_flops,
    forward_flops_per_token,
    matmul_weights,
)
from llmmath.gpus import GPU, gpu_named
from llmmath.gpus import GPUS as CATALOGUE
from llmmath.kvcache import kv_cache_bytes
from llmmath.messages import gettext as _
from llmmath.units import bytes_of

#: The two GPUs whose rooflines the chapters draw side by side, from the one catalogue
#: (`llmmath.gpus.GPUS` holds every GPU; any of its names works below).
GPUS = {name: CATALOGUE[name] for name in ("A100-SXM4-80GB", "H100-SXM5-80GB")}


@dataclass(frozen=True)
class Step:
    """One forward step on ``gpu``: ``flops`` done and ``bytes`` read, for ``batch``
    tokens (a decode step: one token per sequence; a prefill: every prompt token)."""

    flops: int
    bytes: int
    gpu: GPU
    batch: int

    @property
    def intensity(self) -> float:
        """FLOPs per byte read."""
        return self.flops / self.bytes

    @property
    def compute_seconds(self) -> float:
        return self.flops / self.gpu.peak_flops

    @property
    def memory_seconds(self) -> float:
        return self.bytes / self.gpu.bandwidth

    @property
    def seconds(self) -> float:
        """The roofline lower bound on the step's time."""
        return max(self.compute_seconds, self.memory_seconds)

    @property
    def memory_bound(self) -> bool:
        return self.memory_seconds >= self.compute_seconds

    @property
    def tokens_per_second(self) -> float:
        """Upper bound on tokens per second (all sequences together)."""
        return self.batch / self.seconds


def weights_read(cfg: ModelConfig, rows: int, dtype: str = "bf16") -> int:
    """Bytes of weights a step over ``rows`` tokens reads: every non-embedding weight
    and the LM head matrix (V·H, read once whether or not it is tied), but of the
    embedding table only the rows of the tokens present (at most V; likewise for learned
    positions). For a mixture of experts every expert is counted: an upper bound, since
    a small batch's tokens use only some experts."""
    counts = count_params(cfg)
    rows_read = min(rows, cfg.vocab_size) * cfg.hidden_size
    if cfg.position_embedding_type == "learned":
        rows_read += min(rows, cfg.max_position_embeddings) * cfg.hidden_size
    return bytes_of(
        counts.non_embedding + cfg.vocab_size * cfg.hidden_size + rows_read, dtype
    )


def decode_step(
    cfg: ModelConfig,
    gpu: GPU | str,
    batch: int = 1,
    context: int = 4096,
    weight_dtype: str = "bf16",
    cache_dtype: str = "bf16",
) -> Step:
    """FLOPs and bytes of one decode step: 2 × matmul weights × batch plus attention
    over the cache (`decode_attention_flops`); bytes = the weights read (`weights_read`)
    + each sequence's cache once (`kv_cache_bytes` at ``context`` tokens). Activations'
    traffic is left out (a few H-sized vectors per token).

    Raises:
        ConfigError: ``batch`` or ``context`` not a positive integer, or an unknown
        dtype."""
    gpu = gpu_named(gpu)
    check_positive_int("batch", batch)
    attention = decode_attention_flops(cfg, context, batch)
    flops = 2 * sum(matmul_weights(cfg).values()) * batch + attention.quadratic
    read = weights_read(cfg, batch, weight_dtype) + kv_cache_bytes(
        cfg, batch, context, cache_dtype
    )
    return Step(flops, read, gpu, batch)


def prefill_step(
    cfg: ModelConfig,
    gpu: GPU | str,
    tokens: int,
    batch: int = 1,
    weight_dtype: str = "bf16",
    cache_dtype: str = "bf16",
) -> Step:
    """The prefill of ``batch`` prompts of ``tokens`` tokens as one step: the causal
    forward FLOPs of every token (`forward_flops_per_token`); bytes = the weights read
    once and the KV cache written once. Its ``batch`` is the b·t tokens processed."""
    gpu = gpu_named(gpu)
    check_positive_int("batch", batch)
    per_token = forward_flops_per_token(cfg, tokens, "causal").total
    flops = int(per_token * tokens) * batch  # whole: pairs·4·L·n_h·d_h over T
    read = weights_read(cfg, batch * tokens, weight_dtype) + kv_cache_bytes(
        cfg, batch, tokens, cache_dtype
    )
    return Step(flops, read, gpu, batch * tokens)


def request_seconds(
    cfg: ModelConfig,
    gpu: GPU | str,
    prompt: int,
    new_tokens: int,
    weight_dtype: str = "bf16",
    cache_dtype: str = "bf16",
) -> float:
    """The roofline's time for one request at batch 1: the prefill of ``prompt`` tokens,
    which yields the first new token, then ``new_tokens`` − 1 decode steps, the k-th
    over a cache of ``prompt`` + k tokens (`prefill_step`, `decode_step`). This is what
    a latency benchmark times for one request, e.g. vLLM's ``benchmark_latency.py``
    (chapter 9b, *What serving engines reach*).

    Raises:
        ConfigError: ``prompt`` or ``new_tokens`` not a positive integer."""
    check_positive_int("prompt", prompt)
    check_positive_int("new_tokens", new_tokens)
    first = prefill_step(cfg, gpu, prompt, 1, weight_dtype, cache_dtype).seconds
    return first + sum(
        decode_step(cfg, gpu, 1, prompt + k, weight_dtype, cache_dtype).seconds
        for k in range(1, new_tokens)
    )


def compute_bound_batch(
    cfg: ModelConfig,
    gpu: GPU | str,
    context: int = 4096,
    weight_dtype: str = "bf16",
    cache_dtype: str = "bf16",
    limit: int = 1 << 20,
) -> int | None:
    """The smallest batch whose decode step is compute-bound, or None if there is none
    up to ``limit`` (with a long context the KV cache grows with the batch about as fast
    as the FLOPs, and the step may never turn compute-bound). Compute minus memory time
    is linear in the batch, so a bisection finds it."""

    def bound(b: int) -> bool:
        return not decode_step(
            cfg, gpu, b, context, weight_dtype, cache_dtype
        ).memory_bound

    if not bound(limit):
        return None
    lo, hi = 1, limit
    while lo < hi:
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if bound(mid) else (mid + 1, hi)
    return lo


def mfu(
    tokens_per_second: float, flops_per_token: float, gpus: int, peak_flops: float
) -> float:
    """Model FLOPs utilization: achieved model FLOP/s over the peak of ``gpus``
    accelerators.

    Raises:
        ConfigError: a rate, count or peak that is not positive."""
    check_positive_int("gpus", gpus)
    for name, value in (
        ("tokens_per_second", tokens_per_second),
        ("flops_per_token", flops_per_token),
        ("peak_flops", peak_flops),
    ):
        if not value > 0:
            raise ConfigError(
                _("{name} must be positive, got {value}").format(
                    name=name, value=repr(value)
                )
            )
    return tokens_per_second * flops_per_token / (gpus * peak_flops)

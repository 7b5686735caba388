"""Static against continuous batching: a small deterministic simulation whose step times
come from the roofline (`llmmath.roofline.decode_step`, `prefill_step`).

Static batching takes requests b at a time and runs each batch until its longest
request is done: a finished request's slot idles until then, and the next batch waits.
Continuous (iteration-level) batching (Yu et al. 2022, Orca, Sec. 3.1; vLLM, Kwon et
al. 2023) admits a waiting request into any free slot at every step, after its prefill.
Both see the same requests, all waiting at time 0, served in order.

A decode step of b running sequences costs `decode_step` at their mean context
(rounded up); a prefill costs `prefill_step` of the prompt (static: the batch's
prompts, padded to the longest). Standard library only, no torch. Explained in the
chapter *Serving* (``chapters/09b_serving.ipynb``).
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from llmmath.config import ConfigError, ModelConfig, check_positive_int
from llmmath.messages import gettext as _
from llmmath.roofline import GPU, decode_step, prefill_step


@dataclass(frozen=True)
class Request:
    """A request: ``prompt`` tokens in, ``output`` tokens out."""

    prompt: int
    output: int


@dataclass(frozen=True)
class BatchingResult:
    """What a schedule achieved: ``seconds`` until the last request finished, each
    request's ``latencies`` (seconds from time 0 to its last token, in request order),
    ``tokens`` generated, and ``steps`` (decode steps run)."""

    seconds: float
    latencies: tuple[float, ...]
    tokens: int
    steps: int

    @property
    def throughput(self) -> float:
        """Generated tokens per second."""
        return self.tokens / self.seconds

    @property
    def mean_latency(self) -> float:
        return sum(self.latencies) / len(self.latencies)


def requests(
    n: int, prompt: tuple[int, int], output: tuple[int, int], seed: int = 0
) -> list[Request]:
    """``n`` requests with prompt and output lengths drawn uniformly from the inclusive
    ranges ``prompt`` and ``output`` by a seeded `random.Random`."""
    check_positive_int("n", n)
    for name, (lo, hi) in (("prompt", prompt), ("output", output)):
        check_positive_int(f"{name} low", lo)
        if hi < lo:
            raise ConfigError(
                _("{name} range ({lo}, {hi}) is empty").format(name=name, lo=lo, hi=hi)
            )
    rng = random.Random(seed)
    return [Request(rng.randint(*prompt), rng.randint(*output)) for _ in range(n)]


def _decode_seconds(cfg, gpu, contexts: list[int]) -> float:
    mean = -(-sum(contexts) // len(contexts))
    return decode_step(cfg, gpu, len(contexts), mean).seconds


def static_batching(
    cfg: ModelConfig, gpu: GPU | str, reqs: list[Request], batch: int
) -> BatchingResult:
    """Batches of ``batch`` requests in order; each batch prefills its prompts (padded
    to the longest) and decodes until its longest output is done, every slot
    stepping."""
    check_positive_int("batch", batch)
    clock, latencies, steps = 0.0, [], 0
    for i in range(0, len(reqs), batch):
        group = reqs[i : i + batch]
        longest = max(r.prompt for r in group)
        clock += prefill_step(cfg, gpu, longest, len(group)).seconds
        done = [0.0] * len(group)
        for t in range(max(r.output for r in group)):
            clock += _decode_seconds(cfg, gpu, [longest + t + 1] * len(group))
            steps += 1
            for j, r in enumerate(group):
                if r.output == t + 1:
                    done[j] = clock
        latencies += done
    return BatchingResult(clock, tuple(latencies), sum(r.output for r in reqs), steps)


def continuous_batching(
    cfg: ModelConfig, gpu: GPU | str, reqs: list[Request], batch: int
) -> BatchingResult:
    """At most ``batch`` running sequences; at each step every free slot takes the next
    waiting request (its prefill first), then one decode step runs for all running
    sequences, and those that have their last token leave."""
    check_positive_int("batch", batch)
    clock, steps = 0.0, 0
    latencies = [0.0] * len(reqs)
    waiting = list(range(len(reqs)))
    running: dict[int, int] = {}  # request index -> tokens generated so far
    while waiting or running:
        while waiting and len(running) < batch:
            k = waiting.pop(0)
            clock += prefill_step(cfg, gpu, reqs[k].prompt, 1).seconds
            running[k] = 0
        contexts = [reqs[k].prompt + n + 1 for k, n in running.items()]
        clock += _decode_seconds(cfg, gpu, contexts)
        steps += 1
        for k in list(running):
            running[k] += 1
            if running[k] == reqs[k].output:
                latencies[k] = clock
                del running[k]
    return BatchingResult(clock, tuple(latencies), sum(r.output for r in reqs), steps)

"""The roofline checked on the reader's machine: measure, predict, run, compare.

1. Measure what the machine attains: matmul FLOP/s (the best of a few square fp32
   matmuls, 2n³ FLOPs each) and memory bandwidth (the best of a few matrix-vector
   products over a matrix far larger than the caches: bytes read per second), with
   torch, on the CPU and on CUDA when it is there.
2. Predict a small reference model's prefill and decode tokens per second from those two
   numbers with the book's roofline (`llmmath.roofline.prefill_step`, `decode_step`:
   time = max(FLOPs / FLOP/s, bytes / bandwidth)).
3. Run the model (`llmmath.modules.build_model`, random fp32 weights) with its KV cache:
   one prefill of the prompt, then one decode step per token.

The roofline leaves out Python and framework overhead per operation (dozens of small
kernels per layer), attention's softmax and the norms, cache effects (a model that fits
in the CPU's last-level cache reads faster than the measured bandwidth), threads that
start and stop, and for prefill the lower efficiency of the model's non-square matmuls.
Measured numbers change from run to run and machine to machine: nothing compares them
exactly. Imports torch; explained in the chapter *Serving*
(``chapters/09b_serving.ipynb``).
"""

from __future__ import annotations

import time

from llmmath.config import ConfigError, ModelConfig
from llmmath.roofline import GPU, decode_step, prefill_step

#: Runs above this many parameters are refused (fp32 weights and seconds per token).
MAX_PARAMS = 200_000_000
#: The default model: Llama-3.2-1B's layer shapes (H = 2048, I = 8192, 32 query and 8
#: KV heads) with 2 layers and a 32,000-token vocabulary, 187,181,056 parameters: wide
#: enough that a decode step's time is mostly reading weights, not Python.
DEFAULT_MODEL = "llama-3.2-1b, 2 layers, V = 32,000"
LEFT_OUT = (
    "Python and framework overhead per operation",
    "softmax, norms, activations and RoPE (not matmuls, not counted)",
    "cache effects: weights that fit in the CPU's caches read faster",
    "thread start-up and synchronisation",
    "matmul shapes less efficient than the measured square one",
)


def _best_seconds(fn, repeats: int, sync) -> float:
    fn()  # warm up
    sync()
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        sync()
        best = min(best, time.perf_counter() - start)
    return best


def _sync(device: str):
    import torch

    return torch.cuda.synchronize if device == "cuda" else (lambda: None)


def matmul_flops(device: str = "cpu", n: int = 1024, repeats: int = 5) -> float:
    """Attained FLOP/s of an n×n fp32 matmul: 2n³ over the best of ``repeats`` runs."""
    import torch

    a = torch.randn(n, n, device=device)
    b = torch.randn(n, n, device=device)
    seconds = _best_seconds(lambda: a @ b, repeats, _sync(device))
    return 2 * n**3 / seconds


def bandwidth(device: str = "cpu", megabytes: int = 256, repeats: int = 5) -> float:
    """Attained read bandwidth in bytes/s as a decode step's kernel sees it: a
    matrix-vector product over a ``megabytes`` fp32 matrix (far larger than the CPU's
    caches), the matrix's bytes over the best of ``repeats`` runs."""
    import torch

    n = int((megabytes * 2**20 // 4) ** 0.5)
    w = torch.full((n, n), 0.5, device=device)
    x = torch.ones(n, device=device)
    seconds = _best_seconds(lambda: w @ x, repeats, _sync(device))
    return w.nbytes / seconds


def run_model(
    cfg: ModelConfig,
    device: str = "cpu",
    prompt: int = 128,
    new_tokens: int = 32,
    seed: int = 0,
) -> dict[str, float]:
    """Prefill and decode tokens per second of ``cfg`` (random fp32 weights) with its KV
    cache: the best of three prefills of ``prompt`` tokens, then ``new_tokens`` decode
    steps of one token each (the fastest step: the best of several runs, as for the
    machine's FLOP/s and bandwidth, is the least disturbed by other work on the
    machine)."""
    import torch

    from llmmath.modules import build_model

    model = build_model(cfg, device=device, seed=seed).eval()
    sync = _sync(device)
    ids = torch.randint(0, cfg.vocab_size, (1, prompt), device=device)
    with torch.no_grad():
        best = float("inf")
        for _ in range(3):
            cache = model.new_cache()
            sync()
            start = time.perf_counter()
            logits = model(ids, cache)
            sync()
            best = min(best, time.perf_counter() - start)
        steps = []
        token = logits[:, -1:].argmax(-1)
        for _ in range(new_tokens):
            start = time.perf_counter()
            token = model(token, cache)[:, -1:].argmax(-1)
            sync()
            steps.append(time.perf_counter() - start)
    return {"prefill": prompt / best, "decode": 1 / min(steps)}


def predict(
    cfg: ModelConfig,
    flops: float,
    bytes_per_s: float,
    prompt: int = 128,
    new_tokens: int = 32,
) -> dict[str, float]:
    """Roofline tokens per second for a machine of ``flops`` FLOP/s and
    ``bytes_per_s`` bandwidth, fp32 weights and cache: the prefill of ``prompt`` tokens
    and a decode step at the middle of the ``new_tokens`` generated."""
    machine = GPU("this machine", flops, bytes_per_s, 0, "measured")
    pre = prefill_step(cfg, machine, prompt, 1, "fp32", "fp32")
    dec = decode_step(cfg, machine, 1, prompt + new_tokens // 2, "fp32", "fp32")
    return {
        "prefill": pre.tokens_per_second,
        "decode": dec.tokens_per_second,
        "prefill_memory_bound": pre.memory_bound,
        "decode_memory_bound": dec.memory_bound,
    }


def reference_config() -> ModelConfig:
    """The `DEFAULT_MODEL`'s configuration."""
    from llmmath import presets

    return presets.load("llama-3.2-1b").replace(num_hidden_layers=2, vocab_size=32000)


def measure_report(
    model: str | None = None,
    prompt: int = 64,
    new_tokens: int = 16,
    threads: int = 1,
    revision: str | None = None,
):
    """What ``measure --json`` prints: per device (``"cpu"``, and ``"cuda"`` when
    present) the measured FLOP/s and bandwidth, and ``"prefill_tokens_per_s"`` and
    ``"decode_tokens_per_s"`` as ``{"predicted", "measured"}`` (top level: the last
    device's). The CPU runs ``threads`` threads (default one: on a busy machine the
    synchronisation of several threads per small operation, which the roofline leaves
    out, would dominate); torch's setting is restored after.

    ``model`` is anything `llmmath.reports.resolve` takes (a hub id at ``revision``).

    Raises:
        ConfigError: an unknown model, or one above `MAX_PARAMS` parameters.
    """
    import torch

    from llmmath.counting import count_params
    from llmmath.reports import resolve

    if model is None:
        name, cfg = DEFAULT_MODEL, reference_config()
    else:
        name, cfg = resolve(model, revision)
    n = count_params(cfg).total
    if n > MAX_PARAMS:
        raise ConfigError(
            f"model has {n:,} parameters; measure runs at most {MAX_PARAMS:,}"
        )
    devices = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])
    report = {"model": name, "parameters": n, "prompt_tokens": prompt}
    report["new_tokens"] = new_tokens
    report["threads"] = threads
    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        _measure_devices(report, cfg, devices, prompt, new_tokens)
    finally:
        torch.set_num_threads(before)
    return report


def _measure_devices(report, cfg, devices, prompt, new_tokens) -> None:
    for device in devices:
        flops, bw = matmul_flops(device), bandwidth(device)
        predicted = predict(cfg, flops, bw, prompt, new_tokens)
        measured = run_model(cfg, device, prompt, new_tokens)
        entry = {
            "matmul_flops_per_s": flops,
            "bandwidth_bytes_per_s": bw,
            "prefill_tokens_per_s": {
                "predicted": predicted["prefill"],
                "measured": measured["prefill"],
            },
            "decode_tokens_per_s": {
                "predicted": predicted["decode"],
                "measured": measured["decode"],
            },
            "prefill_memory_bound": predicted["prefill_memory_bound"],
            "decode_memory_bound": predicted["decode_memory_bound"],
        }
        report[device] = entry
    first = report["cpu"] if len(devices) == 1 else report[devices[-1]]
    report["decode_tokens_per_s"] = first["decode_tokens_per_s"]
    report["prefill_tokens_per_s"] = first["prefill_tokens_per_s"]
    report["left_out"] = list(LEFT_OUT)


def format_report(r: dict) -> str:
    """The report as text: one block per device."""
    lines = [
        f"{r['model']}: {r['parameters']:,} parameters, fp32, prompt "
        f"{r['prompt_tokens']} tokens, {r['new_tokens']} new, {r['threads']} threads"
    ]
    for device in ("cpu", "cuda"):
        if device not in r:
            continue
        d = r[device]
        lines.append(
            f"{device}: matmul {d['matmul_flops_per_s'] / 1e9:,.1f} GFLOP/s, "
            f"bandwidth {d['bandwidth_bytes_per_s'] / 1e9:,.1f} GB/s"
        )
        for step in ("prefill", "decode"):
            p = d[f"{step}_tokens_per_s"]
            lines.append(
                f"  {step:<8} predicted {p['predicted']:>10,.1f} tokens/s  "
                f"measured {p['measured']:>10,.1f}  "
                f"(measured / predicted {p['measured'] / p['predicted']:.2f})"
            )
    lines.append("left out by the roofline: " + "; ".join(r["left_out"]))
    return "\n".join(lines)

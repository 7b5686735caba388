"""The roofline checked on the reader's machine: measure, predict, run, compare.

On the CPU (``device="cpu"``, the default where torch sees no GPU):

1. Measure what the machine attains: matmul FLOP/s (the best of a few square fp32
   matmuls, 2n³ FLOPs each) and memory bandwidth (the best of a few matrix-vector
   products over a matrix far larger than the caches: bytes read per second).
2. Predict a small reference model's prefill and decode tokens per second from those two
   numbers with the book's roofline (`llmmath.roofline.prefill_step`, `decode_step`:
   time = max(FLOPs / FLOP/s, bytes / bandwidth)).
3. Run the model (`llmmath.modules.build_model`, random fp32 weights) with its KV cache:
   one prefill of the prompt, then one decode step per token.

The roofline leaves out Python and framework overhead per operation (dozens of small
kernels per layer), attention's softmax and the norms, cache effects (a model that fits
in the CPU's last-level cache reads faster than the measured bandwidth), threads that
start and stop, and for prefill the lower efficiency of the model's non-square matmuls.

On CUDA (``device="cuda"``, the default where torch sees a GPU) the model is large
enough that a decode step reads weights for longer than it launches kernels: the whole
Llama-3.2-1B by default, random bf16 weights, with a static KV cache (`StaticCache`:
every layer's keys and values preallocated for the whole context, written in place at
the step's position). It measures the GPU's bf16 matmul FLOP/s (n = 8192) and its
bandwidth (a device copy of 1 GiB, bytes read plus written per second), times a prefill
of the context, and times the same decode step twice: eager, each kernel launched from
Python, and replayed as one CUDA graph (`torch.cuda.CUDAGraph`), which removes the
launches. It reports the attained share of the measured bandwidth and FLOP/s and which
cost the roofline leaves out dominates (`dominant_cost`). A model whose weights, cache
and prefill workspace do not fit in the device's free memory is refused in one line.

Every step of the CUDA path is a function of a ``device`` argument that the tests run on
the CPU (`static_forward`, `decode_timings`, `device_report`); the calls that need CUDA
are four small functions, `cuda_available`, `cuda_name`, `cuda_free_bytes` and
`cuda_graph`, gathered in `cuda_probe` (a `Probe`), which a test replaces with a CPU
probe (`cpu_probe`: a "graph" that calls the step, any free memory).

Measured numbers change from run to run and machine to machine: nothing compares them
exactly. Imports torch; explained in the chapter *Serving*
(``chapters/09b_serving.ipynb``).
"""

from __future__ import annotations

import math
import statistics
import time
from collections.abc import Callable
from typing import NamedTuple

from llmmath.config import ConfigError, ModelConfig
from llmmath.messages import N_, Message, gettext, ljust, translated
from llmmath.roofline import GPU, decode_step, prefill_step

#: Runs above this many parameters are refused on the CPU (fp32 weights and seconds per
#: token); on CUDA the device's free memory decides (`check_fits`).
MAX_PARAMS = 200_000_000
#: The default model on the CPU: Llama-3.2-1B's layer shapes (H = 2048, I = 8192, 32
#: query and 8 KV heads) with 2 layers and a 32,000-token vocabulary, 187,181,056
#: parameters: wide enough that a decode step's time is mostly reading weights, not
#: Python.
DEFAULT_MODEL = "llama-3.2-1b, 2 layers, V = 32,000"
#: The default model on CUDA: the whole preset, 1,235,814,400 parameters, 2.47 GB in
#: bf16, so a decode step reads weights for about half a millisecond on an H100 or an
#: H200 (the two-layer CPU model would read them in 0.1 ms, less than its launches).
CUDA_MODEL = "llama-3.2-1b"
#: Number format of the weights and the cache on CUDA.
CUDA_DTYPE = "bf16"
#: Tokens in the cache when a decode step is timed on CUDA (the prefill's prompt).
CUDA_CONTEXT = 4096
#: Decode steps timed on CUDA, eager and as a graph (each time: their median).
CUDA_STEPS = 32
#: Square matmul size and copy size of the CUDA measurements of the machine.
CUDA_MATMUL_N = 8192
CUDA_COPY_MEGABYTES = 1024
#: `dominant_cost` names launch overhead when the eager step takes at least this many
#: times the graph's, and the kernels themselves when the graph's step takes at least
#: this many times the roofline's.
LAUNCH_RATIO = 2.0
KERNEL_RATIO = 1.5
LEFT_OUT = (
    N_("Python and framework overhead per operation"),
    N_("softmax, norms, activations and RoPE (not matmuls, not counted)"),
    N_("cache effects: weights that fit in the CPU's caches read faster"),
    N_("thread start-up and synchronisation"),
    N_("matmul shapes less efficient than the measured square one"),
)
#: What the roofline leaves out on a GPU.
LEFT_OUT_CUDA = (
    N_(
        "kernel launches: Python and the CPU issue each of a step's hundreds of "
        "kernels (a CUDA graph replays them all in one launch)"
    ),
    N_("attention over the whole static cache, padded to its length, and its mask"),
    N_(
        "softmax, norms, activations, RoPE and the cache writes: small kernels that "
        "each read and write activations"
    ),
    N_("matmul shapes less efficient than the measured square one"),
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


def _torch_dtype(dtype: str):
    import torch

    return {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}[dtype]


def matmul_flops(
    device: str = "cpu", n: int = 1024, repeats: int = 5, dtype: str = "fp32"
) -> float:
    """Attained FLOP/s of an n×n matmul in ``dtype``: 2n³ over the best of
    ``repeats`` runs."""
    import torch

    a = torch.randn(n, n, device=device, dtype=_torch_dtype(dtype))
    b = torch.randn(n, n, device=device, dtype=_torch_dtype(dtype))
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


def copy_bandwidth(
    device: str = "cpu", megabytes: int = 1024, repeats: int = 5
) -> float:
    """Attained memory bandwidth in bytes/s of a device copy: a ``megabytes`` buffer
    copied into another, bytes read plus bytes written over the best of ``repeats``
    runs (the usual reading of a GPU's copy rate; a matrix-vector product on a GPU
    under-reports, its one vector limiting the parallelism)."""
    import torch

    src = torch.ones(megabytes * 2**20 // 4, device=device)
    dst = torch.empty_like(src)
    seconds = _best_seconds(lambda: dst.copy_(src), repeats, _sync(device))
    return 2 * src.nbytes / seconds


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


# --- the static-cache decode step (CUDA, and the CPU in the tests) --------------------


def static_step_refusal(cfg: ModelConfig) -> str | None:
    """Why `static_forward` cannot run ``cfg``, or None when it can: it runs pre-norm
    decoders with RoPE, MHA, GQA or MQA and a dense FFN (every Llama, Qwen and Mistral
    without a window), the shapes of a CUDA graph fixed once. A mixture of experts picks
    its rows by value (a graph cannot replay that), and latent attention, sliding
    windows, learned positions, other norm layouts and soft-capped attention scores are
    left out."""
    reasons = (
        (cfg.is_mla, N_("multi-head latent attention")),
        (cfg.is_moe, N_("a mixture of experts (routing picks rows by value)")),
        (cfg.position_embedding_type != "rope", N_("learned positions")),
        (
            cfg.sliding_window is not None or cfg.layer_types is not None,
            N_("sliding-window attention"),
        ),
        (cfg.norm_layout != "pre", N_("the {layout} norm layout")),
        (cfg.attn_logit_softcapping is not None, N_("soft-capped attention scores")),
    )
    why = next((why for has, why in reasons if has), None)
    return None if why is None else gettext(why).format(layout=repr(cfg.norm_layout))


class StaticCache:
    """A KV cache of fixed shape for `static_forward`: per layer, keys and values of
    ``(batch, n_kv, max_len, d_h)``, zero until written; the RoPE angles of every
    position, ``(max_len, d_h)`` cos and sin in ``dtype``; and the key positions
    0 … max_len − 1. A step writes its tokens' keys and values in place at their
    positions (``index_copy_``) and attends over all ``max_len`` keys with a causal
    mask, so every step has the same shapes and one CUDA graph replays any of them."""

    def __init__(self, cfg: ModelConfig, batch: int, max_len: int, device, dtype):
        import torch

        from llmmath.rope import rope_cos_sin, scaled_inv_freq

        shape = (batch, cfg.num_key_value_heads, max_len, cfg.head_dim)
        n = cfg.num_hidden_layers
        kw = {"device": device, "dtype": dtype}
        self.keys = [torch.zeros(shape, **kw) for _ in range(n)]
        self.values = [torch.zeros(shape, **kw) for _ in range(n)]
        cos, sin = rope_cos_sin(cfg.head_dim, max_len, inv_freq=scaled_inv_freq(cfg))
        self.cos, self.sin = cos.to(**kw), sin.to(**kw)
        self.positions = torch.arange(max_len, device=device)

    def nbytes(self) -> int:
        """Bytes of the keys and values (``Tensor.nbytes``)."""
        return sum(t.nbytes for t in self.keys + self.values)


def _static_attention(attn, x, cache: StaticCache, layer: int, positions, mask):
    """One `llmmath.modules.Attention` over ``x`` ``(b, t, H)`` with the static cache:
    the module's own projections and norms, RoPE at ``positions`` from the cache's
    table, keys and values written in place, ``scaled_dot_product_attention`` over the
    whole cache (``enable_gqa``: the n_kv heads are read, never repeated)."""
    import torch.nn.functional as F

    from llmmath.rope import apply_rope

    cfg = attn.cfg
    b, t, _ = x.shape
    n_h, n_kv, d_h = cfg.num_attention_heads, cfg.num_key_value_heads, cfg.head_dim
    q, k, v = attn._qkv(x)
    if cfg.qk_norm and not cfg.qk_norm_per_head:
        q, k = attn.q_norm(q), attn.k_norm(k)
    q = q.view(b, t, n_h, d_h).transpose(1, 2)
    k = k.view(b, t, n_kv, d_h).transpose(1, 2)
    v = v.view(b, t, n_kv, d_h).transpose(1, 2)
    if cfg.qk_norm and cfg.qk_norm_per_head:
        q, k = attn.q_norm(q), attn.k_norm(k)
    cos, sin = cache.cos[positions], cache.sin[positions]
    q, k = apply_rope(q, cos, sin), apply_rope(k, cos, sin)
    cache.keys[layer].index_copy_(2, positions, k)
    cache.values[layer].index_copy_(2, positions, v)
    scale = (cfg.query_pre_attn_scalar or d_h) ** -0.5
    out = F.scaled_dot_product_attention(
        q,
        cache.keys[layer],
        cache.values[layer],
        attn_mask=mask,
        scale=scale,
        enable_gqa=n_kv != n_h,
    )
    return attn.o_proj(out.transpose(1, 2).reshape(b, t, -1))


def static_forward(model, cache: StaticCache, ids, positions):
    """Logits of the last token, ``(b, 1, V)``, of ``ids`` ``(b, t)`` at ``positions``
    ``(t,)`` (a tensor on the model's device), with the static cache extended by them:
    the same arithmetic as `llmmath.modules.DecoderLM.forward` for a model that
    `static_step_refusal` accepts (``tests/test_measure.py`` checks the logits against
    it), with shapes that do not depend on the position. The LM head runs on the last
    token only (a prefill never needs the others)."""
    cfg = model.cfg
    x = model.embed_tokens(ids)
    if cfg.embedding_scale:
        x = x * math.sqrt(cfg.hidden_size)
    mask = cache.positions[None, :] <= positions[:, None]  # (t, max_len): causal
    for i, block in enumerate(model.layers):
        h = block.input_layernorm(x)
        x = x + _static_attention(block.self_attn, h, cache, i, positions, mask)
        x = x + block.mlp(block.post_attention_layernorm(x))
    logits = model.lm_head(model.norm(x[:, -1:]))
    if cfg.final_logit_softcapping:
        cap = cfg.final_logit_softcapping
        logits = cap * (logits / cap).tanh()
    return logits


def decode_step_fn(model, cache: StaticCache, token, position) -> Callable:
    """A greedy decode step as a function of nothing: feeds ``token`` ``(b, 1)`` at
    ``position`` ``(1,)``, writes the argmax back into ``token`` and moves
    ``position`` on by one, all in place (what a CUDA graph needs: the same tensors
    every replay)."""

    def step():
        logits = static_forward(model, cache, token, position)
        token.copy_(logits.argmax(-1))
        position.add_(1)
        return logits

    return step


#: Steps `cuda_graph` runs before it captures (PyTorch's documentation warms a graph's
#: work up on a side stream first).
WARMUP_STEPS = 3


def cache_length(context: int, steps: int) -> int:
    """Tokens the static cache holds: the ``context`` and room for the timed ``steps``
    (at least the `WARMUP_STEPS` of a capture)."""
    return context + max(steps, WARMUP_STEPS)


def _median_seconds(fn, steps: int, sync) -> float:
    times = []
    for _ in range(steps):
        start = time.perf_counter()
        fn()
        sync()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


# --- the calls that need CUDA ---------------------------------------------------------


def cuda_available() -> bool:
    """``torch.cuda.is_available()``."""
    import torch

    return torch.cuda.is_available()


def cuda_name() -> str:
    """The GPU's name, ``torch.cuda.get_device_name()`` (e.g. ``NVIDIA H200``)."""
    import torch

    return torch.cuda.get_device_name()


def cuda_free_bytes() -> int:
    """The GPU's free bytes as the driver reports them (``mem_get_info``)."""
    import torch

    return torch.cuda.mem_get_info()[0]


def cuda_graph(fn: Callable) -> Callable:
    """``fn`` captured as one CUDA graph (`torch.cuda.CUDAGraph`): three warm-up calls
    on a side stream, as PyTorch's documentation asks, then one capture; returns the
    graph's ``replay``, which launches all of ``fn``'s kernels at once on the tensors
    they had at capture."""
    import torch

    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        for _ in range(WARMUP_STEPS):
            fn()
    torch.cuda.current_stream().wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        fn()
    return graph.replay


class Probe(NamedTuple):
    """What the static-cache measurement asks of a device: its ``device`` string
    (``"cuda"``, ``"cpu"``), its ``name``, its ``free_bytes``, how it turns a step into
    a replayable one (``capture``), and the sizes of the matmul and the copy that
    measure it."""

    device: str
    name: Callable[[], str]
    free_bytes: Callable[[], int]
    capture: Callable[[Callable], Callable]
    matmul_n: int = CUDA_MATMUL_N
    copy_megabytes: int = CUDA_COPY_MEGABYTES


def cuda_probe() -> Probe:
    """The GPU's `Probe`: `cuda_name`, `cuda_free_bytes`, `cuda_graph`."""
    return Probe("cuda", cuda_name, cuda_free_bytes, cuda_graph)


def cpu_probe(free_bytes: int = 2**40) -> Probe:
    """A `Probe` that runs the CUDA path on the CPU, for the tests: ``free_bytes``
    free, and a "graph" that runs the step `WARMUP_STEPS` times, as `cuda_graph`'s
    warm-up does, then is the step itself (its timings are eager twice)."""

    def capture(fn: Callable) -> Callable:
        for _ in range(WARMUP_STEPS):
            fn()
        return fn

    return Probe("cpu", lambda: "cpu", lambda: free_bytes, capture, 256, 16)


# --- the CUDA report -------------------------------------------------------------


def needed_bytes(cfg: ModelConfig, dtype: str, batch: int, max_len: int, prompt: int):
    """Bytes the static-cache measurement allocates at most, by item: the weights, the
    static cache of ``batch`` × ``max_len`` tokens, and the prefill's workspace (the
    attention scores and probabilities in fp32 if the kernel falls back to the plain
    one, the FFN's three ``(batch, prompt, I)`` activations, the last logits in fp32).
    Weights and cache are exact; the workspace is an upper estimate."""
    from llmmath.kvcache import kv_cache_bytes
    from llmmath.memory import weight_bytes
    from llmmath.units import bytes_of

    scores = 2 * 4 * batch * cfg.num_attention_heads * prompt * max_len
    ffn = 3 * bytes_of(batch * prompt * cfg.intermediate_size, dtype)
    return {
        "weights": weight_bytes(cfg, dtype),
        "kv_cache": kv_cache_bytes(cfg, batch, max_len, dtype),
        "workspace": scores + ffn + 4 * batch * cfg.vocab_size,
    }


def check_fits(name: str, needed: int, free: int, device: str) -> None:
    """Nothing if ``needed`` bytes fit in ``free``.

    Raises:
        ConfigError: one line saying both, when they do not."""
    if needed > free:
        raise ConfigError(
            gettext(
                "{name} needs {needed} GB on {device} (weights, static KV cache, "
                "prefill workspace) but {free} GB is free"
            ).format(
                name=name,
                needed=f"{needed / 10**9:,.2f}",
                device=device,
                free=f"{free / 10**9:,.2f}",
            )
        )


def dominant_cost(eager: float, graph: float, roofline: float) -> tuple[str, str]:
    """Which cost the roofline leaves out dominates a decode step, and why, from the
    step's seconds eager, replayed as a graph and by the roofline: launch overhead
    when the eager step takes `LAUNCH_RATIO` times the graph's (the graph runs the same
    kernels without launching them one by one); else the kernels themselves when the
    graph's step takes `KERNEL_RATIO` times the roofline; else neither."""
    if eager >= LAUNCH_RATIO * graph:
        return Message(N_("launch overhead")), Message(
            N_(
                "the eager step takes {ratio} times the graph's, which runs the same "
                "kernels without launching each from Python"
            ),
            ratio=f"{eager / graph:.1f}",
        )
    if graph >= KERNEL_RATIO * roofline:
        return Message(N_("the kernels")), Message(
            N_(
                "the graph's step takes {ratio} times the roofline: attention over "
                "the padded cache, small kernels, matmul shapes"
            ),
            ratio=f"{graph / roofline:.1f}",
        )
    return Message(N_("none")), Message(
        N_("the graph's step is within {limit} times the roofline ({ratio})"),
        limit=KERNEL_RATIO,
        ratio=f"{graph / roofline:.2f}",
    )


def decode_timings(
    model, cfg: ModelConfig, probe: Probe, batch: int, context: int, steps: int
) -> dict:
    """Seconds of a prefill of ``context`` tokens (the best of three) and the median
    seconds of ``steps`` decode steps at that context, eager and through
    ``probe.capture``, with a `StaticCache` of `cache_length` tokens: the position is
    set back to ``context`` before each series and before the capture (whose warm-up
    runs steps), so both series time the same steps and no step writes past the
    cache."""
    import torch

    device, dtype = probe.device, next(model.parameters()).dtype
    sync = _sync(device)
    cache = StaticCache(cfg, batch, cache_length(context, steps), device, dtype)
    ids = torch.randint(0, cfg.vocab_size, (batch, context), device=device)
    prompt = torch.arange(context, device=device)
    token = torch.zeros(batch, 1, dtype=torch.long, device=device)
    position = torch.full((1,), context, device=device)
    step = decode_step_fn(model, cache, token, position)
    with torch.no_grad():
        prefill = _best_seconds(
            lambda: static_forward(model, cache, ids, prompt), 3, sync
        )
        token.copy_(static_forward(model, cache, ids, prompt).argmax(-1))
        for _ in range(2):  # warm up
            step()
        position.fill_(context)
        eager = _median_seconds(step, steps, sync)
        position.fill_(context)  # the capture's warm-up steps run too
        replay = probe.capture(step)
        position.fill_(context)
        graph = _median_seconds(replay, steps, sync)
    return {"prefill": prefill, "eager": eager, "graph": graph}


def device_report(
    name: str,
    cfg: ModelConfig,
    probe: Probe,
    dtype: str = CUDA_DTYPE,
    batch: int = 1,
    context: int = CUDA_CONTEXT,
    steps: int = CUDA_STEPS,
    seed: int = 0,
) -> dict:
    """The static-cache measurement of ``cfg`` on ``probe``'s device (what ``measure``
    prints under ``"cuda"``): the device's name, free and needed bytes; the measured
    matmul FLOP/s (``dtype``) and copy bandwidth; prefill and decode tokens per second
    predicted by the roofline at those rates and measured (decode: the graph's step);
    the decode step's seconds by the roofline, eager and as a graph; its bytes read
    (`llmmath.roofline.decode_step`) and the share of the measured bandwidth they
    attain each way; the prefill's share of the measured FLOP/s; and
    `dominant_cost`.

    Raises:
        ConfigError: a model `static_step_refusal` refuses, or one that does not fit
        in the device's free memory (`check_fits`)."""
    import torch

    from llmmath.modules import build_model

    refusal = static_step_refusal(cfg)
    if refusal:
        raise ConfigError(
            gettext("measure's static-cache step cannot run {name}: {why}").format(
                name=name, why=refusal
            )
        )
    need = needed_bytes(cfg, dtype, batch, cache_length(context, steps), context)
    free = probe.free_bytes()
    check_fits(name, sum(need.values()), free, probe.name())
    flops = matmul_flops(probe.device, probe.matmul_n, dtype=dtype)
    bw = copy_bandwidth(probe.device, probe.copy_megabytes)
    before = torch.get_default_dtype()
    torch.set_default_dtype(_torch_dtype(dtype))  # built in dtype: no fp32 copy
    try:
        model = build_model(cfg, device=probe.device, seed=seed).eval()
    finally:
        torch.set_default_dtype(before)
    t = decode_timings(model, cfg, probe, batch, context, steps)
    machine = GPU("this GPU", flops, bw, 0, "measured")
    pre = prefill_step(cfg, machine, context, batch, dtype, dtype)
    dec = decode_step(cfg, machine, batch, context, dtype, dtype)
    cost, why = dominant_cost(t["eager"], t["graph"], dec.seconds)
    return {
        "device_name": probe.name(),
        "dtype": dtype,
        "batch": batch,
        "free_bytes": free,
        "needed_bytes": need,
        "matmul_flops_per_s": flops,
        "bandwidth_bytes_per_s": bw,
        "prefill_tokens_per_s": {
            "predicted": pre.tokens_per_second,
            "measured": batch * context / t["prefill"],
        },
        "decode_tokens_per_s": {
            "predicted": dec.tokens_per_second,
            "measured": batch / t["graph"],
            "eager": batch / t["eager"],
        },
        "decode_step_seconds": {
            "roofline": dec.seconds,
            "eager": t["eager"],
            "graph": t["graph"],
        },
        "decode_bytes_read": dec.bytes,
        "bandwidth_share": {
            "eager": dec.bytes / t["eager"] / bw,
            "graph": dec.bytes / t["graph"] / bw,
        },
        "prefill_flops_share": pre.flops / t["prefill"] / flops,
        "prefill_memory_bound": pre.memory_bound,
        "decode_memory_bound": dec.memory_bound,
        "dominant_cost": cost,
        "dominant_cost_reason": why,
    }


# --- the command -----------------------------------------------------------------


def measure_report(
    model: str | None = None,
    prompt: int | None = None,
    new_tokens: int | None = None,
    threads: int = 1,
    revision: str | None = None,
    device: str | None = None,
):
    """What ``measure --json`` prints, for ``device`` (``"cpu"`` or ``"cuda"``; by
    default CUDA when torch sees a GPU, else the CPU).

    On the CPU: the measured FLOP/s and bandwidth under ``"cpu"``, with
    ``"prefill_tokens_per_s"`` and ``"decode_tokens_per_s"`` as ``{"predicted",
    "measured"}`` (also at the top level), for ``prompt`` tokens (64) and
    ``new_tokens`` decode steps (16) of the `DEFAULT_MODEL`. The CPU runs ``threads``
    threads (default one: on a busy machine the synchronisation of several threads
    per small operation, which the roofline leaves out, would dominate); torch's
    setting is restored after.

    On CUDA: `device_report` under ``"cuda"`` for the `CUDA_MODEL` in bf16, a context
    of ``prompt`` tokens (`CUDA_CONTEXT`) and ``new_tokens`` timed steps
    (`CUDA_STEPS`); the top level's tokens per second are its.

    ``model`` is anything `llmmath.reports.resolve` takes (a hub id at ``revision``).

    Raises:
        ConfigError: an unknown model; on the CPU one above `MAX_PARAMS` parameters;
        CUDA asked for where torch sees none; on CUDA a model that `device_report`
        refuses."""
    import torch

    from llmmath.counting import count_params
    from llmmath.reports import resolve

    if device is None:
        device = "cuda" if cuda_available() else "cpu"
    if device == "cuda" and not cuda_available():
        raise ConfigError(
            gettext(
                "torch {version} sees no CUDA GPU; --device cpu measures the CPU"
            ).format(version=torch.__version__)
        )
    default = (DEFAULT_MODEL, reference_config()) if device == "cpu" else None
    if model is None and default is None:
        model = CUDA_MODEL
    name, cfg = default if model is None else resolve(model, revision)
    n = count_params(cfg).total
    if device == "cpu" and n > MAX_PARAMS:
        raise ConfigError(
            gettext(
                "model has {n} parameters; measure runs at most {limit} on the CPU"
            ).format(n=f"{n:,}", limit=f"{MAX_PARAMS:,}")
        )
    cpu = device == "cpu"
    prompt = prompt or (64 if cpu else CUDA_CONTEXT)
    new_tokens = new_tokens or (16 if cpu else CUDA_STEPS)
    report = {"model": name, "parameters": n, "prompt_tokens": prompt}
    report["new_tokens"] = new_tokens
    report["threads"] = threads
    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        if cpu:
            _measure_cpu(report, cfg, prompt, new_tokens)
        else:
            entry = device_report(
                name, cfg, cuda_probe(), context=prompt, steps=new_tokens
            )
            report["cuda"] = entry
            report["decode_tokens_per_s"] = entry["decode_tokens_per_s"]
            report["prefill_tokens_per_s"] = entry["prefill_tokens_per_s"]
            report["left_out"] = list(LEFT_OUT_CUDA)
    finally:
        torch.set_num_threads(before)
    return report


def _measure_cpu(report, cfg, prompt, new_tokens) -> None:
    flops, bw = matmul_flops("cpu"), bandwidth("cpu")
    predicted = predict(cfg, flops, bw, prompt, new_tokens)
    measured = run_model(cfg, "cpu", prompt, new_tokens)
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
    report["cpu"] = entry
    report["decode_tokens_per_s"] = entry["decode_tokens_per_s"]
    report["prefill_tokens_per_s"] = entry["prefill_tokens_per_s"]
    report["left_out"] = list(LEFT_OUT)


def format_report(r: dict) -> str:
    """The report as text, in the language of `llmmath.messages`
    (``LLMMATH_LANG=zh``): one block for its device; its numbers are the JSON
    report's."""
    if "cuda" in r:
        return _format_cuda(r)
    lines = [
        gettext(
            "{model}: {parameters} parameters, fp32, prompt {prompt} tokens, {new} "
            "new, {threads} threads"
        ).format(
            model=r["model"],
            parameters=f"{r['parameters']:,}",
            prompt=r["prompt_tokens"],
            new=r["new_tokens"],
            threads=r["threads"],
        )
    ]
    d = r["cpu"]
    lines.append(
        gettext("cpu: matmul {flops} GFLOP/s, bandwidth {bandwidth} GB/s").format(
            flops=f"{d['matmul_flops_per_s'] / 1e9:,.1f}",
            bandwidth=f"{d['bandwidth_bytes_per_s'] / 1e9:,.1f}",
        )
    )
    steps = {"prefill": gettext("prefill"), "decode": gettext("decode")}
    for step, name in steps.items():
        p = d[f"{step}_tokens_per_s"]
        lines.append(
            gettext(
                "  {step} predicted {predicted} tokens/s  measured {measured}  "
                "(measured / predicted {ratio})"
            ).format(
                step=ljust(name, 8),
                predicted=f"{p['predicted']:>10,.1f}",
                measured=f"{p['measured']:>10,.1f}",
                ratio=f"{p['measured'] / p['predicted']:.2f}",
            )
        )
    lines.append(_left_out(r["left_out"]))
    return "\n".join(lines)


def _left_out(items) -> str:
    """The report's last line: what the roofline leaves out, translated."""
    return gettext("left out by the roofline: {items}").format(
        items=gettext("; ").join(translated(item) for item in items)
    )


def _format_cuda(r: dict) -> str:
    d = r["cuda"]
    s = d["decode_step_seconds"]
    share = d["bandwidth_share"]
    pre = d["prefill_tokens_per_s"]
    return "\n".join(
        [
            gettext(
                "{model}: {parameters} parameters, {dtype}, batch {batch}, a static "
                "cache of {prompt} tokens, {new} steps timed"
            ).format(
                model=r["model"],
                parameters=f"{r['parameters']:,}",
                dtype=d["dtype"],
                batch=d["batch"],
                prompt=f"{r['prompt_tokens']:,}",
                new=r["new_tokens"],
            ),
            gettext(
                "cuda ({device}): matmul {flops} TFLOP/s, device copy {bandwidth} "
                "TB/s (read + write)"
            ).format(
                device=d["device_name"],
                flops=f"{d['matmul_flops_per_s'] / 1e12:,.1f}",
                bandwidth=f"{d['bandwidth_bytes_per_s'] / 1e12:,.2f}",
            ),
            gettext(
                "  prefill   predicted {predicted} tokens/s  measured {measured}  "
                "({share} of the measured FLOP/s)"
            ).format(
                predicted=f"{pre['predicted']:>10,.0f}",
                measured=f"{pre['measured']:>10,.0f}",
                share=f"{d['prefill_flops_share']:.0%}",
            ),
            gettext(
                "  decode    roofline {roofline} ms  eager {eager} ms ({eager_share} "
                "of the bandwidth)  graph {graph} ms ({graph_share})"
            ).format(
                roofline=f"{s['roofline'] * 1e3:8.3f}",
                eager=f"{s['eager'] * 1e3:8.3f}",
                eager_share=f"{share['eager']:.0%}",
                graph=f"{s['graph'] * 1e3:8.3f}",
                graph_share=f"{share['graph']:.0%}",
            ),
            gettext("  dominant left-out cost: {cost}: {reason}").format(
                cost=translated(d["dominant_cost"]),
                reason=translated(d["dominant_cost_reason"]),
            ),
            _left_out(r["left_out"]),
        ]
    )

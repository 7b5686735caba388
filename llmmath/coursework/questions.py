"""The coursework question bank: for each chapter, questions whose numbers are drawn per
student.

Each question is a function ``(rng) -> Problem``: it draws its numbers from ``rng`` (a
`random.Random` seeded by chapter, student and question number, see
`llmmath.coursework.Sheet`) and computes the expected answer with ``llmmath`` itself,
the same functions the chapter explains. The questions follow the chapters' exercises
with other numbers, so a student who has worked through the chapter can answer them with
a few lines of code or by hand.

Answers are exact integers (``tolerance`` 0) except where the quantity is irrational,
where a relative tolerance is stated in the question."""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass, field

from llmmath.config import ModelConfig
from llmmath.counting import count_params
from llmmath.messages import N_, Message, gettext

QUESTION_BANK_VERSION = (
    1  # part of every seed: changing a question changes everyone's numbers
)


@dataclass(frozen=True)
class Problem:
    """One question with one student's numbers.

    ``text``: the question as printed (a `llmmath.messages.Message`: English as a
    ``str``, and in another language with `llmmath.messages.translated`); ``numbers``:
    the drawn inputs by name (HF config names where there is one); ``answer``: the
    expected answer (an ``int``, or a ``float`` checked to ``tolerance``, a relative
    tolerance); ``unit``: what the answer counts, in English (parameters, bytes,
    FLOPs, tokens: `AMOUNTS` says an amount of it); ``hint``: printed with a wrong
    answer, never the answer itself (a message too)."""

    text: str
    numbers: dict[str, object]
    answer: int | float
    unit: str
    hint: str
    tolerance: float = 0.0

    @property
    def answer_text(self) -> str:
        """The answer with its unit in the current language (`llmmath.messages`), e.g.
        ``'7,680 bytes'`` (``'7,680 字节'``); a float to 10 significant digits, far
        finer than any tolerance the checks use, so a teacher reads the value that is
        checked (``'4,080,185.13 tokens'``)."""
        if isinstance(self.answer, int):
            n = f"{self.answer:,}"
        else:
            n = f"{self.answer:,.10g}"
        return gettext(AMOUNTS.get(self.unit, "{n} " + self.unit)).format(n=n)


@dataclass(frozen=True)
class Question:
    """A question of the bank: its chapter, its number in the chapter, and its
    generator."""

    chapter: str
    number: int
    title: str
    make: Callable[[random.Random], Problem] = field(repr=False)


BANK: dict[str, list[Question]] = {}


def question(chapter: str, title: str):
    """Register the decorated ``(rng) -> Problem`` function as the next question of
    ``chapter``."""

    def register(
        make: Callable[[random.Random], Problem],
    ) -> Callable[[random.Random], Problem]:
        questions = BANK.setdefault(chapter, [])
        questions.append(Question(chapter, len(questions) + 1, title, make))
        return make

    return register


def _listing(numbers: dict[str, object]) -> str:
    width = max(len(k) for k in numbers)
    return "\n".join(f"    {k:<{width}} = {v}" for k, v in numbers.items())


def _llama_shape(rng: random.Random, *, gqa: bool = True) -> dict[str, int]:
    """A small Llama-style shape: d_h 64 or 128, n_kv dividing n_h (fewer than n_h if
    ``gqa``)."""
    head_dim = rng.choice([64, 128])
    heads = rng.choice([8, 12, 16, 24, 32])
    kv = rng.choice(
        [d for d in (1, 2, 4, 8) if heads % d == 0 and (d < heads or not gqa)]
    )
    hidden = heads * head_dim
    return {
        "vocab_size": rng.choice([32000, 32768, 49152, 65536, 128256, 151936]),
        "hidden_size": hidden,
        "intermediate_size": 256
        * rng.randrange(2 * hidden // 256, 4 * hidden // 256 + 1),
        "num_hidden_layers": rng.randrange(4, 41),
        "num_attention_heads": heads,
        "num_key_value_heads": kv,
    }


def _llama_fields(rng: random.Random, *fields: str) -> dict[str, int]:
    """Only ``fields`` of a `_llama_shape` (drawn whole, so every question draws
    alike)."""
    shape = _llama_shape(rng)
    return {f: shape[f] for f in fields}


def _gpt2(hidden_size: int, **fields) -> ModelConfig:
    """A GPT-2-style config (LayerNorm, plain GELU MLP, learned positions, biases,
    64-wide heads)."""
    return ModelConfig(
        **(
            {
                "vocab_size": 1,
                "intermediate_size": 4 * hidden_size,
                "num_hidden_layers": 1,
            }
            | fields
        ),
        hidden_size=hidden_size,
        num_attention_heads=hidden_size // 64,
        norm_type="layernorm",
        mlp_type="plain",
        hidden_act="gelu_new",
        position_embedding_type="learned",
        tie_word_embeddings=True,
        qkv_bias=True,
        o_proj_bias=True,
        mlp_bias=True,
        model_type="gpt2",
    )


def _cfg(numbers: dict[str, object], **extra) -> ModelConfig:
    fields = {k: v for k, v in numbers.items() if k in ModelConfig._fields}
    return ModelConfig(**fields, **extra)


LLAMA_STYLE = Message(
    N_(
        "a Llama-style decoder: RMSNorm before attention and before the FFN plus a "
        "final one, a SwiGLU FFN, RoPE (no position weights), no biases"
    )
)

# The units answers are counted in (`Problem.unit`).
PARAMETERS, BYTES, FEATURES = "parameters", "bytes", "features"
TOKENS, PAIRS, FLOPS = "tokens", "pairs", "FLOPs"
GPUS, BLOCKS, TIMES = "GPUs", "blocks", "times"
#: An amount in each unit, as a sentence says it (``7,680 bytes``, ``7,680 字节``);
#: FLOPs are FLOPs in every language (`Problem.answer_text`).
AMOUNTS = {
    PARAMETERS: N_("{n} parameters"),
    BYTES: N_("{n} bytes"),
    FEATURES: N_("{n} features"),
    TOKENS: N_("{n} tokens"),
    PAIRS: N_("{n} pairs"),
    GPUS: N_("{n} GPUs"),
    BLOCKS: N_("{n} blocks"),
    TIMES: N_("{n} times"),
}
#: What a question asks for, by unit (the last line `llmmath.coursework.Sheet.question`
#: prints).
ASKED = {
    PARAMETERS: N_("Answer in parameters."),
    BYTES: N_("Answer in bytes."),
    FEATURES: N_("Answer in features."),
    TOKENS: N_("Answer in tokens."),
    PAIRS: N_("Answer in pairs."),
    FLOPS: N_("Answer in FLOPs."),
    GPUS: N_("Answer in GPUs."),
    BLOCKS: N_("Answer in blocks."),
    TIMES: N_("Answer in times."),
}


# --- 1. Counting parameters -----------------------------------------------------------


@question("01_parameters", N_("Every parameter of a Llama-style model"))
def _total_params(rng: random.Random) -> Problem:
    n = _llama_shape(rng)
    return Problem(
        Message(
            N_(
                "Take {style}, with an untied LM head and\n{numbers}\n"
                "How many parameters does it have? Give the exact integer."
            ),
            style=LLAMA_STYLE,
            numbers=_listing(n),
        ),
        n,
        count_params(_cfg(n)).total,
        PARAMETERS,
        N_(
            "add the embedding, L blocks (attention, FFN, two norms), the final norm "
            "and the LM head; K and V have n_kv·d_h output features, not H"
        ),
    )


@question("01_parameters", N_("What multi-head attention would add"))
def _mha_extra(rng: random.Random) -> Problem:
    n = _llama_shape(rng)
    gqa = _cfg(n)
    mha = gqa.replace(num_key_value_heads=gqa.num_attention_heads)
    return Problem(
        Message(
            N_(
                "The same kind of model as in question 1, with\n{numbers}\n"
                "How many parameters would it gain with multi-head attention "
                "(num_key_value_heads = num_attention_heads), all else equal?"
            ),
            numbers=_listing(n),
        ),
        n,
        count_params(mha).total - count_params(gqa).total,
        PARAMETERS,
        N_(
            "only W_K and W_V change: each goes from H × n_kv·d_h to H × H, in every "
            "layer"
        ),
    )


# --- 2. Embeddings --------------------------------------------------------------------


@question("02_embeddings", N_("What tying saves"))
def _tying_bytes(rng: random.Random) -> Problem:
    n = _llama_shape(rng)
    dtype, size = rng.choice([("bf16", 2), ("fp32", 4)])
    untied = _cfg(n)
    saved = (
        count_params(untied).total
        - count_params(untied.replace(tie_word_embeddings=True)).total
    )
    return Problem(
        Message(
            N_(
                "A Llama-style model with an untied LM head has\n{numbers}\n"
                "How many bytes of {dtype} weights ({size} bytes each) does tying the "
                "LM head to the token embedding save?"
            ),
            numbers=_listing(n),
            dtype=dtype,
            size=size,
        ),
        {**n, "dtype": dtype},
        saved * size,
        BYTES,
        N_("tying removes one V × H matrix; multiply by the bytes per number"),
    )


@question("02_embeddings", N_("Learned positions"))
def _gpt2_embeddings(rng: random.Random) -> Problem:
    n = {
        "vocab_size": rng.choice([50257, 50304, 32000]),
        "hidden_size": 64 * rng.randrange(8, 25),
        "max_position_embeddings": rng.choice([512, 1024, 2048, 4096]),
    }
    cfg = _gpt2(
        n["hidden_size"],
        vocab_size=n["vocab_size"],
        max_position_embeddings=n["max_position_embeddings"],
    )
    return Problem(
        Message(
            N_(
                "A GPT-2-style model (learned absolute positions, LM head tied to the "
                "token embedding) has\n{numbers}\n"
                "How many parameters do its token and position embeddings hold "
                "together?"
            ),
            numbers=_listing(n),
        ),
        n,
        count_params(cfg).embedding,
        PARAMETERS,
        N_("one row of H numbers per token of the vocabulary and one per position"),
    )


# --- 3. Attention ---------------------------------------------------------------------


def _attention_per_layer(cfg: ModelConfig) -> int:
    return sum(t.numel for t in count_params(cfg).tensors if t.group == "attention")


@question("03_attention", N_("One layer's attention"))
def _attention_layer(rng: random.Random) -> Problem:
    n = _llama_fields(rng, "hidden_size", "num_attention_heads", "num_key_value_heads")
    return Problem(
        Message(
            N_(
                "A grouped-query attention layer without biases has\n{numbers}\n"
                "(head_dim = hidden_size / num_attention_heads). How many parameters "
                "do its four projections W_Q, W_K, W_V, W_O hold?"
            ),
            numbers=_listing(n),
        ),
        n,
        _attention_per_layer(
            _cfg(n, vocab_size=1, intermediate_size=1, num_hidden_layers=1)
        ),
        PARAMETERS,
        N_("W_Q and W_O are H × n_h·d_h; W_K and W_V are H × n_kv·d_h"),
    )


@question("03_attention", N_("Qwen2's biases"))
def _attention_bias(rng: random.Random) -> Problem:
    n = _llama_fields(rng, "hidden_size", "num_attention_heads", "num_key_value_heads")
    cfg = _cfg(n, vocab_size=1, intermediate_size=1, num_hidden_layers=1)
    return Problem(
        Message(
            N_(
                "Qwen2 adds biases to the Q, K and V projections (not to O). For a "
                "layer with\n{numbers}\nhow many parameters do those biases add to "
                "the layer?"
            ),
            numbers=_listing(n),
        ),
        n,
        _attention_per_layer(cfg.replace(qkv_bias=True)) - _attention_per_layer(cfg),
        PARAMETERS,
        N_("one bias per output feature of W_Q, W_K and W_V"),
    )


# --- 4. The FFN -----------------------------------------------------------------------


@question("04_ffn", N_("Meta's rule for intermediate_size"))
def _llama_rule(rng: random.Random) -> Problem:
    from llmmath.ffn import llama_intermediate_size

    n = {
        "dim": 256 * rng.randrange(4, 33),
        "multiple_of": rng.choice([64, 256, 1024]),
        "ffn_dim_multiplier": rng.choice([None, 1.3, 1.5]),
    }
    return Problem(
        Message(
            N_(
                "A Llama params.json gives\n{numbers}\n"
                "What intermediate_size does Meta's rule give? (hidden = "
                "int(2·4·dim/3); times ffn_dim_multiplier when it is not None, then "
                "int; rounded up to a multiple of multiple_of.)"
            ),
            numbers=_listing(n),
        ),
        n,
        llama_intermediate_size(n["dim"], n["multiple_of"], n["ffn_dim_multiplier"]),
        FEATURES,
        N_("follow the three steps in order, truncating with int() after each product"),
    )


@question("04_ffn", N_("The FFN weights of a whole model"))
def _ffn_params(rng: random.Random) -> Problem:
    n = _llama_fields(rng, "hidden_size", "intermediate_size", "num_hidden_layers")
    cfg = _cfg(n, vocab_size=1, num_attention_heads=1)
    return Problem(
        Message(
            N_(
                "A model with SwiGLU FFNs without biases has\n{numbers}\n"
                "How many parameters do the FFNs of all its layers hold together?"
            ),
            numbers=_listing(n),
        ),
        n,
        count_params(cfg).by_group()["ffn"],
        PARAMETERS,
        N_("a gated FFN has three matrices (gate, up, down), each H × I"),
    )


# --- 5. Norms -------------------------------------------------------------------------


@question("05_norms", N_("RMSNorm weights, with QK-norm"))
def _rms_params(rng: random.Random) -> Problem:
    n = _llama_fields(rng, "hidden_size", "num_attention_heads", "num_hidden_layers")
    n["qk_norm"] = rng.choice([True, False])
    cfg = _cfg(n, vocab_size=1, intermediate_size=1)
    return Problem(
        Message(
            N_(
                "A Llama-style model (RMSNorm before attention and the FFN in every "
                "layer, plus a final norm) has\n{numbers}\n"
                "qk_norm = True means Qwen3's extra RMSNorm over each head's queries "
                "and keys (one weight vector of head_dim = hidden_size / "
                "num_attention_heads for Q and one for K, per layer). How many norm "
                "parameters does the model have?"
            ),
            numbers=_listing(n),
        ),
        n,
        count_params(cfg).by_group()["norm"],
        PARAMETERS,
        N_(
            "RMSNorm has a scale and no shift: 2L + 1 vectors of H, plus 2L of d_h "
            "with QK-norm"
        ),
    )


@question("05_norms", N_("LayerNorm weights"))
def _ln_params(rng: random.Random) -> Problem:
    n = {
        "hidden_size": 64 * rng.randrange(8, 33),
        "num_hidden_layers": rng.randrange(4, 49),
    }
    cfg = _gpt2(n["hidden_size"], num_hidden_layers=n["num_hidden_layers"])
    return Problem(
        Message(
            N_(
                "A GPT-2-style model (LayerNorm before attention and the MLP, plus a "
                "final one) has\n{numbers}\nHow many parameters do its LayerNorms "
                "hold?"
            ),
            numbers=_listing(n),
        ),
        n,
        count_params(cfg).by_group()["norm"],
        PARAMETERS,
        N_("LayerNorm has a scale and a shift, each of H numbers"),
    )


# --- 6. RoPE --------------------------------------------------------------------------


def _wavelengths(head_dim: int, theta: float) -> list[float]:
    from llmmath.rope import rope_wavelengths

    return [float(x) for x in rope_wavelengths(head_dim, theta)]


@question("06_rope", N_("The slowest pair"))
def _slowest(rng: random.Random) -> Problem:
    n = {
        "head_dim": rng.choice([64, 96, 128, 256]),
        "rope_theta": rng.choice([10000.0, 500000.0, 1000000.0]),
    }
    return Problem(
        Message(
            N_(
                "RoPE with\n{numbers}\n"
                "rotates pair i (i = 0 … head_dim/2 − 1) by the angle m·theta_i at "
                "position m, with theta_i = rope_theta^(−2i/head_dim). How many tokens "
                "long is the wavelength of the slowest pair? (relative tolerance 1e-4)"
            ),
            numbers=_listing(n),
        ),
        n,
        _wavelengths(n["head_dim"], n["rope_theta"])[-1],
        TOKENS,
        N_("a pair turns once in 2π/theta_i tokens; the slowest pair is the last one"),
        tolerance=1e-4,
    )


@question("06_rope", N_("Pairs that turn within the context"))
def _turning_pairs(rng: random.Random) -> Problem:
    n = {
        "head_dim": rng.choice([64, 128]),
        "rope_theta": rng.choice([10000.0, 500000.0, 1000000.0]),
        "max_position_embeddings": rng.choice([2048, 4096, 8192, 32768, 131072]),
    }
    lam = _wavelengths(n["head_dim"], n["rope_theta"])
    return Problem(
        Message(
            N_(
                "RoPE with\n{numbers}\n"
                "How many of the head_dim/2 pairs complete at least one full turn "
                "within max_position_embeddings tokens (wavelength ≤ "
                "max_position_embeddings)?"
            ),
            numbers=_listing(n),
        ),
        n,
        sum(1 for x in lam if x <= n["max_position_embeddings"]),
        PAIRS,
        N_("compute each pair's wavelength 2π·rope_theta^(2i/head_dim) and count"),
    )


# --- 7. The KV cache ------------------------------------------------------------------


def _kv_shape(rng: random.Random) -> dict[str, object]:
    return _llama_fields(
        rng,
        "num_hidden_layers",
        "hidden_size",
        "num_attention_heads",
        "num_key_value_heads",
    )


@question("07_kv_cache", N_("One token's cache"))
def _kv_per_token(rng: random.Random) -> Problem:
    from llmmath.kvcache import kv_cache_bytes_per_token

    n = _kv_shape(rng)
    dtype, size = rng.choice([("bf16", 2), ("fp32", 4), ("fp8", 1)])
    cfg = _cfg(n, vocab_size=1, intermediate_size=1)
    return Problem(
        Message(
            N_(
                "A decoder with grouped-query attention has\n{numbers}\n"
                "(head_dim = hidden_size / num_attention_heads). How many bytes does "
                "one more token add to the KV cache of one sequence in {dtype} ({size} "
                "bytes per number)?"
            ),
            numbers=_listing(n),
            dtype=dtype,
            size=size,
        ),
        {**n, "dtype": dtype},
        kv_cache_bytes_per_token(cfg, dtype),
        BYTES,
        N_("keys and values, in every layer, for each KV head (not each query head)"),
    )


@question("07_kv_cache", N_("A batch of sequences"))
def _kv_batch(rng: random.Random) -> Problem:
    from llmmath.kvcache import kv_cache_bytes

    n = _kv_shape(rng)
    n |= {
        "batch": rng.choice([1, 4, 8, 16, 32, 64]),
        "seq_len": rng.choice([1024, 2048, 4096, 8192]),
    }
    cfg = _cfg(n, vocab_size=1, intermediate_size=1)
    return Problem(
        Message(
            N_(
                "The same kind of model, with\n{numbers}\n"
                "How many bytes does the bf16 KV cache of batch sequences of seq_len "
                "tokens take?"
            ),
            numbers=_listing(n),
        ),
        n,
        kv_cache_bytes(cfg, n["batch"], n["seq_len"], "bf16"),
        BYTES,
        N_("2 · L · batch · seq_len · n_kv · d_h · 2 bytes"),
    )


# --- 8. FLOPs -------------------------------------------------------------------------


@question("08_flops", N_("Forward FLOPs per token, all pairs"))
def _forward_full(rng: random.Random) -> Problem:
    from llmmath.flops import forward_flops_per_token

    n = _llama_shape(rng)
    n["seq_len"] = rng.choice([512, 1024, 2048, 4096])
    cfg = _cfg(n)
    return Problem(
        Message(
            N_(
                "A Llama-style model with an untied LM head has\n{numbers}\n"
                "Count its forward FLOPs per token on a seq_len-token sequence the "
                "book's way: 2 FLOPs per weight of every matmul (attention "
                "projections, FFN, LM head; the embedding lookup is free; norms, "
                "activations and softmax are not counted) plus QKᵀ and AV with every "
                "token against all seq_len keys (4·L·seq_len·n_h·d_h)."
            ),
            numbers=_listing(n),
        ),
        n,
        int(forward_flops_per_token(cfg, n["seq_len"], "full").total),
        FLOPS,
        N_(
            "2 × (attention projection weights + FFN weights) per layer, + 2·V·H for "
            "the head, + the attention term"
        ),
    )


@question("08_flops", N_("Causal attention"))
def _causal_attention(rng: random.Random) -> Problem:
    from llmmath.flops import forward_flops_per_token

    n = _llama_fields(rng, "hidden_size", "num_attention_heads", "num_hidden_layers")
    n["seq_len"] = rng.choice([1024, 2048, 4096, 8192])
    f = forward_flops_per_token(
        _cfg(n, vocab_size=1, intermediate_size=1), n["seq_len"], "causal"
    )
    return Problem(
        Message(
            N_(
                "A decoder with\n{numbers}\n"
                "reads a seq_len-token sequence with a causal mask: token i (1-based) "
                "attends to i keys. Averaged over the seq_len positions, how many "
                "FLOPs per token do QKᵀ and AV cost (2 FLOPs per multiply-add, all "
                "layers and heads)?"
            ),
            numbers=_listing(n),
        ),
        n,
        int(f.attention),
        FLOPS,
        N_("token i costs 4·L·n_h·d_h·i; average i over 1 … seq_len"),
    )


# --- 9. Memory ------------------------------------------------------------------------


@question("09_memory", N_("Training state"))
def _training_state(rng: random.Random) -> Problem:
    from llmmath.memory import training_state_bytes

    n = _llama_shape(rng)
    return Problem(
        Message(
            N_(
                "A Llama-style model with an untied LM head has\n{numbers}\n"
                "How many bytes of training state does mixed-precision Adam keep for "
                "it (bf16 weights and gradients, fp32 master weights and two fp32 "
                "moments: 16 bytes per parameter), activations aside?"
            ),
            numbers=_listing(n),
        ),
        n,
        sum(training_state_bytes(_cfg(n)).values()),
        BYTES,
        N_("count the parameters first, then 2 + 2 + 4 + 4 + 4 bytes each"),
    )


@question("09_memory", N_("GPUs for serving"))
def _serving_gpus(rng: random.Random) -> Problem:
    from llmmath.kvcache import kv_cache_bytes
    from llmmath.memory import weight_bytes
    from llmmath.units import GB

    n = _llama_shape(rng)
    heads = rng.choice([16, 24, 32, 40, 48, 64])  # d_h = 128: 2048 ≤ H ≤ 8192
    n |= {
        "hidden_size": 128 * heads,
        "num_attention_heads": heads,
        "intermediate_size": 256 * rng.randrange(heads, 2 * heads + 1),
        "num_key_value_heads": rng.choice([d for d in (1, 2, 4, 8) if heads % d == 0]),
        "num_hidden_layers": rng.randrange(24, 81),
    }
    n |= {
        "batch": rng.choice([32, 64, 128, 256]),
        "seq_len": rng.choice([4096, 8192]),
        "gpu_gb": rng.choice([16, 24, 40]),
    }
    cfg = _cfg(n)
    need = weight_bytes(cfg) + kv_cache_bytes(cfg, n["batch"], n["seq_len"])
    return Problem(
        Message(
            N_(
                "Serve a Llama-style model (untied LM head) with\n{numbers}\n"
                "in bf16: weights plus the KV cache of batch sequences of seq_len "
                "tokens. How many GPUs of gpu_gb GB (1 GB = 10^9 bytes) does that "
                "take, counting bytes only (no activations, no fragmentation)?"
            ),
            numbers=_listing(n),
        ),
        n,
        -(-need // (n["gpu_gb"] * GB)),
        GPUS,
        N_(
            "add 2 bytes per parameter and the cache, divide by gpu_gb·10^9 and round "
            "up"
        ),
    )


# --- 10. LLaMA 1 → 3 ------------------------------------------------------------------

_LLAMA_PRESETS = ("llama-1-7b", "llama-1-65b", "llama-2-7b", "llama-2-13b")


def _older_llama(rng: random.Random) -> tuple[str, ModelConfig, int]:
    """A multi-head LLaMA preset and a num_key_value_heads (1, 2, 4 or 8) to give it."""
    from llmmath import presets

    name = rng.choice(_LLAMA_PRESETS)
    cfg = presets.load(name)
    return (
        name,
        cfg,
        rng.choice([d for d in (1, 2, 4, 8) if cfg.num_attention_heads % d == 0]),
    )


@question("10_llama", N_("Grouped-query attention for an older LLaMA: the cache"))
def _llama_gqa_cache(rng: random.Random) -> Problem:
    from llmmath import presets
    from llmmath.kvcache import kv_cache_bytes_per_token

    name, cfg, kv = _older_llama(rng)
    saved = kv_cache_bytes_per_token(cfg) - kv_cache_bytes_per_token(
        cfg.replace(num_key_value_heads=kv)
    )
    return Problem(
        Message(
            N_(
                "Give {model} (preset {preset}) grouped-query attention with "
                "num_key_value_heads = {kv} and change nothing else. How many bytes "
                "per token does its bf16 KV cache save?"
            ),
            model=presets.get(name).title,
            preset=repr(name),
            kv=kv,
        ),
        {"preset": name, "num_key_value_heads": kv},
        saved,
        BYTES,
        N_(
            "look the preset's L, n_h and d_h up (presets.load); the cache keeps n_kv "
            "heads, not n_h"
        ),
    )


@question("10_llama", N_("Grouped-query attention for an older LLaMA: the weights"))
def _llama_gqa_params(rng: random.Random) -> Problem:
    from llmmath import presets

    name, cfg, kv = _older_llama(rng)
    lost = (
        count_params(cfg).total
        - count_params(cfg.replace(num_key_value_heads=kv)).total
    )
    return Problem(
        Message(
            N_(
                "Give {model} (preset {preset}) num_key_value_heads = {kv} and change "
                "nothing else. How many parameters does it lose?"
            ),
            model=presets.get(name).title,
            preset=repr(name),
            kv=kv,
        ),
        {"preset": name, "num_key_value_heads": kv},
        lost,
        PARAMETERS,
        N_("W_K and W_V shrink from H × H to H × n_kv·d_h in every layer"),
    )


# --- 11. MiniMind ---------------------------------------------------------------------


def _minimind_shape(rng: random.Random) -> dict[str, int]:
    from llmmath.ffn import minimind_intermediate_size

    hidden = 64 * rng.randrange(6, 17)
    return {
        "vocab_size": 6400,
        "hidden_size": hidden,
        "intermediate_size": minimind_intermediate_size(hidden),
        "num_hidden_layers": rng.randrange(4, 25),
        "num_attention_heads": 8,
        "num_key_value_heads": rng.choice([1, 2, 4]),
    }


@question("11_minimind", N_("MiniMind's FFN rule"))
def _minimind_rule(rng: random.Random) -> Problem:
    from llmmath.ffn import minimind_intermediate_size

    n = {"hidden_size": 64 * rng.randrange(6, 33)}
    return Problem(
        Message(
            N_(
                "MiniMind sizes its FFN as int(hidden_size · 8/3) rounded up to a "
                "multiple of 64. For\n{numbers}\nwhat is intermediate_size?"
            ),
            numbers=_listing(n),
        ),
        n,
        minimind_intermediate_size(n["hidden_size"]),
        FEATURES,
        N_(
            "truncate first, then round up to the next multiple of 64 (a multiple "
            "stays as it is)"
        ),
    )


@question("11_minimind", N_("A MiniMind-shaped model"))
def _minimind_total(rng: random.Random) -> Problem:
    n = _minimind_shape(rng)
    return Problem(
        Message(
            N_(
                "A MiniMind-style model (Llama-style blocks, LM head tied to the "
                "embedding) has\n{numbers}\nHow many parameters does it have?"
            ),
            numbers=_listing(n),
        ),
        n,
        count_params(_cfg(n, tie_word_embeddings=True)).total,
        PARAMETERS,
        N_("as for a Llama model, but the V × H matrix counts once"),
    )


# --- 12. Mixture of experts -----------------------------------------------------------


def _moe_shape(rng: random.Random) -> dict[str, int]:
    n = _llama_shape(rng)
    experts = rng.choice([4, 8, 16, 32])
    return n | {
        "num_local_experts": experts,
        "num_experts_per_tok": rng.choice([k for k in (1, 2, 4) if k < experts]),
    }


_MOE_TEXT = Message(
    N_(
        "A Mixtral-style mixture of experts (Llama-style blocks whose FFN is "
        "num_local_experts SwiGLU experts, each H × I × 3, and a router, a linear "
        "layer from H to num_local_experts without bias; untied LM head) has"
    )
)


@question("12_moe", N_("All the experts"))
def _moe_total(rng: random.Random) -> Problem:
    n = _moe_shape(rng)
    return Problem(
        Message(
            N_("{model}\n{numbers}\nHow many parameters does it have in all?"),
            model=_MOE_TEXT,
            numbers=_listing(n),
        ),
        n,
        count_params(_cfg(n, model_type="mixtral")).total,
        PARAMETERS,
        N_(
            "every expert counts in the total, and each layer has a router of H·E "
            "weights"
        ),
    )


@question("12_moe", N_("What one token uses"))
def _moe_active(rng: random.Random) -> Problem:
    n = _moe_shape(rng)
    return Problem(
        Message(
            N_(
                "{model}\n{numbers}\n"
                "The router sends each token to num_experts_per_tok experts. How many "
                "parameters does one token use (the total less the experts it is not "
                "routed to)?"
            ),
            model=_MOE_TEXT,
            numbers=_listing(n),
        ),
        n,
        count_params(_cfg(n, model_type="mixtral")).active,
        PARAMETERS,
        N_(
            "subtract (E − k) experts of 3·H·I in every layer; the router and "
            "attention stay"
        ),
    )


# --- 13. The model zoo ----------------------------------------------------------------

_ZOO = (
    "llama-2-7b",
    "llama-3-8b",
    "mistral-7b-v0.1",
    "qwen2.5-7b",
    "qwen2.5-3b",
    "qwen3-0.6b",
    "llama-3.2-1b",
    "llama-3.2-3b",
    "deepseek-llm-7b",
    "gpt2",
)


@question("13_zoo", N_("Two caches side by side"))
def _zoo_kv(rng: random.Random) -> Problem:
    from llmmath import presets
    from llmmath.kvcache import kv_cache_bytes_per_token

    a, b = rng.sample(_ZOO, 2)
    diff = kv_cache_bytes_per_token(presets.load(a)) - kv_cache_bytes_per_token(
        presets.load(b)
    )
    return Problem(
        Message(
            N_(
                "How many more bytes per token does the bf16 KV cache of preset {a} "
                "take than that of preset {b}? (Negative if it takes fewer.)"
            ),
            a=repr(a),
            b=repr(b),
        ),
        {"preset_a": a, "preset_b": b},
        diff,
        BYTES,
        N_(
            "2 · L · n_kv · d_h · 2 bytes for each; d_h is head_dim when the config "
            "gives it"
        ),
    )


@question("13_zoo", N_("Non-embedding parameters"))
def _zoo_non_embedding(rng: random.Random) -> Problem:
    from llmmath import presets

    name = rng.choice(_ZOO)
    return Problem(
        Message(
            N_(
                "How many non-embedding parameters does preset {preset} have, in the "
                "book's convention (the total less the token and position embeddings "
                "and an untied LM head)?"
            ),
            preset=repr(name),
        ),
        {"preset": name},
        count_params(presets.load(name)).non_embedding,
        PARAMETERS,
        N_(
            "count_params(...).total, then subtract V·H (twice if untied) and any "
            "position table"
        ),
    )


def chapters() -> tuple[str, ...]:
    """The chapters that have coursework, in order."""
    return tuple(sorted(BANK))


# --- 7b. Multi-head latent attention --------------------------------------------------


def _mla_shape(rng: random.Random) -> dict[str, int]:
    """A DeepSeek-style MLA shape: n_h heads, latent d_c, rotary d_r, key and value
    widths."""
    return {
        "num_hidden_layers": rng.randrange(8, 62),
        "num_attention_heads": rng.choice([16, 32, 64, 128]),
        "kv_lora_rank": rng.choice([256, 384, 512]),
        "qk_nope_head_dim": rng.choice([64, 128]),
        "qk_rope_head_dim": rng.choice([32, 64]),
        "v_head_dim": rng.choice([64, 128]),
    }


def _mla_cfg(n: dict[str, int]) -> ModelConfig:
    return _cfg(n, vocab_size=1, hidden_size=64, intermediate_size=1)


@question("07b_latent_attention", N_("The latent cache"))
def _mla_latent(rng: random.Random) -> Problem:
    from llmmath.kvcache import kv_cache_bytes_per_token

    n = _mla_shape(rng)
    dtype, size = rng.choice([("bf16", 2), ("fp32", 4), ("fp8", 1)])
    return Problem(
        Message(
            N_(
                "A decoder with multi-head latent attention (DeepSeek-V2/V3) has\n"
                "{numbers}\nIt caches the latent and the shared rotary key. How many "
                "bytes does one more token add to the cache of one sequence in {dtype} "
                "({size} bytes per number)?"
            ),
            numbers=_listing(n),
            dtype=dtype,
            size=size,
        ),
        {**n, "dtype": dtype},
        kv_cache_bytes_per_token(_mla_cfg(n), dtype),
        BYTES,
        N_(
            "per layer kv_lora_rank + qk_rope_head_dim numbers; the heads do not "
            "multiply"
        ),
    )


@question("07b_latent_attention", N_("What expanding costs"))
def _mla_expanded(rng: random.Random) -> Problem:
    from llmmath.kvcache import kv_cache_bytes_per_token

    n = _mla_shape(rng)
    cfg = _mla_cfg(n)
    extra = kv_cache_bytes_per_token(cfg, "bf16", "expanded") - (
        kv_cache_bytes_per_token(cfg, "bf16", "latent")
    )
    return Problem(
        Message(
            N_(
                "The same kind of model, with\n{numbers}\nA naive implementation "
                "caches each head's key (qk_nope_head_dim + qk_rope_head_dim numbers) "
                "and value (v_head_dim) instead of the latent. How many more bytes per "
                "token does its bf16 cache take than the latent one?"
            ),
            numbers=_listing(n),
        ),
        n,
        extra,
        BYTES,
        N_(
            "expanded: n_h · (d_n + d_r + d_v) per layer; latent: d_c + d_r; times L "
            "and 2 bytes"
        ),
    )


# --- 9c. Many GPUs --------------------------------------------------------------------


@question("09c_many_gpus", N_("ZeRO: model state per GPU"))
def _zero_state(rng: random.Random) -> Problem:
    from llmmath.parallel import zero_model_state_bytes

    n = _llama_shape(rng)
    n |= {"gpus": rng.choice([8, 16, 32, 64, 128, 256]), "zero": rng.choice([1, 2, 3])}
    psi = count_params(_cfg(n)).total
    return Problem(
        Message(
            N_(
                "A Llama-style model with an untied LM head has\n{numbers}\n"
                "It is trained with mixed-precision Adam (bf16 weights and gradients, "
                "12 bytes of fp32 optimizer state per parameter) on gpus data-parallel "
                "GPUs with ZeRO stage zero. How many bytes of model state does each "
                "GPU hold? A partition holds ⌈Ψ/gpus⌉ parameters (Ψ the parameter "
                "count)."
            ),
            numbers=_listing(n),
        ),
        n,
        sum(zero_model_state_bytes(psi, n["gpus"], n["zero"]).values()),
        BYTES,
        N_(
            "stage 1 partitions the 12 optimizer bytes, stage 2 also the 2 gradient "
            "bytes, stage 3 also the 2 weight bytes; the rest stays whole on every GPU"
        ),
    )


@question("09c_many_gpus", N_("Tensor parallelism: parameters per GPU"))
def _tp_params(rng: random.Random) -> Problem:
    from llmmath.parallel import tp_params_per_rank

    n = _llama_shape(rng)
    n["num_key_value_heads"] = max(n["num_key_value_heads"], 2)
    n["tp"] = rng.choice([t for t in (2, 4, 8) if n["num_key_value_heads"] % t == 0])
    return Problem(
        Message(
            N_(
                "A Llama-style model with an untied LM head has\n{numbers}\n"
                "It is split over tp GPUs with Megatron-LM's tensor parallelism: q, k, "
                "v, gate and up projections by column, o and down by row, the "
                "embedding and the LM head by vocabulary in chunks of ⌈V/tp⌉ rows, the "
                "norms replicated. How many parameters does the first GPU (rank 0) "
                "hold?"
            ),
            numbers=_listing(n),
        ),
        n,
        tp_params_per_rank(_cfg(n), n["tp"]),
        PARAMETERS,
        N_(
            "every block matrix ÷ tp, plus the 2L + 1 norms whole, plus two vocabulary "
            "chunks of ⌈V/tp⌉·H"
        ),
    )


# --- 9b. Serving ----------------------------------------------------------------------


@question("09b_serving", N_("An int4 checkpoint"))
def _int4_checkpoint(rng: random.Random) -> Problem:
    from llmmath.quantization import WeightFormat, quantized_bytes

    n = _llama_shape(rng)
    n["group_size"] = rng.choice([32, 64, 128])
    zero = rng.choice([None, "int4", "bf16"])
    n["zero_point"] = zero or "none"
    fmt = WeightFormat("int4", 4, n["group_size"], "bf16", zero)
    return Problem(
        Message(
            N_(
                "A Llama-style model with an untied LM head has\n{numbers}\n"
                "Its block matrices (q, k, v, o, gate, up, down) are stored as packed "
                "int4 values, two per byte, with one bf16 scale and one zero point (of "
                "the type zero_point; none: no zero point) per group_size consecutive "
                "weights of a row; the embedding, the LM head and the norms stay in "
                "bf16. How many bytes is the checkpoint?"
            ),
            numbers=_listing(n),
        ),
        n,
        sum(quantized_bytes(_cfg(n), fmt).values()),
        BYTES,
        N_(
            "block weights × 4/8 + (scale + zero-point bytes) per group + 2 bytes for "
            "every other parameter; a row of w weights has w / group_size groups here"
        ),
    )


@question("09b_serving", N_("Blocks with a shared prompt"))
def _shared_blocks(rng: random.Random) -> Problem:
    from llmmath.paged_cache import shared_prefix_blocks

    n = {
        "sequences": rng.randrange(2, 17),
        "prompt_tokens": rng.randrange(100, 4001),
        "new_tokens_each": rng.randrange(1, 1001),
        "block_size": rng.choice([8, 16, 32]),
    }
    _, shared = shared_prefix_blocks(
        n["sequences"], n["prompt_tokens"], n["new_tokens_each"], n["block_size"]
    )
    return Problem(
        Message(
            N_(
                "A paged KV cache (vLLM) holds\n{numbers}\n"
                "All sequences start with the same prompt and then write their own new "
                "tokens. The full blocks of the prompt are shared; its last, partly "
                "filled block (if any) is copied into each sequence when it first "
                "writes. How many blocks are in use?"
            ),
            numbers=_listing(n),
        ),
        n,
        shared,
        BLOCKS,
        N_("⌊P/B⌋ shared blocks once, then for each sequence ⌈(P + new)/B⌉ − ⌊P/B⌋"),
    )


@question("09b_serving", N_("Speculative decoding's speed-up"))
def _speculative_speedup(rng: random.Random) -> Problem:
    from llmmath.speculative import speedup

    n = {
        "alpha": rng.choice([0.5, 0.6, 0.7, 0.75, 0.8, 0.85, 0.9, 0.95]),
        "gamma": rng.randrange(1, 9),
        "cost_ratio": rng.choice([0.02, 0.05, 0.1, 0.2, 0.3]),
    }
    return Problem(
        Message(
            N_(
                "A draft model proposes gamma tokens per target pass; each is accepted "
                "with probability alpha, independently, and a draft pass costs "
                "cost_ratio target passes:\n{numbers}\n"
                "By what factor is speculative decoding faster than plain decoding "
                "(expected tokens per target pass over the cost of one iteration)?"
            ),
            numbers=_listing(n),
        ),
        n,
        speedup(n["alpha"], n["gamma"], n["cost_ratio"]),
        TIMES,
        N_(
            "(1 − α^(γ+1)) / (1 − α) tokens per pass, at a cost of γ·c + 1 target "
            "passes"
        ),
        tolerance=1e-6,
    )

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

QUESTION_BANK_VERSION = (
    1  # part of every seed: changing a question changes everyone's numbers
)


@dataclass(frozen=True)
class Problem:
    """One question with one student's numbers.

    ``text``: the question as printed; ``numbers``: the drawn inputs by name (HF config
    names where there is one); ``answer``: the expected answer (an ``int``, or a
    ``float`` checked to ``tolerance``, a relative tolerance); ``unit``: what the answer
    counts (parameters, bytes, FLOPs, tokens); ``hint``: printed with a wrong answer,
    never the answer itself."""

    text: str
    numbers: dict[str, object]
    answer: int | float
    unit: str
    hint: str
    tolerance: float = 0.0

    @property
    def answer_text(self) -> str:
        """The answer with its unit, e.g. ``'7,680 bytes'``; a float to 10 significant
        digits, far finer than any tolerance the checks use, so a teacher reads the
        value that is checked (``'4,080,185.13 tokens'``)."""
        if isinstance(self.answer, int):
            return f"{self.answer:,} {self.unit}"
        return f"{self.answer:,.10g} {self.unit}"


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


LLAMA_STYLE = (
    "a Llama-style decoder: RMSNorm before attention and before the FFN plus a final "
    "one, a SwiGLU FFN, RoPE (no position weights), no biases"
)


# --- 1. Counting parameters -----------------------------------------------------------


@question("01_parameters", "Every parameter of a Llama-style model")
def _total_params(rng: random.Random) -> Problem:
    n = _llama_shape(rng)
    return Problem(
        f"Take {LLAMA_STYLE}, with an untied LM head and\n{_listing(n)}\n"
        "How many parameters does it have? Give the exact integer.",
        n,
        count_params(_cfg(n)).total,
        "parameters",
        "add the embedding, L blocks (attention, FFN, two norms), the final norm and "
        "the LM head; "
        "K and V have n_kv·d_h output features, not H",
    )


@question("01_parameters", "What multi-head attention would add")
def _mha_extra(rng: random.Random) -> Problem:
    n = _llama_shape(rng)
    gqa = _cfg(n)
    mha = gqa.replace(num_key_value_heads=gqa.num_attention_heads)
    return Problem(
        f"The same kind of model as in question 1, with\n{_listing(n)}\n"
        "How many parameters would it gain with multi-head attention "
        "(num_key_value_heads = "
        "num_attention_heads), all else equal?",
        n,
        count_params(mha).total - count_params(gqa).total,
        "parameters",
        "only W_K and W_V change: each goes from H × n_kv·d_h to H × H, in every layer",
    )


# --- 2. Embeddings --------------------------------------------------------------------


@question("02_embeddings", "What tying saves")
def _tying_bytes(rng: random.Random) -> Problem:
    n = _llama_shape(rng)
    dtype, size = rng.choice([("bf16", 2), ("fp32", 4)])
    untied = _cfg(n)
    saved = (
        count_params(untied).total
        - count_params(untied.replace(tie_word_embeddings=True)).total
    )
    return Problem(
        f"A Llama-style model with an untied LM head has\n{_listing(n)}\n"
        f"How many bytes of {dtype} weights ({size} bytes each) does tying the LM head "
        "to the "
        "token embedding save?",
        {**n, "dtype": dtype},
        saved * size,
        "bytes",
        "tying removes one V × H matrix; multiply by the bytes per number",
    )


@question("02_embeddings", "Learned positions")
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
        f"A GPT-2-style model (learned absolute positions, LM head tied to the token "
        f"embedding) has\n{_listing(n)}\n"
        "How many parameters do its token and position embeddings hold together?",
        n,
        count_params(cfg).embedding,
        "parameters",
        "one row of H numbers per token of the vocabulary and one per position",
    )


# --- 3. Attention ---------------------------------------------------------------------


def _attention_per_layer(cfg: ModelConfig) -> int:
    return sum(t.numel for t in count_params(cfg).tensors if t.group == "attention")


@question("03_attention", "One layer's attention")
def _attention_layer(rng: random.Random) -> Problem:
    n = _llama_fields(rng, "hidden_size", "num_attention_heads", "num_key_value_heads")
    return Problem(
        f"A grouped-query attention layer without biases has\n{_listing(n)}\n"
        "(head_dim = hidden_size / num_attention_heads). How many parameters do its "
        "four "
        "projections W_Q, W_K, W_V, W_O hold?",
        n,
        _attention_per_layer(
            _cfg(n, vocab_size=1, intermediate_size=1, num_hidden_layers=1)
        ),
        "parameters",
        "W_Q and W_O are H × n_h·d_h; W_K and W_V are H × n_kv·d_h",
    )


@question("03_attention", "Qwen2's biases")
def _attention_bias(rng: random.Random) -> Problem:
    n = _llama_fields(rng, "hidden_size", "num_attention_heads", "num_key_value_heads")
    cfg = _cfg(n, vocab_size=1, intermediate_size=1, num_hidden_layers=1)
    return Problem(
        "Qwen2 adds biases to the Q, K and V projections (not to O). For a layer "
        "with\n"
        f"{_listing(n)}\nhow many parameters do those biases add to the layer?",
        n,
        _attention_per_layer(cfg.replace(qkv_bias=True)) - _attention_per_layer(cfg),
        "parameters",
        "one bias per output feature of W_Q, W_K and W_V",
    )


# --- 4. The FFN -----------------------------------------------------------------------


@question("04_ffn", "Meta's rule for intermediate_size")
def _llama_rule(rng: random.Random) -> Problem:
    from llmmath.ffn import llama_intermediate_size

    n = {
        "dim": 256 * rng.randrange(4, 33),
        "multiple_of": rng.choice([64, 256, 1024]),
        "ffn_dim_multiplier": rng.choice([None, 1.3, 1.5]),
    }
    return Problem(
        f"A Llama params.json gives\n{_listing(n)}\n"
        "What intermediate_size does Meta's rule give? (hidden = int(2·4·dim/3); times "
        "ffn_dim_multiplier when it is not None, then int; rounded up to a multiple of "
        "multiple_of.)",
        n,
        llama_intermediate_size(n["dim"], n["multiple_of"], n["ffn_dim_multiplier"]),
        "features",
        "follow the three steps in order, truncating with int() after each product",
    )


@question("04_ffn", "The FFN weights of a whole model")
def _ffn_params(rng: random.Random) -> Problem:
    n = _llama_fields(rng, "hidden_size", "intermediate_size", "num_hidden_layers")
    cfg = _cfg(n, vocab_size=1, num_attention_heads=1)
    return Problem(
        f"A model with SwiGLU FFNs without biases has\n{_listing(n)}\n"
        "How many parameters do the FFNs of all its layers hold together?",
        n,
        count_params(cfg).by_group()["ffn"],
        "parameters",
        "a gated FFN has three matrices (gate, up, down), each H × I",
    )


# --- 5. Norms -------------------------------------------------------------------------


@question("05_norms", "RMSNorm weights, with QK-norm")
def _rms_params(rng: random.Random) -> Problem:
    n = _llama_fields(rng, "hidden_size", "num_attention_heads", "num_hidden_layers")
    n["qk_norm"] = rng.choice([True, False])
    cfg = _cfg(n, vocab_size=1, intermediate_size=1)
    return Problem(
        "A Llama-style model (RMSNorm before attention and the FFN in every layer, "
        "plus a "
        f"final norm) has\n{_listing(n)}\n"
        "qk_norm = True means Qwen3's extra RMSNorm over each head's queries and keys "
        "(one "
        "weight vector of head_dim = hidden_size / num_attention_heads for Q and one "
        "for K, "
        "per layer). How many norm parameters does the model have?",
        n,
        count_params(cfg).by_group()["norm"],
        "parameters",
        "RMSNorm has a scale and no shift: 2L + 1 vectors of H, plus 2L of d_h with "
        "QK-norm",
    )


@question("05_norms", "LayerNorm weights")
def _ln_params(rng: random.Random) -> Problem:
    n = {
        "hidden_size": 64 * rng.randrange(8, 33),
        "num_hidden_layers": rng.randrange(4, 49),
    }
    cfg = _gpt2(n["hidden_size"], num_hidden_layers=n["num_hidden_layers"])
    return Problem(
        "A GPT-2-style model (LayerNorm before attention and the MLP, plus a final "
        "one) has\n"
        f"{_listing(n)}\nHow many parameters do its LayerNorms hold?",
        n,
        count_params(cfg).by_group()["norm"],
        "parameters",
        "LayerNorm has a scale and a shift, each of H numbers",
    )


# --- 6. RoPE --------------------------------------------------------------------------


def _wavelengths(head_dim: int, theta: float) -> list[float]:
    from llmmath.rope import rope_wavelengths

    return [float(x) for x in rope_wavelengths(head_dim, theta)]


@question("06_rope", "The slowest pair")
def _slowest(rng: random.Random) -> Problem:
    n = {
        "head_dim": rng.choice([64, 96, 128, 256]),
        "rope_theta": rng.choice([10000.0, 500000.0, 1000000.0]),
    }
    return Problem(
        f"RoPE with\n{_listing(n)}\n"
        "rotates pair i (i = 0 … head_dim/2 − 1) by the angle m·theta_i at position m, "
        "with "
        "theta_i = rope_theta^(−2i/head_dim). How many tokens long is the wavelength "
        "of the "
        "slowest pair? (relative tolerance 1e-4)",
        n,
        _wavelengths(n["head_dim"], n["rope_theta"])[-1],
        "tokens",
        "a pair turns once in 2π/theta_i tokens; the slowest pair is the last one",
        tolerance=1e-4,
    )


@question("06_rope", "Pairs that turn within the context")
def _turning_pairs(rng: random.Random) -> Problem:
    n = {
        "head_dim": rng.choice([64, 128]),
        "rope_theta": rng.choice([10000.0, 500000.0, 1000000.0]),
        "max_position_embeddings": rng.choice([2048, 4096, 8192, 32768, 131072]),
    }
    lam = _wavelengths(n["head_dim"], n["rope_theta"])
    return Problem(
        f"RoPE with\n{_listing(n)}\n"
        "How many of the head_dim/2 pairs complete at least one full turn within "
        "max_position_embeddings tokens (wavelength ≤ max_position_embeddings)?",
        n,
        sum(1 for x in lam if x <= n["max_position_embeddings"]),
        "pairs",
        "compute each pair's wavelength 2π·rope_theta^(2i/head_dim) and count",
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


@question("07_kv_cache", "One token's cache")
def _kv_per_token(rng: random.Random) -> Problem:
    from llmmath.kvcache import kv_cache_bytes_per_token

    n = _kv_shape(rng)
    dtype, size = rng.choice([("bf16", 2), ("fp32", 4), ("fp8", 1)])
    cfg = _cfg(n, vocab_size=1, intermediate_size=1)
    return Problem(
        f"A decoder with grouped-query attention has\n{_listing(n)}\n"
        "(head_dim = hidden_size / num_attention_heads). How many bytes does one more "
        "token add "
        f"to the KV cache of one sequence in {dtype} ({size} bytes per number)?",
        {**n, "dtype": dtype},
        kv_cache_bytes_per_token(cfg, dtype),
        "bytes",
        "keys and values, in every layer, for each KV head (not each query head)",
    )


@question("07_kv_cache", "A batch of sequences")
def _kv_batch(rng: random.Random) -> Problem:
    from llmmath.kvcache import kv_cache_bytes

    n = _kv_shape(rng)
    n |= {
        "batch": rng.choice([1, 4, 8, 16, 32, 64]),
        "seq_len": rng.choice([1024, 2048, 4096, 8192]),
    }
    cfg = _cfg(n, vocab_size=1, intermediate_size=1)
    return Problem(
        f"The same kind of model, with\n{_listing(n)}\n"
        "How many bytes does the bf16 KV cache of batch sequences of seq_len tokens "
        "take?",
        n,
        kv_cache_bytes(cfg, n["batch"], n["seq_len"], "bf16"),
        "bytes",
        "2 · L · batch · seq_len · n_kv · d_h · 2 bytes",
    )


# --- 8. FLOPs -------------------------------------------------------------------------


@question("08_flops", "Forward FLOPs per token, all pairs")
def _forward_full(rng: random.Random) -> Problem:
    from llmmath.flops import forward_flops_per_token

    n = _llama_shape(rng)
    n["seq_len"] = rng.choice([512, 1024, 2048, 4096])
    cfg = _cfg(n)
    return Problem(
        f"A Llama-style model with an untied LM head has\n{_listing(n)}\n"
        "Count its forward FLOPs per token on a seq_len-token sequence the book's way: "
        "2 FLOPs "
        "per weight of every matmul (attention projections, FFN, LM head; the "
        "embedding lookup "
        "is free; norms, activations and softmax are not counted) plus QKᵀ and AV with "
        "every "
        "token against all seq_len keys (4·L·seq_len·n_h·d_h).",
        n,
        int(forward_flops_per_token(cfg, n["seq_len"], "full").total),
        "FLOPs",
        "2 × (attention projection weights + FFN weights) per layer, + 2·V·H for the "
        "head, "
        "+ the attention term",
    )


@question("08_flops", "Causal attention")
def _causal_attention(rng: random.Random) -> Problem:
    from llmmath.flops import forward_flops_per_token

    n = _llama_fields(rng, "hidden_size", "num_attention_heads", "num_hidden_layers")
    n["seq_len"] = rng.choice([1024, 2048, 4096, 8192])
    f = forward_flops_per_token(
        _cfg(n, vocab_size=1, intermediate_size=1), n["seq_len"], "causal"
    )
    return Problem(
        f"A decoder with\n{_listing(n)}\n"
        "reads a seq_len-token sequence with a causal mask: token i (1-based) attends "
        "to i keys. "
        "Averaged over the seq_len positions, how many FLOPs per token do QKᵀ and AV "
        "cost "
        "(2 FLOPs per multiply-add, all layers and heads)?",
        n,
        int(f.attention),
        "FLOPs",
        "token i costs 4·L·n_h·d_h·i; average i over 1 … seq_len",
    )


# --- 9. Memory ------------------------------------------------------------------------


@question("09_memory", "Training state")
def _training_state(rng: random.Random) -> Problem:
    from llmmath.memory import training_state_bytes

    n = _llama_shape(rng)
    return Problem(
        f"A Llama-style model with an untied LM head has\n{_listing(n)}\n"
        "How many bytes of training state does mixed-precision Adam keep for it (bf16 "
        "weights "
        "and gradients, fp32 master weights and two fp32 moments: 16 bytes per "
        "parameter), "
        "activations aside?",
        n,
        sum(training_state_bytes(_cfg(n)).values()),
        "bytes",
        "count the parameters first, then 2 + 2 + 4 + 4 + 4 bytes each",
    )


@question("09_memory", "GPUs for serving")
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
        f"Serve a Llama-style model (untied LM head) with\n{_listing(n)}\n"
        "in bf16: weights plus the KV cache of batch sequences of seq_len tokens. How "
        "many GPUs "
        "of gpu_gb GB (1 GB = 10^9 bytes) does that take, counting bytes only (no "
        "activations, "
        "no fragmentation)?",
        n,
        -(-need // (n["gpu_gb"] * GB)),
        "GPUs",
        "add 2 bytes per parameter and the cache, divide by gpu_gb·10^9 and round up",
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


@question("10_llama", "Grouped-query attention for an older LLaMA: the cache")
def _llama_gqa_cache(rng: random.Random) -> Problem:
    from llmmath import presets
    from llmmath.kvcache import kv_cache_bytes_per_token

    name, cfg, kv = _older_llama(rng)
    saved = kv_cache_bytes_per_token(cfg) - kv_cache_bytes_per_token(
        cfg.replace(num_key_value_heads=kv)
    )
    return Problem(
        f"Give {presets.get(name).title} (preset {name!r}) grouped-query attention "
        "with "
        f"num_key_value_heads = {kv} and change nothing else. How many bytes per token "
        "does its "
        "bf16 KV cache save?",
        {"preset": name, "num_key_value_heads": kv},
        saved,
        "bytes",
        "look the preset's L, n_h and d_h up (presets.load); the cache keeps n_kv "
        "heads, not n_h",
    )


@question("10_llama", "Grouped-query attention for an older LLaMA: the weights")
def _llama_gqa_params(rng: random.Random) -> Problem:
    from llmmath import presets

    name, cfg, kv = _older_llama(rng)
    lost = (
        count_params(cfg).total
        - count_params(cfg.replace(num_key_value_heads=kv)).total
    )
    return Problem(
        f"Give {presets.get(name).title} (preset {name!r}) num_key_value_heads = {kv} "
        "and change "
        "nothing else. How many parameters does it lose?",
        {"preset": name, "num_key_value_heads": kv},
        lost,
        "parameters",
        "W_K and W_V shrink from H × H to H × n_kv·d_h in every layer",
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


@question("11_minimind", "MiniMind's FFN rule")
def _minimind_rule(rng: random.Random) -> Problem:
    from llmmath.ffn import minimind_intermediate_size

    n = {"hidden_size": 64 * rng.randrange(6, 33)}
    return Problem(
        "MiniMind sizes its FFN as int(hidden_size · 8/3) rounded up to a multiple of "
        "64. For\n"
        f"{_listing(n)}\nwhat is intermediate_size?",
        n,
        minimind_intermediate_size(n["hidden_size"]),
        "features",
        "truncate first, then round up to the next multiple of 64 (a multiple stays as "
        "it is)",
    )


@question("11_minimind", "A MiniMind-shaped model")
def _minimind_total(rng: random.Random) -> Problem:
    n = _minimind_shape(rng)
    return Problem(
        "A MiniMind-style model (Llama-style blocks, LM head tied to the embedding) "
        "has\n"
        f"{_listing(n)}\nHow many parameters does it have?",
        n,
        count_params(_cfg(n, tie_word_embeddings=True)).total,
        "parameters",
        "as for a Llama model, but the V × H matrix counts once",
    )


# --- 12. Mixture of experts -----------------------------------------------------------


def _moe_shape(rng: random.Random) -> dict[str, int]:
    n = _llama_shape(rng)
    experts = rng.choice([4, 8, 16, 32])
    return n | {
        "num_local_experts": experts,
        "num_experts_per_tok": rng.choice([k for k in (1, 2, 4) if k < experts]),
    }


_MOE_TEXT = (
    "A Mixtral-style mixture of experts (Llama-style blocks whose FFN is "
    "num_local_experts "
    "SwiGLU experts, each H × I × 3, and a router, a linear layer from H to "
    "num_local_experts without bias; untied LM head) has"
)


@question("12_moe", "All the experts")
def _moe_total(rng: random.Random) -> Problem:
    n = _moe_shape(rng)
    return Problem(
        f"{_MOE_TEXT}\n{_listing(n)}\nHow many parameters does it have in all?",
        n,
        count_params(_cfg(n, model_type="mixtral")).total,
        "parameters",
        "every expert counts in the total, and each layer has a router of H·E weights",
    )


@question("12_moe", "What one token uses")
def _moe_active(rng: random.Random) -> Problem:
    n = _moe_shape(rng)
    return Problem(
        f"{_MOE_TEXT}\n{_listing(n)}\n"
        "The router sends each token to num_experts_per_tok experts. How many "
        "parameters does "
        "one token use (the total less the experts it is not routed to)?",
        n,
        count_params(_cfg(n, model_type="mixtral")).active,
        "parameters",
        "subtract (E − k) experts of 3·H·I in every layer; the router and attention "
        "stay",
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


@question("13_zoo", "Two caches side by side")
def _zoo_kv(rng: random.Random) -> Problem:
    from llmmath import presets
    from llmmath.kvcache import kv_cache_bytes_per_token

    a, b = rng.sample(_ZOO, 2)
    diff = kv_cache_bytes_per_token(presets.load(a)) - kv_cache_bytes_per_token(
        presets.load(b)
    )
    return Problem(
        f"How many more bytes per token does the bf16 KV cache of preset {a!r} take "
        "than that of "
        f"preset {b!r}? (Negative if it takes fewer.)",
        {"preset_a": a, "preset_b": b},
        diff,
        "bytes",
        "2 · L · n_kv · d_h · 2 bytes for each; d_h is head_dim when the config gives "
        "it",
    )


@question("13_zoo", "Non-embedding parameters")
def _zoo_non_embedding(rng: random.Random) -> Problem:
    from llmmath import presets

    name = rng.choice(_ZOO)
    return Problem(
        f"How many non-embedding parameters does preset {name!r} have, in the book's "
        "convention "
        "(the total less the token and position embeddings and an untied LM head)?",
        {"preset": name},
        count_params(presets.load(name)).non_embedding,
        "parameters",
        "count_params(...).total, then subtract V·H (twice if untied) and any position "
        "table",
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


@question("07b_latent_attention", "The latent cache")
def _mla_latent(rng: random.Random) -> Problem:
    from llmmath.kvcache import kv_cache_bytes_per_token

    n = _mla_shape(rng)
    dtype, size = rng.choice([("bf16", 2), ("fp32", 4), ("fp8", 1)])
    return Problem(
        f"A decoder with multi-head latent attention (DeepSeek-V2/V3) has\n"
        f"{_listing(n)}\nIt caches the latent and the shared rotary key. How many "
        f"bytes does one more token add to the cache of one sequence in {dtype} "
        f"({size} bytes per number)?",
        {**n, "dtype": dtype},
        kv_cache_bytes_per_token(_mla_cfg(n), dtype),
        "bytes",
        "per layer kv_lora_rank + qk_rope_head_dim numbers; the heads do not multiply",
    )


@question("07b_latent_attention", "What expanding costs")
def _mla_expanded(rng: random.Random) -> Problem:
    from llmmath.kvcache import kv_cache_bytes_per_token

    n = _mla_shape(rng)
    cfg = _mla_cfg(n)
    extra = kv_cache_bytes_per_token(cfg, "bf16", "expanded") - (
        kv_cache_bytes_per_token(cfg, "bf16", "latent")
    )
    return Problem(
        f"The same kind of model, with\n{_listing(n)}\nA naive implementation caches "
        "each head's key (qk_nope_head_dim + qk_rope_head_dim numbers) and value "
        "(v_head_dim) instead of the latent. How many more bytes per token does its "
        "bf16 cache take than the latent one?",
        n,
        extra,
        "bytes",
        "expanded: n_h · (d_n + d_r + d_v) per layer; latent: d_c + d_r; times L and 2 "
        "bytes",
    )


# --- 9c. Many GPUs --------------------------------------------------------------------


@question("09c_many_gpus", "ZeRO: model state per GPU")
def _zero_state(rng: random.Random) -> Problem:
    from llmmath.parallel import zero_model_state_bytes

    n = _llama_shape(rng)
    n |= {"gpus": rng.choice([8, 16, 32, 64, 128, 256]), "zero": rng.choice([1, 2, 3])}
    psi = count_params(_cfg(n)).total
    return Problem(
        f"A Llama-style model with an untied LM head has\n{_listing(n)}\n"
        "It is trained with mixed-precision Adam (bf16 weights and gradients, 12 bytes "
        "of fp32 optimizer state per parameter) on gpus data-parallel GPUs with ZeRO "
        "stage zero. How many bytes of model state does each GPU hold? A partition "
        "holds ⌈Ψ/gpus⌉ parameters (Ψ the parameter count).",
        n,
        sum(zero_model_state_bytes(psi, n["gpus"], n["zero"]).values()),
        "bytes",
        "stage 1 partitions the 12 optimizer bytes, stage 2 also the 2 gradient bytes, "
        "stage 3 also the 2 weight bytes; the rest stays whole on every GPU",
    )


@question("09c_many_gpus", "Tensor parallelism: parameters per GPU")
def _tp_params(rng: random.Random) -> Problem:
    from llmmath.parallel import tp_params_per_rank

    n = _llama_shape(rng)
    n["num_key_value_heads"] = max(n["num_key_value_heads"], 2)
    n["tp"] = rng.choice([t for t in (2, 4, 8) if n["num_key_value_heads"] % t == 0])
    return Problem(
        f"A Llama-style model with an untied LM head has\n{_listing(n)}\n"
        "It is split over tp GPUs with Megatron-LM's tensor parallelism: q, k, v, gate "
        "and up projections by column, o and down by row, the embedding and the LM "
        "head by vocabulary in chunks of ⌈V/tp⌉ rows, the norms replicated. How many "
        "parameters does the first GPU (rank 0) hold?",
        n,
        tp_params_per_rank(_cfg(n), n["tp"]),
        "parameters",
        "every block matrix ÷ tp, plus the 2L + 1 norms whole, plus two vocabulary "
        "chunks of ⌈V/tp⌉·H",
    )


# --- 9b. Serving ----------------------------------------------------------------------


@question("09b_serving", "An int4 checkpoint")
def _int4_checkpoint(rng: random.Random) -> Problem:
    from llmmath.quantization import WeightFormat, quantized_bytes

    n = _llama_shape(rng)
    n["group_size"] = rng.choice([32, 64, 128])
    zero = rng.choice([None, "int4", "bf16"])
    n["zero_point"] = zero or "none"
    fmt = WeightFormat("int4", 4, n["group_size"], "bf16", zero)
    return Problem(
        f"A Llama-style model with an untied LM head has\n{_listing(n)}\n"
        "Its block matrices (q, k, v, o, gate, up, down) are stored as packed int4 "
        "values, two per byte, with one bf16 scale and one zero point (of the type "
        "zero_point; none: no zero point) per group_size consecutive weights of a row; "
        "the embedding, the LM head and the norms stay in bf16. How many bytes is the "
        "checkpoint?",
        n,
        sum(quantized_bytes(_cfg(n), fmt).values()),
        "bytes",
        "block weights × 4/8 + (scale + zero-point bytes) per group + 2 bytes for "
        "every other parameter; a row of w weights has w / group_size groups here",
    )


@question("09b_serving", "Blocks with a shared prompt")
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
        f"A paged KV cache (vLLM) holds\n{_listing(n)}\n"
        "All sequences start with the same prompt and then write their own new "
        "tokens. The full blocks of the prompt are shared; its last, partly filled "
        "block (if any) is copied into each sequence when it first writes. How many "
        "blocks are in use?",
        n,
        shared,
        "blocks",
        "⌊P/B⌋ shared blocks once, then for each sequence ⌈(P + new)/B⌉ − ⌊P/B⌋",
    )


@question("09b_serving", "Speculative decoding's speed-up")
def _speculative_speedup(rng: random.Random) -> Problem:
    from llmmath.speculative import speedup

    n = {
        "alpha": rng.choice([0.5, 0.6, 0.7, 0.75, 0.8, 0.85, 0.9, 0.95]),
        "gamma": rng.randrange(1, 9),
        "cost_ratio": rng.choice([0.02, 0.05, 0.1, 0.2, 0.3]),
    }
    return Problem(
        f"A draft model proposes gamma tokens per target pass; each is accepted with "
        f"probability alpha, independently, and a draft pass costs cost_ratio target "
        f"passes:\n{_listing(n)}\n"
        "By what factor is speculative decoding faster than plain decoding (expected "
        "tokens per target pass over the cost of one iteration)?",
        n,
        speedup(n["alpha"], n["gamma"], n["cost_ratio"]),
        "times",
        "(1 − α^(γ+1)) / (1 − α) tokens per pass, at a cost of γ·c + 1 target passes",
        tolerance=1e-6,
    )

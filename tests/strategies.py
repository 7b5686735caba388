"""Hypothesis strategies: random valid small Hugging Face config.json dicts of every
model type."""

from hypothesis import strategies as st


@st.composite
def rope_config(draw, model_type: str) -> dict:
    n_h = draw(st.integers(1, 8))
    n_kv = draw(st.sampled_from([d for d in range(1, n_h + 1) if n_h % d == 0]))
    d_h = draw(st.integers(1, 8)) * 2  # RoPE rotates pairs: even head_dim
    explicit_head_dim = draw(st.booleans())  # head_dim need not be H / n_h
    hidden = draw(st.integers(1, 24)) if explicit_head_dim else n_h * d_h
    raw = {
        "model_type": model_type,
        "vocab_size": draw(st.integers(1, 97)),
        "hidden_size": hidden,
        "intermediate_size": draw(st.integers(1, 48)),
        "num_hidden_layers": draw(st.integers(1, 3)),
        "num_attention_heads": n_h,
        "tie_word_embeddings": draw(st.booleans()),
    }
    if explicit_head_dim or model_type == "qwen3":
        raw["head_dim"] = d_h
    if n_kv != n_h or draw(st.booleans()):
        raw["num_key_value_heads"] = n_kv
    if model_type in ("llama", "qwen3"):
        raw["attention_bias"] = draw(st.booleans())
    if model_type == "llama":
        raw["mlp_bias"] = draw(st.booleans())
    return raw


@st.composite
def gpt2_config(draw) -> dict:
    n_head = draw(st.integers(1, 6))
    raw = {
        "model_type": "gpt2",
        "vocab_size": draw(st.integers(1, 97)),
        "n_embd": n_head * draw(st.integers(1, 8)),
        "n_layer": draw(st.integers(1, 3)),
        "n_head": n_head,
        "n_positions": draw(st.integers(1, 32)),
    }
    if draw(st.booleans()):
        raw["n_inner"] = draw(st.integers(1, 48))
    if draw(st.booleans()):
        raw["tie_word_embeddings"] = draw(st.booleans())
    return raw


@st.composite
def mixtral_config(draw) -> dict:
    raw = draw(rope_config("mistral"))
    experts = draw(st.integers(1, 5))
    return {
        **raw,
        "model_type": "mixtral",
        "num_local_experts": experts,
        "num_experts_per_tok": draw(st.integers(1, experts)),
    }


@st.composite
def minimind_config(draw) -> dict:
    n_h = draw(st.integers(1, 6))
    raw = {
        "model_type": "minimind",
        "vocab_size": draw(st.integers(1, 97)),
        "hidden_size": n_h * 2 * draw(st.integers(1, 6)),
        "num_hidden_layers": draw(st.integers(1, 3)),
        "num_attention_heads": n_h,
        "num_key_value_heads": draw(
            st.sampled_from([d for d in range(1, n_h + 1) if n_h % d == 0])
        ),
    }
    if draw(st.booleans()):
        raw["intermediate_size"] = draw(st.integers(1, 48))
    if draw(st.booleans()):
        experts = draw(st.integers(1, 4))
        raw.update(
            use_moe=True,
            n_routed_experts=experts,
            num_experts_per_tok=draw(st.integers(1, experts)),
            n_shared_experts=draw(st.integers(0, 2)),
        )
    return raw


def any_config():
    """A random valid config.json dict of any supported model type."""
    return st.one_of(
        *(rope_config(t) for t in ("llama", "mistral", "qwen2", "qwen3")),
        gpt2_config(),
        mixtral_config(),
        minimind_config(),
    )

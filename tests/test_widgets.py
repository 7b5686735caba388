"""The parameter explorer: a thin view over count_params."""

from llmmath import count_params, presets
from llmmath.widgets import ParamExplorer, divisors


def test_divisors():
    assert divisors(12) == [1, 2, 3, 4, 6, 12]
    assert divisors(1) == [1]


def test_initial_state_is_the_preset():
    explorer = ParamExplorer("llama-2-7b")
    assert explorer.config == presets.load("llama-2-7b")
    assert f"{count_params(explorer.config).total:,}" in explorer.table.value
    assert list(explorer.n_kv.options) == divisors(32)


def test_only_divisors_of_n_h_are_offered():
    explorer = ParamExplorer("mistral-7b-v0.1")
    explorer.sizes["num_attention_heads"].value = 12
    explorer.sizes["hidden_size"].value = 4092
    assert list(explorer.n_kv.options) == divisors(12)
    assert (
        explorer.config.num_attention_heads % explorer.config.num_key_value_heads == 0
    )


def test_invalid_combination_shows_message_not_traceback():
    explorer = ParamExplorer("llama-2-7b")
    explorer.sizes["hidden_size"].value = 4000 + 2  # not divisible by 32 heads
    assert explorer.config is None
    assert "must be divisible by num_attention_heads" in explorer.message.value


def test_edits_recount():
    explorer = ParamExplorer("llama-2-7b")
    explorer.n_kv.value = 8
    explorer.tie.value = True
    expected = presets.load("llama-2-7b").replace(
        num_key_value_heads=8, tie_word_embeddings=True
    )
    assert explorer.config == expected
    assert f"{count_params(expected).total:,}" in explorer.table.value


def test_switching_preset_keeps_explicit_head_dim():
    explorer = ParamExplorer("llama-2-7b")
    explorer.preset.value = "qwen3-0.6b"
    assert explorer.config == presets.load("qwen3-0.6b")
    assert explorer.config.head_dim == 128 != 1024 // 16


def test_attention_explorer_numbers_come_from_llmmath():
    from llmmath.flops import attention_flops
    from llmmath.kvcache import kv_cache_bytes_per_token
    from llmmath.widgets import AttentionExplorer

    explorer = AttentionExplorer("qwen2.5-3b", seq_len=1000)
    cfg = presets.load("qwen2.5-3b")
    assert explorer.config == cfg
    assert f"{count_params(cfg).by_group()['attention']:,}" in explorer.output.value
    assert f"{kv_cache_bytes_per_token(cfg):,}" in explorer.output.value
    assert (
        f"{attention_flops(cfg, 1000, causal=True).total // 1000:,}"
        in explorer.output.value
    )
    mha = cfg.replace(num_key_value_heads=16)  # the MHA twin column
    assert f"{kv_cache_bytes_per_token(mha):,}" in explorer.output.value
    explorer.heads.value = 8  # 2 divides 8: kept
    assert explorer.n_kv.value == 2 and list(explorer.n_kv.options) == divisors(8)
    assert explorer.config == cfg.replace(num_attention_heads=8)
    explorer.heads.value = 9  # 2 does not divide 9: back to MHA
    assert explorer.n_kv.value == 9 and explorer.config is None  # 2048 % 9 != 0
    assert "must be divisible" in explorer.output.value


def test_serving_explorer_matches_serving_fit():
    from llmmath.memory import serving_fit
    from llmmath.widgets import ServingExplorer

    explorer = ServingExplorer("llama-3-8b", batch=8, seq_len=8192, gpu_gb=80)
    assert explorer.fit == serving_fit(presets.load("llama-3-8b"), 80 * 10**9, 8, 8192)
    explorer.cache_dtype.value = "int4"
    assert explorer.fit == serving_fit(
        presets.load("llama-3-8b"), 80 * 10**9, 8, 8192, cache_dtype="int4"
    )
    assert f"{explorer.fit.max_batch:,}" in explorer.output.value


def test_rotary_explorer_numbers_come_from_llmmath_rope():
    import math

    from llmmath.rope import rope_cos_sin, rope_inv_freq
    from llmmath.widgets import RotaryExplorer

    explorer = RotaryExplorer(position=100, pair=8, base=1e4, head_dim=128)
    v = explorer.numbers()
    assert v["theta"] == float(rope_inv_freq(128, 1e4)[8])
    cos, sin = rope_cos_sin(128, 1, 1e4, offset=100)
    assert (v["cos"], v["sin"]) == (float(cos[0, 8]), float(sin[0, 8]))
    assert math.isclose(v["wavelength"], 2 * math.pi / v["theta"])
    explorer.head_dim.value = 64  # pairs shrink to 32: the slider follows
    assert explorer.pair.max == 31
    assert "<svg" in explorer.output.value

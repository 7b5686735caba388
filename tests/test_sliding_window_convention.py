"""Which W a sliding-window layer counts (issue 24, item 16).

llmmath counts W cached tokens per sliding layer: what exists during the attention
call of a new token (its own key and value and the W − 1 before it; Mistral's rolling
buffer). transformers keeps W − 1 between two forward calls
(``transformers.cache_utils.DynamicSlidingWindowLayer.update``) and concatenates the
new token inside the call. ``between_steps=True`` (``kv-cache --between-steps``)
counts that. Both are checked here against transformers itself; the Gemma-2-2B
figures are computed by hand from its config.json (26 layers, every other one sliding
with W = 4096, 4 key/value heads of 256).
"""

import json

import pytest

from llmmath import ModelConfig, presets
from llmmath.cli import main
from llmmath.kvcache import cached_tokens, cached_tokens_per_layer, kv_cache_bytes

TINY = ModelConfig(64, 16, 32, 2, 4, 2, sliding_window=4)  # V, H, I, L, n_h, n_kv


def test_layer_keeps_w_minus_one_between_calls_and_attends_over_w():
    """transformers' sliding layer, driven directly: after a 7-token prefill it keeps
    W − 1 = 3 tokens; the next token's call returns W = 4 keys and values."""
    torch = pytest.importorskip("torch")
    cache_utils = pytest.importorskip("transformers.cache_utils")
    w, batch, heads, d_h = 4, 2, 2, 8
    layer = cache_utils.DynamicSlidingWindowLayer(sliding_window=w)
    prefill = torch.zeros(batch, heads, 7, d_h)
    layer.update(prefill, prefill)
    assert layer.keys.shape[-2] == w - 1 == cached_tokens(TINY, 7, between_steps=True)
    step = torch.zeros(batch, heads, 1, d_h)
    keys, values = layer.update(step, step)
    assert keys.shape[-2] == values.shape[-2] == w == cached_tokens(TINY, 8)
    assert layer.keys.shape[-2] == w - 1


@pytest.mark.parametrize("model_type", ["mistral", "gemma2"])
def test_transformers_prefill_cache_is_the_between_steps_count(model_type):
    """A whole transformers model: the cache after a prefill longer than W has the
    bytes of ``between_steps=True``, one token per sliding layer less than llmmath's
    default."""
    pytest.importorskip("transformers")
    from tests.test_transformers_oracle import ALL, cache_bytes, prefill

    raw = ALL[model_type]
    cfg = ModelConfig.from_hf_config(raw)
    batch, seq_len = 2, 7
    assert seq_len > cfg.sliding_window
    measured = cache_bytes(prefill(raw, batch, seq_len))
    between = kv_cache_bytes(cfg, batch, seq_len, "fp32", between_steps=True)
    during = kv_cache_bytes(cfg, batch, seq_len, "fp32")
    sliding = sum(cfg.window_of(i) is not None for i in range(cfg.num_hidden_layers))
    one = batch * 2 * cfg.num_key_value_heads * cfg.head_dim * 4  # a token, fp32
    assert measured == between == during - sliding * one


def test_gemma_2_2b_both_counts_by_hand():
    """Gemma-2-2B at 8192 tokens, bf16: 13 full layers keep 8192 tokens, 13 sliding
    layers 4096 (during the call) or 4095 (between steps); 2·4·256·2 = 4096 bytes a
    token and layer."""
    cfg = presets.load("gemma-2-2b")
    assert kv_cache_bytes(cfg, 1, 8192) == 13 * (8192 + 4096) * 4096 == 654_311_424
    between = kv_cache_bytes(cfg, 1, 8192, between_steps=True)
    assert between == 13 * (8192 + 4095) * 4096 == 654_258_176
    assert cached_tokens_per_layer(cfg, 8192, between_steps=True)[:2] == [4095, 8192]


def test_short_sequences_and_a_window_of_one():
    """Below W − 1 tokens both counts agree; a window of 1 keeps nothing between
    steps (the token's own key and value exist only during its call)."""
    assert kv_cache_bytes(TINY, 1, 3) == kv_cache_bytes(TINY, 1, 3, between_steps=True)
    one = TINY.replace(sliding_window=1)
    assert cached_tokens(one, 5) == 1
    assert cached_tokens(one, 5, between_steps=True) == 0


def test_cli_states_which_count_it_reports(capsys):
    """``kv-cache --json`` names its convention; ``--between-steps`` switches it."""
    assert main(["kv-cache", "mistral-7b-v0.1", "--seq-len", "8192", "--json"]) == 0
    during = json.loads(capsys.readouterr().out)
    assert during["sliding_window_tokens"] == "W (during the attention call)"
    assert during["cached_tokens"] == 4096 and during["bytes"] == 4096 * 131_072
    args = ["kv-cache", "mistral-7b-v0.1", "--seq-len", "8192", "--between-steps"]
    assert main([*args, "--json"]) == 0
    between = json.loads(capsys.readouterr().out)
    assert between["sliding_window_tokens"].startswith("W - 1 (between steps")
    assert between["cached_tokens"] == 4095 and between["bytes"] == 4095 * 131_072
    assert main(args) == 0
    assert "4,095 tokens kept, W - 1 (between steps" in capsys.readouterr().out
    assert main(["kv-cache", "llama-3-8b", "--seq-len", "10", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["sliding_window_tokens"] is None


def test_cli_help_documents_both_counts(capsys):
    try:
        main(["kv-cache", "--help"])
    except SystemExit:  # argparse's exit after printing the help
        pass
    text = " ".join(capsys.readouterr().out.split())
    assert "--between-steps" in text and "during the attention call" in text


def test_chapter_7_says_both_counts():
    """Chapter 7 glues both Gemma-2-2B counts (by hand above) and names both moments."""
    from pathlib import Path

    path = Path(__file__).resolve().parents[1] / "chapters" / "07_kv_cache.ipynb"
    cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
    glued = {
        o["metadata"]["scrapbook"]["name"]: o["data"][
            "application/papermill.record/text/plain"
        ].strip("'")
        for c in cells
        for o in c.get("outputs", [])
        if "scrapbook" in o.get("metadata", {})
    }
    assert (glued["g2_during"], glued["g2_between"]) == ("654,311,424", "654,258,176")
    assert glued["g2_diff"] == f"{13 * 4096:,}" and glued["g2_sliding"] == "13"
    text = " ".join(
        " ".join(
            "".join(c["source"]) for c in cells if c["cell_type"] == "markdown"
        ).split()
    )
    assert "During the attention call of a new token the layer reads $W$" in text
    assert "transformers keeps only $W - 1$ between two forward calls" in text

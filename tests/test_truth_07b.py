"""Issue 24, chapter 7b (Multi-head latent attention): the claims fixed by the truth
pass, counted again here by hand from DeepSeek-V3's ``config.json`` and checked against
figures from outside the code under test.

- The report (arXiv:2412.19437, abstract and Sec. 4.2): 671B total, 37B activated.
- README_WEIGHTS.md of deepseek-ai/DeepSeek-V3, *Main Model Weights*: "Activation
  parameters: 36.7B (including 0.9B for Embedding and 0.9B for the output Head)";
  *MTP Modules*: "11.5B unique parameters, excluding the shared 0.9B Embedding and
  0.9B output Head", "Activation parameters: 2.4B (including the shared 0.9B Embedding
  and 0.9B output Head)".
- ChatGLM2-6B, ChatGLM3-6B and GLM-4-9B: ``multi_query_group_num: 2`` and
  ``kv_channels: 128`` in each model's ``config.json``.
- Qwen3-30B-A3B's ``config.json``: 48 layers, 4 key/value heads of 128.
"""

import inspect
import json
from fractions import Fraction
from itertools import combinations
from pathlib import Path

import pytest

from llmmath import count_params, presets
from llmmath.kvcache import attention_cache_values, kv_cache_bytes_per_token
from tests.notebook_outputs import glued

ROOT = Path(__file__).resolve().parents[1]
CHAPTER = ROOT / "chapters" / "07b_latent_attention.ipynb"
ERRATA = ROOT / "book" / "errata.ipynb"

# DeepSeek-V3's config.json, typed here from the release (not read from llmmath).
V, H, L, DENSE, I, I_E = 129280, 7168, 61, 3, 18432, 2048
N_H, D_Q, D_C, D_N, D_R, D_V = 128, 1536, 512, 128, 64, 128
E, K, SHARED = 256, 8, 1
MOE = L - DENSE

REPORT_ACTIVE_B = 37  # the report: "37B activated"
NOTES_ACTIVE_B = 36.7  # README_WEIGHTS.md, main model
NOTES_EMBED_B = NOTES_HEAD_B = 0.9
NOTES_MTP_UNIQUE_B, NOTES_MTP_ACTIVE_B = 11.5, 2.4

EMBED = HEAD = V * H
ATTENTION = {  # one layer's MLA tensors
    "q_a_proj": D_Q * H,
    "q_b_proj": N_H * (D_N + D_R) * D_Q,
    "kv_a_proj_with_mqa": (D_C + D_R) * H,
    "kv_b_proj": N_H * (D_N + D_V) * D_C,
    "o_proj": H * N_H * D_V,
}
LAYER_NORMS = 2 * H + D_Q + D_C  # input, post-attention, q_a and kv_a norms
EXPERT = 3 * H * I_E
ROUTER = E * H + E  # the gate's weights and e_score_correction_bias
MOE_BLOCK = sum(ATTENTION.values()) + LAYER_NORMS + ROUTER + (E + SHARED) * EXPERT

# What one token uses: every tensor but the 248 routed experts it is not sent to.
GROUPS = {
    "embedding": EMBED,
    "head": HEAD,
    "norms": L * LAYER_NORMS + H,
    "router": MOE * ROUTER,
    "dense layers' FFN": DENSE * 3 * H * I,
    **{name: L * n for name, n in ATTENTION.items()},
}
ACTIVE = (
    EMBED
    + HEAD
    + L * (sum(ATTENTION.values()) + LAYER_NORMS)
    + H
    + DENSE * 3 * H * I
    + MOE * (ROUTER + (K + SHARED) * EXPERT)
)


def markdown(path: Path) -> str:
    cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
    return "\n".join(
        "".join(c["source"]) for c in cells if c["cell_type"] == "markdown"
    )


def tenth(n: int | float) -> int:
    """``n`` in tenths of a billion, rounded as the release notes round."""
    return round(n / 1e8)


@pytest.fixture(scope="module")
def v3():
    return presets.load("deepseek-v3")


def test_item1_active_by_hand_equals_llmmath(v3):
    counts = count_params(v3)
    assert counts.active == ACTIVE == 37_552_297_472
    assert counts.by_group()["embedding"] == EMBED
    assert tenth(EMBED) == tenth(NOTES_EMBED_B * 1e9)  # the notes' "0.9B" each
    assert tenth(HEAD) == tenth(NOTES_HEAD_B * 1e9)


def test_item1_report_and_notes_against_the_exact_count():
    # The exact count rounds to 38B; 37B is the notes' 36.7B rounded, not it.
    assert round(ACTIVE / 1e9) == 38 != REPORT_ACTIVE_B
    assert round(NOTES_ACTIVE_B) == REPORT_ACTIVE_B
    # The notes' scope (embedding and head in) is the exact count's; it is 0.85B more.
    assert f"{(ACTIVE - NOTES_ACTIVE_B * 1e9) / 1e9:.2f}" == "0.85"
    # Without the embedding (the book's old reading): 36.6B, not the notes' 36.7B.
    assert tenth(ACTIVE - EMBED) == 366 != tenth(NOTES_ACTIVE_B * 1e9)


def test_item1_no_group_of_tensors_gives_36_7B():
    """No set of up to four of the groups the chapter names (embedding, head, norms,
    router, the dense layers' FFN, the five attention matrices) lands on 36.7B."""
    target = tenth(NOTES_ACTIVE_B * 1e9)
    for r in range(1, 5):
        for out in combinations(GROUPS, r):
            assert tenth(ACTIVE - sum(GROUPS[g] for g in out)) != target, out
    # One H x I_e matrix of one expert in each MoE layer does.
    assert tenth(ACTIVE - MOE * H * I_E) == target
    # The dense layers are 8 routed + 1 shared experts wide.
    assert I == (K + SHARED) * I_E


def test_item1_chapter_says_so():
    g = glued(CHAPTER)
    assert g["v3_active"] == f"{ACTIVE:,}"
    assert g["v3_active_round"] == "38"
    assert g["v3_notes_gap_b"] == "0.85"
    assert g["v3_active_no_embed_b"] == "36.6"
    assert g["v3_one_matrix"] == f"{MOE * H * I_E:,}"
    text = markdown(CHAPTER)
    assert "36.6B, which is the active count without" not in text
    assert "report rounds this" not in text
    assert "36.7B (including 0.9B for Embedding and 0.9B for the output Head)" in text
    assert "{cite:p}`deepseekai2024v3weights`" in text


def test_item9_mtp_notes_count_the_block_without_eh_proj(v3):
    eh_proj, norms = 2 * H * H, 3 * H  # enorm, hnorm, the module's output norm
    assert count_params(v3).mtp == MOE_BLOCK + eh_proj + norms == 11_610_068_224
    block_active = MOE_BLOCK - (E - K) * EXPERT + EMBED + HEAD
    # The notes' 11.5B and 2.4B are the block alone; with eh_proj they are not.
    assert tenth(MOE_BLOCK) == tenth(NOTES_MTP_UNIQUE_B * 1e9)
    assert tenth(block_active) == tenth(NOTES_MTP_ACTIVE_B * 1e9)
    assert tenth(MOE_BLOCK + eh_proj + norms) != tenth(NOTES_MTP_UNIQUE_B * 1e9)
    assert tenth(block_active + eh_proj + norms) != tenth(NOTES_MTP_ACTIVE_B * 1e9)
    g = glued(CHAPTER)
    assert g["v3_mtp"] == "11,610,068,224"
    assert g["v3_mtp_block"] == f"{MOE_BLOCK:,}" and g["v3_mtp_block_b"] == "11.5"
    assert g["v3_mtp_active_block_b"] == "2.4" and g["v3_mtp_active_b"] == "2.5"
    assert g["v3_mtp_eh"] == f"{eh_proj:,}"


def test_item2_v3_caches_less_per_token_than_qwen3_30b_a3b(v3):
    v3_bytes = L * (D_C + D_R) * 2  # bf16 latent and rotary key per layer
    q3_bytes = 48 * 2 * 4 * 128 * 2  # Qwen3-30B-A3B: K and V of 4 heads of 128
    assert kv_cache_bytes_per_token(v3) == v3_bytes == 70_272
    assert kv_cache_bytes_per_token(presets.load("qwen3-30b-a3b")) == q3_bytes == 98_304
    assert v3_bytes < q3_bytes and f"{v3_bytes / q3_bytes:.2f}" == "0.71"
    assert glued(CHAPTER)["ex_cache_ratio"] == "0.71"
    assert "only a little larger" not in markdown(CHAPTER)


def test_item8_glm_models_use_two_groups():
    glm_groups, glm_d_h = 2, 128  # multi_query_group_num, kv_channels
    mla = D_C + D_R
    same = Fraction(mla, 2 * glm_d_h)
    assert same == Fraction(9, 4) and glm_groups < same
    assert Fraction(mla, 2 * glm_groups * glm_d_h) == Fraction(9, 8)
    g = glued(CHAPTER)
    assert g["ex_v2_over_glm"] == "9/8" and g["ex_v2_over_glm_f"] == "1.125"
    text = markdown(CHAPTER)
    assert "fewer than any real GQA model uses" not in text
    assert "`multi_query_group_num: 2`" in text
    for key in (
        "thudm2023chatglm2config",
        "thudm2023chatglm3config",
        "thudm2024glm4config",
    ):
        assert key in text


def test_item10_gqa_row_assumes_groups_of_8(v3):
    values = attention_cache_values(v3)
    assert values["GQA"] == (N_H // 8) * (D_N + D_R + D_V)
    g = glued(CHAPTER)
    assert g["v3_gqa_n_kv"] == "16" and g["v3_gqa_group"] == "8"
    # Llama-3-70B: 64 heads, 8 key/value heads; Llama-3-8B: 32 and 8 (groups of 4)
    assert "Llama-3-70B" in g["v3_gqa_peers"] and "Llama-3-8B" not in g["v3_gqa_peers"]
    assert "{glue:text}`v3_gqa_n_kv`" in markdown(CHAPTER)


def test_errata_entries_for_items_1_and_2():
    text = markdown(ERRATA)
    book = text.index("(errata-book)=")
    assert book < text.index("(errata-book-1)=") < text.index("(errata-book-2)=")
    assert text.index("(errata-book-2)=") < text.index("(errata-approximations)=")
    g = glued(ERRATA)
    assert g["b_v3_active"] == f"{ACTIVE:,}" and g["b_v3_gap_b"] == "0.85"
    assert g["b_cache_ratio"] == "0.71"
    assert (g["b_v3_cache"], g["b_q3_cache"]) == ("70,272", "98,304")
    cell = "{glue:text}`b_v3_cache` B against {glue:text}`b_q3_cache` B per token"
    assert cell in text


def test_issue32_the_latent_cache_release_is_named():
    """Issue 32: chapter 7b says transformers' ``DeepseekV3Attention`` caches the
    latent "since release 5.15.0" (pull request #47761; the published 5.14.1 still
    updates the cache with expanded keys and values). The release pinned for the
    oracle tests is later, and its attention updates the cache with the latent."""
    from llmmath.kvcache import LATENT_CACHE_SINCE

    g = glued(CHAPTER)
    assert g["hf_latent_release"] == LATENT_CACHE_SINCE == "5.15.0"
    text = "".join(
        "".join(c["source"]) for c in json.loads(CHAPTER.read_text("utf-8"))["cells"]
    )
    assert "does since release {glue:text}`hf_latent_release`" in text
    assert "transformers 5's" not in text
    transformers = pytest.importorskip("transformers")
    from transformers.models.deepseek_v3 import modeling_deepseek_v3

    version = tuple(int(x) for x in transformers.__version__.split(".")[:3])
    assert version >= (5, 15, 0)
    source = inspect.getsource(modeling_deepseek_v3.DeepseekV3Attention.forward)
    assert "past_key_values.update(kv_nope, k_rot" in source

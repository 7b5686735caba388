"""`llmmath.parallel`: the closed forms of the papers, written here, against the code.

ZeRO's 4Ψ + 12Ψ/N, 2Ψ + 14Ψ/N and 16Ψ/N (Rajbhandari et al. 2020, Sec. 5), the ring
all-reduce's 2(N−1)/N, Megatron-LM's per-rank counts, Korthikanti et al.'s Table 2,
the 1F1B bubble, the all-to-all of expert parallelism. torch.distributed itself is
checked in tests/test_distributed.py."""

from fractions import Fraction

import pytest
from hypothesis import given
from hypothesis import strategies as st

from llmmath import count_params, presets
from llmmath.config import ConfigError, ModelConfig
from llmmath.parallel import (
    BYTES_PER_PARAMETER,
    Collective,
    activation_bytes_per_gpu,
    all_reduce_bytes,
    expert_all_to_all_payload,
    layouts,
    pipeline_bubble,
    plan,
    ring_attention_bytes,
    stage_params,
    tp_params_per_rank,
    zero_collectives,
    zero_model_state_bytes,
)

PSI = 7_000_000_000


@pytest.mark.parametrize("n", [1, 2, 8, 64, 1000])
def test_zero_stages_closed_forms(n):
    """Rajbhandari et al. 2020, Sec. 5 (K = 12 for mixed-precision Adam)."""
    state = {s: sum(zero_model_state_bytes(PSI, n, s).values()) for s in range(4)}
    assert state[0] == 16 * PSI == BYTES_PER_PARAMETER * PSI
    assert state[1] == 4 * PSI + 12 * PSI // n
    assert state[2] == 2 * PSI + 14 * PSI // n
    assert state[3] == 16 * PSI // n


@given(st.integers(1, 10**12), st.integers(1, 4096), st.sampled_from([0, 1, 2, 3]))
def test_zero_padding_never_loses_a_byte(params, n, stage):
    held = sum(zero_model_state_bytes(params, n, stage).values())
    assert 16 * params <= n * held or stage < 3
    assert held <= 16 * params + 16 * n


@pytest.mark.parametrize("n", [2, 8, 64])
def test_ring_all_reduce_and_zero_traffic(n):
    """2(N−1)/N of the gradient bytes; ZeRO 1 and 2 the same, ZeRO 3 1.5×."""
    grads = 2 * PSI
    assert all_reduce_bytes(grads, n) == 2 * (n - 1) * grads // n
    sent = {s: sum(c.sent for c in zero_collectives(PSI, n, s)) for s in range(4)}
    assert sent[0] == sent[1] == sent[2] == 2 * (n - 1) * grads // n
    assert 2 * sent[3] == 3 * sent[0]


def test_llama2_7b_tensor_parallel_by_hand():
    """Megatron-LM on Llama 2 7B, tp = 8: every matrix ÷ 8, the 32000-row vocabulary in
    4000-row pieces, the 2L + 1 norms whole."""
    cfg = presets.load("llama-2-7b")
    H, L, V, I = 4096, 32, 32000, 11008
    per_block = (4 * H * H + 3 * H * I) // 8 + 2 * H
    assert tp_params_per_rank(cfg, 8) == L * per_block + 2 * (V // 8) * H + H
    assert sum(tp_params_per_rank(cfg, 8, r) for r in range(8)) == (
        count_params(cfg).total + 7 * (2 * L + 1) * H
    )


def test_pipeline_stages_split_the_layers_and_the_ends():
    cfg = presets.load("llama-2-7b")
    stages = [stage_params(cfg, 1, 4, 1, s) for s in range(4)]
    layer = count_params(cfg).per_layer
    assert stages[1].total == stages[2].total == 8 * layer
    assert stages[0].total == 8 * layer + 32000 * 4096
    assert stages[3].total == 8 * layer + 32000 * 4096 + 4096
    assert sum(s.total for s in stages) == count_params(cfg).total


def test_tied_embedding_is_copied_to_the_last_stage():
    cfg = presets.load("qwen2.5-0.5b")  # tied
    one, two = stage_params(cfg, 1, 1), [stage_params(cfg, 1, 2, 1, s) for s in (0, 1)]
    V, H = cfg.vocab_size, cfg.hidden_size
    assert two[0].total + two[1].total == one.total + V * H


@pytest.mark.parametrize("p, m", [(4, 8), (8, 32), (16, 16), (1, 4)])
def test_one_f_one_b_bubble(p, m):
    assert pipeline_bubble(p, m) == Fraction(p - 1, m + p - 1)
    assert pipeline_bubble(p, m, 2) == Fraction(p - 1, 2 * m + p - 1)


def gpt_layer(s, b, h, a):
    """Korthikanti et al. 2022, Sec. 4.1: sbh(34 + 5as/h) bytes per GPT layer."""
    return s * b * h * 34 + 5 * a * s * s * b


GPT3 = ModelConfig(
    vocab_size=51200,
    hidden_size=12288,
    intermediate_size=4 * 12288,
    num_hidden_layers=96,
    num_attention_heads=96,
    norm_type="layernorm",
    mlp_type="plain",
    hidden_act="gelu",
    qkv_bias=True,
    o_proj_bias=True,
    mlp_bias=True,
    position_embedding_type="learned",
)


@pytest.mark.parametrize("t", [1, 2, 8])
def test_korthikanti_table_2(t):
    """Per layer: sbh(34 + 5as/h) without parallelism, sbh(10 + 24/t + 5as/(ht)) with
    tensor parallelism, sbh(34/t + 5as/(ht)) with sequence parallelism too."""
    s, b, h, a = 2048, 1, 12288, 96
    one = dict(seq_len=s, micro_batch=b, tp=t, flash_attention=False, dropout=True)
    per = GPT3.num_hidden_layers
    tp = activation_bytes_per_gpu(GPT3, **one) // per
    sp = activation_bytes_per_gpu(GPT3, sequence_parallel=True, **one) // per
    assert t * tp == s * b * h * (10 * t + 24) + 5 * a * s * s * b
    assert t * sp == gpt_layer(s, b, h, a)
    if t == 1:
        assert tp == sp == gpt_layer(s, b, h, a)


def test_first_stage_keeps_p_micro_batches():
    s, p = 2048, 4
    one = activation_bytes_per_gpu(GPT3, s, flash_attention=False, dropout=True)
    staged = activation_bytes_per_gpu(
        GPT3, s, pp=p, micro_batches=16, flash_attention=False, dropout=True
    )
    assert staged == one  # L/p layers × p micro-batches in flight
    interleaved = activation_bytes_per_gpu(
        GPT3, s, pp=p, micro_batches=16, chunks=2, flash_attention=False, dropout=True
    )
    assert 8 * interleaved == one * (8 + 3)  # 1 + (p − 1)/(p·v)


def test_full_recomputation_keeps_the_block_inputs():
    """Each layer keeps its input, 2·s·b·H bytes; one layer is rebuilt at a time."""
    s, p, m = 2048, 4, 16
    kw = dict(flash_attention=False, dropout=True)
    one_layer = activation_bytes_per_gpu(GPT3, s, **kw) // GPT3.num_hidden_layers
    kept = activation_bytes_per_gpu(
        GPT3, s, pp=p, micro_batches=m, recompute=True, **kw
    )
    assert kept == 2 * s * 12288 * (96 // p) * p + one_layer
    r = plan(GPT3, 64, tp=8, pp=8, micro_batches=16, seq_len=s, recompute=True)
    t = r.times()
    assert t["compute"] * 3 == pytest.approx(4 * r.flops_per_step / (64 * 989.4e12))


def test_expert_all_to_all():
    cfg = presets.load("mixtral-8x7b")
    tokens = 4096
    assert expert_all_to_all_payload(cfg, tokens) == tokens * 2 * 4096 * 2
    with pytest.raises(ConfigError, match="mixture of experts"):
        expert_all_to_all_payload(presets.load("llama-2-7b"), tokens)


def test_ring_attention():
    cfg = presets.load("llama-3-8b")
    assert ring_attention_bytes(cfg, 131072, 16) == 15 * 8192 * 2 * 8 * 128 * 2


@pytest.mark.parametrize(
    "kwargs, message",
    [
        (
            dict(gpus=8, dp=2, tp=2, pp=1),
            r"dp·tp·pp \(2·2·1 = 4\) must equal gpus \(8\)",
        ),
        (dict(gpus=24, tp=3), r"num_attention_heads \(32\) must be divisible by tp"),
        (
            dict(gpus=24, pp=3),
            r"num_hidden_layers \(32\) must be divisible by pp \(3\)",
        ),
        (dict(gpus=8, ep=2), r"ep \(2\) needs a mixture of experts"),
        (dict(gpus=8, zero=4), r"zero must be 0, 1, 2 or 3"),
        (dict(gpus=8, gpu="v100"), r"gpu must be a GPU with a cluster"),
        (dict(gpus=8, gpu="v1000"), r"gpu must be a GPU of the catalogue"),
    ],
)
def test_bad_layouts_are_one_line(kwargs, message):
    with pytest.raises(ConfigError, match=message) as e:
        plan(presets.load("llama-2-7b"), **kwargs)
    assert "\n" not in str(e.value)


def test_experts_split_by_ep():
    cfg = presets.load("mixtral-8x7b")
    with pytest.raises(ConfigError, match=r"num_local_experts \(8\) must be divisible"):
        plan(cfg, 48, tp=1, pp=1, ep=3)
    whole, split = plan(cfg, 8, ep=1), plan(cfg, 8, ep=8)
    experts = sum(
        count_params(cfg).total_of(t)
        for t in count_params(cfg).tensors
        if t.copies_dim == "E"
    )
    assert whole.params_per_gpu - split.params_per_gpu == experts - experts // 8


def test_plan_totals():
    p = plan(presets.load("llama-2-7b"), 64, tp=8, pp=2, zero=1, micro_batches=8)
    assert p.dp == 4 and p.tokens_per_step == 4 * 8 * 4096
    assert p.model_state_bytes_per_gpu == sum(p.model_state.values())
    assert p.communication_bytes()["all_reduce"] == sum(
        c.sent for c in p.collectives if c.op == "all_reduce"
    )
    assert 0 < p.mfu < 1
    assert isinstance(p.collectives[0], Collective)


def test_llama3_405b_needs_model_parallelism():
    """405B parameters × 16 bytes do not fit in 80 GB without sharding; Meta's layout
    (tp 8, pp 16, Llama 3 paper, Table 4) does, with ZeRO-1 over dp."""
    cfg = presets.load("llama-3.1-405b").replace(num_hidden_layers=128)
    fits = [p for p in layouts(cfg, 16384, zero=1, seq_len=8192) if p.fits]
    assert fits and all(p.tp * p.pp >= 16 for p in fits)


@pytest.mark.parametrize("name", ["deepseek-v3"])
def test_a_mixture_of_experts_dense_layers_keep_the_dense_ffn(name):
    """DeepSeek's first ``first_k_dense_replace`` layers have a dense FFN of width I,
    the others k + S experts of width I_e: the first stage keeps the sum over its own
    layers, each sized as itself (it once sized every layer as a mixture of experts)."""
    from llmmath.memory import activation_bytes_per_layer

    cfg = presets.load(name)
    k = presets.get(name).hf_config["first_k_dense_replace"]
    assert k >= 1 and set(cfg.dense_layers) == set(range(k))
    s, L = 4096, cfg.num_hidden_layers
    per = [
        activation_bytes_per_layer(cfg, s, flash_attention=True, layer=i)
        for i in range(L)
    ]
    each = [sum(items.values()) for items in per]
    assert each[0] != each[-1]  # the dense FFN and the experts keep different bytes
    assert activation_bytes_per_gpu(cfg, s) == sum(each)
    # two stages, four micro-batches: the first stage holds the dense layers and the
    # first of the others, and keeps two micro-batches at once (1F1B)
    staged = activation_bytes_per_gpu(cfg, s, pp=2, micro_batches=4)
    assert staged == sum(each[: L // 2]) * 2
    recomputed = activation_bytes_per_gpu(cfg, s, recompute=True)
    assert recomputed == 2 * s * cfg.hidden_size * L + max(each)

"""Formula = exact count = numel of the torch model, for every preset and random small
configs."""

import re

import pytest
import sympy as sp
from hypothesis import given, settings

from llmmath import ModelConfig, count_params, presets
from llmmath import formulas as F
from llmmath.modules import build_model, numel
from tests.strategies import any_config


def torch_shapes(model) -> dict[str, tuple]:
    """Parameter shapes of the non-layer tensors and of each layer's, with 'layers.i.'
    dropped and the experts' index replaced by '*': name → (shape, copies). A name is
    taken from the first layer that has it (DeepSeek's dense first layers and its MoE
    layers hold different tensors)."""
    out: dict[str, tuple] = {}
    first: dict[str, str] = {}  # name -> the layer prefix it was first seen in
    for name, p in model.named_parameters():
        layer = re.match(r"layers\.\d+\.", name)
        prefix = layer.group(0) if layer else ""
        name = re.sub(r"(experts)\.\d+\.", r"\1.*.", name.removeprefix(prefix))
        if first.setdefault(name, prefix) != prefix:
            continue
        shape, copies = out.get(name, (tuple(p.shape), 0))
        assert shape == tuple(p.shape)
        out[name] = (shape, copies + 1)
    return out


def check_three_ways(cfg: ModelConfig) -> None:
    counts = count_params(cfg)
    model = build_model(cfg, device="meta")
    assert F.evaluate(F.total_formula(cfg), cfg) == counts.total == numel(model)
    assert torch_shapes(model) == {t.name: (t.shape, t.copies) for t in counts.tensors}
    # every layer has the parameters counted for it
    assert all(
        numel(layer) == counts.layer_params(i) for i, layer in enumerate(model.layers)
    )
    assert numel(model.layers[-1]) == counts.per_layer


@pytest.mark.parametrize("name", presets.names())
def test_presets_three_ways(name):
    check_three_ways(presets.load(name))


@given(any_config())
def test_random_configs_three_ways(raw):
    check_three_ways(ModelConfig.from_hf_config(raw))


@given(any_config())
@settings(max_examples=25)
def test_group_formulas_and_printed_formulas_agree_with_counts(raw):
    cfg = ModelConfig.from_hf_config(raw)
    counts = count_params(cfg)
    groups = F.group_formulas(cfg)
    assert {
        g: F.evaluate(groups.get(g, 0), cfg) for g in counts.by_group()
    } == counts.by_group()
    for t in counts.tensors:  # the formula the CLI prints is the tensor's count
        printed = sp.sympify(t.formula.replace("·", "*"), locals=F.SYMBOLS)
        assert F.evaluate(printed, cfg) == counts.total_of(t)


def test_non_embedding_convention():
    gpt2 = count_params(presets.load("gpt2"))  # tied: only the embeddings leave
    assert gpt2.non_embedding == gpt2.total - (50257 + 1024) * 768
    llama = count_params(presets.load("llama-2-7b"))  # untied: the LM head leaves too
    assert llama.non_embedding == llama.total - 2 * 32000 * 4096


def test_tied_head_is_one_tensor():
    model = build_model(presets.load("qwen2.5-3b"))
    assert model.lm_head.weight is model.embed_tokens.weight
    assert count_params(presets.load("qwen2.5-3b")).by_group()["lm_head"] == 0


def test_count_params_rejects_non_config():
    with pytest.raises(TypeError, match="needs a ModelConfig"):
        count_params({"hidden_size": 4096})


def test_405b_on_meta_device_costs_no_memory():
    model = build_model(presets.load("llama-3.1-405b"))
    assert all(p.is_meta for p in model.parameters())
    assert numel(model) == count_params(presets.load("llama-3.1-405b")).total

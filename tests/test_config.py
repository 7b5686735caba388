"""ModelConfig validation and from_hf_config, model type by model type."""

import inspect
import pickle

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from llmmath import ConfigError, ModelConfig, count_params
from tests.conftest import hf_config
from tests.strategies import any_config

BASE = dict(
    vocab_size=100,
    hidden_size=64,
    intermediate_size=128,
    num_hidden_layers=2,
    num_attention_heads=8,
)


@pytest.mark.parametrize(
    "field, value, rule",
    [
        ("hidden_size", 0, "hidden_size must be a positive integer"),
        ("vocab_size", -3, "vocab_size must be a positive integer"),
        ("num_hidden_layers", 2.0, "num_hidden_layers must be a positive integer"),
        ("intermediate_size", "128", "intermediate_size must be a positive integer"),
        ("num_attention_heads", True, "num_attention_heads must be a positive integer"),
        (
            "num_key_value_heads",
            3,
            "num_attention_heads (8) must be divisible by num_key_value_heads (3)",
        ),
        (
            "num_key_value_heads",
            16,
            "num_key_value_heads (16) must not exceed num_attention_heads (8)",
        ),
        ("head_dim", 0, "head_dim must be a positive integer"),
        ("tie_word_embeddings", 1, "tie_word_embeddings must be true or false"),
        ("norm_type", "batchnorm", "norm_type must be one of rmsnorm, layernorm"),
        ("mlp_type", "moe", "mlp_type must be one of gated, plain"),
        ("hidden_act", "swish2", "hidden_act must be one of"),
        ("sliding_window", 0, "sliding_window must be a positive integer"),
        ("rope_theta", -1.0, "rope_theta must be a positive number"),
    ],
)
def test_bad_value_names_field_and_rule(field, value, rule):
    with pytest.raises(ConfigError) as err:
        ModelConfig(**{**BASE, field: value})
    assert rule in str(err.value)


def test_hidden_size_must_divide_when_head_dim_absent():
    with pytest.raises(
        ConfigError,
        match=r"hidden_size \(60\) must be divisible by "
        r"num_attention_heads \(8\) when head_dim is not given",
    ):
        ModelConfig(**{**BASE, "hidden_size": 60})
    assert ModelConfig(**{**BASE, "hidden_size": 60, "head_dim": 16}).head_dim == 16


def test_config_error_is_a_value_error():
    assert issubclass(ConfigError, ValueError)


def test_defaults_mha_and_derived_head_dim():
    cfg = ModelConfig(**BASE)
    assert (cfg.num_key_value_heads, cfg.head_dim, cfg.group_size) == (8, 8, 1)


def test_frozen_and_replace_revalidates():
    cfg = ModelConfig(**BASE)
    with pytest.raises(AttributeError):
        cfg.hidden_size = 5
    assert cfg.replace(num_attention_heads=4, num_key_value_heads=2).head_dim == 16
    with pytest.raises(ConfigError, match="num_key_value_heads"):
        cfg.replace(num_key_value_heads=5)


#: One field changed to a value that may break a rule or need a derived default again.
CHANGES = st.sampled_from(
    [
        ("hidden_size", 0),
        ("hidden_size", 60),
        ("num_key_value_heads", 3),
        ("num_key_value_heads", 16),
        ("num_key_value_heads", 2),
        ("num_key_value_heads", None),
        ("head_dim", None),
        ("head_dim", 0),
        ("num_attention_heads", 4),
        ("norm_type", "batchnorm"),
        ("rope_theta", float("nan")),
        ("sliding_window", 0),
    ]
)


def _outcome(make):
    """The config ``make()`` builds, or the message of the ConfigError it raises."""
    try:
        return make()
    except ConfigError as err:
        return str(err)


@given(raw=any_config(), change=CHANGES)
@settings(max_examples=60, deadline=None)
def test_every_way_to_a_config_is_checked(raw, change):
    """A config is a tuple (a named tuple, for start-up): its constructor by
    name or by position, namedtuple's ``_make`` and ``_replace``, pickling and
    `ModelConfig.replace` all run the same checks, so none of them can make a config
    that breaks a rule. A field set to None is derived again, as a new config's is."""
    cfg = ModelConfig.from_hf_config(raw)
    name, value = change
    fields = {**cfg._asdict(), name: value}
    values = [fields[n] for n in ModelConfig._fields]
    by_name = _outcome(lambda: ModelConfig(**fields))
    assert _outcome(lambda: ModelConfig(*values)) == by_name
    assert _outcome(lambda: ModelConfig._make(values)) == by_name
    assert _outcome(lambda: cfg._replace(**{name: value})) == by_name
    if isinstance(by_name, ModelConfig):
        assert pickle.loads(pickle.dumps(by_name)) == by_name
        assert type(by_name._replace()) is ModelConfig
        if name == "num_key_value_heads" and value is None:
            assert by_name.num_key_value_heads == by_name.num_attention_heads


def test_config_record_shape():
    """Frozen, the same fields in help() as in the class, and ``_make`` refuses a
    wrong number of fields as namedtuple's does."""
    cfg = ModelConfig(**BASE)
    with pytest.raises(AttributeError):
        cfg.vocab_size = 1
    signature = inspect.signature(ModelConfig)
    assert tuple(signature.parameters) == ModelConfig._fields
    assert "ForwardRef" not in str(signature)
    assert str(signature.parameters["head_dim"]) == "head_dim: 'int | None' = None"
    with pytest.raises(TypeError, match="expected"):
        ModelConfig._make(list(cfg)[:-1])


def test_missing_num_key_value_heads_is_mha(write_config):
    raw = hf_config("llama-2-7b")
    del raw["num_key_value_heads"]
    cfg = ModelConfig.from_hf_config(write_config(raw))
    assert cfg.num_key_value_heads == cfg.num_attention_heads == 32


def test_explicit_head_dim_is_honoured():
    raw = {**hf_config("llama-3-8b"), "head_dim": 64}
    cfg = ModelConfig.from_hf_config(raw)
    assert cfg.head_dim == 64 != cfg.hidden_size // cfg.num_attention_heads
    q = next(
        t for t in count_params(cfg).tensors if t.name == "self_attn.q_proj.weight"
    )
    assert q.shape == (32 * 64, 4096)


def test_qwen3_head_dim_defaults_to_128_not_h_over_nh():
    raw = {k: v for k, v in hf_config("qwen3-0.6b").items() if k != "head_dim"}
    raw["hidden_size"] = 2048  # 2048 / 16 = 128 would hide the default
    raw["num_attention_heads"] = 32
    assert ModelConfig.from_hf_config(raw).head_dim == 128


@pytest.mark.parametrize(
    "model_type, tied",
    [
        ("llama", False),
        ("mistral", False),
        ("qwen2", False),
        ("qwen3", False),
        ("gpt2", True),
    ],
)
def test_tie_word_embeddings_default_per_model_type(model_type, tied):
    raw = (
        {
            "model_type": "gpt2",
            "vocab_size": 10,
            "n_embd": 8,
            "n_layer": 1,
            "n_head": 2,
            "n_positions": 4,
        }
        if model_type == "gpt2"
        else {
            "model_type": model_type,
            "vocab_size": 10,
            "hidden_size": 8,
            "intermediate_size": 4,
            "num_hidden_layers": 1,
            "num_attention_heads": 2,
        }
    )
    assert ModelConfig.from_hf_config(raw).tie_word_embeddings is tied


def test_biases_per_model_type():
    llama = ModelConfig.from_hf_config(
        {**hf_config("llama-2-7b"), "attention_bias": True, "mlp_bias": True}
    )
    assert (llama.qkv_bias, llama.o_proj_bias, llama.mlp_bias) == (True, True, True)
    mistral = ModelConfig.from_hf_config(
        {**hf_config("mistral-7b-v0.1"), "attention_bias": True}
    )
    assert (mistral.qkv_bias, mistral.o_proj_bias, mistral.mlp_bias) == (
        False,
        False,
        False,
    )
    qwen2 = ModelConfig.from_hf_config(hf_config("qwen2.5-3b"))
    assert (qwen2.qkv_bias, qwen2.o_proj_bias, qwen2.mlp_bias) == (True, False, False)
    qwen3 = ModelConfig.from_hf_config(hf_config("qwen3-0.6b"))
    assert (qwen3.qkv_bias, qwen3.o_proj_bias, qwen3.qk_norm) == (False, False, True)


def test_gpt2_field_names_and_architecture():
    cfg = ModelConfig.from_hf_config(hf_config("gpt2"))
    assert (cfg.hidden_size, cfg.num_hidden_layers, cfg.num_attention_heads) == (
        768,
        12,
        12,
    )
    assert cfg.intermediate_size == 4 * 768 and cfg.max_position_embeddings == 1024
    assert (cfg.norm_type, cfg.mlp_type, cfg.position_embedding_type) == (
        "layernorm",
        "plain",
        "learned",
    )
    assert cfg.qkv_bias and cfg.o_proj_bias and cfg.mlp_bias and cfg.tie_word_embeddings
    assert (
        ModelConfig.from_hf_config(
            {**hf_config("gpt2"), "n_inner": 1000}
        ).intermediate_size
        == 1000
    )


def test_sliding_window():
    assert (
        ModelConfig.from_hf_config(hf_config("mistral-7b-v0.1")).sliding_window == 4096
    )
    # Qwen2.5 ships sliding_window but use_sliding_window false: no window applies.
    assert ModelConfig.from_hf_config(hf_config("qwen2.5-3b")).sliding_window is None


@pytest.mark.parametrize("model_type", ["bert", "mamba", "gemma3", None, 7])
def test_unsupported_model_type_is_refused_by_name(model_type):
    raw = {**hf_config("llama-2-7b"), "model_type": model_type}
    if model_type is None:
        del raw["model_type"]
    with pytest.raises(ConfigError) as err:
        ModelConfig.from_hf_config(raw)
    message = str(err.value)
    assert repr(model_type) in message
    assert (
        "llama, mistral, qwen2, qwen3, gpt2, mixtral, minimind, deepseek_v2, "
        "deepseek_v3, qwen3_moe, gemma, gemma2, gemma3_text, phi3, olmo2" in message
    )


@pytest.mark.parametrize(
    "field",
    [
        "vocab_size",
        "hidden_size",
        "intermediate_size",
        "num_hidden_layers",
        "num_attention_heads",
    ],
)
def test_missing_required_field(field):
    raw = hf_config("llama-3-8b")
    del raw[field]
    with pytest.raises(ConfigError, match=f"{field} is missing"):
        ModelConfig.from_hf_config(raw)


@pytest.mark.parametrize("field", ["n_embd", "n_layer", "n_head", "n_positions"])
def test_gpt2_errors_use_gpt2_names(field):
    with pytest.raises(ConfigError, match=f"{field} must be a positive integer"):
        ModelConfig.from_hf_config({**hf_config("gpt2"), field: 0})


def test_file_errors(tmp_path, write_config):
    with pytest.raises(ConfigError, match="does not exist"):
        ModelConfig.from_hf_config(tmp_path / "absent.json")
    bad = tmp_path / "bad.json"
    bad.write_text("{not json", encoding="utf-8")
    with pytest.raises(ConfigError, match="not valid JSON"):
        ModelConfig.from_hf_config(bad)
    with pytest.raises(ConfigError, match="must hold a JSON object"):
        ModelConfig.from_hf_config(write_config([1, 2]))
    with pytest.raises(ConfigError, match="is a directory"):
        ModelConfig.from_hf_config(tmp_path)


def test_rope_theta_top_level_or_nested():
    assert ModelConfig.from_hf_config(hf_config("llama-3-8b")).rope_theta == 500000.0
    raw = {k: v for k, v in hf_config("llama-3-8b").items() if k != "rope_theta"}
    assert ModelConfig.from_hf_config(raw).rope_theta == 10000.0  # LlamaConfig default
    raw["rope_parameters"] = {"rope_type": "default", "rope_theta": 500000.0}
    assert ModelConfig.from_hf_config(raw).rope_theta == 500000.0


def test_minimind_defaults_follow_minimind_config():
    raw = {
        "model_type": "minimind",
        "vocab_size": 6400,
        "hidden_size": 512,
        "num_hidden_layers": 8,
        "num_attention_heads": 8,
    }
    cfg = ModelConfig.from_hf_config(raw)
    assert (
        cfg.num_key_value_heads,
        cfg.intermediate_size,
        cfg.tie_word_embeddings,
    ) == (2, 1408, True)
    assert count_params(cfg).total == 25_829_888  # MiniMind2-Small
    one = ModelConfig.from_hf_config({**raw, "use_moe": True, "num_experts_per_tok": 1})
    two = ModelConfig.from_hf_config({**raw, "use_moe": True})
    assert (one.norm_topk_prob, two.norm_topk_prob) == (
        False,
        True,
    )  # MoEGate: only for k > 1


def test_mixtral_sliding_window_is_read():
    raw = {**hf_config("mixtral-8x7b"), "sliding_window": 4096}
    assert ModelConfig.from_hf_config(raw).sliding_window == 4096
    assert ModelConfig.from_hf_config(hf_config("mixtral-8x7b")).sliding_window is None

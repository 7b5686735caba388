"""The explorers' functions (`llmmath.explorers`): state in, view out, never a
traceback.

Numbers are checked against closed forms written here from the chapters' formulas and
against publishers' counts, not against the code that draws them."""

import json
import re
import subprocess
import sys

import pytest
from hypothesis import given
from hypothesis import strategies as st

from llmmath import count_params, presets
from llmmath.config import ConfigError
from llmmath.explorers import (
    EXPLORERS,
    PASTED,
    _illegal,
    explore,
    explore_json,
    view_text,
)
from tests.conftest import hf_config

# Exact totals the publishers state (model cards and papers, as in
# tests/test_published_counts)
PUBLISHED = {
    "llama-2-7b": 6_738_415_616,
    "qwen3-0.6b": 596_049_920,
    "llama-3.1-405b": 405_853_388_800,
}


def table_rows(view):
    return [row for b in view["blocks"] if b["type"] == "table" for row in b["rows"]]


def row(view, label):
    (found,) = [r for r in table_rows(view) if r[0] == label]
    return found


def as_int(text: str) -> int:
    return int(text.split()[0].replace(",", ""))


@pytest.mark.parametrize("name", sorted(PUBLISHED))
def test_params_total_is_the_published_count(name):
    view = explore("params", {"preset": name})
    assert as_int(row(view, "total")[1]) == PUBLISHED[name]
    calc = explore("calculator", {"preset": name})
    assert as_int(row(calc, "total")[1]) == PUBLISHED[name]


@pytest.mark.parametrize("name", presets.names())
def test_calculator_counts_every_pasted_preset_config_exactly(name):
    text = json.dumps(hf_config(name))
    view = explore("calculator", {"preset": PASTED, "config": text})
    assert view["state"]["preset"] == PASTED
    counts = count_params(presets.load(name))
    assert as_int(row(view, "total")[1]) == counts.total
    assert as_int(row(view, "active per token")[1]) == counts.active
    groups = ("embedding", "attention", "FFN", "norms", "LM head")
    assert sum(as_int(row(view, g)[1]) for g in groups) == counts.total


def test_calculator_kv_cache_is_the_closed_form():
    cfg = presets.load("llama-3-8b")
    view = explore(
        "calculator",
        {"preset": "llama-3-8b", "batch": 8, "seq_len": 1000, "kv_dtype": "fp8"},
    )
    d_h = cfg.hidden_size // cfg.num_attention_heads
    per_token = (
        2 * cfg.num_hidden_layers * cfg.num_key_value_heads * d_h * 1
    )  # fp8: 1 B
    assert as_int(row(view, "KV cache per token (fp8)")[1]) == per_token
    assert as_int(row(view, "KV cache, batch 8 × 1,000 tokens")[1]) == per_token * 8000


def test_calculator_edited_text_is_a_pasted_config():
    view = explore("calculator", {"preset": "llama-2-7b"})
    raw = json.loads(view["state"]["config"])
    raw["num_key_value_heads"] = 8
    edited = explore("calculator", {**view["state"], "config": json.dumps(raw)})
    assert edited["state"]["preset"] == PASTED
    expected = count_params(presets.load("llama-2-7b").replace(num_key_value_heads=8))
    assert as_int(row(edited, "total")[1]) == expected.total


def cli_error(tmp_path, text: str) -> str:
    path = tmp_path / "config.json"
    path.write_text(text, encoding="utf-8")
    result = subprocess.run(
        [sys.executable, "-m", "llmmath", "params", str(path)],
        capture_output=True,
        text=True,
    )
    assert result.returncode == 2 and result.stdout == ""
    (line,) = result.stderr.splitlines()
    return line


@pytest.mark.parametrize(
    "text",
    [
        '{"model_type": "t5", "d_model": 512}',  # unsupported model type
        json.dumps({**hf_config("llama-2-7b"), "num_key_value_heads": 5}),  # 32 % 5
        json.dumps({**hf_config("llama-2-7b"), "hidden_size": 4002}),  # 4002 % 32
    ],
)
def test_calculator_refuses_bad_configs_with_the_cli_message(tmp_path, text):
    view = explore("calculator", {"preset": PASTED, "config": text})
    assert view_text(view) == cli_error(tmp_path, text)
    assert view["blocks"][0]["tone"] == "error"


def test_calculator_refuses_invalid_json_with_the_cli_reason(tmp_path):
    text = '{"model_type": "llama",'
    view = explore("calculator", {"preset": PASTED, "config": text})
    message = view_text(view)
    cli = cli_error(tmp_path, text)
    assert message.startswith(
        "llmmath: error: the pasted config.json is not valid JSON ("
    )
    assert message.split("is not valid JSON")[1] == cli.split("is not valid JSON")[1]
    array = explore("calculator", {"preset": PASTED, "config": "[1, 2]"})
    assert "must hold a JSON object, got list" in view_text(array)


def test_attention_explorer_kv_bytes_closed_form():
    view = explore("attention", {"preset": "llama-3-8b", "num_key_value_heads": 2})
    # 2 (K and V) × n_kv × d_h × 2 bytes (bf16), per layer; 32 layers
    assert (
        as_int(row(view, "KV cache bytes per token (bf16)")[1]) == 2 * 2 * 128 * 2 * 32
    )
    assert (
        as_int(row(view, "KV cache bytes per token (bf16)")[2]) == 2 * 32 * 128 * 2 * 32
    )


def test_memory_explorer_inference_is_weights_plus_cache():
    cfg = presets.load("llama-2-7b")
    state = {"preset": "llama-2-7b", "mode": "inference", "weights": "bf16"}
    view = explore("memory", {**state, "batch": 2, "seq_len": 100})
    weights = 2 * count_params(cfg).total  # bf16: two bytes each
    cache = 2 * 32 * 2 * 100 * 32 * 128 * 2
    assert as_int(row(view, "total")[1]) == weights + cache
    controls = {c["name"]: c for c in view["controls"]}
    assert not controls["weights"]["disabled"]
    for name in ("optimizer", "precision", "checkpointing", "method", "loss"):
        assert controls[name]["disabled"], name  # no training state when serving
    trained = explore("memory", {**state, "mode": "training"})
    assert trained["state"]["mode"] == "training"
    assert {c["name"]: c for c in trained["controls"]}["weights"]["disabled"]


def test_unknown_explorer_and_non_dict_state_are_refused():
    with pytest.raises(ConfigError, match="unknown explorer 'nope'"):
        explore("nope", {})
    with pytest.raises(ConfigError, match="must be a dict"):
        explore("params", [1, 2])


def test_explore_json_round_trips():
    out = json.loads(explore_json("roofline", json.dumps({"batch": 64})))
    assert out == json.loads(json.dumps(explore("roofline", {"batch": 64})))


JUNK = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(10**30), max_value=10**30),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=20),
    st.lists(st.integers(), max_size=3),
    st.sampled_from(["llama-2-7b", "bf16", "int4", "H100-SXM5-80GB", PASTED]),
)


@given(kind=st.sampled_from(sorted(EXPLORERS)), data=st.data())
def test_any_state_gets_a_view_never_a_traceback(kind, data):
    start = explore(kind, {})["state"]
    names = sorted(start)
    changes = data.draw(st.dictionaries(st.sampled_from(names), JUNK, max_size=3))
    view = explore(kind, {**start, **changes})
    json.dumps(view, allow_nan=False)  # the browser gets strict JSON
    assert view["kind"] == kind and view["blocks"]


# --- one compute path, valid states (issue 23) ---------------------------------------


def memory_rows(view) -> dict:
    (t,) = [
        b
        for b in view["blocks"]
        if b["type"] == "table" and b["headers"] == ["memory", "bytes"]
    ]
    return {r[0]: r[1] for r in t["rows"]}


def test_calculator_memory_is_the_clis_on_every_preset_format_and_gpu(capsys):
    """The page's weights, cache, fit and GPU answers are `memory --json`'s, for every
    preset × weight format × GPU of the catalogue."""
    from llmmath.cli import main
    from llmmath.cli.serving import WEIGHTS
    from llmmath.gpus import GPUS

    for name in presets.names():
        view = explore("calculator", {"preset": name})
        for weights in WEIGHTS:
            for gpu in GPUS:
                state = {**view["state"], "weights": weights, "gpu": gpu}
                shown = explore("calculator", state)
                assert "error" not in shown, (name, weights, gpu)
                assert (
                    main(["memory", name, "--weights", weights, "--gpu", gpu, "--json"])
                    == 0
                )
                cli = json.loads(capsys.readouterr().out)
                rows = memory_rows(shown)
                weight_row = next(
                    v for k, v in rows.items() if k.startswith("weights (")
                )
                assert as_int(weight_row) == cli["weight_bytes"]
                assert as_int(rows["weights + KV cache"]) == cli["total_bytes"]
                key = f"in {gpu} ({cli['gpu_bytes']:,} bytes) they"
                verdict = "fit" if cli["fits"] else "do not fit"
                assert rows[key] == (
                    f"{verdict}: largest batch {cli['max_batch']:,}, longest context "
                    f"{cli['max_seq_len']:,}"
                )
                stacks = [b for b in shown["blocks"] if b["type"] == "stack"]
                assert len(stacks) == 2  # weights + cache, and the training peak
                for stack in stacks:
                    assert stack["limit"] == cli["gpu_bytes"] == GPUS[gpu].memory


def test_calculator_int4_llama_3_8b_is_the_clis_5_700_591_616_bytes():
    view = explore("calculator", {"preset": "llama-3-8b", "weights": "int4"})
    assert memory_rows(view)["weights (int4, groups of 128)"].startswith(
        "5,700,591,616 bytes"
    )
    big = explore(
        "calculator",
        {
            "preset": "llama-3-8b",
            "batch": 128,
            "seq_len": 4096,
            "gpu": "H100-SXM5-80GB",
        },
    )
    # 16,060,522,496 + 68,719,476,736 B > 80·10⁹: the CLI says "no" too
    assert memory_rows(big)["in H100-SXM5-80GB (80,000,000,000 bytes) they"].startswith(
        "do not fit: largest batch 119"
    )


def test_the_gpu_select_changes_the_capacity():
    a = explore("calculator", {"preset": "llama-3-70b", "gpu": "H100-SXM5-80GB"})
    b = explore("calculator", {"preset": "llama-3-70b", "gpu": "MI300X-192GB"})
    assert memory_rows(a)["in H100-SXM5-80GB (80,000,000,000 bytes) they"].startswith(
        "do not fit"
    )
    assert memory_rows(b)["in MI300X-192GB (192,000,000,000 bytes) they"].startswith(
        "fit"
    )
    # Llama-3-8B in bf16: 16.06·10⁹ B of weights, more than a T4's 16·10⁹
    t4 = explore("roofline", {"gpu": "T4-16GB", "batch": 1, "context": 4096})
    assert row(t4, "weights + cache in 16 GB")[1] == "do not fit"
    l4 = explore("roofline", {"gpu": "L4-24GB", "batch": 1, "context": 4096})
    assert row(l4, "weights + cache in 24 GB")[1] == "fit"


def preset_kinds():
    return [k for k in sorted(EXPLORERS) if "preset" in explore(k, {})["state"]]


@pytest.mark.parametrize("kind", preset_kinds())
def test_every_preset_gives_a_valid_view_in_every_explorer(kind):
    """Each preset alone, and (where the explorer has a model select) each preset
    chosen in the explorer's default view, as a reader would."""
    start = explore(kind, {})
    assert "error" not in start, start["blocks"][0]
    selectable = any(c["name"] == "preset" for c in start["controls"])
    for name in presets.names():
        states = [{"preset": name}]
        if selectable:
            states.append({**start["state"], "preset": name})
        for state in states:
            view = explore(kind, state)
            assert "error" not in view, (kind, name, view["blocks"][0])
            assert view["state"]["preset"] == name


def test_layout_picks_a_pipeline_depth_that_divides_the_layers():
    view = explore("layout", {"preset": "llama-3.1-405b", "pp": 4})
    assert "error" not in view and view["state"]["pp"] == 2  # 126 layers, 1,024 GPUs
    assert 126 % view["state"]["pp"] == 0
    assert "Megatron-LM can also split layers unevenly" in view["blocks"][-1]["text"]


@pytest.mark.parametrize(
    "kind, bad",
    [
        ("calculator", {"preset": "<img src=x onerror=alert(1)>"}),
        ("calculator", {"gpu": "B300"}),
        ("calculator", {"kv_dtype": "fp3"}),
        ("calculator", {"weights": "int2"}),
        ("roofline", {"gpu": "nope"}),
        ("params", {"preset": "nope"}),
        ("mla", {"preset": "nope", "dtype": "fp3"}),
        ("layout", {"preset": "nope", "tp": 3}),
    ],
)
def test_a_bad_link_is_one_line_and_the_controls_fall_back(kind, bad):
    view = explore(kind, bad)
    first = view["blocks"][0]
    assert first["tone"] == "error" and "\n" not in first["text"]
    (name, value), *_ = bad.items()
    assert repr(value) in first["text"]
    assert not _illegal(view)  # every control can show its value
    assert view["state"][name] != value
    again = explore(kind, view["state"])
    assert "error" not in again and again["state"] == view["state"]


@given(kind=st.sampled_from(sorted(EXPLORERS)), data=st.data())
def test_any_state_settles_on_a_state_its_controls_show(kind, data):
    start = explore(kind, {})
    names = sorted(start["state"])
    changes = data.draw(st.dictionaries(st.sampled_from(names), JUNK, max_size=3))
    view = explore(kind, {**start["state"], **changes})
    assert not _illegal(view), (view["state"], view["controls"])
    again = explore(kind, view["state"])
    assert again["state"] == view["state"]
    if "error" in again:  # only a number or text the reader typed may stay wrong
        typed = {
            c["name"]
            for c in start["controls"]
            if c["type"] in ("int", "float", "range", "text")
        }
        assert set(changes) & typed, (changes, again["error"])


# --- training memory: train-memory's answers, field for field (issue 31) ------------

PEAK_NOTE = re.compile(
    r"Peak of a training step \((?P<moment>.+)\): (?P<n>[\d,]+) bytes"
)
FIT_NOTE = re.compile(
    r"(?P<gpu>\S+) \([\d,.]+ GB\): the peak (?P<verdict>fits|does not fit); "
    r"largest batch that fits: (?P<n>[\d,]+)"
)


def training_numbers(view) -> dict:
    """The training part of an (English) view read back as ``train-memory --json``'s
    fields: the peak's moment, bytes and items, the parts at rest, the GPU, whether
    the peak fits and the largest batch that does."""
    notes = [b["text"] for b in view["blocks"] if b["type"] == "note"]
    tables = {
        b["headers"][0]: b["rows"]
        for b in view["blocks"]
        if b["type"] == "table" and b["headers"]
    }
    (peak,) = [m for m in map(PEAK_NOTE.match, notes) if m]
    (fit,) = [m for m in map(FIT_NOTE.fullmatch, notes) if m]
    at_peak, at_rest = tables["at the peak"], tables["at rest"]
    assert at_peak[-1][0] == "peak" and at_rest[-1][0] == "sum at rest"
    (stack,) = [b for b in view["blocks"] if b["type"] == "stack"][-1:]
    numbers = {
        "peak_moment": peak["moment"],
        "peak_bytes": as_int(at_peak[-1][1]),
        "peak_items": {r[0]: as_int(r[1]) for r in at_peak[:-1]},
        "items": {r[0]: as_int(r[1]) for r in at_rest[:-1]},
        "total_bytes": as_int(at_rest[-1][1]),
        "gpu": fit["gpu"],
        "gpu_bytes": stack["limit"],
        "fits": fit["verdict"] == "fits",
        "max_batch": as_int(fit["n"]),
    }
    assert as_int(peak["n"]) == numbers["peak_bytes"]
    assert {i["label"]: i["value"] for i in stack["items"]} == numbers["peak_items"]
    return numbers


def train_memory_argv(model: str, state: dict) -> list[str]:
    """``train-memory``'s arguments for a view's state (LoRA's only with LoRA)."""
    argv = ["train-memory", model]
    for name in ("optimizer", "precision", "checkpointing", "method", "loss"):
        argv += [f"--{name}", state[name]]
    if state["method"] != "full":
        argv += ["--lora-rank", str(state["lora_rank"])]
        argv += ["--adapter-dtype", state["adapter_dtype"]]
    argv += ["--batch", str(state["batch"]), "--seq-len", str(state["seq_len"])]
    return [*argv, "--gpu", state["gpu"], "--json"]


def cli_json(argv) -> dict:
    """What ``python -m llmmath ARGV`` prints, as JSON (`llmmath.cli.main` in this
    process)."""
    import contextlib
    import io

    from llmmath.cli import main

    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main(argv) == 0, argv
    return json.loads(out.getvalue())


def assert_training_is_the_clis(view, model: str) -> dict:
    cli = cli_json(train_memory_argv(model, view["state"]))
    shown = training_numbers(view)
    assert shown == {k: cli[k] for k in shown}, (view["state"], model)
    assert sum(shown["peak_items"].values()) == shown["peak_bytes"]
    return cli


@pytest.mark.parametrize("name", presets.names())
def test_calculator_training_is_the_clis_on_every_preset(name):
    """The calculator's peak, moment, items, parts at rest, fit and largest batch are
    ``train-memory --json``'s for every preset, as a preset and pasted."""
    view = explore("calculator", {"preset": name})
    assert "error" not in view
    assert_training_is_the_clis(view, name)
    pasted = {"preset": PASTED, "config": json.dumps(hf_config(name))}
    again = explore("calculator", {**view["state"], **pasted})
    assert training_numbers(again) == training_numbers(view)


def test_the_training_gpu_and_sizes_are_the_clis():
    from llmmath.gpus import GPUS

    for gpu in GPUS:
        state = {"preset": "qwen3-0.6b", "gpu": gpu, "batch": 2, "seq_len": 2048}
        assert_training_is_the_clis(explore("calculator", state), "qwen3-0.6b")
        view = explore("memory", state)
        cli = assert_training_is_the_clis(view, "qwen3-0.6b")
        assert cli["gpu_bytes"] == GPUS[gpu].memory


OPTION_STATES = st.fixed_dictionaries(
    {
        "preset": st.sampled_from(["qwen3-0.6b", "llama-3.2-1b", "gpt2", "gemma-2-2b"]),
        "optimizer": st.sampled_from(["adamw", "adam8bit", "adafactor", "sgd"]),
        "precision": st.sampled_from(["bf16", "amp", "mixed", "fp32"]),
        "checkpointing": st.sampled_from(["none", "selective", "full"]),
        "method": st.sampled_from(["full", "lora", "qlora"]),
        "lora_rank": st.sampled_from([1, 8, 16, 64]),
        "adapter_dtype": st.sampled_from(["fp32", "bf16"]),
        "loss": st.sampled_from(["full", "chunked"]),
        "batch": st.integers(1, 16),
        "seq_len": st.sampled_from([128, 1000, 4096]),
        "gpu": st.sampled_from(["H100-SXM5-80GB", "L4-24GB", "MI300X-192GB"]),
    }
)


@given(state=OPTION_STATES)
def test_every_training_option_is_the_clis(state):
    """Both the memory explorer and the calculator answer any choice of the training
    options with ``train-memory``'s numbers."""
    for kind in ("memory", "calculator"):
        view = explore(kind, state)
        assert "error" not in view, (kind, view["blocks"][0])
        assert {k: view["state"][k] for k in state} == state
        assert_training_is_the_clis(view, state["preset"])
        lora = state["method"] != "full"
        controls = {c["name"]: c for c in view["controls"]}
        assert bool(controls["lora_rank"].get("disabled")) == (not lora)
        assert controls["adapter_dtype"]["disabled"] == (not lora)


def test_memory_inference_is_the_memory_command():
    from llmmath.reports import WEIGHTS

    for weights in WEIGHTS:
        state = {"mode": "inference", "weights": weights, "batch": 8, "gpu": "L4-24GB"}
        view = explore("memory", state)
        argv = ["memory", "llama-3-8b", "--weights", weights, "--batch", "8"]
        cli = cli_json([*argv, "--gpu", "L4-24GB", "--json"])
        assert as_int(row(view, "total")[1]) == cli["total_bytes"]
        rows = dict(r[:2] for r in table_rows(view))
        assert sum(as_int(v) for k, v in rows.items() if k != "total") == (
            cli["weight_bytes"] + cli["kv_cache_bytes"]
        )
        verdict = "they fit" if cli["fits"] else "they do not fit"
        assert view["blocks"][-2]["text"] == (
            f"L4-24GB (24.00 GB): {verdict}; largest batch that fits: "
            f"{cli['max_batch']:,}"
        )


def test_the_training_words_are_translated():
    """Every item and moment the training peak names, and every option, has its
    Chinese words (a label the catalogue lacks would show in English)."""
    import itertools

    from llmmath.explorers import ITEM_LABELS, ITEM_PATTERNS, _item
    from llmmath.messages import speaking
    from llmmath.training import training_peak

    labels = set()
    for name in presets.names():
        cfg = presets.load(name)
        for method, loss, ckpt, prec in itertools.product(
            ["full", "lora"], ["full", "chunked"], ["none", "full"], ["bf16", "amp"]
        ):
            for batch, seq_len in [(1, 4096), (64, 128)]:
                peak = training_peak(
                    cfg, "adamw", prec, ckpt, batch, seq_len, method, loss=loss
                )
                labels |= {*peak.items, *peak.moments}
    labels |= {"weights", "gradients", "optimizer state", "activations"}
    patterns = [p for p, _ in ITEM_PATTERNS]
    for label in labels:
        assert label in ITEM_LABELS or any(re.fullmatch(p, label) for p in patterns)
    with speaking("zh_CN"):
        untranslated = sorted(x for x in labels if _item(x) == x)
        view = explore("memory", {"method": "lora"})
        words = [label for c in view["controls"] for _, label in c.get("options", [])]
    assert not untranslated, untranslated
    for english in ("none", "selective", "full fine-tuning", "full logits", "chunked"):
        assert english not in words

"""Hostile input (issue 18): the one config reader and the CLI's arguments.

Every refusal is one line naming the key or the field and the rule, the same in the CLI
(exit 2) and on the calculator page. A few runs are real subprocesses (the inputs of
the issue and a closed pipe); the rest call the reader and `llmmath.cli.main`
in-process.
"""

from __future__ import annotations

import contextlib
import io
import json
import subprocess
import sys

import pytest

from llmmath import ModelConfig
from llmmath.cli import main, one_line
from llmmath.config import (
    MAX_CONFIG_BYTES,
    MAX_DEPTH,
    MAX_INT,
    MAX_LAYERS,
    ConfigError,
    check_json_values,
    parse_config_text,
)
from llmmath.explorers import PASTED, explore, view_text
from tests.conftest import hf_config

LLAMA = hf_config("llama-2-7b")
TEXT = json.dumps(LLAMA)


def with_field(name: str, token: str) -> str:
    """The Llama-2-7B config with ``name`` set to the raw JSON ``token``."""
    return json.dumps({**LLAMA, name: "@@"}).replace('"@@"', token)


def refusal(text: str) -> str:
    with pytest.raises(ConfigError) as e:
        parse_config_text(text, "the pasted config.json")
    return str(e.value)


def cli(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        status = main(list(argv))
    return status, out.getvalue(), err.getvalue()


# --- the four inputs of the issue, as a user runs them --------------------------------

ISSUE_INPUTS = {
    "deep nesting": (
        "[" * 100_000,
        "config file {path!r} nests arrays and objects deeper than 32 levels; a "
        "config.json needs a few",
    ),
    "5000-digit integer": (
        with_field("vocab_size", "9" * 5000),
        "vocab_size must be an integer of at most 9,223,372,036,854,775,807 (2^63 - 1) "
        "in magnitude, got an integer of 5,000 digits",
    ),
    "duplicate key": (
        TEXT[:-1] + ', "hidden_size": 8192}',
        "config file {path!r} gives the key 'hidden_size' twice; with a duplicate key "
        "the config is ambiguous",
    ),
    "NaN": (
        with_field("rms_norm_eps", "NaN"),
        "rms_norm_eps must be a finite number, got NaN",
    ),
}


@pytest.mark.parametrize("case", list(ISSUE_INPUTS))
def test_the_issues_inputs_are_refused_with_one_line(case, tmp_path):
    text, message = ISSUE_INPUTS[case]
    path = tmp_path / "config.json"
    path.write_text(text, encoding="utf-8")
    result = subprocess.run(
        [sys.executable, "-m", "llmmath", "params", str(path), "--json"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert (result.returncode, result.stdout) == (2, "")
    assert result.stderr == f"llmmath: error: {message.format(path=str(path))}\n"
    # the calculator page shows the same line, naming the pasted text
    view = explore("calculator", {"preset": PASTED, "config": text})
    assert view_text(view) == "llmmath: error: " + message.format(path="@").replace(
        "config file '@'", "the pasted config.json"
    )


def test_a_closed_pipe_ends_quietly():
    """``python -m llmmath params ... | head``: the reader has gone before the write."""
    child = subprocess.Popen(
        [sys.executable, "-m", "llmmath", "params", "llama-2-7b", "--json"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    child.stdout.close()  # before the child has imported anything
    _, err = child.communicate(timeout=60)
    assert err == b""
    assert child.returncode == 141


# --- the reader's rules, one by one ---------------------------------------------------


def test_nesting_up_to_the_limit_is_read_and_one_more_level_is_refused():
    def nested(levels: int) -> str:  # the top-level object is level 1
        return json.dumps({**LLAMA, "x": 0}).replace(
            '"x": 0', '"x": ' + "[" * (levels - 1) + "]" * (levels - 1)
        )

    assert parse_config_text(nested(MAX_DEPTH))["hidden_size"] == 4096
    assert "deeper than 32 levels" in refusal(nested(MAX_DEPTH + 1))
    assert ModelConfig.from_hf_config(parse_config_text(nested(MAX_DEPTH)))


def test_brackets_inside_strings_do_not_count_as_nesting():
    text = json.dumps({**LLAMA, "note": "[{" * 5000, "q": '\\"[[[['})
    assert parse_config_text(text)["note"] == "[{" * 5000


def test_a_duplicate_key_in_a_nested_object_is_named():
    text = with_field("rope_scaling", '{"factor": 2.0, "rope_type": "linear", '
                      '"factor": 4.0}')  # fmt: skip
    assert refusal(text) == (
        "the pasted config.json gives the key 'factor' twice; with a duplicate key the "
        "config is ambiguous"
    )


@pytest.mark.parametrize(
    "token, got",
    [
        ("NaN", "NaN"),
        ("Infinity", "Infinity"),
        ("-Infinity", "-Infinity"),
        ("1e999", "1e999 (overflows to infinity)"),
        ("-1.5e400", "-1.5e400 (overflows to infinity)"),
    ],
)
def test_non_finite_numbers_are_refused_naming_the_field(token, got):
    text = with_field(
        "rope_scaling", '{"rope_type": "linear", "factor": ' + token + "}"
    )
    assert refusal(text) == f"rope_scaling.factor must be a finite number, got {got}"


def test_integers_past_int64_are_refused_naming_the_field():
    assert parse_config_text(with_field("x", str(MAX_INT)))["x"] == MAX_INT
    assert parse_config_text(with_field("x", str(-MAX_INT)))["x"] == -MAX_INT
    assert refusal(with_field("layer_types", f"[1, 2, 3, {MAX_INT + 1}]")) == (
        "layer_types[3] must be an integer of at most 9,223,372,036,854,775,807 "
        "(2^63 - 1) in magnitude, got one of 19 digits"
    )
    assert refusal(with_field("x", "-" + "1" * 30)).startswith(
        "x must be an integer of at most"
    )


def test_a_key_that_is_not_a_name_is_quoted_in_the_message():
    text = with_field("a\nb", "NaN")
    assert refusal(text) == "'a\\nb' must be a finite number, got NaN"


@pytest.mark.parametrize(
    "text, kind",
    [("[1, 2]", "list"), ("4096", "int"), ('"x"', "str"), ("null", "NoneType"),
     ("NaN", "number"), ("true", "bool")],
)  # fmt: skip
def test_only_an_object_is_a_config(text, kind):
    assert (
        refusal(text) == f"the pasted config.json must hold a JSON object, got {kind}"
    )


def test_text_over_the_size_cap_is_refused_before_parsing(tmp_path):
    big = '{"x": "' + "a" * MAX_CONFIG_BYTES + '"}'
    assert refusal(big) == (
        "the pasted config.json is over 10 MB (10,000,000 bytes); a config.json is a "
        "few kilobytes"
    )
    wide = '{"x": "' + "é" * (MAX_CONFIG_BYTES // 2) + '"}'  # 2 bytes each in UTF-8
    assert "is over 10 MB" in refusal(wide)
    path = tmp_path / "big.json"
    path.write_text(big, encoding="utf-8")
    assert cli("params", str(path))[2] == (
        f"llmmath: error: config file {str(path)!r} is over 10 MB (10,000,000 "
        "bytes); a config.json is a few kilobytes\n"
    )


def test_files_that_cannot_be_read_are_named(tmp_path):
    (tmp_path / "latin1.json").write_bytes(b'{"model_type": "llama\xe9"}')
    status, _, err = cli("params", str(tmp_path / "latin1.json"))
    assert status == 2 and "is not valid JSON ('utf-8' codec can't decode" in err
    long_name = "x" * 5000 + ".json"
    status, _, err = cli("params", long_name)
    assert status == 2 and err.endswith("cannot be read (File name too long)\n")
    (tmp_path / "file").write_text("{}")
    status, _, err = cli("params", str(tmp_path / "file" / "config.json"))
    assert status == 2 and err.endswith("cannot be read (Not a directory)\n")


# --- dicts given to ModelConfig.from_hf_config (the presets' path) -------------------


@pytest.mark.parametrize(
    "field, value, message",
    [
        ("rope_theta", float("nan"), "rope_theta must be a finite number, got nan"),
        ("rms_norm_eps", float("inf"), "rms_norm_eps must be a finite number, got inf"),
        ("hidden_size", True, "hidden_size must be a positive integer, got True"),
        (
            "vocab_size",
            10**5000,
            "vocab_size must be an integer of at most 9,223,372,036,854,775,807 "
            "(2^63 - 1) in magnitude, got one of more than 3,000 digits",
        ),
        (
            "architectures",
            {"LlamaForCausalLM"},
            "architectures must be a JSON value (object, array, string, number, true, "
            "false or null), got set",
        ),
        (
            "num_hidden_layers",
            MAX_LAYERS + 1,
            "num_hidden_layers must be at most 10,000 (no model has more layers), got "
            "10,001",
        ),
    ],
    ids=["nan", "inf", "bool", "huge", "set", "layers"],
)
def test_a_parsed_dict_is_checked_like_text(field, value, message):
    with pytest.raises(ConfigError) as e:
        ModelConfig.from_hf_config({**LLAMA, field: value})
    assert str(e.value) == message


def test_non_finite_values_are_refused_by_the_dataclass_too():
    cfg = ModelConfig.from_hf_config(LLAMA)
    for bad in (float("nan"), float("inf")):
        with pytest.raises(ConfigError, match="rope_theta must be a positive number"):
            cfg.replace(rope_theta=bad)
    with pytest.raises(ConfigError, match="num_hidden_layers must be at most 10,000"):
        cfg.replace(num_hidden_layers=10**12)


def test_keys_must_be_strings_and_nesting_is_bounded_in_dicts():
    with pytest.raises(ConfigError, match=r"has the key 1; keys must be strings"):
        check_json_values({"rope_scaling": {1: 2}})
    deep: dict = {}
    for _ in range(MAX_DEPTH):
        deep = {"x": deep}
    with pytest.raises(ConfigError, match="deeper than 32 levels"):
        check_json_values(deep)


# --- the arguments --------------------------------------------------------------------


KV = ["kv-cache", "gpt2", "--seq-len"]
POSITIVE = "must be a positive integer, got"
TOKENS = ["parallel", "gpt2", "--gpus", "1", "--tokens"]
WHOLE = "must be a whole number such as 1000000000, 1e9, 1.5e12 or 15T, got"


@pytest.mark.parametrize(
    "argv, message",
    [
        ([*KV, "0"], f"argument --seq-len: {POSITIVE} 0"),
        ([*KV, "-5"], f"{POSITIVE} '-5'"),
        ([*KV, "1e3"], f"{POSITIVE} '1e3'"),
        ([*KV, "\u0663"], f"{POSITIVE} '\u0663'"),
        ([*KV, "5_0"], f"{POSITIVE} '5_0'"),
        ([*KV, " 5"], f"{POSITIVE} ' 5'"),
        ([*KV, "100000001"], "--seq-len: must be at most 100,000,000, got 100000001"),
        ([*KV, "9" * 5000], "must be at most 100,000,000, got 99999999999999999999..."),
        ([*KV, "8", "--batch", "1000001"], "--batch: must be at most 1,000,000"),
        ([*KV, "8", "--batch", "0"], f"argument --batch: {POSITIVE} 0"),
        ([*KV, "8", "--seq-len", "9"], "argument --seq-len: given twice"),
        ([*KV, "8", "--dtype", "fp7"], "argument --dtype: invalid choice: 'fp7'"),
        ([*KV, "8", "--dtype", "bf16", "--dtype", "fp8"], "--dtype: given twice"),
        (
            ["flops", "gpt2", "--seq-len", "8", "--attention", "full", "--attention"]
            + ["causal"],
            "argument --attention: given twice",
        ),
        (
            ["flops", "gpt2", "--seq-len", "8", "--attention", "half"],
            "argument --attention: invalid choice: 'half'",
        ),
        *(
            ([*TOKENS, typed], f"argument --tokens: {says}")
            for typed, says in [
                ("1.5e0", "must be a whole number, got 1.5e0 (not an integer)"),
                ("1.5", "must be a whole number, got 1.5"),
                ("1e-3", "must be a whole number, got 1e-3"),
                ("1e-99999999", "must be a whole number, got 1e-99999999"),
                ("1e19", "must be at most 1,000,000,000,000,000,000, got 1e19"),
                ("1e99999999", "must be at most 1,000,000,000,000,000,000"),
                ("9" * 5000, "must be at most 1,000,000,000,000,000,000"),
                ("0", "must be a positive integer, got 0"),
                ("0e5", "must be a positive integer, got 0e5"),
                ("abc", f"{WHOLE} 'abc'"),
                ("-5", f"{WHOLE} '-5'"),
                (" 1e9", f"{WHOLE} ' 1e9'"),
                ("1e9 ", f"{WHOLE} '1e9 '"),
                ("1_000", f"{WHOLE} '1_000'"),
                ("\u0661e9", f"{WHOLE} '\u0661e9'"),
                ("inf", f"{WHOLE} 'inf'"),
                ("nan", f"{WHOLE} 'nan'"),
                ("1e3k", f"{WHOLE} '1e3k'"),
                ("1.e9", f"{WHOLE} '1.e9'"),
                ("e9", f"{WHOLE} 'e9'"),
                ("1e", f"{WHOLE} '1e'"),
                ("T", f"{WHOLE} 'T'"),
            ]
        ),
        (
            ["memory", "gpt2", "--gpu", "a\nb"],
            "argument --gpu: must be a GPU of the catalogue",
        ),
        (["memory", "gpt2", "--gpu", "sxm"], "must name one GPU of the catalogue"),
        (["params", "gpt2", "x\ny\u2028z"], "unrecognized arguments: x\\ny\\u2028z"),
        (["params"], "the following arguments are required: MODEL"),
        (
            ["coursework", "grade", "", "\x85", "--no-such"],
            "arguments: \\x85 --no-such",
        ),
    ],
)
def test_bad_arguments_exit_2_with_one_line_naming_the_argument(argv, message):
    status, out, err = cli(*argv)
    assert (status, out) == (2, "")
    assert err.endswith("\n") and len(err.splitlines()) == 1
    assert message in err


def test_the_largest_arguments_still_count():
    status, out, _ = cli(
        "kv-cache", "llama-3.1-405b", "--seq-len", "100000000", "--batch", "1000000",
        "--dtype", "fp32", "--json",
    )  # fmt: skip
    assert status == 0
    assert json.loads(out)["bytes"] == 2 * 126 * 10**6 * 10**8 * 8 * 128 * 4


def test_help_exits_0_without_raising():
    status, out, err = cli("kv-cache", "--help")
    assert status == 0 and out.startswith("usage:") and err == ""


def test_one_line_escapes_every_line_break():
    text = "a\nb\rc\vd\fe\x1cf\x85g\u2028h\u2029i"
    assert len(one_line(text).splitlines()) == 1
    assert one_line("plain") == "plain"


def test_hostile_texts_are_refused_in_linear_time():
    """Texts built against the reader's own scanning: an unterminated string of
    escaped quotes (quadratic for a naive string pattern), a number of millions of
    digits, brackets of mismatched kinds."""
    escapes = "[" * 40 + '"' + '\\"' * 2_000_000
    assert "deeper than 32 levels" in refusal(escapes)
    digits = with_field("x", "1" * 3_000_000 + ".5")
    assert refusal(digits) == (
        "x must be a finite number, got 11111111111111111111...11111111.5 (3,000,002 "
        "characters, overflows to infinity)"
    )
    assert "is not valid JSON" in refusal("[}" * 40)
    assert "deeper than" not in refusal("]" * 40 + "[" * 40)


@pytest.mark.parametrize("levels", [31, 32, 33, 34])
def test_nesting_is_refused_before_any_other_rule(levels):
    """The depth check runs before parsing, exact at the limit, so it comes first
    whatever else the file holds (here an integer past 2^63 - 1)."""
    inner = "[" * (levels - 1) + "1" + "]" * (levels - 1)  # the object is level 1
    text = with_field("bos_token_id", inner)[:-1] + f', "y": {MAX_INT + 1}}}'
    if levels <= MAX_DEPTH:
        assert refusal(text).startswith("y must be an integer of at most")
    else:
        assert refusal(text) == (
            "the pasted config.json nests arrays and objects deeper than 32 levels; a "
            "config.json needs a few"
        )

"""Fuzzing the CLI and the calculator with hostile input (issue 18).

Every run of ``python -m llmmath`` (here `llmmath.cli.main`, in-process, with stdout and
stderr captured) must end in one of two ways: exit 0 with valid JSON on stdout (with
``--json``), or exit 2 with exactly one line on stderr and nothing on stdout. Never an
exception (a traceback), never a hang (each run has a time limit), never a count from
an ambiguous file (a duplicate key, a non-finite number, an integer past 2^63 - 1 or
nesting past `MAX_DEPTH` is always refused, naming the key or the field).

The inputs: mutations of every preset's config.json (keys deleted, values swapped for
other JSON types, negative, zero and enormous numbers, nesting, duplicate keys,
non-finite numbers), random JSON documents (random shapes, and objects made of the
readers' own field names and a supported ``model_type``), random bytes, and random
argument vectors for every subcommand the parser has (options and choices read from
the parser, so subcommands added later are fuzzed too).

``make test`` runs a fixed, derandomized set (``FUZZ_SCALE`` unset: about 600 cases);
``make fuzz`` sets ``FUZZ_SCALE=40`` (about 24,000 cases) and a random seed.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import math
import os
import signal
import string

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from llmmath import SUPPORTED_MODEL_TYPES, presets
from llmmath.cli import build_parser, main
from llmmath.config import MAX_DEPTH, MAX_INT
from llmmath.errors import SUFFIXES, large_count_argument
from llmmath.explorers import PASTED, explore, view_text
from llmmath.gpus import GPUS

SCALE = int(os.environ.get("FUZZ_SCALE", "1"))
SECONDS_PER_RUN = 10  # a run that takes longer counts as a hang


def fuzz_settings(examples: int):
    return settings(
        max_examples=examples * SCALE,
        derandomize=SCALE == 1,
        deadline=None,
        database=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    )


# --- running the CLI ------------------------------------------------------------------


class Hang(Exception):
    pass


def _alarm(signum, frame):
    raise Hang(f"a run took more than {SECONDS_PER_RUN} s")


def run(argv: list[str]) -> tuple[int, str, str]:
    """``main(argv)`` in-process: (status, stdout, stderr). Any exception fails."""
    out, err = io.StringIO(), io.StringIO()
    old = signal.signal(signal.SIGALRM, _alarm)
    signal.setitimer(signal.ITIMER_REAL, SECONDS_PER_RUN)
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            status = main(argv)
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)
    return status, out.getvalue(), err.getvalue()


def check_outcome(argv: list[str], status: int, out: str, err: str) -> None:
    """Exit 0 with output (valid JSON with --json), or exit 2 with one line."""
    assert isinstance(status, int), (argv, status)
    assert "Traceback" not in err, (argv, err)
    if status == 2:
        assert out == "", (argv, out[:300])
        assert err.endswith("\n") and len(err.splitlines()) == 1, (argv, err[:500])
        assert "error: " in err, (argv, err[:300])
        return
    assert status == 0, (argv, status, err[:300])
    assert err == "", (argv, err[:300])
    if out.startswith("usage:"):  # --help or an abbreviation of it
        return
    if "--json" in argv and argv[0] != "coursework":
        assert isinstance(json.loads(out), dict), (argv, out[:300])
    else:
        assert out.strip(), argv


@pytest.fixture(scope="module")
def workdir(tmp_path_factory):
    """A scratch directory as the working directory (coursework actions write into
    it) and the coursework key inside it, never in the user's home."""
    path = tmp_path_factory.mktemp("fuzz")
    cwd, key = os.getcwd(), os.environ.get("LLMMATH_COURSEWORK_KEY")
    os.chdir(path)
    (path / "tiny.json").write_text(json.dumps(TINY), encoding="utf-8")
    os.environ["LLMMATH_COURSEWORK_KEY"] = str(path / "coursework.key")
    yield path
    os.chdir(cwd)
    if key is None:
        os.environ.pop("LLMMATH_COURSEWORK_KEY", None)
    else:
        os.environ["LLMMATH_COURSEWORK_KEY"] = key


def write(workdir, text: str | bytes, name: str = "config.json") -> str:
    path = workdir / name
    if isinstance(text, str):
        text = text.encode("utf-8", "surrogatepass")
    path.write_bytes(text)
    return str(path)


# --- mutations of the presets' configs ------------------------------------------------

ENORMOUS = [
    2**31,
    2**53 + 1,
    MAX_INT,
    MAX_INT + 1,
    10**30,
    -(10**30),
    10**400,
]
NUMBERS = [-(2**63), -1, 0, 1, 2, 3, 7, 4096, 10**9, 0.0, -0.5, 0.5, 1e-300, 1e300]
NON_FINITE = ["NaN", "Infinity", "-Infinity", "1e999", "-1e400"]

scalars = (
    st.none()
    | st.booleans()
    | st.integers(-(2**70), 2**70)
    | st.sampled_from(NUMBERS + ENORMOUS)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=12)
    | st.sampled_from(SUPPORTED_MODEL_TYPES)
)
json_values = st.recursive(
    scalars,
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=12,
)


def nested(value, depth: int, kind: str):
    for _ in range(depth):
        value = [value] if kind == "list" else {"x": value}
    return value


NONFINITE_MARK = "__llmmath_nonfinite_{}__"


def depth_of(value) -> int:
    """Levels of arrays and objects (an object holding only scalars is level 1)."""
    if isinstance(value, dict):
        return 1 + max(map(depth_of, value.values()), default=0)
    if isinstance(value, list):
        return 1 + max(map(depth_of, value), default=0)
    return 0


def has_huge_int(value) -> bool:
    if isinstance(value, dict):
        return any(map(has_huge_int, value.values()))
    if isinstance(value, list):
        return any(map(has_huge_int, value))
    return isinstance(value, int) and abs(value) > MAX_INT


@st.composite
def mutated_preset(draw) -> tuple[str, str, str | None]:
    """(preset, text of a mutated config.json, the refusal it must get: a substring of
    the one line, or a walk's rule; None when a count is allowed)."""
    name = draw(st.sampled_from(presets.names()))
    raw = dict(presets.get(name).hf_config)
    marks: dict[str, str] = {}
    duplicates: list[tuple[str, object]] = []
    kinds = ["delete", "type", "number", "enormous", "nest", "duplicate", "nonfinite"]
    for _ in range(draw(st.integers(1, 3))):
        key = draw(st.sampled_from(sorted(raw) or ["model_type"]))
        kind = draw(st.sampled_from([*kinds, "new key"]))
        if kind == "delete":
            raw.pop(key, None)
        elif kind == "type":
            raw[key] = draw(json_values)
        elif kind == "number":
            raw[key] = draw(st.sampled_from(NUMBERS))
        elif kind == "enormous":
            raw[key] = draw(st.sampled_from(ENORMOUS))
        elif kind == "nest":
            depth = draw(st.integers(1, MAX_DEPTH + 8))
            shape = draw(st.sampled_from(["list", "dict"]))
            raw[key] = nested(raw.get(key), depth, shape)
        elif kind == "duplicate":
            duplicates.append((key, draw(json_values)))
        elif kind == "nonfinite":
            raw[key] = mark = NONFINITE_MARK.format(len(marks))
            marks[json.dumps(mark)] = draw(st.sampled_from(NON_FINITE))
        else:
            raw[draw(st.text(max_size=10))] = draw(json_values)
    text = json.dumps(raw, indent=draw(st.sampled_from([None, 2])))
    nonfinite = False
    for mark, token in marks.items():
        nonfinite |= mark in text
        text = text.replace(mark, token)
    duplicates = [(k, v) for k, v in duplicates if k in raw]
    for key, value in duplicates:
        body = text.rstrip()[:-1].rstrip()
        sep = "" if body.endswith("{") else ","
        text = f"{body}{sep} {json.dumps(key)}: {json.dumps(value)}}}"
    # The reader's order: nesting (before parsing), a duplicate key (while parsing),
    # then the walk over the values (non-finite numbers, huge integers).
    if depth_of(raw) > MAX_DEPTH or any(
        depth_of(v) >= MAX_DEPTH for _, v in duplicates
    ):
        return name, text, f"deeper than {MAX_DEPTH} levels"
    if duplicates:
        return name, text, f"gives the key {duplicates[0][0]!r} twice"
    if nonfinite or has_huge_int(raw):
        return name, text, WALK
    return name, text, None


WALK = "a value the walk refuses"


def refused_as(err: str, expected: str) -> bool:
    if expected == WALK:
        return (
            "must be a finite number" in err or "must be an integer of at most" in err
        )
    return expected in err


@fuzz_settings(250)
@given(case=mutated_preset(), command=st.sampled_from(["params", "kv-cache", "flops"]))
def test_mutated_presets_get_a_count_or_one_line(workdir, case, command):
    name, text, expected = case
    argv = [command, write(workdir, text), "--json"]
    if command != "params":
        argv += ["--seq-len", "4096"]
    status, out, err = run(argv)
    check_outcome(argv, status, out, err)
    if expected:  # never a count from an ambiguous file
        assert status == 2, (name, text[:400], out[:200])
        assert refused_as(err, expected), (err, expected)
    if status == 0 and command == "params":
        report = json.loads(out)
        assert sum(report["components"].values()) == report["total"]
    if command == "params":  # the calculator shows the same line for the same text
        view = explore("calculator", {"preset": PASTED, "config": text})
        if status == 2:
            assert view_text(view) == err.strip().replace(
                f"config file {argv[1]!r}", "the pasted config.json"
            )


# --- random documents -----------------------------------------------------------------

FIELD_NAMES = sorted(
    {k for n in presets.names() for k in presets.get(n).hf_config}
    | {
        "num_experts",
        "layer_types",
        "sliding_window_pattern",
        "use_bidirectional_attention",
        "rope_parameters",
        "n_inner",
        "fused_qkv",
    }
)
field_values = (
    st.integers(-3, 300)
    | st.sampled_from(NUMBERS + ENORMOUS)
    | st.booleans()
    | st.none()
    | st.sampled_from(
        ["silu", "gelu", "sliding_attention", "full_attention", "linear", "llama3"]
    )
    | st.lists(st.integers(-2, 40) | st.sampled_from(["sliding_attention"]), max_size=6)
    | st.fixed_dictionaries(
        {"rope_type": st.sampled_from(["linear", "llama3", "yarn", 3])},
        optional={"factor": st.sampled_from([0, -1, 2.0, 8, 1e308, "x"])},
    )
)


@st.composite
def config_like(draw) -> dict:
    """An object of the readers' field names and small values, for a supported type."""
    raw = {"model_type": draw(st.sampled_from(SUPPORTED_MODEL_TYPES))}
    for key in draw(st.lists(st.sampled_from(FIELD_NAMES), max_size=20, unique=True)):
        raw[key] = draw(field_values)
    for key in draw(
        st.lists(
            st.sampled_from(
                ["vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers"]
            ),
            max_size=4,
        )
    ):
        raw[key] = draw(st.integers(1, 64))
    return raw


documents = (
    json_values.map(json.dumps)  # any JSON, NaN and Infinity included
    | config_like().map(json.dumps)
    | st.text(alphabet=string.printable + '{}[]":,\u2028\x85é', max_size=80)
    | st.binary(max_size=80)
)


@fuzz_settings(200)
@given(
    document=documents, command=st.sampled_from(["params", "kv-cache", "flops", "calc"])
)
def test_random_documents_get_a_count_or_one_line(workdir, document, command):
    if command == "calc":  # the calculator never raises; an error is its one line
        text = (
            document.decode("utf-8", "replace")
            if isinstance(document, bytes)
            else document
        )
        view = explore("calculator", {"preset": PASTED, "config": text})
        assert len(view_text(view).splitlines()) >= 1
        return
    argv = [command, write(workdir, document), "--json"]
    if command != "params":
        argv += ["--seq-len", "100"]
    status, out, err = run(argv)
    check_outcome(argv, status, out, err)


# --- random argument vectors ----------------------------------------------------------


def _subcommands() -> dict[str, argparse.ArgumentParser]:
    parser = build_parser()
    (sub,) = (a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return dict(sub.choices)


SUBCOMMANDS = _subcommands()
#: Subcommands that run a benchmark for seconds when the model is valid: fuzzed with
#: models and options that must be refused.
HEAVY = {"measure"}
TINY = {
    "model_type": "llama",
    "vocab_size": 11,
    "hidden_size": 8,
    "intermediate_size": 12,
    "num_hidden_layers": 2,
    "num_attention_heads": 2,
}
NUMBER_TEXTS = [
    "-1",
    "0",
    "1",
    "7",
    "4096",
    "100000000",
    "100000001",
    "1000000",
    "1000001",
    "99999999999999999999999999",
    "9" * 5000,
    "1e3",
    "0x10",
    "+5",
    " 5",
    "5_000",
    "\u0663",
    "nan",
    "-inf",
    "",
]


GPU_TEXTS = [*GPUS, "h100", "H200", "a100-80gb", "mi300x", "4090", "80gb", "h1000", ""]


@st.composite
def argv_for(draw) -> list[str]:
    name = draw(st.sampled_from(sorted(SUBCOMMANDS)))
    if name == "coursework":  # the read-only action, and refusals before any write
        action = draw(st.sampled_from(["key", "handout", "nope", "grade"]))
        tokens = ["--student", "--students", "--force", "07_kv_cache", "99_nope", "s1"]
        rest = draw(st.lists(st.sampled_from(tokens) | st.text(max_size=6), max_size=4))
        if action in ("handout", "grade"):  # refused before reading or writing
            rest = [t for t in rest if t not in ("--students",)] + ["--no-such"]
        return ["coursework", action, *rest]
    parser = SUBCOMMANDS[name]
    options = [a for a in parser._actions if a.option_strings]
    models = [] if name in HEAVY else [*presets.names()[:4], "tiny.json"]
    model = draw(
        st.sampled_from(
            [
                *models,
                "nope",
                "",
                "-",
                "/",
                "a\nb",
                "config.json",
                "/nonexistent/config.json",
                "x" * 5000 + ".json",
                "LLAMA-2-7B",
            ]
        )
        | st.text(max_size=8)
    )
    argv = [name]
    if name in HEAVY or draw(st.booleans()):  # without one, HEAVY runs its default
        argv.append(model)
    for _ in range(draw(st.integers(0, 5))):
        option = draw(st.sampled_from(options))
        flag = draw(st.sampled_from(option.option_strings))
        if option.choices:
            value = draw(
                st.sampled_from([str(c) for c in option.choices]) | st.text(max_size=6)
            )
        elif option.dest == "gpu":  # the catalogue's names, short names, near misses
            value = draw(st.sampled_from(GPU_TEXTS) | st.text(max_size=6))
        else:
            value = draw(st.sampled_from(NUMBER_TEXTS) | st.text(max_size=6))
        if flag in ("-h", "--help") and draw(st.booleans()):
            continue
        argv.append(flag)
        if option.nargs != 0 and draw(st.integers(0, 9)):
            argv.append(value)
    if draw(st.booleans()):
        argv.append("--json")
    if draw(st.integers(0, 4)) == 0:
        argv.insert(draw(st.integers(0, len(argv))), draw(st.text(max_size=6)))
    return argv


@fuzz_settings(150)
@given(argv=argv_for())
def test_random_arguments_get_an_answer_or_one_line(workdir, argv):
    status, out, err = run(argv)
    if argv[0] == "coursework" and status == 0:
        return  # a student's answers, as text
    check_outcome(argv, status, out, err)


def test_the_fuzzed_subcommands_include_every_counting_one():
    assert {"params", "kv-cache", "flops", "parallel", "coursework"} <= set(SUBCOMMANDS)


def test_limits_are_what_the_messages_say():
    assert MAX_INT == 2**63 - 1 and MAX_DEPTH == 32
    assert math.log10(MAX_INT) < 19


# --- counts as people write them (``--tokens``, issue 34) -----------------------------


def written_forms(n: int) -> list[str]:
    """``n`` as people write it: digits, scientific notation with and without a
    decimal point, and each suffix (K, M, B, T) that leaves a decimal mantissa."""
    text = str(n)
    digits = text.rstrip("0")
    zeros, top = len(text) - len(digits), len(text) - 1
    forms = [text, f"{n}e0", f"{n}E+0", f"{digits}e{zeros}", f"{n * 1000}e-3"]
    if len(digits) > 1:
        forms.append(f"{digits[0]}.{digits[1:]}e{top}")
    for suffix, power in SUFFIXES.items():
        if zeros >= power:
            forms.append(f"{n // 10**power}{suffix.upper()}")
        elif len(text) > power:  # a decimal point inside: 1.5T
            whole, fraction = text[:-power], text[-power:].rstrip("0")
            forms.append(f"{whole}.{fraction}{suffix}")
    return forms


@fuzz_settings(300)
@given(n=st.integers(1, 10**18))
def test_a_count_reads_back_in_every_written_form(n):
    for form in written_forms(n):
        assert large_count_argument(form) == n, form


@fuzz_settings(300)
@given(st.text(max_size=12) | st.text("0123456789.eE+-kKmMbBtT_ ", max_size=24))
def test_any_text_is_a_count_or_one_line(text):
    try:
        value = large_count_argument(text)
    except argparse.ArgumentTypeError as e:
        assert str(e).startswith("must be") and "\n" not in str(e)
        return
    assert 1 <= value <= 10**18

"""The one GPU catalogue (`llmmath.gpus`): internally consistent, a few published
figures written here from the datasheets, and the one capacity rule used by every
command and explorer."""

import json
import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from llmmath import presets
from llmmath.cli import main
from llmmath.cli.serving import GPU_NAMES, memory_report
from llmmath.config import ConfigError
from llmmath.gpus import DEFAULT_GPU, GPUS, gpu_named, match_gpu
from llmmath.memory import GPU_80GB
from llmmath.parallel import CLUSTERS
from llmmath.roofline import GPUS as ROOFLINE_GPUS
from llmmath.roofline import decode_step


def test_catalogue_covers_the_common_gpus():
    names = set(GPUS)
    for wanted in (
        "A100-SXM4-40GB",
        "A100-PCIE-40GB",
        "A100-SXM4-80GB",
        "A100-PCIE-80GB",
        "H100-SXM5-80GB",
        "H100-PCIE-80GB",
        "H100-NVL-94GB",
        "H200-SXM-141GB",
        "B200-SXM-180GB",
        "L4-24GB",
        "L40S-48GB",
        "RTX-4090-24GB",
        "MI300X-192GB",
    ):
        assert wanted in names
    assert len(GPUS) >= 17
    assert GPU_NAMES == tuple(GPUS) and DEFAULT_GPU in GPUS


@pytest.mark.parametrize("name", sorted(GPUS))
def test_each_row_is_consistent(name):
    g = GPUS[name]
    assert g.name == name and g.source
    # the capacity rule: the vendor's "N GB", the last part of the name, as N·10⁹ B
    (gb,) = re.findall(r"(\d+)GB$", name)
    assert g.memory == int(gb) * 10**9
    assert g.ridge_point == g.peak_flops / g.bandwidth
    assert 1e13 < g.peak_flops < 1e16 and 1e11 < g.bandwidth < 1e13
    if g.fp8_flops is not None:
        assert g.fp8_flops == pytest.approx(2 * g.peak_flops, rel=0.02)  # about twice
    if g.reported_memory is not None:
        assert g.reported_memory > g.memory  # the rule leaves the driver a margin
    assert g.fits(g.memory) and not g.fits(g.memory + 1)


def test_published_figures():
    h100 = GPUS["H100-SXM5-80GB"]
    assert (h100.peak_flops, h100.bandwidth) == (989.4e12, 3.35e12)
    assert h100.reported_memory == 81559 * 2**20 == 85_520_809_984  # nvidia-smi
    assert GPUS["A100-SXM4-80GB"].reported_memory == 81920 * 2**20
    assert GPUS["A100-SXM4-80GB"].bandwidth == 2039e9
    assert GPUS["A100-PCIE-80GB"].bandwidth == 1935e9
    assert GPUS["H200-SXM-141GB"].bandwidth == 4.8e12
    assert GPUS["MI300X-192GB"].peak_flops == 1307.4e12
    assert GPUS["L40S-48GB"].fp8_flops == 733e12
    assert h100.ridge_point == pytest.approx(295.3, abs=0.1)


def test_one_capacity_everywhere():
    assert GPU_80GB == GPUS[DEFAULT_GPU].memory == 80 * 10**9
    for name, g in ROOFLINE_GPUS.items():
        assert g is GPUS[name]
    for c in CLUSTERS.values():
        assert c.gpu is GPUS[c.gpu.name] and c.memory == c.gpu.memory
    cfg = presets.load("llama-3-8b")
    for name in ("A100-SXM4-40GB", "L4-24GB", "MI300X-192GB"):
        r = memory_report("llama-3-8b", cfg, gpu=name)
        assert r["gpu_bytes"] == GPUS[name].memory
        assert r["fits"] is (r["total_bytes"] <= GPUS[name].memory)
    assert decode_step(cfg, "L4-24GB").gpu is GPUS["L4-24GB"]


def test_unknown_gpu_is_refused_by_name():
    with pytest.raises(ConfigError, match="gpu must be a GPU of the catalogue") as e:
        gpu_named("B300")
    assert "(did you mean 'B200-SXM-180GB'" in str(e.value)
    assert str(e.value).endswith("GPUs: " + ", ".join(GPUS))


# --- the names people type (issue 34, item 3) -----------------------------------------


def test_every_catalogue_name_is_chip_form_memory():
    """The resolver's reading of a name (`llmmath.gpus` docstring): chip, at most one
    form, then the memory in GB; a name added in another shape fails here first."""
    from llmmath.gpus import _parts

    for name in GPUS:
        chip, form, memory = _parts(name)
        assert re.fullmatch(r"[a-z0-9]+", chip) and re.fullmatch(r"\d+gb", memory)
        assert form is None or re.fullmatch(r"sxm\d?|pcie|nvl", form), name


@pytest.mark.parametrize(
    "typed, name",
    [
        ("H200", "H200-SXM-141GB"),
        ("mi300x", "MI300X-192GB"),
        ("MI325X", "MI325X-256GB"),
        ("H100-SXM", "H100-SXM5-80GB"),
        ("h100 sxm5", "H100-SXM5-80GB"),
        ("h100-pcie", "H100-PCIE-80GB"),
        ("H100_NVL", "H100-NVL-94GB"),
        ("4090", "RTX-4090-24GB"),
        ("RTX 4090", "RTX-4090-24GB"),
        ("NVIDIA GeForce RTX 4090", "RTX-4090-24GB"),
        ("AMD Instinct MI300X", "MI300X-192GB"),
        ("b200", "B200-SXM-180GB"),
        ("l40s", "L40S-48GB"),
        ("L4", "L4-24GB"),
        ("a10", "A10-24GB"),
        ("t4", "T4-16GB"),
        ("v100", "V100-SXM2-32GB"),
        ("h800", "H800-SXM5-80GB"),
        ("a100-sxm4-40g", "A100-SXM4-40GB"),
        ("A100 PCIe 40", "A100-PCIE-40GB"),
    ],
)
def test_a_short_name_of_one_gpu_names_it_without_a_note(typed, name):
    assert match_gpu(typed) == (GPUS[name], None)
    assert gpu_named(typed) is GPUS[name]


@pytest.mark.parametrize(
    "typed, name, others",
    [
        ("h100", "H100-SXM5-80GB", ["H100-PCIE-80GB", "H100-NVL-94GB"]),
        ("H100-80GB", "H100-SXM5-80GB", ["H100-PCIE-80GB"]),
        ("a100", "A100-SXM4-80GB", ["A100-SXM4-40GB", "A100-PCIE-40GB"]),
        ("a100-80gb", "A100-SXM4-80GB", ["A100-PCIE-80GB"]),
        ("A100-40GB", "A100-SXM4-40GB", ["A100-PCIE-40GB"]),
        ("a100-sxm", "A100-SXM4-80GB", ["A100-SXM4-40GB"]),
        ("a100-pcie", "A100-PCIE-80GB", ["A100-PCIE-40GB"]),
    ],
)
def test_the_family_rule_picks_sxm_then_memory_and_says_so(typed, name, others):
    """Several GPUs of one chip: the SXM board, then the most memory; the note names
    what was read and the others."""
    gpu, note = match_gpu(typed)
    assert gpu is GPUS[name]
    assert note.startswith(f"{typed!r} read as {name} (also ")
    assert all(other in note for other in others)
    assert "SXM board first, then the most memory" in note


@pytest.mark.parametrize(
    "typed, names",
    [
        ("80gb", ["A100-SXM4-80GB", "A100-PCIE-80GB", "H100-SXM5-80GB"]),
        ("sxm5", ["H100-SXM5-80GB", "H800-SXM5-80GB"]),
        ("24GB", ["L4-24GB", "A10-24GB", "RTX-4090-24GB"]),
    ],
)
def test_a_name_of_several_chips_gets_did_you_mean(typed, names):
    with pytest.raises(ConfigError, match="gpu must name one GPU of the catalogue"):
        gpu_named(typed)
    message = str(pytest.raises(ConfigError, gpu_named, typed).value)
    assert "did you mean" in message and all(f"{n!r}" in message for n in names)


@pytest.mark.parametrize(
    "typed, suggested",
    [
        ("h1000", "H100-SXM5-80GB"),
        ("mi300", "MI300X-192GB"),
        ("l40", "L40S-48GB"),
        ("H100-SXM5-80GB-HBM3", "H100-SXM5-80GB"),
        ("rtx4090", "RTX-4090-24GB"),
    ],
)
def test_an_unknown_name_gets_the_closest_real_names(typed, suggested):
    message = str(pytest.raises(ConfigError, gpu_named, typed).value)
    assert message.startswith("gpu must be a GPU of the catalogue")
    hint = re.search(r"\(did you mean (.*?)\?\)", message).group(1)
    assert f"{suggested!r}" in hint
    assert set(re.findall(r"'([^']+)'", hint)) <= set(GPUS)


GPU_NAMES_AND_CASES = st.tuples(
    st.sampled_from(sorted(GPUS)), st.lists(st.booleans(), min_size=20, max_size=20)
)


def _in_case(name: str, upper: list[bool]) -> str:
    return "".join(c.upper() if u else c.lower() for c, u in zip(name, upper))


@given(GPU_NAMES_AND_CASES)
def test_every_catalogue_name_in_any_case_names_itself(case):
    name, upper = case
    assert match_gpu(_in_case(name, upper)) == (GPUS[name], None)


def _words(name: str) -> list[str]:
    """A catalogue name's words, as a reader might type them: the chip, the form and
    the memory, the vendor's RTX left out."""
    return [w for w in name.split("-") if w != "RTX"]


@st.composite
def short_names(draw) -> tuple[str, list[str]]:
    """(a short name, its words): some words of a catalogue name, in any order and
    case, joined by '-', '_' or spaces, a vendor's word perhaps in front; the memory
    perhaps without its "B" or "GB", the SXM form perhaps without its generation."""
    words = _words(draw(st.sampled_from(sorted(GPUS))))
    kept = draw(st.lists(st.sampled_from(words), min_size=1, unique=True))
    typed = []
    for word in kept:
        if word.endswith("GB"):
            word = word[: -draw(st.sampled_from([0, 1, 2])) or None]
        elif word.startswith("SXM"):
            word = draw(st.sampled_from([word, "SXM"]))
        typed.append(_in_case(word, draw(st.lists(st.booleans(), min_size=8))))
    vendor = draw(st.sampled_from(["", "NVIDIA ", "amd-", "GeForce RTX "]))
    separator = draw(st.sampled_from(["-", "_", " ", " - "]))
    return vendor + separator.join(typed), [w.lower() for w in kept]


def _holds(name: str, typed_words: list[str]) -> bool:
    """Whether every typed word is the start of a distinct word of ``name``, said
    independently of `llmmath.gpus`: "sxm" for SXM5, "80" and "80g" for 80GB."""
    words = [w.lower() for w in _words(name)]
    for word in typed_words:
        hits = [
            w
            for w in words
            if w == word
            or (word == "sxm" and w.startswith("sxm"))
            or (w.endswith("gb") and word in (w[:-1], w[:-2]))
        ]
        if not hits:
            return False
        words.remove(hits[0])
    return True


@given(short_names())
def test_a_short_name_names_one_gpu_or_gets_did_you_mean_with_real_names(case):
    typed, words = case
    holders = [n for n in GPUS if _holds(n, words)]
    assert holders  # the words came from a catalogue name
    chips = {_words(n)[0] for n in holders}
    try:
        gpu, note = match_gpu(typed)
    except ConfigError as e:  # several chips: every one of them named, and no other
        message = str(e)
        assert len(chips) > 1 and "\n" not in message
        hint = re.search(r"\(did you mean (.*?)\?\)", message).group(1)
        assert sorted(re.findall(r"'([^']+)'", hint)) == sorted(holders)
        return
    assert len(chips) == 1 and gpu.name in holders
    assert (note is None) == (len(holders) == 1)
    if note:  # the family rule: SXM first, then the most memory
        best = min(holders, key=lambda n: ("SXM" not in n, -GPUS[n].memory))
        assert gpu.name == best and all(n in note for n in holders)


@given(st.text(max_size=30) | st.text("h1a0-_ sxmgbHXPCIE48", max_size=16))
def test_any_text_names_a_gpu_or_gets_one_line_with_real_names(text):
    try:
        gpu, _note = match_gpu(text)
    except ConfigError as e:
        message = str(e)
        assert message.startswith("gpu must") and "Traceback" not in message
        hint = re.search(r"\(did you mean (.*?)\?\)", message)
        if hint:
            assert set(re.findall(r"'([^']+)'", hint.group(1))) <= set(GPUS)
        return
    assert gpu is GPUS[gpu.name]


def cli_json(capsys, *argv) -> dict:
    status = main([*argv, "--json"])
    out, err = capsys.readouterr()
    assert (status, err) == (0, ""), err
    return json.loads(out)


def test_every_command_with_gpu_takes_the_same_names(capsys):
    memory = cli_json(capsys, "memory", "llama-3-8b", "--gpu", "h100")
    train = cli_json(capsys, "train-memory", "gpt2", "--gpu", "h100")
    parallel = cli_json(
        capsys, "parallel", "llama-3-8b", "--gpus", "8", "--gpu", "h100"
    )
    assert memory["gpu"] == train["gpu"] == "H100-SXM5-80GB"
    for r in (memory, train, parallel):
        assert r["gpu_note"].startswith("'h100' read as H100-SXM5-80GB (also ")
    # the name memory uses works in parallel, and the old short names are the same
    # clusters as before, through the one resolver
    for name, old in [
        ("H100-SXM5-80GB", "h100"),
        ("h800-sxm5-80gb", "h800"),
        ("A100-SXM4-80GB", "a100"),
    ]:
        argv = ["parallel", "llama-3-8b", "--gpus", "8", "--gpu"]
        new_r, old_r = cli_json(capsys, *argv, name), cli_json(capsys, *argv, old)
        note = old_r.pop("gpu_note", None)  # h800 names one GPU; h100, a100 several
        assert "gpu_note" not in new_r and (note is None) == (old == "h800")
        assert new_r == old_r and new_r["gpu"] == CLUSTERS[old].name
    for command in (["memory", "llama-3-8b"], ["train-memory", "gpt2"]):
        for typed in ("H200", "mi300x", "4090", "H100-SXM", "a100-80gb"):
            assert cli_json(capsys, *command, "--gpu", typed)["gpu"] in GPUS
    text = main(["memory", "llama-3-8b", "--gpu", "a100"])
    out = capsys.readouterr().out
    assert text == 0 and "fits in A100-SXM4-80GB" in out
    assert "--gpu 'a100' read as A100-SXM4-80GB" in out


@pytest.mark.parametrize(
    "argv",
    [
        ["memory", "llama-3-8b"],
        ["train-memory", "gpt2"],
        ["parallel", "llama-3-8b", "--gpus", "8"],
    ],
)
def test_a_bad_gpu_is_one_line_naming_the_option(capsys, argv):
    for typed, says in [
        ("h1000", "(did you mean 'H100-SXM5-80GB'"),
        ("80gb", "must name one GPU of the catalogue; '80gb' names 5"),
        ("", "must be a GPU of the catalogue"),
        ("x" * 5000, "got 'xxxxxxxxxxxxxxxxxxxx...xxxxxxxxxx'"),
    ]:
        status = main([*argv, "--gpu", typed])
        out, err = capsys.readouterr()
        assert (status, out) == (2, "") and err.count("\n") == 1
        assert "argument --gpu: " in err and says in err, err


def test_help_lists_the_catalogue_once():
    """One list of names: the catalogue's, in memory's and train-memory's --help;
    parallel's names its clusters' GPUs by the same names."""
    import contextlib
    import io

    def help_of(*argv):
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            assert main([*argv, "--help"]) == 0
        return " ".join(out.getvalue().split())

    listing = ", ".join(GPUS)
    for command in ("memory", "train-memory"):
        text = help_of(command)
        assert text.count(listing) == 1 and "h100, H200, a100-80gb, mi300x" in text
    text = help_of("parallel")
    assert "H100-SXM5-80GB (default), H800-SXM5-80GB, A100-SXM4-80GB" in text
    assert "{h100,h800,a100}" not in text


def test_presets_and_gpus_share_did_you_mean():
    from llmmath.errors import did_you_mean

    assert did_you_mean([]) == ""
    assert did_you_mean(["a"]) == " (did you mean 'a'?)"
    assert did_you_mean(["a", "b", "c"]) == " (did you mean 'a', 'b' or 'c'?)"
    with pytest.raises(ConfigError, match=r"\(did you mean 'llama-2-7b'\?\)"):
        presets.get("llama-2-7c")

"""llmmath.book: the chapters' glue, table and FLOP-measuring helpers."""

import subprocess
import sys
from fractions import Fraction

import pytest

from llmmath import book


@pytest.fixture
def glued(monkeypatch):
    """Record llmmath.book.glue calls instead of displaying them."""
    calls = []
    monkeypatch.setattr(
        book,
        "glue",
        lambda key, value, display=True: calls.append((key, value, display)),
    )
    return calls


def _published(glue_function, *args, **kwargs):
    """What ``glue_function(*args, **kwargs)`` publishes: (data, metadata) pairs."""
    import IPython.display

    shown = []

    def record(*objs, raw=False, metadata=None, **_):
        shown.extend((obj, metadata) for obj in objs)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(IPython.display, "display", record)
        if glue_function.__module__.startswith("myst_nb"):
            import myst_nb.ext.glue  # binds IPython's display when imported

            patch.setattr(myst_nb.ext.glue, "ipy_display", record)
        glue_function(*args, **kwargs)
    return shown


@pytest.mark.parametrize(
    "value, display",
    [("6,738,415,616", False), ("about 3×", True), (Fraction(2, 3), False), (7, True)],
)
def test_glue_publishes_what_myst_nb_glue_does(value, display):
    """The book builds from the glued outputs, so they must stay myst-nb's, byte for
    byte; the reader's kernel needs no myst-nb for them."""
    myst_nb = pytest.importorskip("myst_nb")
    ours = _published(book.glue, "key", value, display=display)
    theirs = _published(myst_nb.glue, "key", value, display=display)
    assert ours == theirs and len(ours) == 1
    (data, metadata) = ours[0]
    assert metadata["scrapbook"]["name"] == "key"
    assert all(k.startswith(metadata["scrapbook"]["mime_prefix"]) for k in data)


def test_glue_int_thousands_separators(glued):
    book.glue_int("n", 6738415616)
    book.glue_int("small", 7)
    book.glue_int("neg", -1234)
    assert glued == [
        ("n", "6,738,415,616", False),
        ("small", "7", False),
        ("neg", "-1,234", False),
    ]


@pytest.mark.parametrize("bad", [1.0, 2.5, "12", True, None])
def test_glue_int_refuses_non_integers(glued, bad):
    with pytest.raises(TypeError, match="needs an int"):
        book.glue_int("x", bad)
    assert glued == []


def test_glue_str_float_pct(glued):
    book.glue_str("s", "about 3×")
    book.glue_float("f", 2 / 3, ".3f")
    book.glue_float("p", 0.6424, ".1%")
    book.glue_pct("q", 0.123456)
    book.glue_pct("r", 0.5, digits=0)
    assert glued == [
        ("s", "about 3×", False),
        ("f", "0.667", False),
        ("p", "64.2%", False),
        ("q", "12.35%", False),
        ("r", "50%", False),
    ]


def test_import_is_light():
    code = (
        "import sys, llmmath.book; "
        "print(sorted(m for m in ('torch', 'myst_nb', 'tabulate') if m in sys.modules))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    )
    assert out.stdout.strip() == "[]"


ROWS = [("Llama-2-7B", 6738415616, 0.5), ("GPT-2 <small>", 124439808, None)]


def test_table_plain_text():
    t = book.table(ROWS, ["model", "parameters", "share"], caption="Counts")
    lines = repr(t).splitlines()
    assert lines[0] == "Counts" and lines[1] == ""
    assert lines[2].split() == ["model", "parameters", "share"]
    assert set(lines[3]) == {"-", " "}
    assert lines[4].split() == ["Llama-2-7B", "6,738,415,616", "0.5"]
    assert lines[5].split() == ["GPT-2", "<small>", "124,439,808"]
    # numbers align right: the two counts end in the same column
    assert lines[4].index("6,738,415,616") + 13 == lines[5].index("124,439,808") + 11


def test_table_html_is_one_table():
    t = book.table(ROWS, ["model", "parameters (count)", "share"], caption="Counts")
    out = t._repr_html_()
    assert out.count("<table") == 1 and out.count("</table>") == 1
    assert "<caption>Counts</caption>" in out
    assert "<th>model" in out and "parameters (count)" in out
    assert "6,738,415,616" in out and "124,439,808" in out
    assert "GPT-2 &lt;small&gt;" in out and "<small>" not in out
    assert out.count("<tr>") == 3
    assert 'style="text-align: right;">6,738,415,616' in out
    assert "<details>" not in out


def test_table_fold_and_align():
    rows = [(f"m{i}", i) for i in range(30)]
    out = book.table(rows, ["name", "n"], caption="Presets", fold=True)._repr_html_()
    assert out.startswith("<details>") and out.rstrip().endswith("</details>")
    assert "<summary>Presets (30 rows)</summary>" in out
    one = book.table([("a", 1)], ["x", "y"], fold=True)._repr_html_()
    assert "<summary>Table (1 row)</summary>" in one
    left = book.table([(1, 2)], ["x", "y"], align="lr")._repr_html_()
    assert "<td>1" in left and 'style="text-align: right;">2' in left


def test_table_cells():
    t = book.table([(True, Fraction(1, 3), 1234.5, "x")], list("abcd"))
    assert repr(t).splitlines()[2].split() == ["True", "0.3333", "1,234", "x"]
    t = book.table([(2.0 / 3,)], ["r"], floatfmt=".2f")
    assert repr(t).splitlines()[-1].strip() == "0.67"
    t = book.table([(0.5, 0.25)], ["a", "b"], floatfmt=[".1f", ".0%"])
    assert repr(t).splitlines()[-1].split() == ["0.5", "25%"]
    with pytest.raises(ValueError, match="one format for each"):
        book.table([(0.5, 0.25)], ["a", "b"], floatfmt=[".1f"])
    t = book.table([(-1e-17,), (-0.004,), (-0.006,)], ["r"], floatfmt=".2f")
    assert [line.strip() for line in repr(t).splitlines()[2:]] == [
        "0.00",
        "0.00",
        "-0.01",
    ]


def test_table_refuses_ragged_rows_and_bad_align():
    with pytest.raises(ValueError, match="row 1 has 1 cells, but there are 2 headers"):
        book.table([(1, 2), (3,)], ["a", "b"])
    with pytest.raises(ValueError, match="align"):
        book.table([(1, 2)], ["a", "b"], align=["left"])


def _tiny(name):
    from llmmath import presets

    sizes = dict(
        hidden_size=64,
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=16,
        intermediate_size=96,
        num_hidden_layers=2,
        vocab_size=128,
    )
    return presets.load(name).replace(**sizes)


def test_measured_terms_dense_by_hand():
    torch = pytest.importorskip("torch")
    from llmmath.modules import build_model

    cfg = _tiny("llama-3-8b")
    b, t = 2, 7
    H, L, V, I_ = 64, 2, 128, 96
    q, kv = 4 * 16, 2 * 16
    got = book.measured_terms(build_model(cfg, device="cpu"), torch.zeros(b, t).long())
    assert got == {
        "attention": 2 * b * t * L * H * (q + 2 * kv + q),
        "ffn": 2 * b * t * L * 3 * H * I_,
        "lm_head": 2 * b * t * H * V,
        "QKᵀ + AV": L * 2 * (2 * b * 4 * t * t * 16),
    }


def test_measured_terms_counts_the_router():
    torch = pytest.importorskip("torch")
    from llmmath.modules import build_model

    cfg = _tiny("mixtral-8x7b")
    b, t = 1, 5
    got = book.measured_terms(build_model(cfg, device="cpu"), torch.zeros(b, t).long())
    dense = book.measured_terms(
        build_model(_tiny("llama-3-8b"), device="cpu"), torch.zeros(b, t).long()
    )
    E = cfg.num_local_experts
    assert got["attention"] == dense["attention"] and got["lm_head"] == dense["lm_head"]
    # the router (H × E) runs on every token; at most k of E experts run on each token
    router = 2 * b * t * 2 * 64 * E
    assert router < got["ffn"] <= router + cfg.num_experts_per_tok * dense["ffn"]


def test_preset_names_are_the_chapters_model_types():
    from llmmath import presets

    names = book.preset_names()
    assert names == tuple(sorted(names))
    assert {"gpt2", "llama-2-7b", "mixtral-8x7b", "minimind2-moe"} <= set(names)
    for name in presets.names():
        kind = presets.load(name).model_type
        assert (name in names) == (kind in book.CHAPTER_MODEL_TYPES), name

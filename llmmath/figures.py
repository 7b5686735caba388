"""The book's figures in the reader's language: labels, legends and titles in Chinese.

A figure is a code cell's output, a PNG that matplotlib drew when the notebook was
executed, in English. Its words are translated where they are drawn: within
`translating`, every text of a figure (a title, an axis label, a legend's entry, a tick
label, an annotation) is drawn as its translation, the same rule as the printed
outputs' (`llmmath.localize.output_message`): a text with English words is a
message whose numbers are fields, ``"total {0} parameters"``, filled from the English
text, so the figure shows the same numbers in both languages; a text of numbers,
names and code is drawn as it is. The messages live in their own gettext catalogue,
``llmmath/locale/<lang>/LC_MESSAGES/figures.po`` (compiled to ``figures.mo`` beside
it, which ships in the package).

Chinese needs a font with CJK glyphs. matplotlib's own DejaVu Sans has none, so the
package carries a subset of WenQuanYi Micro Hei (``llmmath/fonts/``, Apache-2.0: its
README says where it comes from and how it is remade): `use_font` registers it with
matplotlib's font manager as DejaVu Sans's fallback, so Latin letters, digits and
symbols are drawn as in the English figure and only CJK characters come from it. The
build, Binder and any pip install have it; no system font is needed.

The Chinese site and the Chinese reader editions show Chinese figures without
re-executing the notebooks: ``python -m llmmath.figures`` executes each chapter with a
figure once with the figures translated (`install`), and stores each Chinese PNG under
``locales/<lang>/figures/`` named by the SHA-256 of the stored English PNG it
translates, with an index of the translations each one used (``index.json``).
`llmmath_book.translation.translate_outputs` replaces an English figure by its
translation when there is one; ``tests/test_figures.py`` fails when a chapter's
figure has none, or when a translation it was drawn with has changed since (stale).
The same command adds each new figure message to the catalogues (untranslated), and
remakes the font subset when a translation uses a character the font does not have.

In a live kernel, `install` (which the Chinese reader editions' first cell calls)
draws every figure in the language of `llmmath.messages` from then on.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
from pathlib import Path

from llmmath import messages

DOMAIN = "figures"
#: The font subset (WenQuanYi Micro Hei) and its family name.
FONT = Path(__file__).with_name("fonts") / "wqy-microhei-subset.ttf"
FAMILY = "WenQuanYi Micro Hei"
#: The font the subset is made from (Debian's fonts-wqy-microhei).
SOURCE_FONT = Path("/usr/share/fonts/truetype/wqy/wqy-microhei.ttc")
#: The repository (the chapters and the stored Chinese figures live there).
ROOT = Path(__file__).resolve().parents[1]
#: The chapters whose figures are translated.
CHAPTERS = ("chapters", "book")
PNG = "image/png"


class FigureTranslationError(ValueError):
    """A figure text with no translation (strict mode)."""


# ------------------------------------------------------------------------------
# The catalogue and the font.


def catalogue_path(language: str, suffix: str = ".po") -> Path:
    language = messages.language(language)
    return messages.LOCALE_DIR / language / "LC_MESSAGES" / f"{DOMAIN}{suffix}"


_CATALOGUES: dict[str, dict[str, str]] = {}


def catalogue(language: str) -> dict[str, str]:
    """The figures' messages of ``language`` as {English: translation} (empty for
    English), read once from the compiled catalogue."""
    language = messages.language(language)
    if language not in _CATALOGUES:
        found: dict[str, str] = {}
        if language != "en":
            import gettext

            path = catalogue_path(language, ".mo")
            if path.is_file():
                with path.open("rb") as f:
                    table = gettext.GNUTranslations(f)._catalog
                found = {k: v for k, v in table.items() if isinstance(k, str) and k}
                found = {k: v for k, v in found.items() if v}
        _CATALOGUES[language] = found
    return _CATALOGUES[language]


def use_font() -> None:
    """Register the CJK font subset with matplotlib (``fontManager.addfont``) and make
    it the last fallback of every text's fonts: a text in the default sans-serif is
    drawn in DejaVu Sans as in English, and only the characters DejaVu Sans lacks
    (Chinese, full-width punctuation) come from it. (A generic family such as
    ``sans-serif`` resolves to one font, so the fallback is added to the fonts
    matplotlib finds for a text, `FontManager._find_fonts_by_props`.) Idempotent."""
    from matplotlib import font_manager

    manager = font_manager.fontManager
    if not any(f.fname == str(FONT) for f in manager.ttflist):
        manager.addfont(str(FONT))
    find = font_manager.FontManager._find_fonts_by_props
    if getattr(find, "llmmath", False):
        return

    def find_with_fallback(self, *args, **kwargs):
        found = find(self, *args, **kwargs)
        return found if str(FONT) in found else [*found, str(FONT)]

    find_with_fallback.llmmath = True
    font_manager.FontManager._find_fonts_by_props = find_with_fallback


def font_characters(path: Path = FONT) -> set[str]:
    """The characters the font at ``path`` has a glyph for."""
    from fontTools.ttLib import TTFont

    with TTFont(str(path), fontNumber=0, lazy=True) as font:
        return {chr(code) for code in font.getBestCmap()}


def needed_characters(translations) -> set[str]:
    """The characters of ``translations`` that the CJK font must draw: every one that
    DejaVu Sans, matplotlib's own font, does not (it draws ASCII, ``ᵀ``, ``⁵``…)."""
    from matplotlib import font_manager

    dejavu = font_characters(Path(font_manager.findfont("DejaVu Sans")))
    return {c for text in translations for c in text if c not in dejavu and c != "\n"}


def make_font(characters: set[str], source: Path = SOURCE_FONT, out: Path = FONT):
    """Write the subset of ``source`` (WenQuanYi Micro Hei, the first font of its
    collection) that draws ``characters`` and ASCII, hinting and names kept; raises
    FileNotFoundError naming the package that has the source font."""
    from fontTools import subset

    if not source.is_file():
        raise FileNotFoundError(
            f"{source}: the CJK font to subset is missing (Debian: apt-get install "
            "fonts-wqy-microhei)"
        )
    options = subset.Options()
    options.font_number = 0
    options.name_IDs = ["*"]
    options.name_languages = ["*"]
    options.notdef_outline = True
    options.recalc_timestamp = False  # the same characters give the same file
    font = subset.load_font(str(source), options)
    subsetter = subset.Subsetter(options)
    text = "".join(sorted(characters | {chr(c) for c in range(32, 127)}))
    subsetter.populate(text=text)
    subsetter.subset(font)
    out.parent.mkdir(parents=True, exist_ok=True)
    subset.save_font(font, str(out), options)
    return out


# ------------------------------------------------------------------------------
# Translating a figure.


def message(text: str) -> str | None:
    """The message of one figure text (`llmmath.localize.output_message`); ``None``
    for mathtext (``$…$``, a log axis's ticks) and texts with no English word."""
    from llmmath.localize import output_message

    if not text.strip() or "$" in text:
        return None
    return output_message(text)


def translate(
    text: str, language: str, strict: bool = False, seen: dict | None = None
) -> str:
    """``text`` (one figure text) in ``language``, its numbers the English ones; the
    text itself when it has no message, or when the catalogue lacks it (then
    `FigureTranslationError` when ``strict``). ``seen`` collects {message:
    translation or None}."""
    from llmmath.localize import fill_output

    found = message(text)
    if found is None or language == "en":
        return text
    translated = catalogue(language).get(found)
    if seen is not None:
        seen[found] = translated
    if translated is None:
        if strict:
            raise FigureTranslationError(
                f"figure text {text!r}: no translation of {found!r} in "
                f"{catalogue_path(language)}"
            )
        return text
    body = text.strip()
    start = text.index(body)
    return text[:start] + fill_output(translated, body) + text[start + len(body) :]


@contextlib.contextmanager
def translating(language: str, strict: bool = False, seen: dict | None = None):
    """Within the block, every matplotlib text is drawn (and measured, for the
    layout) in ``language``; the figures keep their English texts."""
    from matplotlib.text import Text

    language = messages.language(language)
    if language == "en":
        yield
        return
    use_font()
    get_text = Text.get_text

    def translated(self):
        return translate(get_text(self), language, strict, seen)

    Text.get_text = translated
    try:
        yield
    finally:
        Text.get_text = get_text


#: A folder where `install` keeps each figure it draws (pickled, with how it was
#: printed), for `generate` to draw again in another language.
KEEP = "LLMMATH_FIGURE_KEEP"


def install(language: str | None = None) -> None:
    """Draw every figure from now on in ``language`` (or the current language of
    `llmmath.messages`, asked at each drawing), in this process: matplotlib's
    `FigureCanvasBase.print_figure`, which Jupyter's inline backend and ``savefig``
    call, draws within `translating`. Idempotent."""
    from matplotlib.backend_bases import FigureCanvasBase

    if language is not None:
        messages.use(language)
    use_font()
    if getattr(FigureCanvasBase.print_figure, "llmmath", False):
        return
    print_figure = FigureCanvasBase.print_figure

    def print_translated(self, filename, *args, **kwargs):
        keep = os.environ.get(KEEP)
        if keep:
            _keep(self.figure, Path(keep), args, kwargs)
        with translating(messages.current()):
            return print_figure(self, filename, *args, **kwargs)

    print_translated.llmmath = True
    FigureCanvasBase.print_figure = print_translated


def _keep(figure, folder: Path, args, kwargs) -> None:
    """Pickle ``figure`` and how it was printed into ``folder`` (numbered in order)."""
    import pickle

    folder.mkdir(parents=True, exist_ok=True)
    number = len(list(folder.glob("*.pickle")))
    with (folder / f"{number:03d}.pickle").open("wb") as f:
        pickle.dump({"figure": figure, "args": args, "kwargs": kwargs}, f)


def draw(kept: Path, language: str, seen: dict | None = None) -> bytes:
    """The kept figure (`install`) printed again, its texts in ``language``."""
    import io
    import pickle

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    with kept.open("rb") as f:
        found = pickle.load(f)
    out = io.BytesIO()
    figure = found["figure"]
    try:
        with translating(language, seen=seen):
            figure.canvas.print_figure(out, *found["args"], **found["kwargs"])
    finally:
        plt.close(figure)
    return out.getvalue()


# ------------------------------------------------------------------------------
# The stored Chinese figures.


def figures_dir(language: str) -> Path:
    return ROOT / "locales" / messages.language(language) / "figures"


def digest(png) -> str:
    """The SHA-256 of a stored PNG output (base64 text, as a notebook keeps it)."""
    import base64

    data = "".join(png) if isinstance(png, list) else png
    return hashlib.sha256(base64.b64decode(data)).hexdigest()


def read_index(language: str) -> dict:
    path = figures_dir(language) / "index.json"
    return json.loads(path.read_text("utf-8")) if path.is_file() else {}


def stored_figure(png, language: str) -> str | None:
    """The translated PNG (base64 text) of an English figure output, ``None`` when
    there is none."""
    import base64

    path = figures_dir(language) / f"{digest(png)[:16]}.png"
    if not path.is_file():
        return None
    return base64.b64encode(path.read_bytes()).decode("ascii") + "\n"


def figure_outputs(notebook: dict) -> list[tuple[str, dict]]:
    """Each figure output of a notebook as ``(cell id, output)``, in order."""
    return [
        (cell.get("id", ""), output)
        for cell in notebook["cells"]
        if cell["cell_type"] == "code"
        for output in cell.get("outputs", [])
        if PNG in (output.get("data") or {})
    ]


def notebooks() -> list[Path]:
    """The book's notebooks that have a figure."""
    found = []
    for folder in CHAPTERS:
        for path in sorted((ROOT / folder).glob("*.ipynb")):
            notebook = json.loads(path.read_text("utf-8"))
            if figure_outputs(notebook):
                found.append(path)
    return found


def problems(language: str = "zh_CN") -> list[str]:
    """What is wrong with the stored figures of ``language``, one line each: a
    chapter's figure with no translation, one drawn with a translation that has
    changed since, a translation of no figure."""
    index = read_index(language)
    table = catalogue(language)
    wanted, found = set(), []
    for path in notebooks():
        page = path.relative_to(ROOT).with_suffix("").as_posix()
        notebook = json.loads(path.read_text("utf-8"))
        for cell, output in figure_outputs(notebook):
            key = digest(output["data"][PNG])[:16]
            wanted.add(key)
            entry = index.get(key)
            where = f"{page}, cell {cell}"
            if entry is None or not (figures_dir(language) / f"{key}.png").is_file():
                found.append(
                    f"{where}: no {language} figure (python -m llmmath.figures)"
                )
                continue
            changed = sorted(
                m for m, t in entry["messages"].items() if table.get(m) != t
            )
            if changed:
                found.append(f"{where}: stale, drawn before {changed} changed")
    for key in sorted(set(index) - wanted):
        found.append(f"{key}: a {language} figure of no chapter's figure")
    files = {p.stem for p in figures_dir(language).glob("*.png")}
    found += [f"{key}.png: not in index.json" for key in sorted(files - set(index))]
    return found


def _execute(path: Path, keep: Path) -> dict:
    """The notebook at ``path`` executed, each figure kept in ``keep`` (`install`)."""
    import copy

    from nbclient import NotebookClient

    notebook = json.loads(path.read_text("utf-8"))
    run = copy.deepcopy(notebook)
    first = {
        "cell_type": "code",
        "execution_count": None,
        "id": "llmmath-figures",
        "metadata": {},
        "outputs": [],
        "source": "import llmmath.figures\nllmmath.figures.install('en')",
    }
    run["cells"].insert(0, first)
    os.environ[KEEP] = str(keep)
    try:
        import nbformat

        run = nbformat.reads(json.dumps(run), as_version=4)
        NotebookClient(
            run,
            timeout=600,
            kernel_name="python3",
            resources={"metadata": {"path": str(path.parent)}},
        ).execute()
    finally:
        os.environ.pop(KEEP, None)
    run["cells"].pop(0)
    return run


def update_catalogue(language: str, found: set[str]) -> list[str]:
    """Give the catalogue of ``language`` exactly the messages ``found`` (new ones
    untranslated, translations of the others kept) and compile it; returns the ones
    untranslated."""
    from babel.messages.catalog import Catalog
    from babel.messages.mofile import write_mo
    from babel.messages.pofile import read_po, write_po

    path = catalogue_path(language)
    old = Catalog(locale=language, domain=DOMAIN)
    if path.is_file():
        with path.open("rb") as f:
            old = read_po(f, locale=language, domain=DOMAIN)
    new = Catalog(locale=language, domain=DOMAIN, project="llmmath", fuzzy=False)
    for msgid in sorted(found):
        kept = old.get(msgid)
        new.add(msgid, kept.string if kept is not None else "")
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("wb") as f:
        write_po(f, new, width=76, omit_header=True, sort_output=True)
    with catalogue_path(language, ".mo").open("wb") as f:
        write_mo(f, new)
    _CATALOGUES.pop(messages.language(language), None)
    return [m.id for m in new if m.id and not m.string]


def generate(language: str = "zh_CN", paths=None, again: bool = False) -> list[str]:
    """Execute the notebooks with a figure (all, or ``paths``), keeping each figure,
    and draw each again with its texts in ``language``; store each whose texts are
    all translated, update the catalogue and the font. With ``again``, draw the
    figures kept by the last run without executing (after a translation changed).
    Returns what is still wrong (`problems`, and the untranslated messages)."""
    import shutil

    language = messages.language(language)
    _font_for(language)  # before drawing: the translations' characters
    out = figures_dir(language)
    out.mkdir(parents=True, exist_ok=True)
    index = read_index(language)
    untranslated: set[str] = set()
    for path in paths or notebooks():
        path = Path(path).resolve()
        page = path.relative_to(ROOT).with_suffix("").as_posix()
        keep = ROOT / "_build" / "figures" / page
        english = json.loads(path.read_text("utf-8"))
        if not again or not keep.is_dir():
            shutil.rmtree(keep, ignore_errors=True)
            _execute(path, keep)
        for key in [k for k, e in index.items() if e["page"] == page]:
            del index[key]
            (out / f"{key}.png").unlink(missing_ok=True)
        kept = sorted(keep.glob("*.pickle"))
        before = figure_outputs(english)
        if len(before) != len(kept):
            raise RuntimeError(
                f"{page}: {len(before)} figures stored, {len(kept)} drawn: "
                "re-execute the English notebook first"
            )
        for (cell, en), figure in zip(before, kept):
            seen: dict = {}
            png = draw(figure, language, seen)
            missing = {m for m, t in seen.items() if t is None}
            if missing:
                untranslated |= missing
                print(f"{page}, cell {cell}: untranslated, left English")
                continue
            key = digest(en["data"][PNG])[:16]
            (out / f"{key}.png").write_bytes(png)
            index[key] = {"page": page, "cell": cell, "messages": seen}
            print(f"{page}, cell {cell}: {out.relative_to(ROOT)}/{key}.png")
    every = {m for e in index.values() for m in e["messages"]} | untranslated
    if paths:  # the other notebooks were not drawn: keep their messages
        every |= set(catalogue(language))
    missing = update_catalogue(language, every)
    index = dict(sorted(index.items()))
    (out / "index.json").write_text(
        json.dumps(index, ensure_ascii=False, indent=1, sort_keys=True) + "\n", "utf-8"
    )
    _font_for(language)
    return [f"untranslated figure message: {m!r}" for m in missing] + problems(language)


def _font_for(language: str) -> None:
    """Remake the font subset when the catalogue's translations need a character it
    lacks."""
    need = needed_characters(catalogue(language).values())
    if not FONT.is_file() or not need <= font_characters():
        make_font(need)
        print(f"remade {FONT.relative_to(ROOT)}: {len(need)} characters")


def _join(value) -> str:
    return "".join(value) if isinstance(value, list) else value


def main(argv=None) -> int:
    import argparse

    parser = argparse.ArgumentParser(
        prog="python -m llmmath.figures",
        description="Draw the chapters' figures in a language (their labels, legends "
        "and titles from figures.po) and store them for the translated site and "
        "reader editions.",
    )
    parser.add_argument("notebooks", nargs="*", type=Path, help="default: every one")
    parser.add_argument("--lang", default="zh_CN")
    parser.add_argument(
        "--check", action="store_true", help="only list what is missing or stale"
    )
    parser.add_argument(
        "--font", action="store_true", help="remake the font subset and stop"
    )
    parser.add_argument(
        "--again",
        action="store_true",
        help="draw the figures the last run kept (_build/figures/) without executing",
    )
    args = parser.parse_args(argv)
    if args.font:
        make_font(needed_characters(catalogue(args.lang).values()))
        return 0
    found = (
        problems(args.lang)
        if args.check
        else generate(args.lang, args.notebooks, args.again)
    )
    for line in found:
        print(line)
    return 1 if found else 0


if __name__ == "__main__":
    raise SystemExit(main())

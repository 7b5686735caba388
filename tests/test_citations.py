"""The book's citations: every ``{cite}`` key is an entry of ``book/references.bib``,
every entry is cited somewhere, and every chapter that discusses papers cites them with
sphinxcontrib-bibtex roles rather than as plain "Author et al. (year)" text.

The roles are read from the markdown cells of the notebooks and from the ``book/*.md``
pages, the way the book is built; code cells and their outputs are not prose and are
left alone. The role contents are parsed with sphinxcontrib-bibtex's own parser, so
``{cite:p}`a,b``` and ``{cite:t}`key{Sec. 2}``` (post-text) count as the keys the build
resolves.
"""

import re
from pathlib import Path

import nbformat
import pytest
from pybtex.database import parse_file
from sphinxcontrib.bibtex.citation_target import parse_citation_targets

ROOT = Path(__file__).resolve().parents[1]
BIB = ROOT / "book" / "references.bib"
NOTEBOOKS = sorted((ROOT / "chapters").glob("*.ipynb")) + sorted(
    (ROOT / "book").glob("*.ipynb")
)
PAGES = sorted((ROOT / "book").glob("*.md"))

# The notebooks that discuss papers: each must cite at least one entry.
DISCUSSING_PAPERS = [
    "chapters/01_parameters.ipynb",
    "chapters/02_embeddings.ipynb",
    "chapters/03_attention.ipynb",
    "chapters/04_ffn.ipynb",
    "chapters/05_norms.ipynb",
    "chapters/06_rope.ipynb",
    "chapters/07_kv_cache.ipynb",
    "chapters/08_flops.ipynb",
    "chapters/09_memory.ipynb",
    "chapters/10_llama.ipynb",
    "chapters/11_minimind.ipynb",
    "chapters/12_moe.ipynb",
    "chapters/13_zoo.ipynb",
    "book/errata.ipynb",
]

# {cite}, {cite:p}, {cite:t}, {cite:ps}, {footcite:t}, ... and the role's content.
ROLE = re.compile(r"\{(?:foot)?cite(?::[a-z]+)?\}`([^`]*)`")
# "Vaswani et al. (2017", "Brown et al. 2020", "Zhang & Sennrich (2019": a citation
# typed as text.
PLAIN = re.compile(r"\b[A-Z][\w-]+(?: et al\.| & [A-Z][\w-]+),? \(?(?:19|20)\d\d\b")


def prose(path: Path) -> str:
    """The text the book renders as MyST markdown: markdown cells of a notebook, or a
    page."""
    if path.suffix == ".md":
        return path.read_text(encoding="utf-8")
    nb = nbformat.read(path, as_version=4)
    return "\n".join(cell.source for cell in nb.cells if cell.cell_type == "markdown")


def cited_keys(text: str) -> list[str]:
    return [
        target.key
        for role in ROLE.finditer(text)
        for target in parse_citation_targets(role.group(1))
    ]


def bib_keys() -> set[str]:
    return set(parse_file(str(BIB), bib_format="bibtex").entries.keys())


SOURCES = {path.relative_to(ROOT).as_posix(): prose(path) for path in NOTEBOOKS + PAGES}


def test_sources_found():
    assert set(DISCUSSING_PAPERS) <= set(SOURCES)
    assert "book/references.md" in SOURCES
    assert len(bib_keys()) >= 27


@pytest.mark.parametrize("name", sorted(SOURCES))
def test_every_cited_key_is_in_the_bibliography(name):
    unknown = sorted(set(cited_keys(SOURCES[name])) - bib_keys())
    assert not unknown, (
        f"{name} cites keys that book/references.bib does not have: {unknown}"
    )


def test_every_entry_is_cited():
    cited = {key for text in SOURCES.values() for key in cited_keys(text)}
    uncited = sorted(bib_keys() - cited)
    assert not uncited, f"entries of book/references.bib that nothing cites: {uncited}"


@pytest.mark.parametrize("name", DISCUSSING_PAPERS)
def test_chapter_cites_its_papers(name):
    assert cited_keys(SOURCES[name]), f"{name} discusses papers but cites none"


# The notebooks only: book/notation.md's table keeps "Kaplan et al. 2020" as a column
# heading.
@pytest.mark.parametrize(
    "name", [name for name in sorted(SOURCES) if name.endswith(".ipynb")]
)
def test_no_citation_typed_as_plain_text(name):
    text = ROLE.sub("", SOURCES[name])
    assert not PLAIN.findall(text), f"{name}: cite these with {{cite:t}} or {{cite:p}}"


def test_the_checks_see_a_misspelt_key():
    text = (
        "As {cite:t}`vaswani2017attention{Sec. 3}` and "
        "{cite:p}`shazeer2019fast,ainslie2023gqaa` show."
    )
    assert cited_keys(text) == [
        "vaswani2017attention",
        "shazeer2019fast",
        "ainslie2023gqaa",
    ]
    assert set(cited_keys(text)) - bib_keys() == {"ainslie2023gqaa"}
    assert PLAIN.findall("as Ainslie et al. (2023) and Zhang & Sennrich 2019 show") == [
        "Ainslie et al. (2023",
        "Zhang & Sennrich 2019",
    ]

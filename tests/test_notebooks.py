"""Every notebook of the book opens in Colab from GitHub: its first code cell installs
the book's package (with the ``notebooks`` extra: tabulate, torchao, nbformat) when it
is missing, from the repository that ``_config.yml`` names. Where ``llmmath`` is
installed, as in the test environment, the cell does nothing and prints nothing, so it
stores no output for nbval."""

import re
from pathlib import Path

import nbformat
import pytest
import yaml

from llmmath.coursework import handout
from llmmath.environment import REPOSITORY_BRANCH, REPOSITORY_URL, install_cell

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted((ROOT / "chapters").glob("*.ipynb")) + sorted(
    (ROOT / "book").glob("*.ipynb")
)

PIP_URL = re.compile(r'"llmmath\[notebooks\] @ git\+(?P<url>\S+)@(?P<branch>[^"@\s]+)"')


def repository() -> tuple[str, str]:
    config = yaml.safe_load((ROOT / "_config.yml").read_text(encoding="utf-8"))[
        "repository"
    ]
    return config["url"].rstrip("/"), config.get("branch", "main")


def code_cells(path: Path) -> list:
    return [
        cell
        for cell in nbformat.read(path, as_version=4).cells
        if cell.cell_type == "code"
    ]


def test_package_names_the_books_repository():
    assert (REPOSITORY_URL, REPOSITORY_BRANCH) == repository()
    assert (handout.REPOSITORY_URL, handout.REPOSITORY_BRANCH) == repository()


def test_notebooks_found():
    assert len(NOTEBOOKS) >= 14
    assert ROOT / "book" / "errata.ipynb" in NOTEBOOKS


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_first_code_cell_installs_the_package(path):
    first, *rest = code_cells(path)
    url, branch = repository()
    pip = PIP_URL.search(first.source)
    assert pip, f"{path.name}: the first code cell does not install llmmath"
    assert (pip["url"], pip["branch"]) == (url, branch), (
        "the URL differs from _config.yml's"
    )
    assert first.source == install_cell(url, branch)
    assert first.metadata.get("tags") == ["hide-cell"]
    assert (
        first.outputs == [] and first.execution_count == 1
    )  # run, silently, where llmmath is installed
    assert not any(PIP_URL.search(cell.source) for cell in rest), (
        "install cell repeated"
    )
    # Everything that needs the package runs after the install; nothing needs myst-nb.
    assert any("llmmath" in cell.source for cell in rest)
    assert not any("myst_nb" in cell.source for cell in rest)

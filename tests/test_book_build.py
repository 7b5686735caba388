"""The book builds with warnings as errors, and every chapter page renders what it stores."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
CHAPTERS = sorted((ROOT / "chapters").glob("*.ipynb"))


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("book")
    jb = Path(sys.executable).with_name("jupyter-book")
    result = subprocess.run([str(jb), "build", str(ROOT), "--path-output", str(out),
                             "-W", "-n", "--keep-going"], capture_output=True, text=True,
                            timeout=900)
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-4000:]
    return out / "_build" / "html"


def test_front_matter_renders(site):
    assert "Notation" in (site / "book" / "notation.html").read_text(encoding="utf-8")
    assert (site / "index.html").exists()
    assert "分组查询注意力" in (site / "book" / "glossary.html").read_text(encoding="utf-8")
    references = (site / "book" / "references.html").read_text(encoding="utf-8")
    bib = (ROOT / "book" / "references.bib").read_text(encoding="utf-8")
    assert references.count('class="citation"') == bib.count("@")   # every entry listed
    assert "Ainslie" in references and "Vaswani" in references


@pytest.mark.parametrize("notebook", CHAPTERS, ids=[p.stem for p in CHAPTERS])
def test_chapter_renders_outputs(site, notebook):
    page = (site / "chapters" / f"{notebook.stem}.html").read_text(encoding="utf-8")
    nb = json.loads(notebook.read_text(encoding="utf-8"))
    assert "Traceback" not in page
    if any("image/png" in out.get("data", {}) for cell in nb["cells"]
           for out in cell.get("outputs", [])):
        assert "<img" in page                                      # figures made it
    if "widgets" in nb["metadata"]:
        assert "application/vnd.jupyter.widget-state+json" in page  # widget initial state
    exercises = sum("".join(c["source"]).count("{exercise}") for c in nb["cells"])
    assert page.count('class="exercise admonition"') == exercises
    assert page.count('class="solution dropdown admonition"') == exercises  # hidden solutions
    assert "math notranslate" in page                               # math for MathJax
    assert "mybinder.org/v2/gh/" in page and "colab.research.google.com/github/" in page

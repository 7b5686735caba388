"""Shared test setup: deterministic hypothesis runs (the same examples on every
machine), torch on one thread in the test processes, and one build of the book shared
by the tests that read the site (test_book_build.py, test_browser.py,
test_editions.py, test_jupyterlab.py …), even across pytest-xdist's workers."""

import json
import sys
from pathlib import Path
from typing import NamedTuple

import pytest
from filelock import FileLock
from hypothesis import HealthCheck, settings

from llmmath import presets

settings.register_profile(
    "book",
    derandomize=True,
    deadline=None,
    max_examples=60,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.load_profile("book")


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item):
    """torch on one thread in this process, as the chapters set it: the tests' tensors
    are tiny, and make test runs three workers on two cores, where torch's default
    of one thread per core spends most of its time waiting for the other threads
    (tests/test_kvcache.py: 15 s of CPU with two threads, 6.5 s with one). Only this
    process: the kernels, CLIs and pytest runs that tests start keep torch's default
    (tests/test_other_kernels.py sets OMP_NUM_THREADS=1 itself, to differ from it)."""
    torch = sys.modules.get("torch")
    if torch is not None and torch.get_num_threads() != 1:
        torch.set_num_threads(1)


@pytest.fixture
def write_config(tmp_path):
    """Write a dict as a config.json in a temporary directory and return its path."""

    def write(raw: dict, name: str = "config.json"):
        path = tmp_path / name
        path.write_text(json.dumps(raw), encoding="utf-8")
        return path

    return write


def hf_config(name: str) -> dict:
    """The raw Hugging Face config.json shipped with a preset."""
    return dict(presets.get(name).hf_config)


class BookBuild(NamedTuple):
    returncode: int
    log: str  # the tail of jupyter-book's stdout and stderr
    html: Path  # the built site (_build/html)


def _build_book(out: Path) -> BookBuild:
    """Every edition of the book, strictly (-W -n --keep-going), as ``make book`` builds
    them: English in ``out/_build/html``, 简体中文 in ``out/_build/html/zh``."""
    from llmmath_book.translation import build_book

    root = Path(__file__).resolve().parents[1]
    code, log, seconds = build_book(root, out, ("-W", "-n", "--keep-going"))
    times = ", ".join(f"{lang} {taken:.0f} s" for lang, taken in seconds.items())
    return BookBuild(code, f"build times: {times}\n" + log, out / "_build" / "html")


@pytest.fixture(scope="session")
def book_build(tmp_path_factory, worker_id) -> BookBuild:
    """One strict build of the book (-W -n --keep-going) into a temporary directory, per
    test run: under pytest-xdist (``make test``) the first worker to ask builds it,
    under a file lock, and the others read the same build."""
    if worker_id == "master":  # no xdist
        return _build_book(tmp_path_factory.mktemp("book"))
    shared = tmp_path_factory.getbasetemp().parent  # the same for every worker
    out, done = shared / "book", shared / "book.json"
    with FileLock(str(shared / "book.lock")):
        if done.exists():
            build = json.loads(done.read_text(encoding="utf-8"))
            return BookBuild(build["returncode"], build["log"], Path(build["html"]))
        build = _build_book(out)
        done.write_text(
            json.dumps({**build._asdict(), "html": str(build.html)}), encoding="utf-8"
        )
        return build


@pytest.fixture(scope="session")
def site(book_build) -> Path:
    """The built site; fails the test that asks for it if the strict build failed."""
    assert book_build.returncode == 0, book_build.log
    return book_build.html

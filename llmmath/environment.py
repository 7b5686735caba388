"""The readers' environment: the install cell that opens every notebook, and its note.

Every chapter, the calculator and the errata start with `install_cell`'s code: on
Colab, or any Python without ``llmmath``, it installs the package with its
``notebooks`` extra (the core alone needs only the standard library; the extra brings
SymPy, NumPy, Matplotlib, ipywidgets and anywidget, tabulate for the tables, torchao
for chapter 9b, nbformat for the coursework), and nothing that only builds or tests
the book. Colab already has torch,
NumPy, SymPy, Matplotlib and ipywidgets 7, which the package accepts, so pip leaves
them alone; if it did change a package that the session had already imported, the
cell says so in one line (`restart_note`). Standard library only.
"""

from __future__ import annotations

import importlib
import importlib.metadata
import re
import sys
from collections.abc import Mapping

__all__ = ["changed_and_imported", "install_cell", "installed", "restart_note"]

REPOSITORY_URL, REPOSITORY_BRANCH = "https://github.com/llm-math/llm-math", "main"


def install_cell(url: str = REPOSITORY_URL, branch: str = REPOSITORY_BRANCH) -> str:
    """The source of every notebook's first code cell (within 88 columns).

    Where ``llmmath`` is importable it does nothing and prints nothing, so the stored
    notebooks keep no output for it. Elsewhere it records the installed versions,
    installs ``llmmath[notebooks]`` from ``url`` at ``branch`` with the kernel's own pip
    (not ``%pip``, which always prints that a restart may be needed) and calls
    `restart_note` with the record.
    """
    return (
        "# On Colab, or any Python without the book's package, install it first (torch "
        "and the\n"
        "# usual scientific stack are already there on Colab); it says if a restart is "
        "needed.\n"
        "import importlib.metadata\n"
        "import importlib.util\n"
        "import subprocess\n"
        "import sys\n\n"
        f'BOOK = "llmmath[notebooks] @ git+{url}@{branch}"\n'
        'if importlib.util.find_spec("llmmath") is None:\n'
        "    before = {d.name: d.version for d in importlib.metadata.distributions()}\n"
        '    subprocess.run([sys.executable, "-m", "pip", "install", "-q", BOOK], '
        "check=True)\n"
        "    from llmmath.environment import restart_note\n\n"
        "    restart_note(before)"
    )


def _norm(name: str) -> str:
    """A distribution's name as pip compares them (PEP 503)."""
    return re.sub(r"[-_.]+", "-", name).lower()


def installed() -> dict[str, str]:
    """The installed distributions, ``{normalized name: version}``, first on the path
    winning (the one ``import`` finds)."""
    importlib.invalidate_caches()
    found: dict[str, str] = {}
    for dist in importlib.metadata.distributions():
        name = dist.metadata["Name"]
        if name:
            found.setdefault(_norm(name), dist.version)
    return found


def changed_and_imported(
    before: Mapping[str, str], modules: Mapping[str, object] | None = None
) -> list[str]:
    """The distributions whose version changed since ``before`` (or that went) and
    that provide a module already in ``modules`` (default ``sys.modules``), sorted.

    ``before`` maps distribution names (any spelling) to versions, as the install cell
    records them before pip runs.
    """
    modules = sys.modules if modules is None else modules
    now = installed()
    changed = {_norm(n) for n, v in before.items() if n and now.get(_norm(n)) != v}
    providers = importlib.metadata.packages_distributions()
    loaded = {
        _norm(dist)
        for module in list(modules)
        for dist in providers.get(module.partition(".")[0], ())
    }
    return sorted(changed & loaded)


def restart_note(before: Mapping[str, str]) -> str | None:
    """Print and return one line asking for a restart if pip changed a distribution
    whose modules the session had already imported; otherwise print nothing.

    ``before`` is the install cell's record of ``{name: version}`` before pip ran.
    """
    stale = changed_and_imported(before)
    if not stale:
        return None
    version = installed().get("llmmath", "?")
    line = (
        f"Installed llmmath {version}; restart the session (Colab: Runtime > Restart "
        f"session) and run this notebook again: pip changed {', '.join(stale)}, "
        "which this session had already imported."
    )
    print(line)
    return line

"""Reader editions: every notebook of the book as plain Jupyter, numbers filled in.

The chapters (``chapters/*.ipynb``, ``book/*.ipynb``) are written in MyST: prose
numbers are ``{glue:text}`` roles, cross-references ``{doc}``, ``{ref}`` and
``{numref}`` roles, citations ``{cite:p}``, exercises ``{exercise}`` directives and
solutions dropdowns. Only the site renders those. JupyterLab, Notebook 7, Colab and VS
Code show them raw, so readers who open a chapter in Binder or Colab get *reader
editions* instead, the way QuantEcon (sphinx-tojupyter) and d2l (d2lbook) publish
their notebooks. This module is the Sphinx extension (``_config.yml`` lists it) that
writes them after every HTML build, from what Sphinx itself resolved:

- each role becomes the text the site shows for it (the resolved doctree's
  ``pasted-text``, ``std-doc``, ``std-ref``, ``std-numref`` and ``bibtex-citation``
  nodes, taken in document order), and a link to the site's page where the site links
  to another page;
- an exercise becomes a heading, "Exercise N (title)", numbered as on the site
  (Sphinx's ``toc_fignumbers``), followed by its text;
- a solution's prose goes into an HTML ``<details>`` block ("Solution to Exercise N"),
  folded until the reader opens it, and its code cells are folded (``jupyter.
  source_hidden``, and a Colab form title) with no stored output: the reader unfolds
  the code and runs it;
- a figure (a code cell with ``mystnb.figure`` metadata) is followed by its caption,
  "Fig. N. …";
- ``(label)=`` targets and MyST comments go; relative links to ``.md`` and ``.ipynb``
  pages point at the site;
- glue's hidden outputs (``application/papermill.record/…``, which JupyterLab shows as
  "No renderer could be found") go, and an explorer's output keeps only its static
  snapshot (``text/html`` and ``text/plain``, see `llmmath.widgets.Explorer`): run the
  cell and the live explorer replaces it;
- ``hide-input``, ``hide-cell`` and ``remove-cell`` tags become folded cells, and a
  markdown cell tagged ``site-only`` (prose about the web page itself) is left out.

The editions are plain CommonMark with ``$…$`` math: nothing else to render.
``make book`` copies them from ``_build/editions/`` to ``editions/``, which is
committed; the site's Binder and Colab buttons open them, and
``tests/test_editions.py`` checks that the committed ones are current and hold no MyST
syntax.
"""

from __future__ import annotations

import copy
import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urljoin

from llmmath.messages import gettext as _

#: Where the editions go, relative to the repository root (and to the build folder).
EDITIONS = "editions"
#: The language folder of this edition (a translated edition adds its own).
LANGUAGE = "en"

#: Each MyST role of the chapters → the class of the resolved node Sphinx writes for it.
ROLE_NODE_CLASS = {
    "glue:text": "pasted-text",
    "doc": "std-doc",
    "ref": "std-ref",
    "numref": "std-numref",
    "cite:p": "bibtex-citation",
    "cite:t": "bibtex-citation",
}
ROLE = re.compile(
    r"(?P<code>(?P<ticks>`+)(?!\{).+?(?<!`)(?P=ticks)(?!`))"  # a code span: kept
    r"|\{(?P<name>[a-z][\w:+-]*)\}`(?P<body>[^`]*)`"
    # a Markdown link to another page of the book, which MyST resolves as {doc} does
    r"|\[(?P<text>[^\]]*)\]\((?P<path>(?![a-z]+:)[^)#\s]+?)\.(?:md|ipynb)"
    r"(?P<anchor>#[^)\s]*)?\)"
)
DIRECTIVE = re.compile(
    r"^(?P<fence>`{3,}|:{3,})\{(?P<name>[\w:-]+)\}[ \t]*(?P<arg>.*)$"
)
CODE_FENCE = re.compile(r"^(?P<fence>`{3,}|~{3,})")
TARGET = re.compile(r"^\([\w.:-]+\)=\s*$")
MYST_COMMENT = re.compile(r"^%")
#: A markdown cell with this tag is shown on the site only (it speaks of the page).
SITE_ONLY = "site-only"
GLUE_MIME = "application/papermill.record/"
WIDGET_MIME = "application/vnd.jupyter.widget-view+json"
MARKDOWN_SPECIAL = re.compile(r"([\\`*_\[\]<>$|])")


class EditionError(ValueError):
    """A chapter's MyST could not be turned into a reader edition (the message names
    the page and what did not match)."""


@dataclass
class Resolved:
    """What Sphinx resolved on one page, in document order."""

    roles: dict[str, list[str]] = field(default_factory=dict)  # node class → markdown
    exercises: dict[str, int] = field(default_factory=dict)  # label → number
    figures: dict[str, int] = field(default_factory=dict)  # name → number


def escape(text: str) -> str:
    """Backslash-escape the characters that CommonMark (or Jupyter's ``$`` math) would
    read as syntax in a resolved text."""
    return MARKDOWN_SPECIAL.sub(r"\\\1", text)


def _inline_markdown(node, page_url: str) -> str:
    """A resolved inline node as Markdown: text escaped, emphasis kept, links to other
    pages made absolute (links within the page become plain text)."""
    from docutils import nodes

    if isinstance(node, nodes.Text):
        return escape(node.astext())
    inner = "".join(_inline_markdown(child, page_url) for child in node.children)
    if isinstance(node, nodes.emphasis):
        return f"*{inner}*"
    if isinstance(node, nodes.strong):
        return f"**{inner}**"
    if isinstance(node, nodes.literal):
        return f"`{node.astext()}`"
    if isinstance(node, nodes.reference) and node.get("refuri"):
        return f"[{inner}]({urljoin(page_url, node['refuri'])})"
    return inner


def resolve_page(doctree, docname: str, env, site_url: str) -> Resolved:
    """Collect, in document order, the markdown for every resolved role of a page, and
    the page's exercise and figure numbers (``env.toc_fignumbers``)."""
    from docutils import nodes

    page_url = urljoin(site_url, docname + ".html")
    resolved = Resolved(roles={cls: [] for cls in set(ROLE_NODE_CLASS.values())})
    for node in doctree.findall(nodes.inline):
        classes = set(node.get("classes", []))
        for cls in resolved.roles:
            if cls in classes or cls.removeprefix("std-") in classes:
                text = _inline_markdown(node, page_url)
                parent = node.parent
                if isinstance(parent, nodes.reference) and parent.get("refuri"):
                    text = f"[{text}]({urljoin(page_url, parent['refuri'])})"
                resolved.roles[cls].append(text)
    numbers = env.toc_fignumbers.get(docname, {})
    for label, number in numbers.get("exercise", {}).items():
        resolved.exercises[label] = number[-1]
    for name, number in numbers.get("figure", {}).items():
        resolved.figures[name] = number[-1]
    return resolved


class _Page:
    """The rewriting of one notebook: roles are filled from `Resolved` in order."""

    def __init__(
        self, docname: str, resolved: Resolved, site_url: str, lang: str = "en"
    ):
        self.lang = lang
        self.docname = docname
        self.resolved = resolved
        self.site_url = site_url
        self.page_url = urljoin(site_url, docname + ".html")
        self.queues = {cls: list(texts) for cls, texts in resolved.roles.items()}
        self.exercise_titles: dict[str, str] = {}

    def fail(self, message: str) -> EditionError:
        return EditionError(f"{self.docname}: {message}")

    def roles(self, text: str) -> str:
        """Replace every role in ``text`` by what the site shows for it."""

        def fill(match: re.Match) -> str:
            if match["code"]:
                return match["code"]
            name = match["name"]
            if name is None:  # a link to a page
                if match["anchor"]:
                    url = urljoin(self.page_url, match["path"] + ".html")
                    return f"[{match['text']}]({url}{match['anchor']})"
                name = "doc"
            if name not in ROLE_NODE_CLASS:
                raise self.fail(f"the role {{{name}}} has no reader-edition form")
            queue = self.queues[ROLE_NODE_CLASS[name]]
            if not queue:
                raise self.fail(
                    f"more {{{name}}} roles in the source than resolved nodes "
                    f"({match.group(0)!r})"
                )
            return queue.pop(0)

        return ROLE.sub(fill, text)

    def prose(self, text: str) -> str:
        """Plain-Markdown prose: roles and links to pages filled as the site shows
        them, targets and comments dropped."""
        out: list[str] = []
        prose: list[str] = []
        fence: str | None = None
        for line in text.split("\n"):
            if fence is None and CODE_FENCE.match(line):
                fence = CODE_FENCE.match(line)["fence"]
                out += [self.roles("\n".join(prose)), line] if prose else [line]
                prose = []
            elif fence is not None:
                out.append(line)
                if line.strip() == fence:
                    fence = None
            elif not TARGET.match(line) and not MYST_COMMENT.match(line):
                prose.append(line)
        if prose:
            out.append(self.roles("\n".join(prose)))
        return "\n".join(out).strip("\n")

    def split(self, source: str) -> list[tuple[str, Any]]:
        """A markdown cell as segments: ``("md", text)``, ``("exercise", (title,
        options, body lines))``,
        ``("solution-start", label)`` and ``("solution-end", "")``."""
        segments: list[tuple[str, Any]] = []
        buffer: list[str] = []
        lines = source.split("\n")
        i = 0
        in_code: str | None = None
        while i < len(lines):
            line = lines[i]
            code = CODE_FENCE.match(line)
            directive = DIRECTIVE.match(line) if in_code is None else None
            if in_code is not None:
                if line.strip() == in_code:
                    in_code = None
                buffer.append(line)
                i += 1
                continue
            if directive is None and code is not None:
                in_code = code["fence"]
                buffer.append(line)
                i += 1
                continue
            if directive is None:
                buffer.append(line)
                i += 1
                continue
            fence, name, arg = directive["fence"], directive["name"], directive["arg"]
            i += 1
            options: dict[str, str] = {}
            while i < len(lines) and re.match(r"^:[\w-]+:", lines[i]):
                key, _, value = lines[i][1:].partition(":")
                options[key] = value.strip()
                i += 1
            body: list[str] = []
            while i < len(lines) and not (
                lines[i].strip().startswith(fence[0] * len(fence))
                and set(lines[i].strip()) == {fence[0]}
            ):
                if DIRECTIVE.match(lines[i]):
                    raise self.fail(f"a directive nested in {{{name}}}: {lines[i]!r}")
                body.append(lines[i])
                i += 1
            if i == len(lines):
                raise self.fail(f"the {{{name}}} directive is not closed")
            i += 1  # the closing fence
            if buffer:
                segments.append(("md", "\n".join(buffer)))
                buffer = []
            if name == "exercise":  # rewritten in order with the other segments
                segments.append(("exercise", (arg, options, body)))
            elif name == "solution-start":
                segments.append(("solution-start", arg.strip()))
            elif name == "solution-end":
                segments.append(("solution-end", ""))
            else:
                raise self.fail(f"the directive {{{name}}} has no reader-edition form")
        if in_code is not None:
            raise self.fail("a code fence is not closed")
        if buffer:
            segments.append(("md", "\n".join(buffer)))
        return segments

    def skip(self, source: str) -> None:
        """Consume the resolved nodes of a cell the edition leaves out."""
        self.roles(source)

    def exercise(self, title: str, options: dict[str, str], body: list[str]) -> str:
        label = options.get("label")
        if label not in self.resolved.exercises:
            raise self.fail(f"the exercise {label!r} has no number")
        number = self.resolved.exercises[label]
        title = self.roles(title.strip())
        heading = _("Exercise {number}", self.lang).format(number=number)
        if title:
            heading += _(" ({title})", self.lang).format(title=title)
        self.exercise_titles[label] = heading
        return f"### {heading}\n\n" + self.prose("\n".join(body))

    def figure_caption(self, figure: dict) -> str:
        name = figure.get("name")
        number = self.resolved.figures.get(name)
        if number is None:
            raise self.fail(f"the figure {name!r} has no number")
        caption = self.prose(figure.get("caption", ""))
        return _("**Fig. {number}.** {caption}", self.lang).format(
            number=number, caption=caption
        )

    def leftovers(self) -> None:
        for cls, queue in self.queues.items():
            if queue:
                raise self.fail(
                    f"{len(queue)} resolved {cls} node(s) matched no role in the "
                    f"source (first: {queue[0]!r})"
                )


def _markdown_cell(cell_id: str, text: str) -> dict:
    return {"cell_type": "markdown", "id": cell_id, "metadata": {}, "source": text}


def _widget_views(notebook: dict) -> dict[str, dict]:
    """The explorers' stored views, by widget model id (the notebook's saved widget
    state)."""
    state = (
        notebook.get("metadata", {})
        .get("widgets", {})
        .get("application/vnd.jupyter.widget-state+json", {})
        .get("state", {})
    )
    return {
        model_id: model["state"]["view"]
        for model_id, model in state.items()
        if isinstance(model.get("state", {}).get("view"), dict)
    }


def _clean_outputs(
    outputs: list[dict], views: dict[str, dict], lang: str = "en"
) -> list[dict]:
    """Outputs as a reader without a kernel should see them: glue records dropped,
    widgets shown by their static snapshot (from the output, or else drawn from the
    notebook's saved widget state; in a translated edition, drawn again from that
    state in its language)."""
    from llmmath.explorers import explore, view_html, view_snapshot_text
    from llmmath.messages import speaking

    kept = []
    for output in outputs:
        output = copy.deepcopy(output)
        data = output.get("data")
        if data is not None:
            if any(mime.startswith(GLUE_MIME) for mime in data):
                continue
            if WIDGET_MIME in data:
                view = views.get(data[WIDGET_MIME].get("model_id"))
                if lang != "en" and view is not None:
                    with speaking(lang):
                        view = explore(view["kind"], view["state"])
                        for mime, text in (
                            ("text/html", view_html(view)),
                            ("text/plain", view_snapshot_text(view)),
                        ):  # as Jupyter stores them: a list of lines
                            data[mime] = text.splitlines(keepends=True)
                if "text/html" not in data:
                    if view is None:
                        raise EditionError(
                            "a widget's stored output has neither a snapshot nor a "
                            "saved state: re-execute the notebook"
                        )
                    data["text/html"] = view_html(view)
                    data["text/plain"] = view_snapshot_text(view)
                del data[WIDGET_MIME]
        output.get("metadata", {}).pop("scrapbook", None)
        kept.append(output)
    return kept


def _language_cell(lang: str, figures: bool = False) -> dict:
    """The code cell that makes llmmath's live parts speak ``lang``; with
    ``figures``, the figures a reader draws too (`llmmath.figures.install`: their
    labels, with the CJK font llmmath carries)."""
    comment = _("# The explorers' words in this edition's language.", lang)
    source = f'{comment}\nimport llmmath.messages\n\nllmmath.messages.use("{lang}")'
    if figures:
        comment = _("# The figures' labels and legends too.", lang)
        source += f"\n\n{comment}\nimport llmmath.figures\n\nllmmath.figures.install()"
    return {
        "cell_type": "code",
        "execution_count": None,
        "id": "llmmath-language",
        "metadata": {},
        "outputs": [],
        "source": source,
    }


def _fold(cell: dict, *, source: bool, outputs: bool) -> None:
    jupyter = cell["metadata"].setdefault("jupyter", {})
    if source:
        jupyter["source_hidden"] = True
    if outputs:
        jupyter["outputs_hidden"] = True


def edition(
    notebook: dict, docname: str, resolved: Resolved, site_url: str, lang: str = "en"
) -> dict:
    """The reader edition of one notebook (a dict in nbformat 4), from its source and
    what Sphinx resolved for it; its own words ("Exercise", "Solution to") in the
    language ``lang`` (`llmmath.messages`).

    Raises:
        EditionError: a role or directive with no plain form, or the source's roles do
            not match the resolved page one to one.
    """
    page = _Page(docname, resolved, site_url, lang)
    views = _widget_views(notebook)
    cells: list[dict] = []
    solution: dict[str, Any] | None = None

    def close_solution() -> None:
        label = solution["label"]
        heading = page.exercise_titles.get(label)
        if heading is None:
            raise page.fail(f"a solution to {label!r} comes before its exercise")
        summary = _("Solution to {heading}", lang).format(heading=heading)
        parts = [f"<details>\n<summary>{summary}</summary>"]
        parts += [text for text in solution["prose"] if text.strip()]
        if solution["code"]:
            parts.append(
                _(
                    "*The solution's code is folded below: click the collapsed cell "
                    "to show it, and run it to see its output.*",
                    lang,
                )
            )
        parts.append("</details>")
        cells[solution["at"]] = _markdown_cell(solution["id"], "\n\n".join(parts))

    for index, cell in enumerate(notebook["cells"]):
        cell_id = cell.get("id") or f"cell-{index}"
        source = (
            "".join(cell["source"])
            if isinstance(cell["source"], list)
            else cell["source"]
        )
        tags = cell.get("metadata", {}).get("tags", [])
        if cell["cell_type"] == "markdown" and SITE_ONLY in tags:
            page.skip(source)  # its roles were resolved on the page: consume them
            continue
        if cell["cell_type"] == "markdown":
            for part, (kind, text) in enumerate(page.split(source)):
                part_id = cell_id if part == 0 else f"{cell_id}-{part}"
                if kind == "solution-start":
                    if solution is not None:
                        raise page.fail("a solution starts inside another")
                    solution = {
                        "label": text,
                        "prose": [],
                        "code": 0,
                        "at": len(cells),
                        "id": part_id,
                    }
                    cells.append({})  # filled when the solution ends
                elif kind == "solution-end":
                    if solution is None:
                        raise page.fail("a solution ends that never started")
                    close_solution()
                    solution = None
                else:
                    text = page.prose(text) if kind == "md" else page.exercise(*text)
                    if solution is not None:
                        solution["prose"].append(text)
                    elif text.strip():
                        cells.append(_markdown_cell(part_id, text))
            continue
        if cell["cell_type"] != "code":
            cells.append(copy.deepcopy(cell))
            continue
        metadata = {
            key: value
            for key, value in cell.get("metadata", {}).items()
            if key not in ("execution", "mystnb")
        }
        out = {
            "cell_type": "code",
            "execution_count": cell.get("execution_count"),
            "id": cell_id,
            "metadata": metadata,
            "outputs": _clean_outputs(cell.get("outputs", []), views, lang),
            "source": source,
        }
        tags = metadata.get("tags", [])
        if "hide-input" in tags:
            _fold(out, source=True, outputs=False)
        if "hide-cell" in tags or "remove-cell" in tags:
            _fold(out, source=True, outputs=True)
        if solution is not None:
            solution["code"] += 1
            label = page.exercise_titles.get(solution["label"], solution["label"])
            title = _("Solution to {label}: the code", lang).format(label=label)
            out["source"] = f"# @title {title}\n" + source
            out["outputs"] = []
            out["execution_count"] = None
            out["metadata"]["cellView"] = "form"  # Colab folds the code under the title
            _fold(out, source=True, outputs=False)
        cells.append(out)
        figure = cell.get("metadata", {}).get("mystnb", {}).get("figure")
        if figure:
            cells.append(
                _markdown_cell(f"{cell_id}-caption", page.figure_caption(figure))
            )
    if solution is not None:
        raise page.fail("a solution is not closed")
    page.leftovers()
    if lang != "en":
        # The explorers speak the edition's language (llmmath.messages): a cell after
        # the first one (the install cell), before any explorer is made.
        first = next(
            (i for i, c in enumerate(cells) if c.get("cell_type") == "code"), -1
        )
        drawn = any(
            "image/png" in (o.get("data") or {})
            for c in cells
            for o in c.get("outputs", [])
        )
        cells.insert(first + 1, _language_cell(lang, figures=drawn))
    metadata = {
        key: value
        for key, value in notebook.get("metadata", {}).items()
        if key in ("kernelspec", "language_info")
    }
    metadata["llmmath"] = {
        "edition": LANGUAGE,
        "source": f"{docname}.ipynb",
        "note": "Generated by `make book` from the source; edit the source instead.",
    }
    return {
        "cells": cells,
        "metadata": metadata,
        "nbformat": 4,
        "nbformat_minor": max(notebook.get("nbformat_minor", 5), 5),
    }


def dumps(notebook: dict) -> str:
    """The edition as the repository stores notebooks: JSON, one-space indent."""
    for cell in notebook["cells"]:
        text = cell["source"]
        cell["source"] = (
            text.splitlines(keepends=True) if isinstance(text, str) else text
        )
    return json.dumps(notebook, indent=1, ensure_ascii=False, sort_keys=True) + "\n"


def edition_path(docname: str, language: str = LANGUAGE) -> str:
    """A page's edition, relative to the repository root: ``editions/en/<docname>``
    (``editions/zh/…`` for ``zh_CN``)."""
    return f"{EDITIONS}/{edition_folder(language)}/{docname}.ipynb"


def edition_folder(language: str) -> str:
    """The folder of a language's editions: ``en``, or the folder its site is served
    from (``zh`` for ``zh_CN``, `llmmath_book.translation.FOLDERS`)."""
    from llmmath_book.translation import FOLDERS

    return FOLDERS.get(language) or LANGUAGE


def _site_url(app) -> str:
    """The published site of this build's language (the English site's address, and
    ``zh/`` under it for the Chinese one)."""
    from llmmath_book.translation import FOLDERS, language_of

    url = app.config.html_baseurl or ""
    if not url:
        raise EditionError("html_baseurl (html: baseurl in _config.yml) is not set")
    url = url if url.endswith("/") else url + "/"
    folder = FOLDERS[language_of(app.config)]
    return url + (folder + "/" if folder else "")


def write_editions(app) -> list[Path]:
    """Write the edition of every notebook page into ``<build>/editions/<language>/``
    (the folder beside the HTML output). Returns the files written."""
    from llmmath_book.translation import (
        catalogue_path,
        language_of,
        read_catalogue,
        translate_notebook,
    )

    env = app.env
    lang = language_of(app.config)
    out = Path(app.outdir).parent / EDITIONS / edition_folder(lang)
    site_url = _site_url(app)
    written = []
    for docname in sorted(env.found_docs):
        source = Path(env.doc2path(docname))
        if source.suffix != ".ipynb":
            continue
        doctree = env.get_and_resolve_doctree(docname, app.builder)
        resolved = resolve_page(doctree, docname, env, site_url)
        notebook = json.loads(source.read_text(encoding="utf-8"))
        if lang != "en":
            catalogue = read_catalogue(catalogue_path(app, docname))
            notebook = translate_notebook(notebook, catalogue, docname)
        text = dumps(edition(notebook, docname, resolved, site_url, lang))
        target = out / f"{docname}.ipynb"
        target.parent.mkdir(parents=True, exist_ok=True)
        if not target.exists() or target.read_text(encoding="utf-8") != text:
            target.write_text(text, encoding="utf-8")
        written.append(target)
    return written


def _build_finished(app, exception) -> None:
    if exception is None and app.builder.format == "html":
        write_editions(app)


def _launch_editions(app, pagename, templatename, context, doctree) -> None:
    """Point the page's Binder and Colab buttons at its reader edition (the theme
    points them at the MyST source)."""
    from llmmath_book.translation import language_of

    language = language_of(app.config)
    source = f"/{pagename}.ipynb"
    for button in context.get("header_buttons", []):
        for item in button.get("buttons", []) if isinstance(button, dict) else []:
            url = item.get("url", "")
            if url.endswith(source) and ("binder" in url or "colab" in url):
                item["url"] = (
                    url[: -len(source)] + "/" + edition_path(pagename, language)
                )


def setup(app) -> dict:
    """Sphinx entry point: write the reader editions after every HTML build, and
    point the launch buttons at them."""
    app.connect("build-finished", _build_finished)
    app.connect("html-page-context", _launch_editions, priority=600)
    return {"parallel_read_safe": True, "parallel_write_safe": True}

"""The Simplified Chinese edition: Sphinx's gettext route, made to work with MyST-NB.

The book has one source, in English; every other language lives in gettext catalogues,
one ``.po`` file per page under ``locales/<lang>/LC_MESSAGES/`` (sphinx-intl's layout,
kept current by ``make catalogues``). Sphinx replaces each paragraph, heading, caption,
table cell and exercise title with its ``msgstr`` while it reads a page, so the
translated site keeps every number, link and figure of the English one: glue roles,
math and references are part of each message and resolve as they do in English.

This module is the Sphinx extension (``_config.yml`` lists it) that makes that route
work for this book:

- **MyST-NB issue 587.** Sphinx parses each translated message with the parser of the
  page's file type. For a notebook that is MyST-NB's notebook parser, which reads the
  message as notebook JSON and fails (``NotJSONError``). The messages are MyST Markdown,
  so `publish_msgstr` parses them with MyST-Parser's parser instead, with the same
  settings (roles such as ``{glue:text}`` and ``{cite:p}`` included).
- **Glued words in the page's language.** A value glued with a spec (a count, a list,
  a date: `llmmath.localize`) is written in the build's language before the page's
  messages are parsed (`localize_glue`): "Four" and "A, B and C" on the English page
  are 4 and "A、B 和 C" on the Chinese one.
- **Where each edition lives.** English is the site's root; a translation is built
  into ``<root>/<folder>/`` (``zh/`` for ``zh_CN``, see `FOLDERS`), and every page of
  each edition has a language switch that leads to the same page in the other one
  (`language_links`, shown in the page header; the ``<link rel="alternate"
  hreflang>`` tags say the same to search engines).
- **Search.** A ``zh_CN`` build indexes the pages with Sphinx's Chinese search, which
  segments words with jieba (a pinned dependency of the book), so a search for 参数量
  finds the pages that use the term.

The live parts of the site (explorers and the calculator) translate their own labels
with `llmmath.messages`, from the catalogue in ``llmmath/locale/``.
"""

from __future__ import annotations

import contextlib
import re
from collections import Counter
from pathlib import Path

# the rules that make a printed line a message live with the package (figures use them)
from llmmath.localize import MONTHS, fill_output, output_message

#: The languages of the book → the folder of the site each edition is served from
#: ("" is the site's root).
FOLDERS = {"en": "", "zh_CN": "zh"}
#: Each language's name as its readers write it (the language switch shows it).
NAMES = {"en": "English", "zh_CN": "简体中文"}
#: Each language's short name, for the switch on a phone's narrow header.
SHORT_NAMES = {"en": "EN", "zh_CN": "中文"}
#: Each language's tag for ``hreflang`` and ``<html lang>``.
TAGS = {"en": "en", "zh_CN": "zh-CN"}

TEMPLATES = Path(__file__).with_name("templates")

#: Each page's MyST-NB notebook renderer (which holds its glue data), kept from the
#: page's parse until its messages are translated: MyST-NB drops it from the page's
#: document at the end of the parse, before Sphinx's `Locale` transform runs.
_RENDERERS: dict[str, object] = {}


def _keep_renderers(app) -> None:
    """Keep the notebook renderer MyST-NB makes for each page, by page name."""
    import myst_nb.sphinx_

    load = myst_nb.sphinx_.load_renderer
    if getattr(load, "llmmath", False):
        return

    def load_renderer(name):
        make = load(name)

        def kept(*args, **kwargs):
            renderer = make(*args, **kwargs)
            _RENDERERS[app.env.docname] = renderer
            return renderer

        return kept

    load_renderer.llmmath = True
    myst_nb.sphinx_.load_renderer = load_renderer


def _message_parser(app):
    """MyST-Parser's parser for one translated message of a MyST-NB page. The message
    is parsed as a document of its own, so it is given the page's notebook renderer:
    a ``{glue:text}`` role in a message finds the page's glue data there."""
    from myst_parser.parsers.sphinx_ import MystParser

    class MessageParser(MystParser):
        def parse(self, inputstring, document) -> None:
            from sphinx.util.docutils import sphinx_domains

            renderer = _RENDERERS.get(app.env.docname)
            if renderer is not None:
                localize_glue(renderer, language_of(app.config))
                document["nb_renderer"] = renderer
            try:
                # The domains' roles ({doc}, {ref}, {numref}…), as for the page.
                with sphinx_domains(app.env):
                    super().parse(inputstring, document)
            finally:
                document.attributes.pop("nb_renderer", None)

    parser = MessageParser()
    parser.set_application(app)
    return parser


def localize_glue(renderer, language: str) -> None:
    """Write the page's glued specs (`llmmath.localize`) in ``language``: each glued
    value stored with a spec gets the spec's text in the build's language as its
    ``text/plain``, which ``{glue:text}`` shows. Done once per page, before its first
    translated message is parsed; the English build keeps the stored English text."""
    from llmmath.localize import MIME, render

    if language == "en" or getattr(renderer, "llmmath_language", None) == language:
        return
    for record in renderer.renderer.nb_client.glue_data.values():
        spec = record["data"].get(MIME)
        if spec is not None:
            record["data"]["text/plain"] = repr(render(dict(spec), language))
    renderer.llmmath_language = language


def publish_msgstr(app, source, source_path, source_line, config, settings):
    """Parse one translated message (MyST Markdown) into a docutils node.

    Sphinx's own `sphinx.transforms.i18n.publish_msgstr`, with one change: a message
    from a MyST-NB page (notebook or Markdown) is parsed with MyST-Parser's
    `MystParser` rather than MyST-NB's notebook parser, which would read it as JSON
    (MyST-NB issue 587). Returns the first node of the parsed message.
    """
    from docutils.io import StringInput
    from sphinx.io import SphinxI18nReader
    from sphinx.util import get_filetype

    rst_prolog = config.rst_prolog
    try:
        config.rst_prolog = None
        reader = SphinxI18nReader()
        reader.setup(app)
        filetype = get_filetype(config.source_suffix, source_path)
        if filetype == "myst-nb":
            parser = _message_parser(app)
        else:
            parser = app.registry.create_source_parser(app, filetype)
        doc = reader.read(
            source=StringInput(
                source=source, source_path=f"{source_path}:{source_line}:<translated>"
            ),
            parser=parser,
            settings=settings,
        )
        with contextlib.suppress(IndexError):  # empty node
            return doc[0]
        return doc
    finally:
        config.rst_prolog = rst_prolog


def _translatable_exercise_titles() -> None:
    """Make each exercise's title a message: sphinx-exercise builds the title's
    subtitle node with neither a source nor its raw text, so Sphinx's gettext builder
    leaves it out and a translated page would show the English title."""
    from sphinx_exercise.directive import ExerciseDirective
    from sphinx_exercise.nodes import exercise_subtitle

    run = ExerciseDirective.run
    if getattr(run, "llmmath", False):
        return

    def run_with_message(self):
        result = run(self)
        if self.arguments:
            source, line = self.get_source_info()
            for node in result:
                for subtitle in node.findall(exercise_subtitle):
                    subtitle.rawsource = self.arguments[0]
                    subtitle.source, subtitle.line = source, line
        return result

    run_with_message.llmmath = True
    ExerciseDirective.run = run_with_message


def _exercise_title_messages(app, doctree) -> None:
    """Give the gettext builder each exercise's title as it is read: by the time the
    builder extracts a page's messages, sphinx-exercise has replaced the title nodes
    with numbered ones that carry no source."""
    if app.builder.name != "gettext":
        return
    from sphinx.builders.gettext import MsgOrigin
    from sphinx.util.i18n import docname_to_domain
    from sphinx_exercise.nodes import exercise_subtitle

    domain = docname_to_domain(app.env.docname, app.config.gettext_compact)
    for node in doctree.findall(exercise_subtitle):
        if node.rawsource:
            origin = MsgOrigin(node.source, node.line)
            app.builder.catalogs[domain].add(node.rawsource, origin)


def _translated_exercises(app, doctree) -> None:
    """sphinx-exercise's registry keeps each exercise's node as it was parsed, before
    the catalogue translated it, and a solution's title copies its exercise's from
    there ("解答 练习 65 (Top-1 routing)"): give the registry a copy of the page's
    translated node (a copy: sphinx-exercise rebuilds the page's titles in place)."""
    from docutils import nodes

    registry = getattr(app.env, "sphinx_exercise_registry", {})
    for node in doctree.findall(nodes.Element):
        entry = registry.get(node.get("label")) if "label" in node else None
        if entry and entry["docname"] == app.env.docname:
            if type(entry["node"]) is type(node):
                entry["node"] = node.deepcopy()


class _Terms(set):
    """A set that takes ``extend`` as a list does."""

    extend = set.update


def _fast_chinese_search() -> None:
    """Sphinx 7.4's Chinese search keeps the Latin words it has seen in a list shared
    by the class, and looks each word up in it (17 s of a 90 s build); a set per
    indexer gives the same index."""
    from sphinx.search.zh import SearchChinese

    init = SearchChinese.init
    if getattr(init, "llmmath", False):
        return

    def init_with_set(self, options) -> None:
        init(self, options)
        self.latin_terms = _Terms()

    init_with_set.llmmath = True
    SearchChinese.init = init_with_set


def language_of(config) -> str:
    """The build's language as a key of `FOLDERS`; raises ValueError for a language
    the book has no edition in."""
    return language_of_name(config.language or "en")


def language_links(pagename: str, language: str) -> list[dict[str, str]]:
    """The page ``pagename`` in every edition, as relative links from the page itself
    in the edition ``language``: ``[{"language", "name", "short", "tag", "href",
    "current"}]``.

    English pages are at ``<root>/<pagename>.html`` and a translation's at
    ``<root>/<folder>/<pagename>.html``, so the link climbs out of the page's folders
    and the edition's folder, then goes down into the other edition's.
    """
    root = "../" * pagename.count("/") + ("../" if FOLDERS[language] else "")
    return [
        {
            "language": other,
            "name": NAMES[other],
            "short": SHORT_NAMES[other],
            "tag": TAGS[other],
            "href": "#"
            if other == language
            else f"{root}{folder + '/' if folder else ''}{pagename}.html",
            "current": "true" if other == language else "",
        }
        for other, folder in FOLDERS.items()
    ]


def _config_inited(app, config) -> None:
    language = language_of(config)
    config.templates_path = [*config.templates_path, str(TEMPLATES)]
    options = dict(config.html_theme_options or {})
    header = list(options.get("article_header_end") or ["article-header-buttons.html"])
    if "language-switch.html" not in header:
        header.insert(0, "language-switch.html")
    options["article_header_end"] = header
    config.html_theme_options = options
    if config.html_search_scorer:  # Sphinx opens it from the cwd
        config.html_search_scorer = str(Path(app.srcdir) / config.html_search_scorer)
    if language != "en":
        from llmmath.messages import gettext as _

        # MyST-NB's folded-cell buttons, in the page's language
        config.nb_code_prompt_show = _("Show code cell", language)
        config.nb_code_prompt_hide = _("Hide code cell", language)
    if language != "en":
        config.html_search_language = language.split("_")[0]
        if language == "zh_CN":
            # jieba segments the pages for search; the glossary's terms are words
            # of its dictionary, so 参数量 or 前馈网络 is one term, not two.
            words = Path(app.outdir).parent / "jieba-glossary.txt"
            words.parent.mkdir(parents=True, exist_ok=True)
            glossary = Path(app.srcdir) / "book" / "glossary.md"
            terms = glossary_terms(glossary.read_text("utf-8"))
            words.write_text("".join(f"{term} 100000\n" for term in terms), "utf-8")
            options = dict(config.html_search_options or {})
            options["dict"] = str(words)
            config.html_search_options = options


def glossary_terms(glossary_md: str) -> list[str]:
    """The Chinese terms of the glossary's table (its second column), one per
    concept: "注意力头、头维度" gives both, "输出层（LM head）" gives 输出层."""
    terms = []
    for line in glossary_md.splitlines():
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        if len(cells) < 2 or not re.search(r"[\u4e00-\u9fff]", cells[1]):
            continue
        for term in re.split(r"[、/，,]", re.sub(r"（[^）]*）", "", cells[1])):
            term = term.strip()
            # a word of jieba's dictionary has no space ("KV 缓存" is two words)
            if re.fullmatch(r"[\u4e00-\u9fffA-Za-z0-9-]+", term) and term not in terms:
                terms.append(term)
    return terms


def _page_context(app, pagename, templatename, context, doctree) -> None:
    language = language_of(app.config)
    links = language_links(pagename, language)
    context["llmmath_languages"] = links
    tags = "".join(
        f'<link rel="alternate" hreflang="{link["tag"]}" href="{link["href"]}" />\n'
        for link in links
        if not link["current"]
    )
    context["metatags"] = context.get("metatags", "") + tags + _page_words(language)
    # A translated page is its own canonical page, not a duplicate of the English one
    # (issue 36): html_baseurl stays the English site's, for the editions' links.
    base = (app.config.html_baseurl or "").rstrip("/") + "/"
    page = context.get("pageurl") or ""
    if FOLDERS[language] and base != "/" and page.startswith(base):
        context["pageurl"] = f"{base}{FOLDERS[language]}/{page[len(base) :]}"


def _page_words(language: str) -> str:
    """The words the book's stylesheet shows (``_vendor/llmmath.css``), in the page's
    language: CSS custom properties that its ``content:`` rules read."""
    import json

    from llmmath.messages import gettext as _

    words = {
        "--llmmath-needs-kernel": _(
            "needs a kernel: run this cell on Binder, Colab or your machine (🚀 above)",
            language,
        )
    }
    rules = "".join(
        f"{name}: {json.dumps(text, ensure_ascii=False)};"  # a CSS string: "…"
        for name, text in words.items()
    )
    return f"<style>:root {{{rules}}}</style>\n"


def _translate_part_captions(app, doctree) -> None:
    """The captions of the table of contents' parts ("Parameters", "Cost"…) in the
    build's language: sphinx-external-toc adds the root page's toctrees after Sphinx
    has translated the page, so their captions would stay English in the sidebar.
    They are messages of the root page's catalogue (``book/intro.po``)."""
    from sphinx import addnodes

    language = language_of(app.config)
    if language == "en" or app.env.docname != app.config.root_doc:
        return
    catalogue = read_catalogue(catalogue_path(app, app.config.root_doc))
    for toctree in doctree.findall(addnodes.toctree):
        caption = toctree.get("caption")
        if caption in catalogue:
            toctree["caption"] = catalogue[caption]
            toctree["rawcaption"] = catalogue[caption]


def setup(app) -> dict:
    """Sphinx entry point: the MyST-NB 587 fix, the language switch, Chinese search."""
    import sphinx.transforms.i18n

    sphinx.transforms.i18n.publish_msgstr = publish_msgstr
    _keep_renderers(app)
    _translatable_exercise_titles()
    locale = sphinx.transforms.i18n.Locale
    if not getattr(locale.apply, "llmmath", False):
        original = locale.apply

        def apply(self, **kwargs) -> None:
            try:
                original(self, **kwargs)
            finally:
                _RENDERERS.pop(self.env.docname, None)
            # A translated message's nodes still name the throwaway document they were
            # parsed into; pickled with the page, each drags its document along (the
            # zh doctrees were six times the English ones, and slow to load).
            for node in self.document.findall():
                if node._document is not None and node._document is not self.document:
                    node._document = None

        apply.llmmath = True
        locale.apply = apply
    _fast_chinese_search()
    app.connect("config-inited", _config_inited)
    app.connect("doctree-read", _exercise_title_messages)
    app.connect("doctree-read", _output_messages_for_gettext)
    app.connect("source-read", _translate_source_outputs)
    app.connect("doctree-read", _translated_exercises)
    app.connect("doctree-read", _translate_part_captions, priority=900)
    app.connect("html-page-context", _page_context)
    return {"parallel_read_safe": True, "parallel_write_safe": True}


# ------------------------------------------------------------------------------
# The catalogues: what a translation must keep, and the translators' tools.


#: What a message must carry over unchanged (as a multiset: a translation puts them
#: where its own word order wants them): a role (by name, and for a cross-reference by
#: target only, since its title may be translated), a code span, a math span, a link's
#: target, a web address and every number written in digits. Titles of links and of
#: ``{doc}``/``{ref}`` roles are free. An English month beside a day or a year is its
#: number ("18 April 2024" keeps 18, 4 and 2024: 2024 年 4 月 18 日). A number is
#: digits not inside a Latin word ("Llama-3-8B" has 3 and 8, "bfloat16" none), and a
#: Chinese character before it does not hide it (a note's "组有8" has 8).
INVARIANT = re.compile(
    r"\{(?P<role>[a-z][\w:+-]*)\}`(?P<body>[^`]*)`"
    r"|(?P<code>(?P<ticks>`+)[^`].*?(?P=ticks))"
    r"|(?P<math>\$\$.+?\$\$|\$[^$]+\$)"
    r"|\]\((?P<link>[^)\s]+)\)"
    r"|(?P<url>https?://[^\s)>\]]+)"
    r"|(?P<month>(?<=\d )(?:MONTHS)\b|\b(?:MONTHS)(?= \d{4}\b))"
    r"|(?P<number>(?<![A-Za-z0-9_.])\d+(?:[.,]\d+)*)".replace(
        "MONTHS", "|".join(MONTHS)
    )
)
#: Roles whose body may be "title <target>": only the target must stay.
TITLED_ROLES = {"doc", "ref", "numref", "term", "download"}


def invariants(message: str) -> list[str]:
    """The parts of a message a translation keeps as they are, in the message's order
    (`INVARIANT`): ``["glue:text:llama_total", "math:$H$", "number:4096", …]``; an
    English month of a date is its number (``"number:4"`` for April)."""
    found = []
    for match in INVARIANT.finditer(message):
        kind = match.lastgroup if match.lastgroup != "ticks" else "code"
        if match.group("role"):
            role, body = match.group("role"), match.group("body")
            if role in TITLED_ROLES:
                target = re.search(r"<([^<>]+)>\s*$", body)
                body = target.group(1) if target else body
            found.append(f"{role}:{body}")
        elif match.group("code"):
            found.append(f"code:{match.group('code')}")
        elif match.group("month"):
            found.append(f"number:{MONTHS.index(match.group('month')) + 1}")
        else:
            found.append(f"{kind}:{match.group(kind)}")
    return found


def markup(message: str) -> list[str]:
    """The inline markup a message renders to, as MyST reads it: the sequence of
    emphasis, strong, link and code tokens. A translation must render the same: in
    Chinese, ``**`` next to full-width punctuation easily stops being bold (CommonMark's
    flanking rules) and shows its asterisks instead."""
    from markdown_it import MarkdownIt
    from mdit_py_plugins.dollarmath import dollarmath_plugin

    parser = MarkdownIt("commonmark").use(dollarmath_plugin)
    kinds = {"strong_open", "em_open", "link_open", "code_inline", "math_inline"}
    return [
        token.type
        for block in parser.parse(message)
        for token in block.children or []
        if token.type in kinds
    ]


#: A path into the English reader editions (``editions/en/``): a translation names its
#: own edition's folder there (``editions/zh/``), in code and links alike.
EDITION_PATH = re.compile(r"\beditions/en\b")


def own_edition(parts: list[str], language: str | None) -> list[str]:
    """The English message's protected ``parts`` as a translation into ``language``
    must keep them: a path into the English reader editions names the translation's
    own (`EDITION_PATH`); everything else is unchanged."""
    folder = FOLDERS.get(language or "")
    if not folder:
        return parts
    return [EDITION_PATH.sub(f"editions/{folder}", part) for part in parts]


def check_message(
    msgid: str, msgstr: str, fuzzy: bool = False, language: str | None = "zh_CN"
) -> list[str]:
    """What is wrong with one translated message: ``[]`` when it is complete, not
    fuzzy, keeps every invariant of its English source (`invariants`: the same parts,
    each as often, in whatever order the translation's word order puts them; a path
    into the English reader editions names ``language``'s own, `own_edition`) and
    renders the same inline markup (`markup`)."""
    if not msgstr.strip():
        return ["untranslated"]
    problems = ["fuzzy"] if fuzzy else []
    if sorted(markup(msgid)) != sorted(markup(msgstr)):
        problems.append(
            f"renders other markup: {sorted(markup(msgid))} in English, "
            f"{sorted(markup(msgstr))} translated (is a ** or * beside full-width "
            "punctuation? put a space outside it, or move the punctuation out)"
        )
    source = Counter(own_edition(invariants(msgid), language))
    translated = Counter(invariants(msgstr))
    if source != translated:
        missing = sorted((source - translated).elements())
        extra = sorted((translated - source).elements())
        detail = (
            f"missing {missing}" if missing else "",
            f"added {extra}" if extra else "",
        )
        problems.append(
            "keeps its {roles}, math, code, links and numbers differently: "
            + "; ".join(part for part in detail if part)
        )
    return problems


def check_catalogue(path) -> list[str]:
    """Every problem of one ``.po`` catalogue, one line each (``[]`` when it is
    complete): messages untranslated, fuzzy or changed in what they must keep."""
    from babel.messages.pofile import read_po

    with open(path, "rb") as handle:
        catalogue = read_po(handle)
    # locales/<language>/LC_MESSAGES/<page>.po, a page may be in a folder
    folders = [folder.name for folder in Path(path).resolve().parents]
    messages = folders.index("LC_MESSAGES") if "LC_MESSAGES" in folders else None
    language = folders[messages + 1] if messages is not None else None
    problems = []
    for message in catalogue:
        if not message.id:
            continue
        found = check_message(message.id, message.string, message.fuzzy, language)
        for problem in found:
            problems.append(f"{path}: {problem}: {message.id[:70]!r}")
    return problems


def export_catalogue(path) -> list[dict[str, str]]:
    """A catalogue's messages as ``[{"id": English, "str": translation}]``, in order."""
    from babel.messages.pofile import read_po

    with open(path, "rb") as handle:
        catalogue = read_po(handle)
    return [{"id": m.id, "str": m.string} for m in catalogue if m.id]


def import_catalogue(path, messages: list[dict[str, str]]) -> int:
    """Set translations of a catalogue from ``[{"id", "str"}]`` (as `export_catalogue`
    gives), clearing their fuzzy flags; raises KeyError for an ``id`` the catalogue
    does not hold. Returns how many messages were set."""
    from babel.messages.pofile import read_po, write_po

    with open(path, "rb") as handle:
        catalogue = read_po(handle)
    count = 0
    for item in messages:
        message = catalogue.get(item["id"])
        if message is None:
            raise KeyError(f"{path}: no message {item['id'][:70]!r}")
        message.string = item["str"]
        message.flags.discard("fuzzy")
        count += 1
    with open(path, "wb") as handle:
        write_po(handle, catalogue, width=76)
    return count


def edition_config(config_yml: str, language: str) -> str:
    """The book's jupyter-book configuration (``_config.yml``'s text) for the
    edition in ``language``: the same but for ``sphinx.config.language``. Jupyter
    Book 1.x reads one configuration file and has no option for the language, so
    each translated edition is built with such a copy (``make book``)."""
    import yaml

    config = yaml.safe_load(config_yml)
    config["sphinx"]["config"]["language"] = language_of_name(language)
    return yaml.safe_dump(config, allow_unicode=True, sort_keys=False)


def language_of_name(language: str) -> str:
    """``language`` if the book has an edition in it; else ValueError."""
    if language not in FOLDERS:
        raise ValueError(
            f"language {language!r}: the book has editions in {sorted(FOLDERS)} only"
        )
    return language


def build_book(
    root: Path, out: Path, flags: tuple[str, ...] = (), jupyter_book: str = ""
) -> tuple[int, str, dict[str, float]]:
    """Build the site in every language with jupyter-book: English into
    ``out/_build/html/``, each translation into ``out/_build/html/<folder>/``
    (`FOLDERS`) and its reader editions into ``out/_build/editions/<folder>/`` beside
    the English ones. ``flags`` go to every build (``-W -n --keep-going``: strict).

    Returns the first failing build's exit code (else 0), the tail of each build's
    output, and each language's build time in seconds.
    """
    import shutil
    import subprocess
    import sys
    import time

    jb = jupyter_book or str(Path(sys.executable).with_name("jupyter-book"))
    log, seconds, code = [], {}, 0
    for lang, folder in FOLDERS.items():
        command = [jb, "build", str(root), "--path-output", str(out), *flags]
        target = out
        if folder:
            config = out / "_build" / f"_config.{lang}.yml"
            config.parent.mkdir(parents=True, exist_ok=True)
            text = (root / "_config.yml").read_text("utf-8")
            config.write_text(edition_config(text, lang), "utf-8")
            target = out / "_build" / lang
            command[4] = str(target)
            command += ["--config", str(config)]
        started = time.perf_counter()
        result = subprocess.run(command, capture_output=True, text=True, timeout=900)
        seconds[lang] = time.perf_counter() - started
        log.append(f"--- {lang}: exit {result.returncode} in {seconds[lang]:.1f} s\n")
        log.append(result.stdout[-4000:] + result.stderr[-4000:])
        if result.returncode:
            code = code or result.returncode
            continue
        if folder:
            built = target / "_build"
            site = out / "_build" / "html" / folder
            shutil.rmtree(site, ignore_errors=True)
            shutil.copytree(built / "html", site)
            editions = out / "_build" / "editions" / folder
            shutil.rmtree(editions, ignore_errors=True)
            shutil.copytree(built / "editions" / folder, editions)
    return code, "".join(log), seconds


def main(argv=None) -> int:
    """``python -m llmmath_book.translation check|export|import``: the translators'
    tools.

    - ``check PO…``: print every problem (exit 1 if any);
    - ``export PO``: the messages as JSON on stdout;
    - ``import PO JSON``: set translations from such a JSON file;
    - ``build [FLAGS]``: build every edition of the book here (`build_book`);
    - ``config LANG OUT``: write the book's ``_config.yml`` with ``language: LANG``
      to OUT, for ``jupyter-book build --config OUT`` (`edition_config`).
    """
    import argparse
    import json
    import sys

    parser = argparse.ArgumentParser(prog="python -m llmmath_book.translation")
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("check").add_argument(
        "catalogues", nargs="+", help=".po files, or folders of them"
    )
    sub.add_parser("export").add_argument("catalogue")
    imported = sub.add_parser("import")
    imported.add_argument("catalogue")
    imported.add_argument("messages")
    configured = sub.add_parser("config")
    configured.add_argument("language", choices=sorted(FOLDERS))
    configured.add_argument("out")
    built = sub.add_parser("build")
    built.add_argument("flags", nargs="*")
    args = parser.parse_args(argv)
    if args.command == "build":
        root = Path.cwd()
        code, log, seconds = build_book(root, root, tuple(args.flags))
        print(log if code else "", end="")
        for lang, taken in seconds.items():
            print(f"{NAMES[lang]} edition ({lang}) built in {taken:.0f} s")
        return code
    if args.command == "config":
        text = edition_config(Path("_config.yml").read_text("utf-8"), args.language)
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(text, "utf-8")
        return 0
    if args.command == "check":  # a folder stands for every catalogue under it
        paths = [
            found
            for given in map(Path, args.catalogues)
            for found in (sorted(given.rglob("*.po")) if given.is_dir() else [given])
        ]
        missing = [str(path) for path in paths if not path.is_file()]
        if missing or not paths:
            parser.error(f"no catalogue at {', '.join(missing) or args.catalogues[0]}")
        problems = [p for path in paths for p in check_catalogue(path)]
        print("\n".join(problems) if problems else "complete")
        return 1 if problems else 0
    if args.command == "export":
        messages = export_catalogue(args.catalogue)
        json.dump(messages, sys.stdout, ensure_ascii=False, indent=1)
        print()
        return 0
    with open(args.messages, encoding="utf-8") as handle:
        print(import_catalogue(args.catalogue, json.load(handle)), "messages set")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())


# ------------------------------------------------------------------------------
# The translated reader editions: a notebook's MyST, message by message.


class TranslationError(ValueError):
    """A page's source holds a message its catalogue does not (the message names the
    page and the text): run ``make catalogues`` and translate what is new."""


def catalogue_path(app, docname: str) -> Path:
    """The ``.po`` catalogue of page ``docname`` in the build's language."""
    language = language_of(app.config)
    locales = Path(app.srcdir) / app.config.locale_dirs[0] / language
    return locales / "LC_MESSAGES" / f"{docname}.po"


def read_catalogue(path) -> dict[str, str]:
    """A ``.po`` catalogue as ``{English: translation}``, with only what Sphinx uses:
    messages translated and not fuzzy."""
    from babel.messages.pofile import read_po

    with open(path, "rb") as handle:
        catalogue = read_po(handle)
    return {
        m.id: m.string
        for m in catalogue
        if m.id and isinstance(m.id, str) and m.string and not m.fuzzy
    }


def _markdown_parser():
    from markdown_it import MarkdownIt
    from mdit_py_plugins.amsmath import amsmath_plugin
    from mdit_py_plugins.colon_fence import colon_fence_plugin
    from mdit_py_plugins.dollarmath import dollarmath_plugin
    from mdit_py_plugins.myst_blocks import myst_block_plugin

    return (
        MarkdownIt("commonmark")
        .enable("table")
        .use(dollarmath_plugin)
        .use(amsmath_plugin)
        .use(colon_fence_plugin)
        .use(myst_block_plugin)
    )


def translate_markdown(
    text: str, catalogue: dict[str, str], page: str = "", strict: bool = False
) -> str:
    """MyST Markdown with each message replaced by its translation.

    A message is what Sphinx's gettext builder extracts: a heading's, paragraph's or
    table cell's inline text with its line breaks made spaces. A directive's title
    (``{exercise} Title``) is a message too, and its body is translated the same way;
    code, math blocks, targets and comments stay. A message the catalogue does not
    hold stays English, as on Sphinx's translated pages; with ``strict``, it raises
    `TranslationError` instead.
    """
    lines = text.split("\n")
    tokens = _markdown_parser().parse(text)
    edits: list[tuple[int, int, list[str]]] = []  # [start, end) lines → new lines

    def translated(message: str) -> str:
        key = message.replace("\n", " ").strip()
        return lookup(catalogue, key, page, strict)

    row: list[int] | None = None
    for i, token in enumerate(tokens):
        if token.type == "tr_open":
            row = token.map
        elif token.type == "tr_close":
            row = None
        elif token.type == "inline" and token.content.strip():
            if row is not None:  # a table cell: replaced within its row's line
                start = row[0]
                line = _edited_line(edits, lines, start)
                cell = token.content.strip()
                line = line.replace(cell, translated(cell).replace("|", "\\|"), 1)
                edits.append((start, start + 1, [line]))
                continue
            block = tokens[i - 1]
            start, end = block.map
            first = token.content.split("\n", 1)[0]
            head = lines[start]
            prefix = head[: head.index(first)] if first in head else head
            edits.append((start, end, [prefix + translated(token.content)]))
        elif token.type in ("fence", "colon_fence") and token.info.startswith("{"):
            edits.append(_translate_directive(token, lines, catalogue, page, strict))
    for start, end, new in sorted(edits, key=lambda edit: edit[0], reverse=True):
        lines[start:end] = new
    return "\n".join(lines)


def _edited_line(edits, lines, index: int) -> str:
    """Line ``index`` as earlier edits of the same line left it."""
    for start, end, new in reversed(edits):
        if start == index and end == index + 1:
            return new[0]
    return lines[index]


def lookup(catalogue: dict[str, str], key: str, page: str, strict: bool) -> str:
    """The translation of one message; the message itself when there is none (or
    `TranslationError` when ``strict``)."""
    if key in catalogue:
        return catalogue[key]
    if strict:
        raise TranslationError(f"{page}: no translation of {key[:80]!r}")
    return key


def _translate_directive(token, lines, catalogue, page, strict):
    """A directive fence with its title and body translated (options kept)."""
    start, end = token.map
    opening = lines[start]
    name, _, title = token.info.partition("}")
    title = title.strip()
    if title and name not in ("{solution-start", "{solution-end"):
        opening = opening[: opening.rindex(title)] + lookup(
            catalogue, title, page, strict
        )
    body = token.content.removesuffix("\n").split("\n")
    options = 0
    while options < len(body) and re.match(r"^:[\w-]+:", body[options]):
        options += 1
    rest = "\n".join(body[options:])
    if rest.strip():
        rest = translate_markdown(rest, catalogue, page, strict)
    closing = lines[end - 1] if end - 1 > start else ""
    new = [opening, *body[:options], *rest.split("\n")]
    if closing:
        new.append(closing)
    return (start, end, new)


def translate_notebook(
    notebook: dict, catalogue: dict[str, str], page: str, strict: bool = False
) -> dict:
    """A copy of a MyST notebook (nbformat 4 dict) in the catalogue's language: every
    markdown cell through `translate_markdown`, each figure's caption (the code
    cell's ``mystnb.figure.caption``) and the printed outputs (`translate_outputs`).
    Code stays as it is."""
    notebook = translate_outputs(notebook, catalogue, page, strict)
    for cell in notebook["cells"]:
        source = cell["source"]
        source = "".join(source) if isinstance(source, list) else source
        if cell["cell_type"] == "markdown":
            cell["source"] = translate_markdown(source, catalogue, page, strict)
        figure = cell.get("metadata", {}).get("mystnb", {}).get("figure")
        if figure and figure.get("caption"):
            caption = figure["caption"]
            figure["caption"] = translate_markdown(caption, catalogue, page, strict)
    return notebook


# ------------------------------------------------------------------------------
# Printed outputs: the text and tables a code cell prints, in the page's language.
#
# A stored output is English: what the cell printed when the notebook was executed. Its
# words are messages of the page's catalogue, like its prose (the gettext builder adds
# them, `_output_messages_for_gettext`), one message per printed line and per table
# cell, caption or header that holds English words. A message's numbers are fields,
# ``{0}``, ``{1}``… in the order the English prints them, filled from the stored output
# when it is translated: the translation keeps every field (the catalogue check counts
# them as numbers, a multiset), so a translated output shows the same numbers as the
# English one, and a number that changes when the notebook is re-executed changes in
# both editions. A changed word makes a new message, which the catalogue check finds
# untranslated until ``make catalogues`` and a translator have been by.

_TABLE_CELL = re.compile(r"(<t[dh](?:\s[^>]*)?>)(.*?)(</t[dh]>)", re.S)
_TABLE_TITLE = re.compile(r"<(caption|summary)>(.*?)</\1>", re.S)
_FOLDED_ROWS = re.compile(r" \(\d[\d,]* rows?\)$")
_GLUE = "application/papermill.record/"
_WIDGET = "application/vnd.jupyter.widget-view+json"


def _printed(output: dict) -> str | None:
    """What kind of printed output this is: ``"stream"``, ``"table"`` (an HTML
    table of `llmmath.book.table`, with its plain-text twin), ``"figure"`` (a PNG,
    translated by `llmmath.figures`) or ``None`` (glue, explorers, math: not printed
    text)."""
    if output.get("output_type") == "stream":
        return "stream"
    data = output.get("data") or {}
    if any(mime.startswith(_GLUE) for mime in data) or _WIDGET in data:
        return None
    if "text/html" in data:
        return "table"
    if "image/png" in data:
        return "figure"
    return None


def _text(value) -> str:
    return "".join(value) if isinstance(value, list) else value


def _table_texts(markup: str) -> list[str]:
    """The cells, headers and caption of a table's HTML, as text."""
    import html

    texts = [html.unescape(cell) for _, cell, _ in _TABLE_CELL.findall(markup)]
    for _, title in _TABLE_TITLE.findall(markup):
        texts.append(_FOLDED_ROWS.sub("", html.unescape(title)))
    return texts


def output_texts(notebook: dict) -> list[str]:
    """Every printed line and table text of a notebook's code cells, in order."""
    texts = []
    for cell in notebook["cells"]:
        for output in cell.get("outputs", []) if cell["cell_type"] == "code" else []:
            kind = _printed(output)
            if kind == "stream":
                texts += _text(output.get("text", "")).split("\n")
            elif kind == "table":
                texts += _table_texts(_text(output["data"]["text/html"]))
    return texts


def output_messages(notebook: dict) -> list[str]:
    """The messages of a notebook's printed outputs (`output_message`), each once,
    in order: what its catalogue must translate for the page's outputs."""
    found = (output_message(text) for text in output_texts(notebook))
    return list(dict.fromkeys(m for m in found if m))


def _translate_text(text: str, catalogue, page: str, strict: bool) -> str:
    """One printed line or cell in the catalogue's language (its leading and
    trailing blanks kept); a text with no message is itself."""
    message = output_message(text)
    if message is None:
        return text
    translated = lookup(catalogue, message, page, strict)
    if translated is message:
        return text
    body = text.strip()
    start = text.index(body) if body else 0
    return text[:start] + fill_output(translated, body) + text[start + len(body) :]


def _translate_table(data: dict, catalogue, page, strict, language) -> None:
    """A table's HTML and plain text rebuilt from its translated cells
    (`llmmath.book.Table`, its own words in ``language``)."""
    import html

    from llmmath.book import Table
    from llmmath.messages import speaking

    markup = _text(data["text/html"])
    heads, rows, align = [], [], []
    for row in re.findall(r"<tr>(.*?)</tr>", markup, re.S):
        cells = _TABLE_CELL.findall(row)
        texts = [
            _translate_text(html.unescape(cell), catalogue, page, strict)
            for _, cell, _ in cells
        ]
        if cells and cells[0][0].startswith("<th"):
            heads = texts
            align = [
                "right"
                if "right" in opening
                else "center"
                if "center" in opening
                else "left"
                for opening, _, _ in cells
            ]
        else:
            rows.append(texts)
    titles = _TABLE_TITLE.findall(markup)
    caption = None
    if titles:
        caption = _FOLDED_ROWS.sub("", html.unescape(titles[0][1]))
        caption = _translate_text(caption, catalogue, page, strict)
    if not heads:  # not a table of llmmath.book.table: its cells in place
        data["text/html"] = _TABLE_CELL.sub(
            lambda m: (
                m.group(1)
                + html.escape(
                    _translate_text(html.unescape(m.group(2)), catalogue, page, strict)
                )
                + m.group(3)
            ),
            markup,
        )
        return
    folded = markup.lstrip().startswith("<details>")
    table = Table(rows, heads, caption=caption, align=align, fold=folded)
    with speaking(language):
        data["text/html"] = table._repr_html_()
        data["text/plain"] = repr(table)


def translate_outputs(
    notebook: dict,
    catalogue: dict[str, str],
    page: str = "",
    strict: bool = False,
    language: str = "zh_CN",
) -> dict:
    """A copy of a notebook whose printed outputs (each line of a stream, each cell,
    header and caption of a table) are in the catalogue's language, their numbers
    those of the stored English output (`fill_output`), and whose figures are the
    ones drawn in ``language`` (`llmmath.figures.stored_figure`), where there are.
    What the catalogue does not translate stays English (or raises `TranslationError`
    when ``strict``); glue, explorers, math and code are unchanged."""
    import copy

    notebook = copy.deepcopy(notebook)
    for cell in notebook["cells"]:
        for output in cell.get("outputs", []) if cell["cell_type"] == "code" else []:
            kind = _printed(output)
            if kind == "stream":
                lines = _text(output.get("text", "")).split("\n")
                text = "\n".join(
                    _translate_text(line, catalogue, page, strict) for line in lines
                )
                output["text"] = _stored(text, output.get("text"))
            elif kind == "figure":
                from llmmath.figures import PNG, stored_figure

                translated = stored_figure(output["data"][PNG], language)
                if translated is not None:  # else the English figure, until drawn
                    output["data"][PNG] = _stored(translated, output["data"][PNG])
            elif kind == "table":
                data = output["data"]
                stored = {mime: data.get(mime) for mime in ("text/html", "text/plain")}
                _translate_table(data, catalogue, page, strict, language)
                for mime, before in stored.items():
                    if mime in data:
                        data[mime] = _stored(_text(data[mime]), before)
    return notebook


def _stored(text: str, like) -> str | list[str]:
    """``text`` as the notebook stored the value it replaces: nbformat's list of
    lines, or one string."""
    return text.splitlines(keepends=True) if isinstance(like, list) else text


def _output_messages_for_gettext(app, doctree) -> None:
    """Give the gettext builder the messages of a notebook page's printed outputs
    (`output_messages`), so that ``make catalogues`` puts them in its catalogue."""
    if app.builder.name != "gettext":
        return
    import json

    from sphinx.builders.gettext import MsgOrigin
    from sphinx.util.i18n import docname_to_domain

    source = Path(app.env.doc2path(app.env.docname))
    if source.suffix != ".ipynb":
        return
    notebook = json.loads(source.read_text("utf-8"))
    domain = docname_to_domain(app.env.docname, app.config.gettext_compact)
    for message in output_messages(notebook):
        app.builder.catalogs[domain].add(message, MsgOrigin(str(source), 0))


def _translate_source_outputs(app, docname: str, source: list[str]) -> None:
    """A translated build reads each notebook page with its printed outputs in the
    build's language (`translate_outputs`, from the page's catalogue)."""
    import json

    language = language_of(app.config)
    if language == "en" or Path(app.env.doc2path(docname)).suffix != ".ipynb":
        return
    path = catalogue_path(app, docname)
    if not path.is_file():
        return
    notebook = json.loads(source[0])
    catalogue = read_catalogue(path)
    translated = translate_outputs(notebook, catalogue, docname, False, language)
    source[0] = json.dumps(translated, ensure_ascii=False)

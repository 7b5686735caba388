# The two commands of the README. Each creates .venv (Python 3.11) and installs what is missing.
# PYTHON is the interpreter that creates .venv: the first python3.11 on the PATH, else
# python3; `make PYTHON=/path/to/python3.11 ...` picks another.
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
REQUIREMENTS := requirements.txt requirements/reader.txt requirements/book.txt requirements/dev.txt

# The targets that install or use .venv first check the Python they would use (.venv's once
# it exists, else PYTHON) and stop at once with one line when it is not a 3.11 with venv.
# Any 3.11.x will do: requirements/ pins only packages that install on 3.11.0
# (tests/test_environment.py checks every pin's Requires-Python against this).
NEEDS_PYTHON := 3.11
PYTHON_TARGETS := book test setup lab fuzz benchmark snapshot
ifneq ($(filter $(PYTHON_TARGETS),$(or $(MAKECMDGOALS),book)),)
CHECKED_PYTHON := $(if $(wildcard $(BIN)/python),$(BIN)/python,$(PYTHON))
PYTHON_FOUND := $(shell $(CHECKED_PYTHON) -c 'import sys, venv, ensurepip;   print("%d.%d.%d" % sys.version_info[:3])' 2>/dev/null)
ifeq ($(filter $(NEEDS_PYTHON).%,$(PYTHON_FOUND)),)
PYTHON_SEEN := $(if $(CHECKED_PYTHON),$(shell $(CHECKED_PYTHON) -c   'import sys; print("%d.%d.%d" % sys.version_info[:3])' 2>/dev/null),)
$(error LLM Math needs Python $(NEEDS_PYTHON) (any $(NEEDS_PYTHON).x) with venv and ensurepip; found $(if $(PYTHON_SEEN),$(PYTHON_SEEN) at $(CHECKED_PYTHON)$(if $(PYTHON_FOUND),, without venv/ensurepip),no Python$(if $(CHECKED_PYTHON), at $(CHECKED_PYTHON))). Set PYTHON=/path/to/python$(NEEDS_PYTHON)$(if $(wildcard $(BIN)/python), after make clean,))
endif
endif

CHROMIUM := /usr/bin/chromium
CHROMEDRIVER := /usr/bin/chromedriver

.PHONY: book catalogues test fuzz browser sandbox serve benchmark lab setup vendor snapshot clean

# Every edition of the site (book/_ext/llmmath_book/translation.py): English in
# _build/html/, each translation from its catalogues in _build/html/<folder>/ (zh/). The
# builds also write the reader editions (book/_ext/llmmath_book/editions.py) into
# _build/editions/<folder>/;
# they replace editions/, which is committed (tests/test_editions.py checks it is current).
book: $(STAMP)  ## build the book (English, and 简体中文 in _build/html/zh/) and its reader editions
	$(BIN)/python -m llmmath_book.translation build
	rm -rf editions && cp -R _build/editions editions
	@echo "Open _build/html/index.html, or run make serve and visit http://localhost:8000 (the explorers compute only there); the reader editions are in editions/"

# One pytest session on three workers (pytest-xdist), each test file on one worker: a
# notebook's cells run in order in one kernel. The browser, JupyterLab, Binder and sandbox
# tests mostly wait on other processes, so on two cores a third worker overlaps their
# waits with the rest (measured on a fresh clone: 6 min 45 s of tests with three workers,
# 7 min 40 s with two). TEST_WORKERS=0 runs in one process.
TEST_WORKERS ?= 3
test: $(STAMP) browser sandbox  ## unit + property tests, nbval over every chapter, a -W -n book build, the site in Chromium
	$(BIN)/python -m pytest -n $(TEST_WORKERS) --dist loadfile

# tests/test_browser.py opens every page in Debian's headless Chromium (and fonts-wqy-microhei, a small
# CJK font, shows the glossary's Chinese in its screenshots). Installed only when chromium or its
# driver is missing (apt-get as root, else through sudo); without either the test skips, or fails
# when CI is set.
browser:
	@if [ -x $(CHROMIUM) ] && [ -x $(CHROMEDRIVER) ]; then exit 0; fi; \
	if [ "$$(id -u)" = 0 ]; then SUDO=; elif command -v sudo >/dev/null; then SUDO=sudo; \
	else echo "note: cannot install chromium + chromium-driver (not root, no sudo); tests/test_browser.py will skip (fail under CI)"; exit 0; fi; \
	if command -v apt-get >/dev/null \
	  && $$SUDO apt-get update -qq \
	  && $$SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends chromium chromium-driver fonts-wqy-microhei >/dev/null; \
	then echo "installed $$($(CHROMIUM) --version 2>/dev/null)"; \
	else echo "note: could not install chromium + chromium-driver with apt-get; tests/test_browser.py will skip (fail under CI)"; fi

# Coursework grading runs each handed-in sheet in Debian's bubblewrap (bwrap), under a seccomp
# filter that libseccomp (Debian's libseccomp2, through pyseccomp) builds; both installed the
# same way when missing. Without them the sandbox tests skip, or fail when CI is set.
sandbox:
	@if command -v bwrap >/dev/null && { ldconfig -p 2>/dev/null || /sbin/ldconfig -p; } \
	  | grep -q 'libseccomp\.so\.2'; then exit 0; fi; \
	if [ "$$(id -u)" = 0 ]; then SUDO=; elif command -v sudo >/dev/null; then SUDO=sudo; \
	else echo "note: cannot install bubblewrap and libseccomp2 (not root, no sudo); sandbox tests will skip (fail under CI)"; exit 0; fi; \
	if command -v apt-get >/dev/null \
	  && $$SUDO apt-get update -qq \
	  && $$SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends bubblewrap libseccomp2 >/dev/null; \
	then echo "installed $$(bwrap --version) and libseccomp2"; \
	else echo "note: could not install bubblewrap and libseccomp2 with apt-get; sandbox tests will skip (fail under CI)"; fi

# The translations' gettext catalogues (book/_ext/llmmath_book/translation.py): Sphinx's
# gettext builder extracts every message of the book into _build/gettext/*.pot, and
# sphinx-intl merges them
# into locales/<lang>/LC_MESSAGES/*.po (a changed English message comes back fuzzy, a new
# one empty: tests/test_translation.py fails until it is translated). Babel does the same
# for the live parts' words (llmmath/messages.py): llmmath/locale/<lang>/LC_MESSAGES/
# llmmath.po, compiled to the llmmath.mo that ships in the package.
LANGUAGES := zh_CN
# The modules whose words are marked _("…") or N_("…") for llmmath.po: the explorers, the
# editions, the error messages (ConfigError, the CLI's one-line errors) and the CLI's
# reports and help (tests/test_messages.py checks that every such module is here).
MESSAGE_SOURCES := $(addprefix llmmath/,activations.py batching.py book.py config.py \
  cost.py counting.py errors.py flops.py flops_by_module.py \
  gpus.py hub.py kvcache.py measure.py memory.py messages.py modules.py paged_cache.py \
  parallel.py presets/__init__.py quantization.py reports.py roofline.py \
  rope.py speculative.py training.py units.py widgets.py \
  cli/__init__.py cli/parallel.py cli/serving.py cli/training.py \
  explorers/__init__.py explorers/any_model.py explorers/controls.py \
  explorers/decoding.py explorers/heads.py explorers/kv_cache.py explorers/latent.py \
  explorers/many_gpus.py explorers/memory_speed.py explorers/parameters.py \
  explorers/rope.py \
  coursework/__init__.py coursework/questions.py \
  coursework/handout.py coursework/grading.py coursework/cli.py) \
  $(addprefix book/_ext/llmmath_book/,editions.py translation.py)
catalogues: $(STAMP)  ## extract the book's messages and update locales/*/LC_MESSAGES/*.po
	rm -rf _build/gettext-book
	$(BIN)/jupyter-book build . --builder custom --custom-builder gettext --path-output _build/gettext-book -q
	$(BIN)/sphinx-intl update -p _build/gettext-book/_build/gettext -d locales $(addprefix -l ,$(LANGUAGES)) -w 76
	$(BIN)/pybabel extract -o llmmath/locale/llmmath.pot --project=llmmath --no-location \
	  --sort-output --omit-header -w 76 $(MESSAGE_SOURCES)
	$(BIN)/pybabel update -D llmmath -i llmmath/locale/llmmath.pot -d llmmath/locale -w 76
	$(BIN)/pybabel compile -D llmmath -d llmmath/locale --statistics

setup: $(STAMP)  ## create .venv and install the pinned requirements and llmmath (nothing else)

# JupyterLab serves the repository and opens LAB_START (a folder or a notebook under it).
# It refuses to run as root without --allow-root, so root gets it; on Linux without a
# display it opens no browser (it prints the address to open). LAB_ARGS adds options.
LAB_START ?= editions/en
LAB_ARGS ?=
LAB_FLAGS = $(if $(filter 0,$(shell id -u)),--allow-root) $(if $(filter Linux,$(shell \
  uname -s)),$(if $(DISPLAY)$(WAYLAND_DISPLAY),,--no-browser))
lab: $(STAMP)  ## open the book in JupyterLab (LAB_START, with llmmath's kernel)
	$(BIN)/jupyter lab --ServerApp.root_dir=. --LabApp.default_url=/lab/tree/$(LAB_START) \
	  $(LAB_FLAGS) $(LAB_ARGS)

# The browser assets in _vendor/ are committed (a fresh clone needs only Python and pip).
# `make vendor` refreshes them from npm by package name, at the exact versions of
# package.json and package-lock.json; run it only to update a version, then `make test`.
PYODIDE_FILES := pyodide.mjs pyodide.asm.mjs pyodide.asm.wasm python_stdlib.zip pyodide-lock.json
vendor:
	npm ci --ignore-scripts --no-audit --no-fund
	cp node_modules/anywidget/dist/index.js node_modules/anywidget/LICENSE _vendor/anywidget/
	cd node_modules/pyodide && cp $(PYODIDE_FILES) ../../_vendor/pyodide/
	cp node_modules/requirejs/require.js _vendor/requirejs/
	cp node_modules/mathjax/es5/tex-chtml.js node_modules/mathjax/LICENSE _vendor/mathjax/
	cp node_modules/mathjax/es5/output/chtml/fonts/woff-v2/*.woff _vendor/mathjax/output/chtml/fonts/woff-v2/
	cp node_modules/@jupyter-widgets/html-manager/dist/embed-amd.js node_modules/@jupyter-widgets/html-manager/dist/*.woff2 node_modules/@jupyter-widgets/html-manager/dist/embed.js.LICENSE.txt _vendor/html-manager/
	$(MAKE) snapshot
	git status --short _vendor/

# The site's snapshot of Pyodide started (book/_ext/llmmath_book/snapshot.py), made in
# headless Chromium from the vendored Pyodide and committed in _vendor/pyodide-snapshot/:
# `make vendor` makes it again; the book's build refuses one made from other Pyodide files.
snapshot: $(STAMP) browser
	$(BIN)/python -m llmmath_book.snapshot

serve: ## serve the built book on http://localhost:8000
	$(BIN)/python -m http.server --directory _build/html 8000

# make test fuzzes the CLI and the calculator with a fixed set of about 600 hostile inputs
# (tests/test_fuzz.py); this runs 40 times as many, from a new random seed each time.
FUZZ_SCALE ?= 40
fuzz: $(STAMP)  ## a larger fuzz run of the CLI and the calculator (about 24,000 cases)
	FUZZ_SCALE=$(FUZZ_SCALE) $(BIN)/python -m pytest tests/test_fuzz.py --hypothesis-show-statistics

benchmark: $(STAMP)  ## timings of the CLI, the import, each chapter and the widget
	$(BIN)/python tests/benchmarks/run.py $(BENCHMARK_ARGS)

# llmmath, and the book's build machinery beside it (book/_ext/: the Sphinx extensions
# and the editions' builders, which llmmath's wheel does not ship), both editable.
$(STAMP): $(REQUIREMENTS) pyproject.toml book/_ext/pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet -r requirements.txt
	$(BIN)/python -m pip install --quiet --no-deps --no-build-isolation -e . -e book/_ext
	touch $(STAMP)

clean:
	rm -rf _build .venv

# The two commands of the README. Each creates .venv (Python 3.11) and installs what is missing.
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: book test serve benchmark clean

book: $(STAMP)  ## build the book into _build/html (from the stored notebook outputs)
	$(BIN)/jupyter-book build . --builder html
	@echo "Open _build/html/index.html, or run: make serve"

test: $(STAMP)  ## unit + property tests, nbval over every chapter, and a -W -n book build
	$(BIN)/python -m pytest

serve: ## serve the built book on http://localhost:8000
	$(BIN)/python -m http.server --directory _build/html 8000

benchmark: $(STAMP)  ## timings of the CLI, the import, each chapter and the widget
	$(BIN)/python tests/benchmarks/run.py

$(STAMP): requirements.txt pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet -r requirements.txt
	$(BIN)/python -m pip install --quiet --no-deps --no-build-isolation -e .
	touch $(STAMP)

clean:
	rm -rf _build .venv

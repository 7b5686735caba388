"""The book's build machinery, which llmmath's wheel does not ship (issue 34).

- `llmmath_book.runtime`: the site's browser runtime (the llmmath wheel and Pyodide,
  pinned by SHA-384), a Sphinx extension;
- `llmmath_book.editions`: the reader editions, a Sphinx extension;
- `llmmath_book.translation`: the translated editions (a Sphinx extension), the
  catalogue checks and ``python -m llmmath_book.translation build|check|export|import``.

Installed into the book's .venv by ``make setup`` (``book/_ext/pyproject.toml``).
"""

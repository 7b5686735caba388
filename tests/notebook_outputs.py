"""Reading a committed notebook's stored outputs, for the tests that check what a
chapter claims (tests/test_truth_*.py)."""

import json
from pathlib import Path

GLUE_TEXT = "application/papermill.record/text/plain"


def glued(path: Path) -> dict[str, str]:
    """The values a notebook glues into its prose (``{glue:text}``), as the page shows
    them: its stored glue outputs' text, quotes stripped."""
    out = {}
    for cell in json.loads(path.read_text(encoding="utf-8"))["cells"]:
        for o in cell.get("outputs", []):
            book = o.get("metadata", {}).get("scrapbook")
            if book:
                out[book["name"]] = o["data"][GLUE_TEXT].strip("'\"")
    return out

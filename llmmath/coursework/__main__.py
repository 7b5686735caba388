"""``python -m llmmath.coursework``: hand out, key, blank editions, and grade (see
`cli`)."""

import sys

from llmmath.coursework.cli import main

sys.exit(main())

"""``python -m llmmath``: see `llmmath.cli`."""

import sys

from llmmath.cli import main

sys.exit(main())

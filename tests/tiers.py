"""Which tier of the suite runs (`make test` or `make test-fast`), for the test modules.

Hypothesis' profile (tests/conftest.py) sets the number of examples of every property
that names none; a property that names its own with ``@settings(max_examples=...)``
asks ``examples(n)`` for it, so the inner loop caps it too.
"""

from __future__ import annotations

import os

FAST_TIER = os.environ.get("ORCHESTRATOR_TEST_TIER") == "fast"
# Examples per property in `make test-fast`; `make test` keeps each property's own count
# (Hypothesis' default, 100, where it names none).
FAST_EXAMPLES = 20


def examples(thorough: int) -> int:
    """``max_examples`` for a property that needs ``thorough`` examples in `make test`."""
    return min(thorough, FAST_EXAMPLES) if FAST_TIER else thorough

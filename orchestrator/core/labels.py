"""Seed 000's replay-label classifier, on its own.

The seed gates one side's replay list: the list must have the fixed length, hold
only the four labels, and mix ``assert_pass`` with ``assert_fail`` to be eligible
for a freeze. The composed two-sided rule is ``orchestrator.core.lanes.decide``;
this function keeps the seed's own vocabulary so its examples can be checked.
"""

from __future__ import annotations

from collections.abc import Sequence

from orchestrator.model import Label

SEED_REPLAYS = 5  # the seed's proposal, not a tuned threshold

KNOWN_LABELS = frozenset(label.value for label in Label)
INFRA_LABELS = frozenset({Label.TIMEOUT.value, Label.HARNESS_ERROR.value})


def classify_labels(runs: Sequence[str], replays: int = SEED_REPLAYS) -> str:
    """``reject_malformed``, ``infra_queue``, ``block_patch``, ``not_reproduced`` or
    ``freeze_eligible`` for one replay list (seed 000)."""
    if len(runs) != replays or any(run not in KNOWN_LABELS for run in runs):
        return "reject_malformed"
    if any(run in INFRA_LABELS for run in runs):
        return "infra_queue"
    fails = sum(run == Label.ASSERT_FAIL for run in runs)
    if fails == replays:
        return "block_patch"
    if fails == 0:
        return "not_reproduced"
    return "freeze_eligible"

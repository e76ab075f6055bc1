"""Thaw verdicts (lanes.md section 6): does a re-probe thaw a freeze or leave it overdue?

A flake freeze thaws only when every replay at the revision under test passed with
one call budget; a timing freeze only when the property passed in every sample and
seed 004's ``thaw_allowed`` holds. Anything else leaves the freeze ``overdue``; a
freeze is never renewed. The verdicts are values; the scheduled job that claims the
due freezes and re-probes them is ``orchestrator.services.thaw``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from orchestrator.core.calls import call_sets, format_counts, unstable
from orchestrator.core.timing import MIN_SAMPLES, latency_summary, thaw_allowed
from orchestrator.model import Label, Replay


@dataclass(frozen=True, kw_only=True)
class Verdict:
    thawed: bool
    code: str
    reasons: tuple[str, ...] = ()


def flake_thaw_verdict(replays: Sequence[Replay], expected: int) -> Verdict:
    """All ``assert_pass`` with one call budget thaws; anything else stays overdue."""
    labels = [replay.label for replay in replays]
    if len(labels) != expected:
        return Verdict(thawed=False, code="replay_count", reasons=(f"{len(labels)}/{expected}",))
    infra = sorted(
        {
            f"{r.label}:{r.reason or 'unspecified'}"
            for r in replays
            if r.label != Label.SKIPPED and not Label.is_completed(r.label)
        }
    )
    if infra:
        return Verdict(thawed=False, code="probe_infra_error", reasons=tuple(infra))
    skipped = sorted({r.message or "no reason given" for r in replays if r.label == Label.SKIPPED})
    if skipped:  # the project skips it now: nothing shows the flake is gone
        return Verdict(thawed=False, code="skipped", reasons=tuple(skipped))
    failing = sorted({r.assertion_id or "?" for r in replays if r.label != Label.ASSERT_PASS})
    if failing:
        count = labels.count(Label.ASSERT_FAIL)
        return Verdict(
            thawed=False,
            code="still_failing",
            reasons=(f"{count}/{len(labels)} replays failed", *failing),
        )
    varying = unstable(call_sets(replays))
    if varying:
        reasons = tuple(f"{name}: counts {format_counts(seen)}" for name, seen in varying.items())
        return Verdict(thawed=False, code="call_budget_unstable", reasons=reasons)
    return Verdict(thawed=True, code="all_pass")


def timing_thaw_verdict(
    labels: Sequence[str], samples_ms: Sequence[float], budget_ms: float
) -> Verdict:
    """The property must pass in every sample, then seed 004's ``thaw_allowed``."""
    red = [label for label in labels if label != Label.ASSERT_PASS]
    if red:
        return Verdict(thawed=False, code="property_red", reasons=tuple(sorted(set(red))))
    if len(samples_ms) < MIN_SAMPLES:
        return Verdict(thawed=False, code="sample_too_small", reasons=(str(len(samples_ms)),))
    if thaw_allowed(samples_ms, budget_ms):
        return Verdict(thawed=True, code="within_budget")
    spread = latency_summary(samples_ms)[1]
    reason = f"max {max(samples_ms):g} ms, spread {spread:g} ms, budget {budget_ms:g} ms"
    if max(samples_ms) > budget_ms:
        return Verdict(thawed=False, code="over_budget", reasons=(reason,))
    return Verdict(thawed=False, code="spread_too_wide", reasons=(reason,))

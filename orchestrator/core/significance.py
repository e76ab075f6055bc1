"""Evidence for a blocking verdict that rests on a mixed side (docs/lanes.md section 3b).
Pure: values in, values out.

The table of :mod:`orchestrator.core.lanes` blocks on patterns. Where every replay of
each side is alike (base P and patch F, base F at one assertion and the patch F at
another, one call count on base and another on the patch) the pattern is deterministic
and the verdict stands as the table gives it. Where a side is mixed, the pattern turns
up by chance on a test that is flaky on both sides: base P and patch M is one failure in
a few replays of a 10 % flake. Such a verdict (row 7; row 11 with base M; row 5 or row 10
with a side that varies) blocks only once an exact test
(:mod:`orchestrator.core.exact_tests`) says the patch differs at the run's level; until
then the property is replayed more on both sides, in rounds, up to a cap; at the cap a
verdict still without evidence is ``no_freeze`` / ``weak_evidence``, its first reason one
line that says what could not be shown.

The level: ``alpha`` is the false-block rate of a whole run (default 1 %), shared by
Bonferroni over the properties *at stake* (those whose pooled replays vary at all: a
failure on either side unless every replay of both failed alike, or a call count not the
same in every replay; a property whose pooled replays do not vary can reach no p-value
below 1 under any deal of them, so it spends nothing: Tarone's argument for discrete
tests; counted at the first look) and over the looks (the replay counts at which a
property is judged: N, 2N, ..., the cap), equally.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from typing import Any

from orchestrator.core.calls import budget_changes, call_sets, describe_change
from orchestrator.core.exact_tests import fisher_one_sided, split_test
from orchestrator.core.lanes import SideState, compare_by_key, ran, side_state
from orchestrator.model import Decision, Evidence, Label, Lane, Replay

DEFAULT_ALPHA = 0.01  # --false-block-rate: per run
DEFAULT_CAP = 20  # --evidence-cap: replays per side at most (Datadog retries up to 20)
WEAK = "weak_evidence"


def needs_a_look(lane: str, code: str) -> bool:
    """Every lane but ``no_freeze``, and a verdict set aside for want of evidence
    (:data:`WEAK`, in ``no_freeze``: not blocking, but not judged either): what a run's
    summary and table list; the others behaved alike on both sides, and are counted."""
    return lane != Lane.NO_FREEZE or code == WEAK


PASSED = "<passed>"  # a passing replay's outcome, beside the failing assertions


@dataclass(frozen=True, kw_only=True)
class EvidencePolicy:
    """The false-block rate of a run, the cap of replays per side, and N (the first look)."""

    alpha: float = DEFAULT_ALPHA
    cap: int = DEFAULT_CAP
    replays: int = 5

    @property
    def enabled(self) -> bool:
        """``alpha`` 1 turns the rule off: every verdict as the table gives it."""
        return self.alpha < 1

    @property
    def looks(self) -> tuple[int, ...]:
        """The replay counts per side at which a verdict is judged: N, then doubling, then
        the cap (N alone when the cap is not above it)."""
        looks = [self.replays]
        while looks[-1] < self.cap:
            looks.append(min(self.cap, looks[-1] * 2))
        return tuple(looks)

    def level(self, at_stake: int) -> float:
        """The p-value a verdict needs at any one look."""
        return self.alpha / (len(self.looks) * max(1, at_stake))

    def next_look(self, replays: int) -> int | None:
        """The replay count of the look after ``replays`` (None: the cap is reached)."""
        return next((look for look in self.looks if look > replays), None)

    def to_json(self) -> dict[str, Any]:
        """The run log's ``evidence_rule``."""
        return {
            "false_block_rate": self.alpha,
            "cap": self.cap,
            "looks": list(self.looks) if self.enabled else [],
            "enabled": self.enabled,
        }


@dataclass(frozen=True, kw_only=True)
class Claim:
    """What a blocking verdict on a mixed side claims, with its exact p-value."""

    test: str  # "fisher" (failure rates) or "split" (call counts, failing assertions)
    p_value: float
    shown: str  # "patch failed 1 of 20, base 0 of 20"
    claim: str  # "a new instability"


def _failed(replays: Sequence[Replay]) -> int:
    return sum(1 for replay in replays if replay.label == Label.ASSERT_FAIL)


def _fisher(base: Sequence[Replay], patch: Sequence[Replay], claim: str) -> Claim:
    patch_failed, base_failed = _failed(patch), _failed(base)
    return Claim(
        test="fisher",
        p_value=fisher_one_sided(
            patch_failed=patch_failed,
            patch_runs=len(patch),
            base_failed=base_failed,
            base_runs=len(base),
        ),
        shown=f"patch failed {patch_failed} of {len(patch)}, base {base_failed} of {len(base)}",
        claim=claim,
    )


def _outcomes(replays: Sequence[Replay], *, by_key: bool) -> list[str]:
    """Each replay as what it showed: passed, or the assertion it failed at."""
    return [
        PASSED
        if replay.label != Label.ASSERT_FAIL
        else str(replay.assertion_key if by_key else replay.assertion_id)
        for replay in replays
    ]


def _calls_claim(base: Sequence[Replay], patch: Sequence[Replay]) -> Claim | None:
    """Row 5 on a mixed side: the least likely moved dependency, Bonferroni over the
    dependencies whose pooled counts vary (only they could move by chance). None when
    some moved dependency has one count on each side: deterministic."""
    moved = budget_changes(base, patch)
    if any(len(change.base) == 1 and len(change.patch) == 1 for change in moved):
        return None
    pooled = call_sets((*base, *patch))
    varying = sum(1 for counts in pooled.values() if len(counts) > 1)
    best: tuple[float, str] | None = None
    for change in moved:
        name = change.dependency
        p = split_test(
            [replay.calls.get(name, 0) for replay in base],
            [replay.calls.get(name, 0) for replay in patch],
        )
        if best is None or p < best[0]:
            best = (p, describe_change(change))
    if best is None:
        return None
    return Claim(
        test="split",
        p_value=min(1.0, best[0] * max(1, varying)),
        shown=f"{best[1]} in {len(base)} and {len(patch)} replays",
        claim="a moved call budget",
    )


def _assertions_claim(base: Sequence[Replay], patch: Sequence[Replay]) -> Claim | None:
    """Row 10 on a mixed side: an assertion one side failed at and the other never did
    (None when each side failed one way every time: deterministic)."""
    by_key = compare_by_key(base, patch)
    on_base, on_patch = _outcomes(base, by_key=by_key), _outcomes(patch, by_key=by_key)
    if len(set(on_base)) == 1 and len(set(on_patch)) == 1:
        return None
    failing = {*on_base, *on_patch} - {PASSED}
    only = sorted(({*on_patch} ^ {*on_base}) & failing)
    return Claim(
        test="split",
        p_value=split_test(on_base, on_patch, counted=failing),
        shown=(
            f"failing assertions seen on one side only: {', '.join(only)}"
            f" (in {len(base)} and {len(patch)} replays)"
        ),
        claim="a different bug",
    )


def claim_of(evidence: Evidence, decision: Decision) -> Claim | None:
    """The claim a blocking verdict makes when it rests on a mixed side (None: the verdict
    is not blocking, or deterministic, or a row this rule leaves as it is: a changed
    oracle, a test base skips)."""
    if not decision.blocking:
        return None
    base, patch = ran(evidence.base), ran(evidence.patch)
    if not base or not patch:
        return None  # row 4a (fails_where_base_skips): nothing to compare with
    code = decision.code
    if code == "new_instability":  # row 7: base P, patch M
        return _fisher(base, patch, "a new instability")
    if code == "uniform_failure" and side_state(base) is SideState.MIXED:  # row 11, base M
        return _fisher(base, patch, "the patch failing more often than base")
    if code == "call_budget":
        return _calls_claim(base, patch)
    if code == "different_assertion":
        return _assertions_claim(base, patch)
    return None


def at_stake(evidence: Evidence) -> bool:
    """Do the property's pooled replays vary at all (so that some deal of them could
    reach a small p-value)? Only replays with a verdict count; a property with a replay
    without one, or a changed oracle, is decided by another row."""
    base, patch = ran(evidence.base), ran(evidence.patch)
    pooled = (*base, *patch)
    if not base or not patch or any(not Label.is_completed(r.label) for r in pooled):
        return False
    if evidence.oracle_changed or evidence.base_oracle_digest != evidence.patch_oracle_digest:
        return False
    by_key = compare_by_key(base, patch)
    if len(set(_outcomes(pooled, by_key=by_key))) > 1:
        return True
    return any(len(counts) > 1 for counts in call_sets(pooled).values())


@dataclass(frozen=True, kw_only=True)
class Weighing:
    """A verdict weighed: the decision to keep (``more`` 0), or how many more replays per
    side the property needs before it can be judged again."""

    decision: Decision
    more: int = 0
    claim: Claim | None = None
    level: float | None = None


def _p(value: float) -> str:
    return f"{value:.2g}"


def weigh(
    evidence: Evidence, decision: Decision, *, policy: EvidencePolicy, at_stake: int
) -> Weighing:
    """Keep a verdict, ask for more replays, or, at the cap, set it aside for want of
    evidence (``no_freeze`` / ``weak_evidence``)."""
    if not policy.enabled:
        return Weighing(decision=decision)
    claim = claim_of(evidence, decision)
    if claim is None:
        return Weighing(decision=decision)
    replays = evidence.replays or 0
    level = policy.level(at_stake)
    if claim.p_value <= level:
        shown = f"evidence: {claim.shown}: p = {_p(claim.p_value)} <= {_p(level)}"
        return Weighing(
            decision=replace(decision, reasons=(*decision.reasons, shown)),
            claim=claim,
            level=level,
        )
    following = policy.next_look(replays)
    if following is not None:
        return Weighing(decision=decision, more=following - replays, claim=claim, level=level)
    return Weighing(
        decision=weak(decision, claim, level, policy, at_stake), claim=claim, level=level
    )


def weak(
    decision: Decision, claim: Claim, level: float, policy: EvidencePolicy, at_stake: int
) -> Decision:
    """The verdict set aside: non-blocking, and one line that says what was not shown."""
    looks = ", ".join(str(look) for look in policy.looks)
    said = "; ".join(decision.reasons)
    return replace(
        decision,
        lane=Lane.NO_FREEZE,
        code=WEAK,
        blocking=False,
        freeze_allowed=False,
        reasons=(
            f"{claim.shown}: p = {_p(claim.p_value)} > {_p(level)}, not evidence of {claim.claim}",
            f"the table said {decision.lane.value} / {decision.code}: {said}",
            f"false-block rate {policy.alpha:g} per run over {max(1, at_stake)} properties"
            f" at stake and looks at {looks} replays",
        ),
    )


def count_at_stake(evidences: Iterable[Evidence]) -> int:
    """How many properties of the run are at stake (:func:`at_stake`)."""
    return sum(1 for evidence in evidences if at_stake(evidence))

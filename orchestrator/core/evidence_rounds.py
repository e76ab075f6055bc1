"""Rounds of evidence: which properties a run replays more, how many times, and what it
spent (docs/lanes.md section 3b). Pure: the services replay, this module decides.

After the first look (every property decided on its N replays, or K when screening found
no signal), :func:`weigh_outcomes` weighs each verdict (:func:`~orchestrator.core.
significance.weigh`): most are kept as they are; a blocking verdict on a mixed side
without evidence at the run's level asks for more replays per side, up to the next look.
:func:`round_plan` groups those into rounds (one per replay count), the service replays
them, decides them again, and weighs again, until none asks for more (each verdict is
then kept, blocked with its evidence, or set aside at the cap as ``weak_evidence``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from orchestrator.core.replay_run import PropertyOutcome
from orchestrator.core.significance import (
    WEAK,
    EvidencePolicy,
    Weighing,
    count_at_stake,
    weigh,
)

ROUND_FOLDER = "round-{number}"  # raw/round-<n>: a round's raw files before they are linked


@dataclass(frozen=True, kw_only=True)
class EvidenceRound:
    """One round: ``replays`` more per side of ``property_ids``, which had ``before``."""

    number: int
    replays: int
    before: int
    property_ids: tuple[str, ...]

    @property
    def folder(self) -> str:
        return ROUND_FOLDER.format(number=self.number)

    @property
    def spent(self) -> int:
        """Replays of both sides this round cost."""
        return 2 * self.replays * len(self.property_ids)

    def to_json(self) -> dict[str, Any]:
        return {
            "round": self.number,
            "replays": self.replays,
            "before": self.before,
            "properties": list(self.property_ids),
            "spent": self.spent,
        }


def weigh_outcomes(
    outcomes: Iterable[PropertyOutcome], *, policy: EvidencePolicy, at_stake: int
) -> dict[str, Weighing]:
    """Property -> its verdict weighed (the decision to keep, or the replays it needs)."""
    return {
        str(item.evidence.property_id): weigh(
            item.evidence, item.decision, policy=policy, at_stake=at_stake
        )
        for item in outcomes
    }


def round_plan(
    outcomes: Sequence[PropertyOutcome], weighings: Mapping[str, Weighing], *, first: int
) -> tuple[EvidenceRound, ...]:
    """The next rounds: the properties that need more, grouped by how many they have and
    how many more they need (in the order they were named), numbered from ``first``."""
    groups: dict[tuple[int, int], list[str]] = {}
    for item in outcomes:
        property_id = str(item.evidence.property_id)
        weighing = weighings.get(property_id)
        if weighing is None or weighing.more == 0:
            continue
        key = (item.evidence.replays or 0, weighing.more)
        groups.setdefault(key, []).append(property_id)
    return tuple(
        EvidenceRound(number=number, replays=more, before=before, property_ids=tuple(ids))
        for number, ((before, more), ids) in enumerate(sorted(groups.items()), start=first)
    )


def settled(
    outcomes: Iterable[PropertyOutcome], weighings: Mapping[str, Weighing]
) -> tuple[PropertyOutcome, ...]:
    """The outcomes whose verdicts need nothing more, with their weighed decisions."""
    kept = []
    for item in outcomes:
        weighing = weighings[str(item.evidence.property_id)]
        if weighing.more == 0:
            kept.append(replace(item, decision=weighing.decision))
    return tuple(kept)


def evidence_summary(
    policy: EvidencePolicy,
    *,
    at_stake: int,
    rounds: Sequence[EvidenceRound],
    outcomes: Sequence[PropertyOutcome],
) -> dict[str, Any]:
    """The report's and the run log's ``evidence``: the rule, the rounds, what they
    cost, and how many verdicts were set aside for want of evidence."""
    return {
        **policy.to_json(),
        "at_stake": at_stake,
        "level": policy.level(at_stake) if policy.enabled else None,
        "rounds": [one.to_json() for one in rounds],
        "replayed_more": len({p for one in rounds for p in one.property_ids}),
        "replays_spent": sum(one.spent for one in rounds),
        "weak": sum(1 for item in outcomes if item.decision.code == WEAK),
    }


def evidence_line(summary: Mapping[str, Any]) -> str | None:
    """``evidence: 2 replayed more in 2 rounds, 60 replays spent; 1 without evidence at
    the cap`` under the table (None: no round ran and nothing was set aside)."""
    rounds = summary.get("rounds") or []
    weak_count = int(summary.get("weak") or 0)
    if not rounds and not weak_count:
        return None
    parts = []
    if rounds:
        parts.append(
            f"{summary.get('replayed_more', 0)} replayed more in {len(rounds)}"
            f" round{'s' if len(rounds) != 1 else ''}, {summary.get('replays_spent', 0)}"
            " replays spent"
        )
    if weak_count:
        parts.append(f"{weak_count} without evidence at the cap (not blocking)")
    return "evidence: " + "; ".join(parts)


def first_look_at_stake(outcomes: Iterable[PropertyOutcome]) -> int:
    """The properties at stake at the first look (the run's share of the false-block rate
    is split over them)."""
    return count_at_stake(item.evidence for item in outcomes)

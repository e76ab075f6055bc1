"""Rounds of evidence (docs/lanes.md section 3b): replay more, on both sides, the
properties whose blocking verdict rests on a mixed side without evidence at the run's
level, until each is decided or at the cap. The pure core says which and how many
(:mod:`orchestrator.core.evidence_rounds`); this module replays them
(:func:`orchestrator.services.screening.replay_more`, in the containers a screening kept
when there is one) and decides them again."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from orchestrator.core.evidence_rounds import (
    EvidenceRound,
    evidence_line,
    evidence_summary,
    first_look_at_stake,
    round_plan,
    settled,
    weigh_outcomes,
)
from orchestrator.core.oracle import OracleChange
from orchestrator.core.replay_run import PropertyOutcome, RunPlan, decide_all
from orchestrator.core.screening import Screening
from orchestrator.log import get_logger
from orchestrator.services.screening import Replaying, replay_more
from orchestrator.services.sides import SidesOutcome

log = get_logger(__name__)


@dataclass(frozen=True, kw_only=True)
class Gathered:
    """The run after its rounds: every property decided, the replays as they ended, and
    what the rounds were."""

    properties: tuple[PropertyOutcome, ...]
    outcome: SidesOutcome
    summary: Mapping[str, Any]


def gather_evidence(
    plan: RunPlan,
    first_look: Sequence[PropertyOutcome],
    outcome: SidesOutcome,
    *,
    oracle: Mapping[str, OracleChange],
    screening: Screening | None,
    via: Replaying,
) -> Gathered:
    """Weigh every verdict of ``first_look``; replay more, round after round, those that
    ask for it; return every property decided (in its first-look order)."""
    policy = plan.evidence_policy
    at_stake = first_look_at_stake(first_look)
    adaptive: dict[str, int] = {}
    rounds: list[EvidenceRound] = []
    done: list[PropertyOutcome] = []
    current = tuple(first_look)
    while current:
        weighings = weigh_outcomes(current, policy=policy, at_stake=at_stake)
        done.extend(settled(current, weighings))
        planned = round_plan(current, weighings, first=len(rounds) + 1)
        if not planned:
            break
        for one in planned:
            log.info(
                "evidence.round",
                round=one.number,
                properties=len(one.property_ids),
                replays=one.replays,
                before=one.before,
            )
            if via.warm is not None:
                via.warm.phase = one.folder
            outcome = replay_more(
                plan,
                one.property_ids,
                replays=one.replays,
                offset=one.before,
                previous=outcome,
                phase=one.folder,
                via=via,
            )
            for property_id in one.property_ids:
                adaptive[property_id] = adaptive.get(property_id, 0) + one.replays
            rounds.append(one)
        again = [property_id for one in planned for property_id in one.property_ids]
        current = decide_all(
            plan,
            outcome.labelled,
            oracle,
            screening,
            only=again,
            runners=outcome.runners,
            raw_dirs=outcome.raw_dirs,
            adaptive=adaptive,
        )
    properties = tuple(sorted(done, key=lambda item: item.index))
    summary = evidence_summary(policy, at_stake=at_stake, rounds=rounds, outcomes=properties)
    line = evidence_line(summary)
    if line is not None:
        log.info("evidence.done", line=line)
    return Gathered(properties=properties, outcome=outcome, summary=summary)

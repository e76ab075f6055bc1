"""What a run of sides comes to: labels per side and property from every batch, in the
selection's order, with the attempts of engines that went away and how each engine fared."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from orchestrator.core.backend import Backend
from orchestrator.core.neutralise import present_in
from orchestrator.core.side_spec import ReplayPlan, SideSpec, label_sides, unplanned_ids
from orchestrator.log import get_logger
from orchestrator.model import Replay
from orchestrator.services.sides.dispatch import Dispatched

log = get_logger("orchestrator.services.sides")


@dataclass(frozen=True, kw_only=True)
class SidesOutcome:
    """What a run of sides produced: the labels (side -> property -> one replay per
    replay), which engine decided each property, the attempts that are not results, the
    pool."""

    labelled: dict[str, dict[str, tuple[Replay, ...]]]
    runners: Mapping[str, str]  # property id -> runner id of the engine that ran it
    raw_dirs: Mapping[str, str]  # property id -> its raw folder in the run folder
    attempts: tuple[AttemptRecord, ...] = ()
    engines: tuple[Mapping[str, Any], ...] = ()
    # The plugins the replays had and neutralised (core.neutralise.present_in).
    neutralised: tuple[str, ...] = ()


@dataclass(frozen=True, kw_only=True)
class AttemptRecord:
    """A batch's attempt on an engine that stopped answering, labelled, for the run folder."""

    batch: str
    engine: str  # its URL
    runner_id: str
    raw_dir: str
    labelled: Mapping[str, Mapping[str, tuple[Replay, ...]]]  # side -> property -> replays

    def to_json(self) -> dict[str, Any]:
        properties = sorted({p for per_side in self.labelled.values() for p in per_side})
        return {
            "batch": self.batch,
            "engine": self.engine,
            "runner_id": self.runner_id,
            "raw_dir": self.raw_dir,
            "properties": [
                {
                    "property_id": property_id,
                    **{
                        f"{side}_labels": [r.label for r in per_side.get(property_id, ())]
                        for side, per_side in self.labelled.items()
                    },
                    **{
                        f"{side}_reasons": [r.reason for r in per_side.get(property_id, ())]
                        for side, per_side in self.labelled.items()
                    },
                }
                for property_id in properties
            ],
        }


def outcome(
    plan: ReplayPlan,
    sides: Sequence[SideSpec],
    engines: Sequence[Backend],
    dispatched: Dispatched,
    *,
    one_batch: bool,
) -> SidesOutcome:
    """Labels per side and property in the selection's order, from every batch
    (``one_batch``: the run was not cut, its raw files go straight under ``raw``)."""
    labelled: dict[str, dict[str, tuple[Replay, ...]]] = {side.name: {} for side in sides}
    runners: dict[str, str] = {}
    raw_dirs: dict[str, str] = {}
    decided_by: dict[int, int] = {}  # engine index -> properties it gave the labels of
    ignored, first_ignored = 0, None
    finals = sorted(dispatched.finals, key=lambda item: item[0].key)
    for batch, results in finals:
        engine = engines[batch.engine]
        batch_plan = replace(plan, property_ids=batch.property_ids, runner_id=engine.runner_id)
        per_side = label_sides(batch_plan, sides, results)
        unplanned, first = unplanned_ids(batch_plan, results)
        if unplanned:  # a result may name only what its side was asked to run
            ignored += unplanned
            first_ignored = first_ignored or first
        for side in sides:
            labelled[side.name].update(per_side[side.name])
        for property_id in per_side[sides[0].name]:
            runners[property_id] = engine.runner_id
            raw_dirs[property_id] = batch.raw_dir(single=one_batch)
        decided_by[batch.engine] = decided_by.get(batch.engine, 0) + len(per_side[sides[0].name])
    if ignored:
        log.warning("results.unplanned_ignored", tests=ignored, first=first_ignored)
    if plan.property_ids and len(finals) > 1:
        labelled = _in_selection_order(plan.property_ids, labelled)
    attempts = tuple(
        AttemptRecord(
            batch=attempt.batch.key,
            engine=engines[attempt.batch.engine].url,
            runner_id=engines[attempt.batch.engine].runner_id,
            raw_dir=attempt.batch.raw_dir(single=one_batch),
            labelled=label_sides(
                replace(
                    plan,
                    property_ids=attempt.batch.property_ids,
                    runner_id=engines[attempt.batch.engine].runner_id,
                ),
                sides,
                attempt.results,
            ),
        )
        for attempt in dispatched.attempts
    )
    described = [
        {
            "url": engines[item.index].url,
            "runner_id": engines[item.index].runner_id,
            "slots": engines[item.index].slots,
            "status": item.status,
            "detail": item.detail,
            "batches": list(item.batches),
            "properties": decided_by.get(item.index, 0),
            "image_shipped": _shipped(engines[item.index]),
        }
        for item in dispatched.engines
    ]
    return SidesOutcome(
        labelled=labelled,
        runners=runners,
        raw_dirs=raw_dirs,
        attempts=attempts,
        engines=tuple(described),
        neutralised=present_in(
            replay_file.doc
            for _, results in finals
            for side in sides
            for replay_file, _ in results[side.name]
        ),
    )


def _shipped(engine: Backend) -> dict[str, Any] | None:
    shipped = engine.shipped
    if shipped is None:
        return None
    return {"bytes": shipped.bytes, "seconds": round(shipped.seconds, 3)}


def _in_selection_order(
    property_ids: Sequence[str], labelled: dict[str, dict[str, tuple[Replay, ...]]]
) -> dict[str, dict[str, tuple[Replay, ...]]]:
    """The selection's order, whichever batch ran a property; a parametrization goes
    where the function's id was named."""
    position = {p: index for index, p in enumerate(property_ids)}

    def rank(property_id: str) -> int:
        named = position.get(property_id, position.get(property_id.split("[", 1)[0]))
        return len(position) if named is None else named

    return {
        side: {p: per_property[p] for p in sorted(per_property, key=rank)}
        for side, per_property in labelled.items()
    }

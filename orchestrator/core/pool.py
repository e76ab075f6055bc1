"""How one run's properties are spread over a pool of Docker engines. Pure.

A property's two sides always run on one engine (labels are compared only within one
runner), so the unit spread over the pool is a *batch*: some properties, run as one
container per side on one engine. Each engine has ``slots`` (how many sides it runs at
once); a batch needs two, so an engine runs ``max(1, slots // 2)`` batches side by side
(with one slot its batch's sides take turns). The planner cuts the selection into one
batch per such lane, longest-processing-time first: properties in order of their
recorded duration, longest first, each to the lane that has the least work so far (the
lane that will have a free slot first). Unknown durations count as the mean of the known
ones; with none known every property weighs the same and ties go in node-id order, so a
plan is a function of its inputs alone.

An engine that stops answering gives its unfinished batches back: each is queued again
once, whole, for the engines left (:func:`retry`); a batch that fails twice, or finds no
engine left, keeps the labels of its last attempt (``harness_error`` / ``engine_gone``).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from urllib.parse import urlsplit

from orchestrator.errors import InputError

ENGINE_SCHEMES = ("unix", "tcp", "ssh")
RAW = "raw"  # the run folder's raw/ (replay files per side)


@dataclass(frozen=True, kw_only=True)
class Batch:
    """Properties replayed together, both sides on one engine."""

    key: str  # "e1-b1": engine 1, its first lane; a retry adds "-attempt2"
    engine: int  # index of the engine in the pool (the one that runs it)
    property_ids: tuple[str, ...]  # empty: every test the command runs (one batch only)
    attempt: int = 1

    def raw_dir(self, *, single: bool) -> str:
        """Where its raw replay files go in the run folder: ``raw`` when the run is this
        one batch (a run without ``--engine``), else ``raw/<key>``."""
        return RAW if single and self.attempt == 1 else f"{RAW}/{self.key}"


def lanes_for(slots: int) -> int:
    """Batches an engine runs side by side: a batch takes two slots (its two sides)."""
    return max(1, slots // 2)


def weights(property_ids: Sequence[str], durations: Mapping[str, float]) -> dict[str, float]:
    """Each property's recorded duration; an unknown one counts as the known mean, and
    with nothing known every property weighs 1."""
    known = [durations[p] for p in property_ids if p in durations and durations[p] >= 0]
    # fsum is exactly rounded: the mean is the same in whatever order the ids come (a sum
    # that moved by one unit in the last place moved ties of the cut, and with them the
    # shard a test falls in).
    default = math.fsum(known) / len(known) if known else 1.0
    return {
        p: durations[p] if p in durations and durations[p] >= 0 else default for p in property_ids
    }


def longest_first(property_ids: Sequence[str], durations: Mapping[str, float]) -> tuple[str, ...]:
    """Longest recorded duration first; ties (and unknowns) in node-id order."""
    weight = weights(property_ids, durations)
    return tuple(sorted(dict.fromkeys(property_ids), key=lambda p: (-weight[p], p)))


def assign_longest_first(
    property_ids: Sequence[str], bins: int, durations: Mapping[str, float]
) -> dict[str, int]:
    """Property -> bin index: longest-processing-time first, each property (longest
    recorded duration first) into the bin with the least work so far, the lowest index
    on ties. Lanes of a pool and shards of a CI matrix are both cut this way."""
    weight = weights(property_ids, durations)
    loads = [0.0] * bins
    owner: dict[str, int] = {}
    for property_id in longest_first(property_ids, durations):
        target = min(range(bins), key=lambda index: (loads[index], index))
        loads[target] += weight[property_id]
        owner[property_id] = target
    return owner


def plan_batches(
    property_ids: Sequence[str], slots: Sequence[int], durations: Mapping[str, float]
) -> tuple[Batch, ...]:
    """Cut the selection into batches, one per lane of the pool at most (LPT).

    ``slots`` holds each engine's slots, in pool order. Lanes are taken engine by
    engine within each lane number (``e1-b1, e2-b1, e1-b2, ...``), so a selection
    smaller than the pool still reaches every engine. Within a batch the properties
    keep the selection's order. No properties named (run every test) is one batch on
    the first engine: nothing can be cut before the tests are known.
    """
    if not slots:
        raise ValueError("a pool has at least one engine")
    if not property_ids:
        return (Batch(key="e1-b1", engine=0, property_ids=()),)
    lanes = [
        (engine, lane)
        for lane in range(max(lanes_for(s) for s in slots))
        for engine, engine_slots in enumerate(slots)
        if lane < lanes_for(engine_slots)
    ]
    owner = assign_longest_first(property_ids, len(lanes), durations)
    members: list[set[str]] = [set() for _ in lanes]
    for property_id, lane_index in owner.items():
        members[lane_index].add(property_id)
    order = list(dict.fromkeys(property_ids))
    return tuple(
        Batch(
            key=f"e{engine + 1}-b{lane + 1}",
            engine=engine,
            property_ids=tuple(p for p in order if p in chosen),
        )
        for (engine, lane), chosen in zip(lanes, members, strict=True)
        if chosen
    )


def plan_batches_on(
    property_ids: Sequence[str],
    slots: Sequence[int],
    durations: Mapping[str, float],
    engine_of: Mapping[str, int],
) -> tuple[Batch, ...]:
    """Batches that keep each property on the engine ``engine_of`` names (the first
    engine when it names none, or one outside the pool), cut into that engine's lanes as
    :func:`plan_batches` cuts them. A screened property's second phase runs where its
    screening ran: replays of one property on two runners are no evidence (lanes.md
    row 1)."""
    if not slots:
        raise ValueError("a pool has at least one engine")
    home = {p: engine_of.get(p, 0) for p in property_ids}
    home = {p: engine if 0 <= engine < len(slots) else 0 for p, engine in home.items()}
    batches: list[Batch] = []
    for engine, engine_slots in enumerate(slots):
        mine = [p for p in property_ids if home[p] == engine]
        if not mine:
            continue
        for batch in plan_batches(mine, [engine_slots], durations):
            lane = batch.key.partition("-")[2]
            batches.append(replace(batch, key=f"e{engine + 1}-{lane}", engine=engine))
    return tuple(batches)


def sides_at_once(slots: int, sides: int = 2) -> int:
    """Containers an engine runs at once: a lane's sides side by side when it has a slot
    for each, one at a time with a single slot."""
    return sides * lanes_for(slots) if slots >= sides else 1


def retry(batch: Batch) -> Batch | None:
    """The batch queued again after its engine stopped answering, once; None after that.
    It keeps naming that engine until another one takes it."""
    if batch.attempt > 1:
        return None
    return replace(batch, key=f"{batch.key}-attempt2", attempt=2)


def narrow_targets(targets: Sequence[str], property_ids: Sequence[str] | None) -> tuple[str, ...]:
    """What a side hands pytest for a part of the selection (a batch, a shard). ``targets``
    are what it is handed for the whole selection (node ids it has, whole modules; empty:
    the property ids themselves); the part keeps the node ids of ``property_ids`` the side
    has, or all of them when it has none (pytest then reports them not found instead of
    running every test). ``property_ids`` None: the whole selection, unchanged."""
    if property_ids is None or not targets:
        return tuple(targets)
    wanted = set(targets)
    kept = tuple(p for p in property_ids if p in wanted or p.partition("::")[0] in wanted)
    return kept or tuple(property_ids)


# ---------------------------------------------------------------- engines


def check_engine_urls(urls: Sequence[str]) -> tuple[str, ...]:
    """The ``--engine`` URLs, each once, of a scheme the Docker SDK reaches (exit 2 else)."""
    seen: list[str] = []
    for url in urls:
        text = url.strip()
        scheme = urlsplit(text).scheme
        if scheme not in ENGINE_SCHEMES:
            raise InputError(
                f"--engine {url!r}: expected unix://PATH, tcp://HOST:PORT or ssh://[USER@]HOST"
            )
        if text in seen:
            raise InputError(f"--engine {text} is given twice")
        seen.append(text)
    return tuple(seen)


def runner_ids(urls: Sequence[str], runner_id: str | None, *, named: bool) -> tuple[str, ...]:
    """The runner id each engine's replays carry. Without ``--engine`` it is
    ``--runner-id`` (default ``local``); with ``--engine`` each engine is
    named by its URL, after ``--runner-id`` and ``@`` when that is given too."""
    if not named:
        return (runner_id or "local",) * len(urls)
    return tuple(f"{runner_id}@{url}" if runner_id else url for url in urls)

"""CI-matrix shards: one selection cut into N parts, and N run folders joined again. Pure.

``replay --shard I/N`` replays part I of a deterministic partition of the selected
properties: balanced by recorded durations when there are any (longest first, each to
the lightest shard), else by a hash of the node id (properties in the order of their
hashes, dealt to the shards in turn: parts differ by one property at most). Every shard
records what it was cut from (the selection's digest and size, and the partition's
inputs) beside the run's pins, so that
``orchestrator merge`` can refuse shards that do not belong together: different pins,
a shard missing or given twice, or parts that do not add up to the selection.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from orchestrator.core.bounds import MAX_SHARDS
from orchestrator.core.digest import digest
from orchestrator.core.lanes import worst_exit_status
from orchestrator.core.pool import assign_longest_first
from orchestrator.core.significance import needs_a_look
from orchestrator.errors import InputError
from orchestrator.model import PROPERTIES_FILE, REPORT_SCHEMA, Lane

_SHARD = re.compile(r"^\s*(\d+)\s*/\s*(\d+)\s*$")
# What must be equal for shards to be parts of one run (run-log.json field names).
PINS = (
    "base_rev",
    "patch_rev",
    "image_digest",
    "command",
    "seed",
    "tests_from",
    "fixture_digest",
    "replays",
    "screening",  # K then N where there is signal, or N for all: the same for every shard
    "evidence_rule",  # the false-block rate and the cap (lanes.md section 3b)
    "environment",
)
BY_DURATIONS = "durations"
BY_HASH = "hash"


@dataclass(frozen=True, kw_only=True)
class Shard:
    """Part ``index`` of ``count`` (both from 1)."""

    index: int
    count: int

    def __str__(self) -> str:
        return f"{self.index}/{self.count}"


def parse_shard(text: str) -> Shard:
    """``"2/3"`` -> ``Shard(index=2, count=3)``; anything else is bad input."""
    match = _SHARD.match(text)
    if not match:
        raise InputError(f"--shard {text!r}: expected I/N, e.g. 2/3")
    index, count = int(match.group(1)), int(match.group(2))
    if count < 1 or not 1 <= index <= count:
        raise InputError(f"--shard {text!r}: I must be between 1 and N")
    if count > MAX_SHARDS:  # every part is computed to take one
        raise InputError(f"--shard {text!r}: N must be at most {MAX_SHARDS}")
    return Shard(index=index, count=count)


def _hash(property_id: str) -> str:
    return hashlib.sha256(property_id.encode("utf-8")).hexdigest()


def partition(
    property_ids: Sequence[str], count: int, durations: Mapping[str, float]
) -> tuple[tuple[str, ...], ...]:
    """All ``count`` parts, each in the selection's order; every property in exactly one."""
    selection = list(dict.fromkeys(property_ids))
    known = {p: durations[p] for p in selection if p in durations}
    if known:
        owner = assign_longest_first(selection, count, known)
    else:
        dealt = sorted(selection, key=lambda p: (_hash(p), p))
        owner = {p: index % count for index, p in enumerate(dealt)}
    return tuple(tuple(p for p in selection if owner[p] == index) for index in range(count))


def shard_record(
    property_ids: Sequence[str], shard: Shard, durations: Mapping[str, float]
) -> tuple[tuple[str, ...], dict[str, Any]]:
    """The shard's properties and what its run log records about the cut."""
    selection = list(dict.fromkeys(property_ids))
    known = {p: durations[p] for p in selection if p in durations}
    part = partition(selection, shard.count, known)[shard.index - 1]
    record = {
        "index": shard.index,
        "count": shard.count,
        "selection": digest(sorted(selection)),
        "selected": len(selection),
        "by": BY_DURATIONS if known else BY_HASH,
        "partition": digest({"count": shard.count, "durations": known}),
        "properties": len(part),
    }
    return part, record


# ---------------------------------------------------------------- merge


@dataclass(frozen=True, kw_only=True)
class ShardRun:
    """One finished run folder as ``merge`` reads it: its run log, its summary and its
    properties' records (``index``, ``property_id``, ``entry``, ``evidence``,
    ``decision`` each, in the run's order; iterating reads them afresh), from its store
    or, for a folder of an earlier version, from its summary and files."""

    name: str  # the folder as named on the command line
    run_log: Mapping[str, Any]
    summary: Mapping[str, Any]
    records: Iterable[Mapping[str, Any]] = ()

    @property
    def shard(self) -> Mapping[str, Any]:
        """Its shard record; a run without one is the whole selection (``1/1``)."""
        record = self.run_log.get("shard")
        return record if isinstance(record, Mapping) else {"index": 1, "count": 1}

    @property
    def property_ids(self) -> tuple[str, ...]:
        return tuple(str(record.get("property_id")) for record in self.records)


def _shown(value: Any) -> str:
    text = str(value)
    return text if len(text) <= 24 else text[:21] + "..."


def check_shards(runs: Sequence[ShardRun]) -> tuple[ShardRun, ...]:
    """The runs in shard order, or an ``InputError`` naming the first folder that does not
    belong: different pins, another cut, a shard given twice or missing, or parts that do
    not add up to the selection."""
    if not runs:
        raise InputError("merge needs at least one run folder")
    first = runs[0]
    for run in runs:
        for pin in PINS:
            mine, theirs = run.run_log.get(pin), first.run_log.get(pin)
            if mine != theirs:
                raise InputError(
                    f"{run.name}: {pin} {_shown(mine)} differs from {first.name}'s "
                    f"{_shown(theirs)}: not shards of one run"
                )
        for key in ("count", "selection", "selected", "partition"):
            mine, theirs = run.shard.get(key), first.shard.get(key)
            if mine != theirs:
                raise InputError(
                    f"{run.name}: shard {key} {_shown(mine)} differs from {first.name}'s "
                    f"{_shown(theirs)}: not cut from one selection"
                )
    count = first.shard.get("count")
    if not isinstance(count, int) or not 1 <= count <= MAX_SHARDS:
        raise InputError(
            f"{first.name}: run-log.json: shard count is not a number from 1 to {MAX_SHARDS}"
        )
    by_index: dict[int, ShardRun] = {}
    for run in runs:
        index = run.shard.get("index")
        if not isinstance(index, int) or not 1 <= index <= count:
            raise InputError(f"{run.name}: run-log.json: shard index {index!r} is not 1..{count}")
        if index in by_index:
            raise InputError(
                f"{run.name}: shard {index}/{count} is given twice (also {by_index[index].name})"
            )
        by_index[index] = run
    missing = [str(index) for index in range(1, count + 1) if index not in by_index]
    if missing:
        raise InputError(f"shard {', '.join(missing)} of {count} missing: merge needs all {count}")
    ordered = tuple(by_index[index] for index in range(1, count + 1))
    seen: dict[str, str] = {}
    for run in ordered:
        for property_id in run.property_ids:
            if property_id in seen:
                raise InputError(
                    f"{run.name}: {property_id} was also decided in {seen[property_id]}"
                )
            seen[property_id] = run.name
    selected = first.shard.get("selected")
    if isinstance(selected, int) and len(seen) != selected:
        raise InputError(
            f"the shards decided {len(seen)} properties of a selection of {selected}: "
            "a shard is not whole"
        )
    return ordered


def worst_exit(statuses: Sequence[int]) -> int:
    """1 (blocking) beats 3 (undecided) beats 0; nothing at all is undecided."""
    worst = worst_exit_status(statuses)
    return Lane.INFRA_QUEUE.exit_status if worst is None else worst


@dataclass(frozen=True, kw_only=True)
class Copy:
    """A file or folder of shard ``shard`` (a path in its run folder) that the merged
    folder holds at ``target``."""

    shard: int
    source: str
    target: str


@dataclass(frozen=True, kw_only=True)
class Merged:
    """The merged run: its run log, its replay report (``decisions`` and the counts are
    filled as its records are written, :class:`MergedProperties`) and the folders to copy
    into it."""

    run_log: dict[str, Any]
    summary: dict[str, Any]
    copies: tuple[Copy, ...]


def merged_run_id(runs: Sequence[ShardRun]) -> str:
    """``merge-<12 hex>`` of the shards' run ids: the same shards give the same id."""
    ids = sorted(str(run.summary.get("run_id") or run.run_log.get("run_id")) for run in runs)
    return "merge-" + digest(ids).removeprefix("sha256:")[:12]


def _strings(value: Any) -> list[str]:
    return [item for item in value if isinstance(item, str)] if isinstance(value, list) else []


def merge_runs(ordered: Sequence[ShardRun], *, run_dir: str) -> Merged:
    """Join checked shards (:func:`check_shards`) into one run folder's documents.

    Properties keep the shards' order (:class:`MergedProperties` renumbers them as they
    are copied into the merged store); each shard's ``raw/`` moves under
    ``shards/<i>/``. The exit status is the worst of the shards'.
    """
    first = ordered[0]
    run_id = merged_run_id(ordered)
    engines: list[str] = []
    runner_ids: list[str] = []
    for run in ordered:
        for engine in _strings(run.run_log.get("engines")):
            if engine not in engines:
                engines.append(engine)
        runner = run.run_log.get("runner_id")
        if isinstance(runner, str) and runner not in runner_ids:
            runner_ids.append(runner)
    started = sorted(
        str(run.run_log["started_at"])
        for run in ordered
        if isinstance(run.run_log.get("started_at"), str)
    )
    run_log = dict(first.run_log)
    run_log.pop("shard", None)
    run_log.update(
        {
            "run_id": run_id,
            "runner_id": ", ".join(runner_ids) or first.run_log.get("runner_id"),
            "engines": engines,
            "started_at": started[0] if started else first.run_log.get("started_at"),
            "merged_from": [
                {
                    "index": run.shard.get("index"),
                    "count": run.shard.get("count"),
                    "run_id": run.summary.get("run_id") or run.run_log.get("run_id"),
                    "run_dir": run.name,
                    "exit_status": run.summary.get("exit_status"),
                }
                for run in ordered
            ],
        }
    )
    statuses: list[int] = []
    for run in ordered:
        status = run.summary.get("exit_status")
        if isinstance(status, int) and not isinstance(status, bool):
            statuses.append(status)
    copies = tuple(
        Copy(shard=number, source="raw", target=f"shards/{number}/raw")
        for number in range(1, len(ordered) + 1)
    )
    summary: dict[str, Any] = {
        "schema": REPORT_SCHEMA,
        "run_id": run_id,
        "run_dir": run_dir,
        "run_log": run_log,
        "exit_status": worst_exit(statuses),
        "decisions": [],
        "decisions_left_out": 0,
        "properties": 0,
        "properties_file": PROPERTIES_FILE,
        "lanes": {},
    }
    screening = merged_screening(ordered)
    if screening is not None:
        summary["screening"] = screening
    skipped = [run.summary.get("skipped") for run in ordered]
    if all(isinstance(n, int) and not isinstance(n, bool) for n in skipped):
        summary["skipped"] = sum(n for n in skipped if isinstance(n, int))
    removed = first.summary.get("removed_tests")  # one overlay (tests_from is a pin): one list
    if isinstance(removed, list):
        summary["removed_tests"] = removed
    return Merged(run_log=run_log, summary=summary, copies=copies)


class MergedProperties:
    """The shards' records renumbered into the merged run's, one at a time, and what the
    merged summary says of them: the entries that need a look, the lanes' counts."""

    def __init__(self, summary: dict[str, Any]) -> None:
        self.summary = summary
        self.count = 0

    def records(self, ordered: Sequence[ShardRun]) -> Iterator[dict[str, Any]]:
        for number, run in enumerate(ordered, start=1):
            for record in run.records:
                yield self.add(record, number)

    def add(self, record: Mapping[str, Any], shard: int) -> dict[str, Any]:
        """``record`` of shard ``shard`` as the merged run's next property."""
        self.count += 1
        entry = dict(record.get("entry") or {})
        raw_dir = entry.get("raw_dir")
        entry.update(
            index=self.count,
            raw_dir=f"shards/{shard}/{raw_dir if isinstance(raw_dir, str) else 'raw'}",
            shard=shard,
            evidence_file=None,
            decision_file=None,
        )
        decision = record.get("decision")
        decided = decision if isinstance(decision, Mapping) else entry
        lane, code = str(decided.get("lane")), str(decided.get("code"))
        counts = self.summary["lanes"]
        counts[lane] = counts.get(lane, 0) + 1
        self.summary["properties"] = self.count
        if needs_a_look(lane, code):
            self.summary["decisions"].append(entry)
        else:
            self.summary["decisions_left_out"] += 1
        return {**record, "index": self.count, "entry": entry}


def merged_screening(runs: Sequence[ShardRun]) -> dict[str, Any] | None:
    """The shards' ``screening`` summaries as one: the policy they share (a pin), the
    properties screened and replayed in all of them; None when a shard has none (a run
    folder of an earlier version)."""
    summaries = [run.summary.get("screening") for run in runs]
    found = [item for item in summaries if isinstance(item, Mapping)]
    if not found or len(found) != len(summaries):
        return None
    merged = {key: value for key, value in found[0].items() if key not in ("screened", "replayed")}
    for key in ("screened", "replayed"):
        counts = [item.get(key) for item in found]
        merged[key] = sum(n for n in counts if isinstance(n, int) and not isinstance(n, bool))
    return merged

"""``orchestrator merge``: the run folders of a CI matrix's shards as one run.

Each folder is read as ``report`` reads it (one without ``summary.json``, or marked
incomplete, is refused by name; a folder of an earlier version, ``replay-report/1``,
with its evidence and decision files, is read too), the shards are checked to belong
together (:func:`orchestrator.core.shards.check_shards`) and joined
(:func:`orchestrator.core.shards.merge_runs`). With ``out`` the merged run is written
as a run folder of its own (``run-log.json``, each shard's ``raw/`` under
``shards/<i>/``, the store ``properties.jsonl.gz`` with every shard's properties
renumbered in shard order, ``summary.json`` last; marked ``INCOMPLETE`` until then, as
a replay's), which ``orchestrator report`` reads like any other.

The test durations each shard measured (its ``durations.json``) are joined into the
merged folder's ``durations.json``; when the shards recorded their decisions (they were
not ``--no-record``), they are also folded into the repository's record of durations in
the working directory (:mod:`orchestrator.services.durations`). A shard never folds its
own: its siblings must cut the selection from the record they all read.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from orchestrator.core.shards import (
    Merged,
    MergedProperties,
    ShardRun,
    check_shards,
    merge_runs,
)
from orchestrator.errors import InputError, LocalWriteError
from orchestrator.services import property_store, run_writer
from orchestrator.services.run_folders import SUMMARY, read_folders


def read_shards(folders: Sequence[Path]) -> tuple[ShardRun, ...]:
    """Every folder as a shard; refusals name their folder (exit 2)."""
    runs = []
    for documents in read_folders(folders):
        summary = documents.summary
        if not isinstance(summary, Mapping):
            raise InputError(f"{documents.name}: {SUMMARY} is not a JSON object")
        run_log = documents.run_log if isinstance(documents.run_log, Mapping) else None
        if run_log is None:
            nested = summary.get("run_log")
            run_log = nested if isinstance(nested, Mapping) else None
        if run_log is None:
            raise InputError(f"{documents.name}: no run log: not a run folder of replay")
        records = documents.records
        if records is None:  # a folder of an earlier version: its summary and its files
            records = _records_of_files(documents.summary, documents)
        runs.append(
            ShardRun(name=documents.name, run_log=run_log, summary=summary, records=records)
        )
    return tuple(runs)


def _records_of_files(summary: Mapping[str, Any], documents: Any) -> list[dict[str, Any]]:
    """A ``replay-report/1`` folder's properties as store records: each entry of its
    summary, with the evidence and decision files it names (the decision the summary
    copied when its file is absent)."""
    records = []
    entries = summary.get("decisions")
    for index, entry in enumerate(entries if isinstance(entries, list) else (), start=1):
        if not isinstance(entry, Mapping):
            continue
        evidence = (documents.evidence or {}).get(entry.get("evidence_file"))
        decision = (documents.decisions or {}).get(entry.get("decision_file"))
        if not isinstance(decision, Mapping):
            decision = entry.get("decision")
        records.append(
            {
                "index": index,
                "property_id": str(entry.get("property_id")),
                "entry": dict(entry),
                "evidence": evidence if isinstance(evidence, Mapping) else {},
                "decision": decision if isinstance(decision, Mapping) else {},
            }
        )
    return records


@dataclass(frozen=True, kw_only=True)
class MergeResult:
    """The merged run and its shards (whose records ``entries`` reads again)."""

    merged: Merged
    shards: tuple[ShardRun, ...]

    def entries(self) -> Iterator[Mapping[str, Any]]:
        """Every merged property's entry, in the merged run's order (read afresh)."""
        again = MergedProperties({**self.merged.summary, "decisions": [], "lanes": {}})
        return (record["entry"] for record in again.records(self.shards))


def merge(folders: Sequence[Path], *, out: Path | None = None) -> MergeResult:
    """Check and join the shards; write the merged run folder when ``out`` is given."""
    if out is not None:  # a folder in the way, read-only or full: exit 2 before reading
        run_writer.check_run_folder(out)
    shards = check_shards(read_shards(folders))
    merged = merge_runs(shards, run_dir=str(out.resolve()) if out is not None else "")
    if out is not None:
        write_merged(out, merged, [Path(shard.name) for shard in shards], shards)
    else:  # the summary's counts and listed entries
        for _ in MergedProperties(merged.summary).records(shards):
            pass
    keep_durations(shards, out=out, root=Path.cwd())
    return MergeResult(merged=merged, shards=shards)


def keep_durations(shards: Sequence[ShardRun], *, out: Path | None, root: Path) -> None:
    """The shards' measured durations: ``durations.json`` in the merged folder (with
    ``out``) and, when every shard recorded its decisions, folded into the record under
    ``root``. Durations only schedule: nothing here fails the merge."""
    from datetime import UTC, datetime

    from orchestrator.core.schedule import merge_durations
    from orchestrator.services import durations as durations_store

    described = shards[0].run_log.get("durations")
    key = described.get("repository") if isinstance(described, Mapping) else None
    if not isinstance(key, str) or not key:
        return
    measured: dict[str, float] = {}
    for shard in shards:
        path = Path(shard.name) / durations_store.RUN_FILE
        measured = merge_durations(measured, durations_store.read_durations(path))
    if not measured:
        return
    now = datetime.now(UTC)
    try:
        if out is not None:
            durations_store.write_run_durations(out, key, measured, now=now)
        if all("ledger" in shard.summary for shard in shards):
            record = durations_store.store_path(root, key)
            durations_store.record_durations(record, key, measured, now=now)
    except OSError as error:
        from orchestrator.log import get_logger

        get_logger(__name__).warning("durations.not_recorded", error=str(error))


def write_merged(
    out: Path, merged: Merged, folders: Sequence[Path], shards: Sequence[ShardRun]
) -> None:
    """The merged run folder, marked ``INCOMPLETE`` (services.run_writer) until it is
    whole: the run log, the copies, then ``summary.json``; a write that fails on the way
    is one line, exit 3 (``disk_full`` or ``internal_error``), the folder still marked."""
    run_writer.start_run_folder(out, started_at=str(merged.run_log.get("started_at", "")))
    run_writer.write_run_log(out, dict(merged.run_log))
    try:
        for copy in merged.copies:
            source = folders[copy.shard - 1] / copy.source
            target = out / copy.target
            if source.is_dir():
                shutil.copytree(source, target, dirs_exist_ok=True)
            elif source.is_file():
                target.parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(source, target)
    except OSError as error:
        reason = run_writer.write_reason(error)
        raise LocalWriteError(
            reason, f"{out}: cannot write the merged run: {error.strerror or error} ({reason})"
        ) from None
    merging = MergedProperties(merged.summary)
    property_store.writer_for(out).add_records(merging.records(shards))
    property_store.finish(out, str(merged.summary["run_id"]))
    run_writer.write_json(out, SUMMARY, merged.summary)
    run_writer.finish_run_folder(out)

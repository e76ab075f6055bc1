"""Recording a run: the evidence and decision files, the measured durations,
``summary.json`` and the ledger (written only once the run folder is complete, so a
ledger that fails leaves the report whole).

The ledger's modules (SQLAlchemy) are imported where they are used: a run that does not
record never pays for them. A run without ``--freeze`` on an up-to-date SQLite ledger
never imports them at all: it is checked and written with the standard library
(``sqlite_reads``, ``sqlite_writes``: the store's statements, written out). Any other
ledger is opened by the store on a thread of its own while the run plans.
"""

from __future__ import annotations

import contextlib
import importlib
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from orchestrator import files, interrupts
from orchestrator.core.replay_run import (
    DecidedProperty,
    PropertyOutcome,
    RunPlan,
)
from orchestrator.core.schedule import (
    measured_durations,
)
from orchestrator.errors import LedgerError
from orchestrator.log import get_logger
from orchestrator.model import Lane, Replay
from orchestrator.services import durations as durations_store
from orchestrator.services import property_store, run_writer

if TYPE_CHECKING:
    pass

log = get_logger(__name__)


@dataclass(frozen=True, kw_only=True)
class LedgerRequest:
    """Record the run in the ledger: every decision as an event, infra cases queued and,
    with ``freeze``, a flake freeze attempted for every property (the ledger refuses all
    but ``flake_queue_eligible`` decisions with complete records, and logs why)."""

    url: str
    now: datetime
    freeze: bool = False
    owner: str | None = None
    expires_at: datetime | None = None
    # The ledger, opened (and checked) before anything ran; None: open ``url`` to record.
    store: Any = None
    # Or: the ledger being opened meanwhile (``PendingLedger.result``), waited for when
    # the run records.
    open_store: Callable[[], Any] | None = None


def import_in_background(module: str) -> None:
    """Import ``module`` while the containers run: the ledger's SQLAlchemy import costs a
    third of a second that would otherwise come after the replays. A failure here is
    left for the real import, on the main thread, to report."""

    def load() -> None:
        with contextlib.suppress(Exception):
            importlib.import_module(module)

    threading.Thread(target=load, name=f"import {module}", daemon=True).start()


def complete_and_record(
    plan: RunPlan,
    properties: Sequence[DecidedProperty],
    report: dict[str, Any],
    ledger: LedgerRequest | None,
) -> tuple[dict[str, Any], str | None]:
    """Write ``summary.json``, mark the run folder complete, then record in the ledger
    (when asked) and write ``summary.json`` again with what the ledger gave.

    The report is whole before the ledger is touched, so a ledger failure cannot lose it
    (the one line it ends with is returned). The ledger only ever holds complete runs;
    it records what the run's store holds."""
    property_store.finish(plan.run_dir, plan.run_id)
    run_writer.write_json(plan.run_dir, "summary.json", report)
    recording_error = None
    # From here a signal waits (a commit is never cut from the run folder it belongs to),
    # except while the ledger's lock is awaited: that wait ends at once on Ctrl-C.
    with interrupts.shielded():
        run_writer.finish_run_folder(plan.run_dir)  # complete, whatever the ledger does
        if ledger is not None:
            try:
                report["ledger"], recording_error = _record(plan, properties, ledger, report)
            except KeyboardInterrupt:  # while waiting for the lock: nothing was recorded
                run_writer.mark_incomplete(plan.run_dir, "interrupted before recording")
                raise
            # The ledger's ids: summary.json keeps those of the properties it lists (and
            # of any with more than a decision event); --json prints them all.
            run_writer.write_json(plan.run_dir, "summary.json", summary_of(report))
    return report, recording_error


def summary_of(report: Mapping[str, Any]) -> dict[str, Any]:
    """``summary.json`` of a report whose ledger entries name every property: the entries
    of the properties it lists, or that record more than a decision event, and a count of
    the others (``entries_left_out``)."""
    ledger = report.get("ledger")
    if not isinstance(ledger, Mapping):
        return dict(report)
    listed = {entry.get("property_id") for entry in report.get("decisions") or ()}
    plain = {"property_id", "decision_event"}
    kept = [
        entry
        for entry in ledger.get("entries") or ()
        if entry.get("property_id") in listed or set(entry) - plain
    ]
    left_out = len(ledger.get("entries") or ()) - len(kept)
    return {**report, "ledger": {**ledger, "entries": kept, "entries_left_out": left_out}}


def _record(
    plan: RunPlan,
    properties: Sequence[DecidedProperty],
    ledger: LedgerRequest,
    report: Mapping[str, Any],
) -> tuple[dict[str, Any], str | None]:
    """The report's ``ledger`` entry, and the one line a failed recording ends with."""
    try:
        recorded = record_in_ledger(
            plan,
            properties,
            ledger,
            finished_at=datetime.now(UTC),
            exit_status=report["exit_status"],
        )
    except LedgerError as error:
        message = f"{error}; the run folder {plan.run_dir} is complete"
        entry = {"url": _shown(ledger.url), "recorded": False, "error": str(error)}
        return {**entry, "entries": [], "entries_left_out": 0}, message
    return {**recorded, "recorded": True, "entries_left_out": 0}, None


class PendingLedger:
    """The ledger a run records in, checked before any container starts (:meth:`check`).

    An up-to-date SQLite ledger (read with the standard library) passes at once; a run
    that needs no store for it (``store_needed`` false: no freezes to write) then records
    with the standard library too, and the store is never opened. Any other ledger is
    opened (created or upgraded) by the store on a thread of its own, started as soon as
    this is made, while the run plans: SQLAlchemy's import and the schema check cost the
    time that pinning the revisions and the image takes anyway; :meth:`check` then waits
    for it. :meth:`result` waits for it (in short waits, so Ctrl-C is acted on) and
    raises what opening raised: a URL or path that cannot be used (exit 2), a database
    that fails (exit 3); it is None when the store was not needed."""

    def __init__(self, url: str, *, store_needed: bool = True) -> None:
        from orchestrator.adapters.ledger.sqlite_writes import recorder_for

        self.url = url
        self._store: Any = None
        self._error: BaseException | None = None
        self._done = threading.Event()
        self._lock = threading.Lock()
        self._closed = False
        self._started = False
        self._without_store = False
        if store_needed or recorder_for(url) is None:
            self._start()

    def _start(self) -> None:
        with self._lock:
            if self._started:
                return
            self._started = True
        threading.Thread(target=self._open, name="open ledger", daemon=True).start()

    def _open(self) -> None:
        from orchestrator.adapters.ledger import Ledger

        store: Any
        try:
            store = Ledger.open(self.url)
        except BaseException as error:  # handed to the main thread by result()
            self._error = error
        else:
            with self._lock:
                if not self._closed:
                    self._store, store = store, None
            if store is not None:  # the run ended while it opened: nobody will use it
                store.close()
        finally:
            self._done.set()

    def check(self) -> None:
        """Raise what opening the ledger would raise, before anything runs."""
        from orchestrator.adapters.ledger.sqlite_reads import up_to_date

        if not self._done.is_set() and up_to_date(self.url):
            # Nothing for the store to create or upgrade: it opens meanwhile, or not at all.
            self._without_store = not self._started
            return
        self.result()

    def result(self) -> Any:
        if self._without_store:
            return None
        self._start()
        while not self._done.wait(timeout=0.2):  # short waits: Ctrl-C acted on between
            interrupts.checkpoint()
        if self._error is not None:
            raise self._error
        return self._store

    def close(self) -> None:
        """Close the store; one still opening closes itself when it is open."""
        with self._lock:
            self._closed = True
            store, self._store = self._store, None
        if store is not None:
            store.close()


def open_ledger_for_run(url: str, *, store_needed: bool = True) -> PendingLedger:
    """Start opening the run's ledger; it is checked before anything is written or run.
    ``store_needed``: the run writes more than the standard library path writes (freezes)."""
    return PendingLedger(url, store_needed=store_needed)


def write_outcomes(
    plan: RunPlan, outcomes: Iterable[PropertyOutcome]
) -> tuple[DecidedProperty, ...]:
    """Each property's report entry, evidence and decision into the run's store
    (``properties.jsonl.gz``, written whole when the run completes); what the run keeps
    of each."""
    return property_store.add(plan.run_dir, outcomes)


def record_run_durations(
    plan: RunPlan, labelled: Mapping[str, Mapping[str, Sequence[Replay]]], *, keep: bool
) -> None:
    """What the run measured: ``durations.json`` in its folder and, with ``keep``, folded
    into the repository's record."""
    scheduling = plan.scheduling
    if scheduling.repository is None:
        return
    measured = measured_durations(labelled)
    now = datetime.now(UTC)
    durations_store.write_run_durations(plan.run_dir, scheduling.repository, measured, now=now)
    if keep and scheduling.durations_file is not None and measured:
        try:
            durations_store.record_durations(
                scheduling.durations_file, scheduling.repository, measured, now=now
            )
        except OSError as error:  # a record that cannot be kept never fails the run
            log.warning(
                "durations.not_recorded", path=str(scheduling.durations_file), error=str(error)
            )


def record_in_ledger(
    plan: RunPlan,
    properties: Sequence[DecidedProperty],
    request: LedgerRequest,
    *,
    finished_at: datetime,
    exit_status: int,
) -> dict[str, Any]:
    """Record the run and each decision (and queue infra cases, and try freezes) in the
    ledger, in one transaction."""
    from orchestrator.adapters.ledger import sqlite_writes

    store = request.store
    if store is None and request.open_store is not None:
        store = request.open_store()  # opened while the run replayed (None: not needed)
    if store is None and not request.freeze:
        recorder = sqlite_writes.recorder_for(request.url)
        if recorder is not None:
            try:
                entries = _write_records(
                    recorder, plan, properties, request, finished_at, exit_status
                )
            except sqlite_writes.StoreNeeded:
                pass  # changed meanwhile (nothing written): the store's turn
            else:
                return {"url": _shown(request.url), "entries": entries}
    with contextlib.ExitStack() as opened:
        if store is None:
            from orchestrator.adapters.ledger import Ledger

            store = opened.enter_context(Ledger.open(request.url))
        entries = _write_records(store, plan, properties, request, finished_at, exit_status)
    return {"url": _shown(request.url), "entries": entries}


def _shown(url: str) -> str:
    """The ledger's URL as reports show it (without a password)."""
    from orchestrator.adapters.ledger.sqlite_writes import shown_url

    shown = shown_url(url)
    if shown is None:
        from orchestrator.adapters.ledger import display_url

        shown = display_url(url)
    return shown


# Properties recorded per statement: the store is read and the ledger written a part at
# a time, in one transaction (a whole suite's events are never held at once).
RECORD_CHUNK = 1000


def _write_records(
    store: Any,
    plan: RunPlan,
    properties: Sequence[DecidedProperty],
    request: LedgerRequest,
    finished_at: datetime,
    exit_status: int,
) -> list[dict[str, Any]]:
    """The run's row, its decisions, infra cases and freezes, in one transaction of
    ``store`` (the store, or the standard library's recorder: the same writes), from what
    the run's property store holds."""
    from orchestrator.core.evidence import parse_evidence
    from orchestrator.core.run_store import decision_from_json
    from orchestrator.services.ledger_jobs import (
        decision_event_of,
        queue_infra,
        record_run,
        write_flake_freeze_from_replay,
    )

    # The run folder's copy (the bytes every replay read) when it was kept.
    kept = plan.kept_fixture
    if kept is not None and not kept.is_file():
        kept = plan.options.fixture
    fixture_bytes = files.read_bytes(kept) if kept is not None else None
    shrink_path = plan.pins.shrink.shrink_path if plan.pins.shrink is not None else ()
    # Nothing shrunk: the origin is the fixture itself. Otherwise the shrink report (or
    # --origin) carries the unshrunk payload; without it the ledger refuses the freeze.
    # No fixture at all: both are JSON null (ledger_jobs keeps them so).
    origin_bytes = plan.origin_bytes
    entries = []
    stored = property_store.StoreRead(plan.run_dir)
    with store.transaction():
        record_run(
            store,
            plan.run_id,
            plan.started_at,
            finished_at,
            exit_status,
            plan.options.command,
            {"run_dir": str(plan.run_dir), "properties": len(properties)},
        )
        for chunk in _chunks(stored.records(), RECORD_CHUNK):
            recorded = store.append_decisions_once(
                [
                    decision_event_of(
                        record["evidence"], record["decision"], request.now, run_id=plan.run_id
                    )
                    for record in chunk
                ],
                run_id=plan.run_id,
            )
            for record, (event_id, new) in zip(chunk, recorded, strict=True):
                entry: dict[str, Any] = {
                    "property_id": record["property_id"],
                    "decision_event": event_id,
                }
                lane = record["decision"].get("lane")
                if not new:  # a retried run: its first recording stands, with what came
                    entry["already_recorded"] = True
                elif lane == Lane.INFRA_QUEUE or request.freeze:
                    evidence = parse_evidence(record["evidence"])
                    decision = decision_from_json(record["decision"])
                    if decision.lane is Lane.INFRA_QUEUE:
                        entry["infra_queue_id"] = queue_infra(
                            store, evidence, decision, request.now, run_id=plan.run_id
                        )
                    else:
                        written = write_flake_freeze_from_replay(
                            store,
                            evidence,
                            decision,
                            request.owner,
                            request.expires_at,
                            fixture_bytes,
                            origin_bytes,
                            shrink_path,
                            request.now,
                            run_id=plan.run_id,
                        )
                        entry["freeze_id"] = written.freeze_id
                        entry["freeze_refusals"] = list(written.codes)
                entries.append(entry)
    return entries


def _chunks(items: Iterator[dict[str, Any]], size: int) -> Iterator[list[dict[str, Any]]]:
    chunk: list[dict[str, Any]] = []
    for item in items:
        chunk.append(item)
        if len(chunk) == size:
            yield chunk
            chunk = []
    if chunk:
        yield chunk

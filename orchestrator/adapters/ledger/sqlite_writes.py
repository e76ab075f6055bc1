"""A replay's recording on a SQLite ledger with the standard library's ``sqlite3``: no
SQLAlchemy, whose import is the largest part of a small replay's own CPU time.

It writes what a replay without ``--freeze`` records, and nothing else: the run's row,
one decision event per property and run, and the infra cases with their events. The
statements are the store's (``Ledger.record_run``, ``Ledger.append_decisions_once``,
``Ledger.enqueue_infra``), written out, with the values encoded as the store encodes them
(``values.canonical`` JSON; date-times as ``schema.UTCDateTime`` stores them, naive UTC
text), in one transaction taken as the store's writer takes it: ``BEGIN IMMEDIATE``,
waiting for another writer in short slices up to the ledger's lock wait, a signal acted
on between two (``locking``, as the store's writer). A database failure is the store's one
line.

It is only used on a ledger the store would open without doing anything (a plain
``sqlite:///PATH`` file, readable and writable, in WAL mode, at this tool's revision:
``sqlite_reads``), checked again inside the write transaction. When that check fails
(:class:`StoreNeeded`), nothing was written and the caller records through the store.
"""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Iterator, Sequence
from contextlib import closing, contextmanager
from pathlib import Path
from typing import Final

from orchestrator import model
from orchestrator.adapters.ledger import locking
from orchestrator.adapters.ledger.sqlite_reads import at_head, sqlite_path, stored, usable
from orchestrator.adapters.ledger.values import (
    RUN_REFERENCED,
    InfraEntry,
    RunRecord,
    canonical,
    decision_ids,
)
from orchestrator.adapters.ledger_location import lock_wait_s as lock_wait_from
from orchestrator.errors import LedgerError

# Rows per INSERT of decisions: 6 parameters each, well under SQLite's 32,766.
ROWS_PER_INSERT: Final = 1000

_UPSERT_RUN: Final = (
    "INSERT INTO runs (id, started_at, finished_at, status, command, detail) "
    "VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (id) DO UPDATE SET "
    "started_at = excluded.started_at, finished_at = excluded.finished_at, "
    "status = excluded.status, command = excluded.command, detail = excluded.detail"
)
_ENSURE_RUN: Final = (
    "INSERT INTO runs (id, started_at, status, detail) VALUES (?, ?, ?, '{}') "
    "ON CONFLICT (id) DO NOTHING"
)
_DECISIONS_ONCE: Final = (
    "INSERT INTO events (at, kind, code, subject, detail, run_id) VALUES {rows} "
    "ON CONFLICT (run_id, subject) WHERE kind = 'decision' AND run_id IS NOT NULL "
    "DO NOTHING RETURNING subject, id"
)
_EXISTING_DECISIONS: Final = (
    "SELECT subject, id FROM events WHERE kind = ? AND run_id = ? AND subject IN ({names})"
)
_INSERT_INFRA: Final = (
    "INSERT INTO infra_queue (queued_at, property_id, code, runner_id, image_digest, "
    "base_rev, patch_rev, labels, reasons, record, run_id) "
    "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
)
_INSERT_EVENT: Final = "INSERT INTO events (at, kind, code, subject, detail) VALUES (?, ?, ?, ?, ?)"


class StoreNeeded(Exception):
    """The ledger is no longer one this path may write (nothing was written)."""


def shown_url(url: str) -> str | None:
    """The URL as messages and reports show it, for a URL this path writes (a plain SQLite
    file URL has no password: the store shows it as given); None for any other."""
    if "%" in url or sqlite_path(url) is None:
        return None
    return url


def recorder_for(url: str) -> SqliteRecorder | None:
    """A recorder for ``url`` when the store would open it without doing anything; None
    otherwise (the caller opens the store)."""
    path = sqlite_path(url) if shown_url(url) is not None else None
    if path is None or not usable(path):
        return None
    return SqliteRecorder(path, url)


class SqliteRecorder:
    """The store's three recording writes on one SQLite file, in one transaction
    (:meth:`transaction`, as ``Ledger.transaction``); the writes run only inside it."""

    def __init__(self, path: Path, url: str) -> None:
        self.path = path
        self.url = url
        self._cursor: sqlite3.Cursor | None = None

    @contextmanager
    def transaction(self) -> Iterator[SqliteRecorder]:
        """``BEGIN IMMEDIATE`` (waited for in slices), the revision checked again, the
        writes, ``COMMIT``; a failure rolls everything back. :class:`StoreNeeded` when the
        ledger is no longer at this tool's revision."""
        wait_s = lock_wait_from(os.environ)
        try:
            connection = sqlite3.connect(self.path, timeout=wait_s, isolation_level=None)
            with closing(connection), closing(connection.cursor()) as cursor:
                cursor.execute("PRAGMA synchronous = NORMAL")
                cursor.execute("PRAGMA foreign_keys = ON")
                locking.begin_immediate(
                    cursor.execute,
                    wait_s=wait_s,
                    locked=_is_locked,
                    errors=sqlite3.OperationalError,
                )
                try:
                    if not at_head(cursor):
                        raise StoreNeeded(self.url)
                    self._cursor = cursor
                    yield self
                    cursor.execute("COMMIT")
                except BaseException:
                    cursor.execute("ROLLBACK")
                    raise
                finally:
                    self._cursor = None
        except sqlite3.Error as error:
            raise locking.failure(self.url, _reason(error)) from None

    def _writing(self) -> sqlite3.Cursor:
        if self._cursor is None:
            raise RuntimeError("SqliteRecorder writes only inside transaction()")
        return self._cursor

    def record_run(self, run: RunRecord) -> None:
        """``Ledger.record_run``: the run's row, or the one a write referenced completed."""
        self._writing().execute(
            _UPSERT_RUN,
            (
                run.id,
                stored(run.started_at),
                None if run.finished_at is None else stored(run.finished_at),
                run.status,
                run.command,
                canonical(dict(run.detail)),
            ),
        )

    def append_decisions_once(
        self, event_rows: Sequence[model.Event], *, run_id: str
    ) -> list[tuple[int, bool]]:
        """``Ledger.append_decisions_once``: ``(event id, written now)`` for each event, in
        order; the unique index decides which are new, as in the store."""
        cursor = self._writing()
        inserted: dict[str, int] = {}
        for start in range(0, len(event_rows), ROWS_PER_INSERT):
            part = event_rows[start : start + ROWS_PER_INSERT]
            parameters: list[object] = []
            for row in part:
                parameters += [
                    stored(row.at),
                    row.kind.value,
                    row.code,
                    row.subject,
                    canonical(dict(row.detail)),
                    run_id,
                ]
            statement = _DECISIONS_ONCE.format(rows=", ".join(["(?, ?, ?, ?, ?, ?)"] * len(part)))
            inserted.update(
                (str(subject), int(key)) for subject, key in cursor.execute(statement, parameters)
            )
        subjects = [str(row.subject) for row in event_rows]
        missing = sorted(set(subjects) - inserted.keys())
        existing: dict[str, int] = {}
        for start in range(0, len(missing), 500):  # bound the statement's parameters
            names = missing[start : start + 500]
            query = _EXISTING_DECISIONS.format(names=", ".join("?" * len(names)))
            found = cursor.execute(query, [model.EventKind.DECISION.value, run_id, *names])
            existing.update((str(subject), int(key)) for subject, key in found)
        return decision_ids(subjects, inserted, existing)

    def enqueue_infra(self, entry: InfraEntry) -> int:
        """``Ledger.enqueue_infra``: the case queued, and its event."""
        cursor = self._writing()
        if entry.run_id is not None:
            cursor.execute(_ENSURE_RUN, (entry.run_id, stored(entry.queued_at), RUN_REFERENCED))
        labels = {key: list(value) for key, value in entry.labels.items()}
        cursor.execute(
            _INSERT_INFRA,
            (
                stored(entry.queued_at),
                entry.property_id,
                entry.code,
                entry.runner_id,
                entry.image_digest,
                entry.base_rev,
                entry.patch_rev,
                canonical(labels),
                canonical(list(entry.reasons)),
                canonical(dict(entry.record)),
                entry.run_id,
            ),
        )
        infra_id = cursor.lastrowid
        if infra_id is None:
            raise LedgerError(f"ledger {self.url}: the infra case got no id")
        detail = {
            "infra_id": infra_id,
            "runner_id": entry.runner_id,
            "reasons": list(entry.reasons),
            "labels": labels,
            "run_id": entry.run_id,
        }
        cursor.execute(
            _INSERT_EVENT,
            (
                stored(entry.queued_at),
                model.EventKind.INFRA_QUEUED.value,
                entry.code,
                entry.property_id,
                canonical(detail),
            ),
        )
        return int(infra_id)


def _is_locked(error: Exception) -> bool:
    return locking.is_locked(_reason(error))


def _reason(error: Exception) -> str:
    text = str(error).strip()
    return text.splitlines()[0] if text else repr(error)

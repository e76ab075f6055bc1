"""The freeze ledger's store: a thin SQLAlchemy Core layer over the tables of ``schema``.

SQLite by default, PostgreSQL for teams. Whether a record may be written is the pure
core's decision (``orchestrator.core.records``); every write method here is one
transaction, and a freeze write validates inside it, so a refusal event and "no freeze
written" are one atomic outcome. :meth:`Ledger.transaction` groups several writes: the
replay records its run row, its decision events, infra cases and freezes (or their
refusals) in one transaction, and an admission its event and its freeze.
"""

from __future__ import annotations

import os
from collections.abc import Collection, Iterator, Mapping, Sequence
from contextlib import contextmanager
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import Engine, func, insert, select, text
from sqlalchemy.exc import DBAPIError

from orchestrator import model
from orchestrator.adapters.ledger import migrate, rows
from orchestrator.adapters.ledger.claims import ThawClaims
from orchestrator.adapters.ledger.connection import (
    Transactions,
    display_url,
    open_engine,
    parse_url,
    sqlite_file,
)
from orchestrator.adapters.ledger.revisions import HEAD
from orchestrator.adapters.ledger.schema import (
    DECISION_PER_RUN,
    EVENTS,
    FREEZES,
    INFRA,
    RUNS,
)
from orchestrator.adapters.ledger.statements import (
    dialect_insert,
    ensure_run,
    freeze_select,
    insert_event,
    new_id,
)
from orchestrator.adapters.ledger.values import (
    DEFAULT_FLAKE_MAX_AGE,
    DEFAULT_TIMING_MAX_AGE,
    FreezeRow,
    InfraEntry,
    RunRecord,
    WriteOutcome,
    canonical,
    decision_ids,
)
from orchestrator.adapters.ledger_location import lock_wait_s as lock_wait_from
from orchestrator.errors import LedgerError


class Ledger(ThawClaims):
    """The ledger behind one URL. Use as a context manager; it disposes its engine."""

    def __init__(self, engine: Engine, url: str) -> None:
        self.engine = engine
        self.url = url
        self._tx = Transactions(engine, display_url(url))

    # -- opening and versioning --

    @classmethod
    def open(
        cls, url: str, *, target_revision: str = HEAD, lock_wait_s: float | None = None
    ) -> Ledger:
        """Connect, then create or upgrade the schema (``target_revision`` is for tests).

        A URL or SQLite path that cannot be used is a :class:`LedgerLocationError`
        (exit 2); a database that fails is a :class:`LedgerError` (exit 3). A write
        waits ``lock_wait_s`` for another writer (default: ``$ORCHESTRATOR_LEDGER_WAIT_S``
        or 60 s).
        """
        if lock_wait_s is None:
            lock_wait_s = lock_wait_from(os.environ)
        shown = display_url(url)
        parsed = parse_url(url)
        engine = open_engine(parsed, shown, lock_wait_s=lock_wait_s)
        try:
            migrate.ensure_schema(
                engine,
                shown=shown,
                database=sqlite_file(parsed),
                target=target_revision,
                lock_wait_s=lock_wait_s,
            )
        except DBAPIError as error:
            engine.dispose()
            reason = str(error.orig).strip().splitlines()[0] if error.orig else str(error)
            raise LedgerError(f"ledger {shown} cannot be opened: {reason}") from None
        except BaseException:
            engine.dispose()
            raise
        return cls(engine, url)

    def __enter__(self) -> Ledger:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()

    def close(self) -> None:
        self.engine.dispose()

    def schema_revision(self) -> str | None:
        """The Alembic revision the ledger is at."""
        with self._tx.read() as conn:
            return migrate.read_revision(conn).revision

    # -- transactions --

    @contextmanager
    def transaction(self) -> Iterator[Ledger]:
        """Group several writes into one atomic transaction (all or nothing)."""
        with self._tx.write():
            yield self

    # -- events --

    def append_event(self, event_row: model.Event) -> int:
        with self._tx.write() as conn:
            return insert_event(conn, event_row)

    def append_decision_once(self, event_row: model.Event, *, run_id: str) -> tuple[int, bool]:
        """Append a decision event of run ``run_id`` unless that run already recorded one
        for the same subject (a retried CI job): ``(event id, written now)``. The unique
        index decides, also between two writers at once."""
        values = {
            "at": event_row.at,
            "kind": event_row.kind.value,
            "code": event_row.code,
            "subject": event_row.subject,
            "detail": canonical(dict(event_row.detail)),
            "run_id": run_id,
        }
        with self._tx.write() as conn:
            inserted = conn.execute(
                dialect_insert(conn, EVENTS)
                .values(values)
                .on_conflict_do_nothing(
                    index_elements=[EVENTS.c.run_id, EVENTS.c.subject],
                    index_where=text(DECISION_PER_RUN),
                )
                .returning(EVENTS.c.id)
            ).scalar_one_or_none()
            if inserted is not None:
                return int(inserted), True
            existing = conn.execute(
                select(EVENTS.c.id).where(
                    EVENTS.c.kind == model.EventKind.DECISION.value,
                    EVENTS.c.run_id == run_id,
                    EVENTS.c.subject == event_row.subject,
                )
            ).scalar_one()
            return int(existing), False

    def append_decisions_once(
        self, event_rows: Sequence[model.Event], *, run_id: str
    ) -> list[tuple[int, bool]]:
        """:meth:`append_decision_once` for many decision events of run ``run_id`` in one
        statement (a whole suite's decisions): ``(event id, written now)`` for each, in
        order. The unique index decides as for one."""
        if not event_rows:
            return []
        values = [
            {
                "at": row.at,
                "kind": row.kind.value,
                "code": row.code,
                "subject": row.subject,
                "detail": canonical(dict(row.detail)),
                "run_id": run_id,
            }
            for row in event_rows
        ]
        with self._tx.write() as conn:
            statement = (
                dialect_insert(conn, EVENTS)
                .on_conflict_do_nothing(
                    index_elements=[EVENTS.c.run_id, EVENTS.c.subject],
                    index_where=text(DECISION_PER_RUN),
                )
                .returning(EVENTS.c.subject, EVENTS.c.id)
            )
            inserted = {str(row.subject): int(row.id) for row in conn.execute(statement, values)}
            subjects = [str(row.subject) for row in event_rows]
            missing = sorted(set(subjects) - inserted.keys())
            existing: dict[str, int] = {}
            for start in range(0, len(missing), 500):  # bound the statement's parameters
                existing.update(
                    (str(row.subject), int(row.id))
                    for row in conn.execute(
                        select(EVENTS.c.subject, EVENTS.c.id).where(
                            EVENTS.c.kind == model.EventKind.DECISION.value,
                            EVENTS.c.run_id == run_id,
                            EVENTS.c.subject.in_(missing[start : start + 500]),
                        )
                    )
                )
        return decision_ids(subjects, inserted, existing)

    def events(
        self,
        *,
        since: datetime | None = None,
        kinds: Collection[model.EventKind] | None = None,
        subject: str | None = None,
    ) -> list[model.Event]:
        query = select(EVENTS).order_by(EVENTS.c.id)
        if since is not None:
            query = query.where(EVENTS.c.at >= since)
        if kinds is not None:
            query = query.where(EVENTS.c.kind.in_([kind.value for kind in kinds]))
        if subject is not None:
            query = query.where(EVENTS.c.subject == subject)
        with self._tx.read() as conn:
            return [rows.event(row._mapping) for row in conn.execute(query)]

    def count_events(self) -> int:
        with self._tx.read() as conn:
            return int(conn.execute(select(func.count()).select_from(EVENTS)).scalar_one())

    # -- runs and the infra queue --

    def record_run(self, run: RunRecord) -> None:
        """Write a run's row (or complete the one a write referenced before it)."""
        values = {
            "id": run.id,
            "started_at": run.started_at,
            "finished_at": run.finished_at,
            "status": run.status,
            "command": run.command,
            "detail": canonical(dict(run.detail)),
        }
        with self._tx.write() as conn:
            upsert = dialect_insert(conn, RUNS).values(values)
            conn.execute(
                upsert.on_conflict_do_update(
                    index_elements=[RUNS.c.id],
                    set_={name: upsert.excluded[name] for name in values if name != "id"},
                )
            )

    def runs(self) -> list[RunRecord]:
        with self._tx.read() as conn:
            query = select(RUNS).order_by(RUNS.c.started_at, RUNS.c.id)
            return [rows.run_record(row._mapping) for row in conn.execute(query)]

    def enqueue_infra(self, entry: InfraEntry) -> int:
        """Queue a case the runner broke, and log it (one transaction)."""
        with self._tx.write() as conn:
            if entry.run_id is not None:
                ensure_run(conn, entry.run_id, entry.queued_at)
            result = conn.execute(
                insert(INFRA).values(
                    queued_at=entry.queued_at,
                    property_id=entry.property_id,
                    code=entry.code,
                    runner_id=entry.runner_id,
                    image_digest=entry.image_digest,
                    base_rev=entry.base_rev,
                    patch_rev=entry.patch_rev,
                    labels=canonical({k: list(v) for k, v in entry.labels.items()}),
                    reasons=canonical(list(entry.reasons)),
                    record=canonical(dict(entry.record)),
                    run_id=entry.run_id,
                )
            )
            infra_id = new_id(result)
            insert_event(
                conn,
                model.Event(
                    id=None,
                    at=entry.queued_at,
                    kind=model.EventKind.INFRA_QUEUED,
                    code=entry.code,
                    subject=entry.property_id,
                    detail={
                        "infra_id": infra_id,
                        "runner_id": entry.runner_id,
                        "reasons": list(entry.reasons),
                        "labels": {k: list(v) for k, v in entry.labels.items()},
                        "run_id": entry.run_id,
                    },
                ),
            )
            return infra_id

    def infra_entries(self) -> list[InfraEntry]:
        with self._tx.read() as conn:
            query = select(INFRA).order_by(INFRA.c.id)
            return [rows.infra_entry(row._mapping) for row in conn.execute(query)]

    # -- freezes: writes --

    def write_flake_freeze(
        self,
        record: model.FlakeFreeze,
        *,
        decision: model.Decision,
        now: datetime,
        fixture_bytes: bytes | None,
        origin_bytes: bytes | None,
        max_age: timedelta = DEFAULT_FLAKE_MAX_AGE,
        run_id: str | None = None,
    ) -> WriteOutcome:
        """Validate with the core, then write the row and its event, or only a refusal
        event (one transaction)."""
        from orchestrator.core import records

        with self._tx.write():
            codes = (
                *records.validate_flake_freeze(record, decision=decision, now=now, max_age=max_age),
                *records.payload_bytes_codes(record, fixture_bytes, origin_bytes),
            )
            if codes:
                return self._refuse(
                    model.FreezeKind.FLAKE,
                    record.property_id,
                    codes,
                    owner=record.owner,
                    now=now,
                    run_id=run_id,
                )
            assert record.property_id
            assert record.owner
            assert record.opened_at
            assert record.expires_at
            return self._insert_freeze(
                kind=model.FreezeKind.FLAKE,
                subject=record.property_id,
                owner=record.owner,
                opened_at=record.opened_at,
                expires_at=record.expires_at,
                document=records.flake_freeze_to_json(record),
                fixture_bytes=fixture_bytes,
                origin_bytes=origin_bytes,
                now=now,
                run_id=run_id,
                detail={"decision": decision.code},
            )

    def write_timing_freeze(
        self,
        record: model.TimingFreeze,
        *,
        admission_code: str,
        now: datetime,
        max_age: timedelta = DEFAULT_TIMING_MAX_AGE,
        run_id: str | None = None,
    ) -> WriteOutcome:
        """Validate with the core, then write the row and its event, or only a refusal
        event (one transaction)."""
        from orchestrator.core import records

        with self._tx.write():
            codes = records.validate_timing_freeze(
                record, admission_code=admission_code, now=now, max_age=max_age
            )
            if codes:
                return self._refuse(
                    model.FreezeKind.TIMING,
                    record.test_name,
                    codes,
                    owner=record.owner,
                    now=now,
                    run_id=run_id,
                )
            assert record.test_name
            assert record.owner
            assert record.opened_at
            assert record.expires_at
            return self._insert_freeze(
                kind=model.FreezeKind.TIMING,
                subject=record.test_name,
                owner=record.owner,
                opened_at=record.opened_at,
                expires_at=record.expires_at,
                document=records.timing_freeze_to_json(record),
                fixture_bytes=None,
                origin_bytes=None,
                now=now,
                run_id=run_id,
                detail={"admission": admission_code},
            )

    def _refuse(
        self,
        kind: model.FreezeKind,
        subject: str | None,
        codes: tuple[str, ...],
        *,
        owner: str | None,
        now: datetime,
        run_id: str | None,
    ) -> WriteOutcome:
        refusal = model.Event(
            id=None,
            at=now,
            kind=model.EventKind.FREEZE_REFUSED,
            code=codes[0],
            subject=subject,
            detail={"codes": list(codes), "kind": kind.value, "owner": owner, "run_id": run_id},
        )
        return WriteOutcome(freeze_id=None, codes=codes, event_id=self.append_event(refusal))

    def _insert_freeze(  # noqa: PLR0913 - one keyword per column of the row
        self,
        *,
        kind: model.FreezeKind,
        subject: str,
        owner: str,
        opened_at: datetime,
        expires_at: datetime,
        document: Mapping[str, Any],
        fixture_bytes: bytes | None,
        origin_bytes: bytes | None,
        now: datetime,
        run_id: str | None,
        detail: Mapping[str, Any],
    ) -> WriteOutcome:
        from orchestrator.core.digest import digest

        record_digest = digest(dict(document))
        with self._tx.write() as conn:
            # Idempotent: the same record again (also from a concurrent writer, whose
            # insert this one waits for) adds nothing; the existing row is the answer.
            freeze_id = conn.execute(
                dialect_insert(conn, FREEZES)
                .values(
                    kind=kind.value,
                    subject=subject,
                    owner=owner,
                    opened_at=opened_at,
                    expires_at=expires_at,
                    record=canonical(dict(document)),
                    record_digest=record_digest,
                    fixture_bytes=fixture_bytes,
                    origin_bytes=origin_bytes,
                    run_id=run_id,
                )
                .on_conflict_do_nothing(index_elements=[FREEZES.c.record_digest])
                .returning(FREEZES.c.id)
            ).scalar_one_or_none()
            if freeze_id is None:
                existing = conn.execute(
                    select(FREEZES.c.id).where(FREEZES.c.record_digest == record_digest)
                ).scalar_one()
                return WriteOutcome(freeze_id=int(existing), codes=(), event_id=None)
            if run_id is not None:
                ensure_run(conn, run_id, now)
            event_id = insert_event(
                conn,
                model.Event(
                    id=None,
                    at=now,
                    kind=model.EventKind.FREEZE_WRITTEN,
                    code=kind.value,
                    subject=subject,
                    detail={
                        **detail,
                        "freeze_id": freeze_id,
                        "owner": owner,
                        "expires_at": expires_at.isoformat(),
                        "record_digest": record_digest,
                        "run_id": run_id,
                    },
                ),
            )
            return WriteOutcome(freeze_id=int(freeze_id), codes=(), event_id=event_id)

    # -- freezes: reads --

    def live_freezes(
        self,
        *,
        expired_at: datetime | None = None,
        kind: model.FreezeKind | None = None,
        payloads: bool = False,
    ) -> list[FreezeRow]:
        """Live rows in id order; with ``expired_at``, those expired then, by expiry.

        ``payloads`` also loads the fixture and origin bytes (``export`` needs them; a
        listing does not).
        """
        query = freeze_select(payloads=payloads)
        if expired_at is None:
            query = query.order_by(FREEZES.c.id)
        else:  # the expiry index serves both the range and the order
            query = query.where(FREEZES.c.expires_at <= expired_at).order_by(
                FREEZES.c.expires_at, FREEZES.c.id
            )
        if kind is not None:
            query = query.where(FREEZES.c.kind == kind.value)
        with self._tx.read() as conn:
            return [rows.freeze_row(row._mapping) for row in conn.execute(query).all()]

    def freeze(self, freeze_id: int) -> FreezeRow | None:
        with self._tx.read() as conn:
            row = conn.execute(
                freeze_select(payloads=True).where(FREEZES.c.id == freeze_id)
            ).one_or_none()
            return None if row is None else rows.freeze_row(row._mapping)

    def count_freezes(self) -> int:
        with self._tx.read() as conn:
            return int(conn.execute(select(func.count()).select_from(FREEZES)).scalar_one())

    def due_freezes(self, now: datetime, within: timedelta = timedelta(0)) -> list[FreezeRow]:
        """Rows whose expiry falls at or before ``now + within`` (read only, no claim)."""
        return self.live_freezes(expired_at=now + within)

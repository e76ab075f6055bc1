"""Thaw jobs' side of the store: claiming due freezes, then thawing, marking overdue or
releasing each, every step one transaction.

A claim row in ``freeze_claims`` says which job holds a due freeze; a claim older than
:data:`CLAIM_TTL` belongs to a job that died, and another job may take the row.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Collection, Mapping, Sequence
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import and_, delete, insert, or_, select, update
from sqlalchemy.engine import Connection

from orchestrator import model
from orchestrator.adapters.ledger.connection import Transactions
from orchestrator.adapters.ledger.rows import freeze_row
from orchestrator.adapters.ledger.schema import CLAIMS, EVENTS, FREEZES
from orchestrator.adapters.ledger.statements import (
    dialect_insert,
    freeze_select,
    insert_event,
    new_id,
    overdue_values,
)
from orchestrator.adapters.ledger.values import FreezeRow
from orchestrator.errors import LedgerError

# A claim older than this belongs to a thaw job that died; another job may take the row.
CLAIM_TTL = timedelta(hours=6)


class ThawClaims:
    """The claim and thaw operations of :class:`~orchestrator.adapters.ledger.store.Ledger`."""

    _tx: Transactions

    def claim_due(
        self,
        now: datetime,
        *,
        within: timedelta = timedelta(0),
        claimant: str | None = None,
        limit: int | None = None,
    ) -> tuple[str, list[FreezeRow]]:
        """Atomically claim the due rows no other job holds or has probed since ``now``.

        Returns the claim token and the claimed rows. A row stays claimed until
        :meth:`thaw` deletes it or :meth:`mark_overdue` releases it; a row probed at or
        after ``now`` by a concurrent job is not probed again by this one.
        """
        token = claimant or uuid.uuid4().hex
        stale = now - CLAIM_TTL
        held_free = or_(  # an existing claim row that no live job holds
            and_(
                CLAIMS.c.claimed_by.is_(None),
                or_(CLAIMS.c.probed_at.is_(None), CLAIMS.c.probed_at < now),
            ),
            and_(CLAIMS.c.claimed_by.is_not(None), CLAIMS.c.claimed_at < stale),
        )
        pick = (
            select(FREEZES.c.id)
            .select_from(FREEZES.outerjoin(CLAIMS, CLAIMS.c.freeze_id == FREEZES.c.id))
            .where(
                FREEZES.c.expires_at <= now + within,
                or_(CLAIMS.c.freeze_id.is_(None), held_free),
            )
            .order_by(FREEZES.c.expires_at, FREEZES.c.id)
        )
        if limit is not None:
            pick = pick.limit(limit)
        with self._tx.write() as conn:
            postgres = conn.dialect.name == "postgresql"
            if postgres:  # SQLite's BEGIN IMMEDIATE already serialises claimers
                pick = pick.with_for_update(of=FREEZES, skip_locked=True)
            ids = list(conn.execute(pick).scalars())
            if ids:
                upsert = dialect_insert(conn, CLAIMS)
                # The WHERE re-checks a row another job claimed meanwhile: it stays theirs.
                upsert = upsert.on_conflict_do_update(
                    index_elements=[CLAIMS.c.freeze_id],
                    set_={
                        "claimed_by": upsert.excluded.claimed_by,
                        "claimed_at": upsert.excluded.claimed_at,
                        "probed_at": upsert.excluded.probed_at,
                    },
                    where=held_free,
                )
                conn.execute(
                    upsert,
                    [
                        {"freeze_id": i, "claimed_by": token, "claimed_at": now, "probed_at": now}
                        for i in ids
                    ],
                )
            rows = conn.execute(
                freeze_select(payloads=True)
                .join(CLAIMS, CLAIMS.c.freeze_id == FREEZES.c.id)
                .where(CLAIMS.c.claimed_by == token)
                .order_by(FREEZES.c.expires_at, FREEZES.c.id)
            )
            return token, [freeze_row(row._mapping) for row in rows]

    def claimants(self) -> list[str]:
        """The tokens that hold claims now (one per thaw job holding any)."""
        with self._tx.read() as conn:
            query = select(CLAIMS.c.claimed_by).where(CLAIMS.c.claimed_by.is_not(None))
            return sorted(set(conn.execute(query.distinct()).scalars()))

    def release_claims(self, tokens: Collection[str]) -> int:
        """Give back every row these tokens hold (their jobs are gone); how many rows."""
        if not tokens:
            return 0
        with self._tx.write() as conn:
            result = conn.execute(
                update(CLAIMS)
                .where(CLAIMS.c.claimed_by.in_(list(tokens)))
                .values(claimed_by=None, claimed_at=None)
            )
            return int(result.rowcount or 0)

    def thaw(self, freeze_id: int, *, token: str, now: datetime, detail: Mapping[str, Any]) -> int:
        """Delete a claimed live row and append the THAWED event (one transaction)."""
        with self._tx.write() as conn:
            row = self._claimed(conn, freeze_id, token)
            conn.execute(delete(CLAIMS).where(CLAIMS.c.freeze_id == freeze_id))
            conn.execute(delete(FREEZES).where(FREEZES.c.id == freeze_id))
            return insert_event(
                conn,
                model.Event(
                    id=None,
                    at=now,
                    kind=model.EventKind.THAWED,
                    code="thawed",
                    subject=row.subject,
                    detail={
                        **detail,
                        "freeze_id": freeze_id,
                        "kind": row.kind,
                        "owner": row.owner,
                        "record": json.loads(row.record),
                    },
                ),
            )

    def mark_overdue(
        self, freeze_id: int, *, token: str, now: datetime, code: str, detail: Mapping[str, Any]
    ) -> int:
        """Keep the row, release the claim, append the OVERDUE event (one transaction)."""
        with self._tx.write() as conn:
            row = self._claimed(conn, freeze_id, token)
            conn.execute(  # probed_at stays: this job does not take the row again
                update(CLAIMS)
                .where(CLAIMS.c.freeze_id == freeze_id)
                .values(claimed_by=None, claimed_at=None)
            )
            result = conn.execute(
                insert(EVENTS).values(
                    overdue_values(
                        freeze_id=row.id,
                        subject=row.subject,
                        kind=row.kind,
                        owner=row.owner,
                        expires_at=row.expires_at,
                        now=now,
                        code=code,
                        detail=detail,
                    )
                )
            )
            return new_id(result)

    def release(self, freeze_id: int, *, token: str) -> None:
        """Give a claimed row back untouched (the job could not probe it)."""
        with self._tx.write() as conn:
            conn.execute(
                delete(CLAIMS).where(CLAIMS.c.freeze_id == freeze_id, CLAIMS.c.claimed_by == token)
            )

    def record_overdue(self, rows: Sequence[FreezeRow], *, now: datetime, code: str) -> int:
        """Append one OVERDUE event per row found live past expiry (``check``); returns count."""
        if not rows:
            return 0
        with self._tx.write() as conn:
            conn.execute(
                insert(EVENTS),
                [
                    overdue_values(
                        freeze_id=row.id,
                        subject=row.subject,
                        kind=row.kind.value,
                        owner=row.owner,
                        expires_at=row.expires_at,
                        now=now,
                        code=code,
                        detail={},
                    )
                    for row in rows
                ],
            )
        return len(rows)

    @staticmethod
    def _claimed(conn: Connection, freeze_id: int, token: str) -> Any:
        # The freeze is locked before its claim, the order claim_due takes them in: a
        # concurrent pick that locked this row after our claim committed (its snapshot
        # older than the claim) then waits for us, or we for it, never each for the other.
        row = conn.execute(
            select(FREEZES).where(FREEZES.c.id == freeze_id).with_for_update()
        ).one_or_none()
        holder = conn.execute(
            select(CLAIMS.c.claimed_by).where(CLAIMS.c.freeze_id == freeze_id)
        ).scalar_one_or_none()
        if row is None or holder != token:
            raise LedgerError(f"freeze {freeze_id} is not claimed by this job")
        return row

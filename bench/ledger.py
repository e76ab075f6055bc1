"""Ledger read paths at scale: 100,000 live freezes and 1,000,000 events in SQLite.

Measures, each as the median of 5 runs on a warm file:
- ``freeze list --expired``: open the ledger, select expired live rows, render the table;
- ``check``: the same selection plus one OVERDUE event appended per expired row;
- picking the due rows for a thaw: the atomic claim (then released, untimed).
Also prints the end-to-end ``orchestrator freeze list --expired`` wall time (Python
start-up included) for reference.

Usage: .venv/bin/python bench/ledger.py [--freezes N] [--events N] [--expired-share F]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path

from sqlalchemy import insert

from orchestrator import model
from orchestrator.adapters.ledger import EVENTS, FREEZES, Ledger
from orchestrator.core.digest import canonical_json, digest
from orchestrator.services.ledger_jobs import check_expired

NOW = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)
BATCH = 20_000


def populate(ledger: Ledger, freezes: int, events: int, expired_share: float) -> int:
    expired_every = max(1, round(1 / expired_share))
    minimal = canonical_json({"user_id": 0, "role": ""})
    origin = canonical_json({"user_id": 0, "role": "", "name": "wide", "tags": [1, 2, 3]})
    expired = 0
    with ledger.engine.begin() as conn:
        rows = []
        for n in range(freezes):
            is_expired = n % expired_every == 0
            expired += is_expired
            opened = NOW - timedelta(days=2)
            expires = (
                NOW - timedelta(hours=1 + n % 24)
                if is_expired
                else NOW + timedelta(hours=1 + n % 160)
            )
            record = {
                "schema": model.FREEZE_SCHEMA,
                "kind": "flake",
                "property_id": f"tests/test_p{n % 500}.py::test_{n}",
                "assertion_id": f"tests/test_p{n % 500}.py::test_{n}@tests/x.py:9:AssertionError",
                "seed": n,
                "fixture_digest": digest({"user_id": 0, "role": ""}),
                "origin_digest": digest({"n": n}),
                "shrink_path": [{"step": "drop_key", "key": "name"}],
                "canonicalization": "json-sort-keys",
                "replays": {"base": ["assert_pass", "assert_fail"], "patch": ["assert_fail"]},
                "base_rev": "a" * 40,
                "patch_rev": "b" * 40,
                "image_digest": "sha256:" + "c" * 64,
                "runner_id": "local",
                "command": "pytest -q tests/",
                "owner": f"owner-{n % 37}",
                "opened_at": opened.isoformat(),
                "expires_at": expires.isoformat(),
            }
            rows.append(
                {
                    "kind": "flake",
                    "subject": record["property_id"],
                    "owner": record["owner"],
                    "opened_at": opened,
                    "expires_at": expires,
                    "record": json.dumps(record, sort_keys=True, separators=(",", ":")),
                    "record_digest": f"sha256:{n:064x}",
                    "fixture_bytes": minimal,
                    "origin_bytes": origin,
                    "run_id": None,
                }
            )
            if len(rows) == BATCH:
                conn.execute(insert(FREEZES), rows)
                rows = []
        if rows:
            conn.execute(insert(FREEZES), rows)
        kinds = [k.value for k in model.EventKind]
        batch = []
        for n in range(events):
            batch.append(
                {
                    "at": NOW - timedelta(seconds=events - n),
                    "kind": kinds[n % len(kinds)],
                    "code": "flake_queue_eligible",
                    "subject": f"tests/test_p{n % 500}.py::test_{n % 100_000}",
                    "detail": '{"lane":"flake_queue_eligible","base_labels":["assert_pass"]}',
                }
            )
            if len(batch) == BATCH:
                conn.execute(insert(EVENTS), batch)
                batch = []
        if batch:
            conn.execute(insert(EVENTS), batch)
    return expired


def median_ms(action: Callable[[], object], runs: int = 5) -> float:
    timings = []
    for _ in range(runs):
        started = time.perf_counter()
        action()
        timings.append((time.perf_counter() - started) * 1000)
    return statistics.median(timings)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--freezes", type=int, default=100_000)
    parser.add_argument("--events", type=int, default=1_000_000)
    parser.add_argument("--expired-share", type=float, default=0.01)
    parser.add_argument("--db", type=Path, default=None, help="keep the ledger at this path")
    args = parser.parse_args()

    folder = Path(tempfile.mkdtemp(prefix="ledger-bench-"))
    path = args.db or folder / "ledger.db"
    url = f"sqlite:///{path}"
    started = time.perf_counter()
    if args.db is not None and path.exists():  # reuse a kept ledger as is
        with Ledger.open(url) as ledger:
            expired = len(ledger.live_freezes(expired_at=NOW))
    else:
        with Ledger.open(url) as ledger:
            expired = populate(ledger, args.freezes, args.events, args.expired_share)
    print(
        f"populated {args.freezes:,} freezes ({expired:,} expired) and {args.events:,} events "
        f"in {time.perf_counter() - started:.1f} s ({path.stat().st_size / 1e6:.0f} MB)"
    )

    def list_expired() -> None:
        with Ledger.open(url) as ledger:
            rows = ledger.live_freezes(expired_at=NOW)
            lines = [f"{r.id} {r.kind.value} {r.expires_at.isoformat()} {r.subject}" for r in rows]
            assert len(lines) == expired

    def check() -> None:
        with Ledger.open(url) as ledger:
            assert len(check_expired(ledger, NOW)) == expired

    def pick_due_timed_only() -> float:
        timings = []
        for _ in range(5):
            with Ledger.open(url) as ledger:
                t0 = time.perf_counter()
                token, rows = ledger.claim_due(NOW)
                timings.append((time.perf_counter() - t0) * 1000)
                assert len(rows) == expired
                with ledger.engine.begin() as conn:
                    conn.execute(
                        FREEZES.update()
                        .where(FREEZES.c.claimed_by == token)
                        .values(claimed_by=None, claimed_at=None, probed_at=None)
                    )
        return statistics.median(timings)

    results = [
        ("freeze list --expired (open + select + render)", median_ms(list_expired)),
        (f"check (select + {expired:,} OVERDUE events)", median_ms(check)),
        ("pick due rows for thaw (atomic claim)", pick_due_timed_only()),
    ]
    env = {**os.environ, "ORCHESTRATOR_LEDGER": url}
    cli = [sys.executable, "-m", "orchestrator", "freeze", "list", "--expired"]

    def end_to_end() -> None:
        subprocess.run(cli, env=env, check=True, capture_output=True)

    results.append(
        ("end to end: `orchestrator freeze list --expired` process", median_ms(end_to_end))
    )
    print()
    print(
        f"| operation ({args.freezes:,} live freezes, {args.events:,} events, SQLite) | median of 5 |"
    )
    print("|---|---|")
    for name, ms in results:
        print(f"| {name} | {ms:.1f} ms |")


if __name__ == "__main__":
    main()

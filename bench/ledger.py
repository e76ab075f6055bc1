"""Ledger read paths at scale: 100,000 live freezes and 1,000,000 events in SQLite.

Measures, each as the median of ``--runs`` (5) runs on a warm file:
- ``freeze list --expired``: open the ledger, select expired live rows, render the table;
- ``check``: the same selection plus one OVERDUE event appended per expired row;
- picking the due rows for a thaw: the atomic claim (then released, untimed).
Also prints the end-to-end ``orchestrator freeze list --expired`` wall time (Python
start-up included) for reference.

Usage: .venv/bin/python bench/ledger.py [--freezes N] [--events N] [--expired-share F]
       [--db PATH] [--runs N]

The tables are reflected from the database, not imported from the tool, so the same
script measures any version of it (``PYTHONPATH=<an older checkout>``).
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

from sqlalchemy import Engine, MetaData, Table, insert

from orchestrator import model
from orchestrator.adapters.ledger import Ledger
from orchestrator.core.digest import canonical_json, digest
from orchestrator.services.ledger_jobs import check_expired

NOW = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)
BATCH = 20_000


def table(engine: Engine, name: str) -> Table:
    """A ledger table as the database has it (the bench runs against any version of the
    tool, so that before and after a change are measured by the same script)."""
    return Table(name, MetaData(), autoload_with=engine)


def populate(ledger: Ledger, freezes: int, events: int, expired_share: float) -> int:
    expired_every = max(1, round(1 / expired_share))
    minimal = canonical_json({"user_id": 0, "role": ""})
    origin = canonical_json({"user_id": 0, "role": "", "name": "wide", "tags": [1, 2, 3]})
    expired = 0
    freezes_table, events_table = table(ledger.engine, "freezes"), table(ledger.engine, "events")
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
                    "opened_at": opened.replace(tzinfo=None),  # naive UTC, as the ledger stores
                    "expires_at": expires.replace(tzinfo=None),
                    "record": json.dumps(record, sort_keys=True, separators=(",", ":")),
                    "record_digest": f"sha256:{n:064x}",
                    "fixture_bytes": minimal,
                    "origin_bytes": origin,
                    "run_id": None,
                }
            )
            if len(rows) == BATCH:
                conn.execute(insert(freezes_table), rows)
                rows = []
        if rows:
            conn.execute(insert(freezes_table), rows)
        kinds = [k.value for k in model.EventKind]
        batch = []
        for n in range(events):
            batch.append(
                {
                    "at": (NOW - timedelta(seconds=events - n)).replace(tzinfo=None),
                    "kind": kinds[n % len(kinds)],
                    "code": "flake_queue_eligible",
                    "subject": f"tests/test_p{n % 500}.py::test_{n % 100_000}",
                    "detail": '{"lane":"flake_queue_eligible","base_labels":["assert_pass"]}',
                }
            )
            if len(batch) == BATCH:
                conn.execute(insert(events_table), batch)
                batch = []
        if batch:
            conn.execute(insert(events_table), batch)
    return expired


def _cpu_s(children: bool) -> float:
    times = os.times()
    if children:
        return times.children_user + times.children_system
    return times.user + times.system


def summary(wall: list[float], cpu: list[float]) -> tuple[float, float, float]:
    """Median wall, fastest wall, median CPU (ms). On a shared machine the fastest run is
    the figure other load disturbs least."""
    return statistics.median(wall), min(wall), statistics.median(cpu)


def median_ms(
    action: Callable[[], object], runs: int, *, children: bool = False
) -> tuple[float, float, float]:
    """Wall and CPU times (this process, or its children) of ``runs`` runs, in ms."""
    wall, cpu = [], []
    for _ in range(runs):
        started, started_cpu = time.perf_counter(), _cpu_s(children)
        action()
        wall.append((time.perf_counter() - started) * 1000)
        cpu.append((_cpu_s(children) - started_cpu) * 1000)
    return summary(wall, cpu)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--freezes", type=int, default=100_000)
    parser.add_argument("--events", type=int, default=1_000_000)
    parser.add_argument("--expired-share", type=float, default=0.01)
    parser.add_argument("--db", type=Path, default=None, help="keep the ledger at this path")
    parser.add_argument("--runs", type=int, default=5, help="runs per operation (median)")
    args = parser.parse_args()

    folder = Path(tempfile.mkdtemp(prefix="ledger-bench-"))
    path = args.db or folder / "ledger.db"
    url = f"sqlite:///{path}"
    started = time.perf_counter()
    if args.db is not None and path.exists():  # reuse a kept ledger as is
        with Ledger.open(url) as ledger:
            with ledger.engine.begin() as conn:  # claims left by an interrupted run
                conn.execute(table(ledger.engine, "freeze_claims").delete())
            expired = len(ledger.live_freezes(expired_at=NOW))
            freezes, events = ledger.count_freezes(), ledger.count_events()
        verb = "reused"
    else:
        with Ledger.open(url) as ledger:
            expired = populate(ledger, args.freezes, args.events, args.expired_share)
        freezes, events, verb = args.freezes, args.events, "populated"
    print(
        f"{verb} {freezes:,} freezes ({expired:,} expired) and {events:,} events "
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

    def pick_due_timed_only() -> tuple[float, float, float]:
        wall, cpu = [], []
        for _ in range(args.runs):
            with Ledger.open(url) as ledger:
                t0, c0 = time.perf_counter(), time.process_time()
                token, rows = ledger.claim_due(NOW)
                wall.append((time.perf_counter() - t0) * 1000)
                cpu.append((time.process_time() - c0) * 1000)
                assert len(rows) == expired
                claims = table(ledger.engine, "freeze_claims")
                with ledger.engine.begin() as conn:  # give the rows back, untimed
                    conn.execute(claims.delete().where(claims.c.claimed_by == token))
        return summary(wall, cpu)

    results = [
        ("freeze list --expired (open + select + render)", median_ms(list_expired, args.runs)),
        (f"check (select + {expired:,} OVERDUE events)", median_ms(check, args.runs)),
        ("pick due rows for thaw (atomic claim)", pick_due_timed_only()),
    ]
    env = {**os.environ, "ORCHESTRATOR_LEDGER": url}
    cli = [sys.executable, "-m", "orchestrator", "freeze", "list", "--expired"]

    def end_to_end() -> None:
        subprocess.run(cli, env=env, check=True, capture_output=True)

    results.append(
        (
            "end to end: `orchestrator freeze list --expired` process",
            median_ms(end_to_end, args.runs, children=True),
        )
    )
    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    print(f"\nload average during the run: {load} on {os.cpu_count()} CPUs")
    print(
        f"| operation ({freezes:,} live freezes, {events:,} events, SQLite) "
        "| wall (median) | wall (fastest) | CPU (median) |"
    )
    print("|---|---:|---:|---:|")
    for name, (wall, fastest, cpu) in results:
        print(f"| {name} | {wall:.1f} ms | {fastest:.1f} ms | {cpu:.1f} ms |")


if __name__ == "__main__":
    main()

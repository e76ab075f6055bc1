"""A separate process that writes to or claims from a ledger (driven by test_concurrency).

Usage: python ledger_worker.py MODE URL [ARGS...]. Each mode opens the ledger, prints
``ready``, and waits for a line on stdin before it starts, so the parent can release all
workers at once (mode ``open`` waits before it opens).
"""

from __future__ import annotations

import json
import sys
from datetime import datetime, timedelta

from ledger_factories import FIXTURE_BYTES, NOW, ORIGIN_BYTES, eligible, flake_record

from orchestrator import model
from orchestrator.adapters.ledger import Ledger


def say(line: str) -> None:
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


def write_flake(ledger: Ledger, n: int):
    _, decision = eligible()
    return ledger.write_flake_freeze(
        flake_record(n),
        decision=decision,
        now=NOW,
        fixture_bytes=FIXTURE_BYTES,
        origin_bytes=ORIGIN_BYTES,
    )


def main(mode: str, url: str, *args: str) -> None:
    if mode == "open":  # open the ledger (maybe the first to) only when released
        say("ready")
        sys.stdin.readline()
        with Ledger.open(url) as ledger:
            event = model.Event(id=None, at=NOW, kind=model.EventKind.DECISION, code=args[0])
            say(json.dumps(ledger.append_event(event)))
        return
    with Ledger.open(url) as ledger:
        say("ready")
        sys.stdin.readline()
        if mode == "write":  # write COUNT distinct freezes numbered from FIRST
            first, count = int(args[0]), int(args[1])
            ids = [write_flake(ledger, first + i).freeze_id for i in range(count)]
            say(json.dumps(ids))
        elif mode == "hold":  # stay inside an open write transaction until killed
            with ledger.transaction():
                write_flake(ledger, int(args[0]))
                say("inside")
                sys.stdin.readline()
                raise SystemExit("the parent should have killed this process")
        elif mode == "churn":  # write freezes one transaction at a time until killed
            n = int(args[0])
            while True:
                write_flake(ledger, n)
                n += 1
                say(str(n))
        elif mode == "claim":  # claim due rows in small batches; thaw odd, overdue even
            now = datetime.fromisoformat(args[0])
            processed: list[int] = []
            while True:
                token, rows = ledger.claim_due(now, limit=3)
                if not rows:
                    break
                for row in rows:
                    if row.id % 2:
                        ledger.thaw(row.id, token=token, now=now, detail={})
                    else:
                        ledger.mark_overdue(row.id, token=token, now=now, code="x", detail={})
                    processed.append(row.id)
            say(json.dumps(processed))
        else:
            raise SystemExit(f"unknown mode {mode}")


if __name__ == "__main__":
    assert NOW + timedelta(0) == NOW
    main(*sys.argv[1:])

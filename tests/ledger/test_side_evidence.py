"""The ledger's side_evidence table (r0006) on SQLite and PostgreSQL: an entry stored once
per key and read back whole, the table bounded, a ledger without the table taking none."""

from __future__ import annotations

import os
from datetime import UTC, datetime, timedelta

from orchestrator.adapters.evidence_cache import decode_entry, encode_entry
from orchestrator.adapters.ledger import Ledger
from orchestrator.adapters.ledger.side_evidence import LedgerStore
from orchestrator.core.side_evidence import SHARED, SideEvidence, StoredReplay

IMAGE = "sha256:" + "1" * 64
NOW = datetime(2020, 1, 1, 12, 0, tzinfo=UTC)  # before any "now" a read marks


def entry(digit: str = "a", data: bytes = b'{"replay": 1}') -> SideEvidence:
    return SideEvidence(
        key="sha256:" + digit * 64,
        scope=SHARED,
        side="base",
        rev="9" * 40,
        run_id=f"run-{digit}",
        stored_at=NOW.isoformat(),
        replays=(StoredReplay(replay=1, data=data, image_id=IMAGE, exit_code=0),),
    )


def opened(url: str) -> None:
    Ledger.open(url).close()  # created or upgraded to the head revision


def test_an_entry_is_stored_once_per_key_and_read_back(ledger_url):
    opened(ledger_url)
    store = LedgerStore(url=ledger_url)
    assert store.load(entry().key) is None
    assert store.save(entry(), now=NOW) is True
    assert store.save(entry(), now=NOW) is False
    data = store.load(entry().key)
    assert data is not None
    assert decode_entry(data, entry().key) == (entry(), None)
    assert store.load(entry("b").key) is None


def test_the_table_is_bounded_least_recently_used_first(ledger_url):
    opened(ledger_url)
    size = len(encode_entry(entry("a", os.urandom(3000))))
    store = LedgerStore(url=ledger_url, max_bytes=size * 2 + 200)
    store.save(entry("a", os.urandom(3000)), now=NOW)
    store.save(entry("b", os.urandom(3000)), now=NOW + timedelta(seconds=1))
    assert store.load(entry("a").key) is not None  # used now: "b" is the oldest
    store.save(entry("c", os.urandom(3000)), now=NOW + timedelta(seconds=2))
    assert store.load(entry("b").key) is None
    assert store.load(entry("a").key) is not None
    assert store.load(entry("c").key) is not None


def test_a_ledger_not_yet_created_takes_and_gives_nothing(tmp_path):
    url = f"sqlite:///{tmp_path / 'ledger.db'}"
    store = LedgerStore(url=url)
    assert store.load(entry().key) is None
    assert store.save(entry(), now=NOW) is False
    assert not (tmp_path / "ledger.db").exists()

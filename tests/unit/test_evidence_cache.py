"""The evidence cache folder (orchestrator/adapters/evidence_cache.py): written atomically,
read back only as a whole entry for its key, bounded; a tampered, truncated or foreign
file is ignored."""

from __future__ import annotations

import os
import zlib

from orchestrator.adapters.evidence_cache import FolderStore, decode_entry, encode_entry
from orchestrator.core.side_evidence import SHARED, SideEvidence, StoredReplay

IMAGE = "sha256:" + "1" * 64


def entry(key_digit: str = "a", data: bytes = b'{"replay": 1}') -> SideEvidence:
    return SideEvidence(
        key="sha256:" + key_digit * 64,
        scope=SHARED,
        side="base",
        rev="9" * 40,
        run_id="run-1",
        stored_at="2026-12-07T00:00:00+00:00",
        replays=(StoredReplay(replay=1, data=data, image_id=IMAGE, exit_code=0),),
    )


def test_an_entry_is_stored_once_and_read_back(tmp_path):
    store = FolderStore(root=tmp_path / "cache")
    assert store.load(entry().key) is None
    assert store.save(entry()) is True
    assert store.save(entry()) is False  # one key, one entry: the first is kept
    data = store.load(entry().key)
    assert data is not None
    assert decode_entry(data, entry().key) == (entry(), None)
    # Nothing half-written is left beside it.
    assert [p.name for p in (tmp_path / "cache").rglob("*") if p.is_file()] == [
        "a" * 64 + ".json.z"
    ]


def _path(tmp_path, key_digit="a"):
    return tmp_path / "cache" / (key_digit * 2) / (key_digit * 64 + ".json.z")


def test_a_truncated_or_tampered_entry_is_ignored(tmp_path):
    store = FolderStore(root=tmp_path / "cache")
    store.save(entry())
    path = _path(tmp_path)
    whole = path.read_bytes()
    path.write_bytes(whole[: len(whole) // 2])
    assert decode_entry(store.load(entry().key) or b"", entry().key)[0] is None
    # Another entry's bytes under this key, its digest recomputed or not: refused.
    other = encode_entry(entry(data=b'{"replay": 2}'))
    path.write_bytes(other)
    assert (
        decode_entry(store.load(entry().key) or b"", entry().key)[0] is not None
    )  # same key: its own
    foreign = encode_entry(entry("b"))
    path.write_bytes(foreign)
    found, problem = decode_entry(store.load(entry().key) or b"", entry().key)
    assert found is None
    assert problem == "stored under another key"
    tampered = zlib.compress(zlib.decompress(whole).replace(b'"run-1"', b'"run-2"'))
    path.write_bytes(tampered)
    found, problem = decode_entry(store.load(entry().key) or b"", entry().key)
    assert found is None
    assert "digest" in (problem or "")
    path.write_bytes(b"not zlib at all")
    assert decode_entry(store.load(entry().key) or b"", entry().key)[0] is None


def test_a_link_where_an_entry_should_be_is_not_followed(tmp_path):
    store = FolderStore(root=tmp_path / "cache")
    target = tmp_path / "elsewhere"
    target.write_bytes(encode_entry(entry()))
    path = _path(tmp_path)
    path.parent.mkdir(parents=True)
    path.symlink_to(target)
    assert store.load(entry().key) is None
    os.mkfifo(_path(tmp_path, "c").parent.mkdir(parents=True) or _path(tmp_path, "c"))
    assert store.load(entry("c").key) is None  # a FIFO: not read, never a hang


def test_the_folder_is_bounded_least_recently_used_first(tmp_path):
    one = encode_entry(entry("a", os.urandom(2000)))
    store = FolderStore(root=tmp_path / "cache", max_bytes=len(one) * 2 + 100)
    for digit, stamp in (("a", 1_000), ("b", 2_000)):
        store.save(entry(digit, os.urandom(2000)))
        os.utime(_path(tmp_path, digit), (stamp, stamp))
    assert store.load(entry("a").key) is not None  # used now: "b" is the oldest
    store.save(entry("c", os.urandom(2000)))
    assert not _path(tmp_path, "b").exists()
    assert _path(tmp_path, "a").exists()
    assert _path(tmp_path, "c").exists()


def test_keys_that_are_not_keys_name_no_file(tmp_path):
    store = FolderStore(root=tmp_path / "cache")
    assert store.load("sha256:../../etc/passwd") is None
    assert store.load("a" * 64) is None

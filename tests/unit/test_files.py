"""The tool's own file writes (orchestrator/files.py): many documents at once."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from tiers import examples

from orchestrator import files
from orchestrator.probe import atomic


@contextmanager
def without_syncfs(active: bool = True) -> Iterator[list[str]]:
    """``syncfs`` missing (the batch then fsyncs each file); yields the files fsynced."""
    fsynced: list[str] = []
    real_syncfs, real_fsync = atomic._syncfs, atomic._fsync_file

    def fsync(path: str) -> None:
        fsynced.append(path)
        real_fsync(path)

    if active:
        atomic._syncfs, atomic._fsync_file = (lambda folder: False), fsync
    try:
        yield fsynced
    finally:
        atomic._syncfs, atomic._fsync_file = real_syncfs, real_fsync


documents = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner),
    max_leaves=8,
)


@settings(max_examples=examples(25), deadline=None)
@given(st.lists(documents, min_size=1, max_size=40), st.booleans())
def test_many_documents_are_written_as_one_by_one(tmp_path_factory, docs, syncfs) -> None:
    root = tmp_path_factory.mktemp("many")
    one, many = root / "one", root / "many"
    for index, document in enumerate(docs):
        files.write_json_atomic(one / f"sub{index % 3}" / f"doc-{index}.json", document)
    with without_syncfs(not syncfs):
        files.write_json_many(
            (many / f"sub{index % 3}" / f"doc-{index}.json", doc) for index, doc in enumerate(docs)
        )
    written = sorted(path.relative_to(many) for path in many.rglob("*") if path.is_file())
    assert written == sorted(path.relative_to(one) for path in one.rglob("*") if path.is_file())
    for name in written:
        assert (many / name).read_bytes() == (one / name).read_bytes()
        assert (many / name).stat().st_mode & 0o777 == (one / name).stat().st_mode & 0o777
    assert not [path for path in many.rglob(".*") if path.name.endswith(".tmp")]


def test_nothing_to_write_writes_nothing(tmp_path: Path) -> None:
    files.write_json_many([])
    assert os.listdir(tmp_path) == []


def test_syncfs_makes_the_batch_durable_where_it_exists(tmp_path: Path) -> None:
    assert atomic._syncfs(str(tmp_path))  # Linux: the one call for the whole batch
    with without_syncfs() as fsynced:
        files.write_json_many([(tmp_path / "a.json", 1), (tmp_path / "b.json", 2)])
    # Without it, every file's data is fsynced under its temporary name, before the rename.
    assert sorted(Path(path).name.split(".")[1] for path in fsynced) == ["a", "b"]
    assert (tmp_path / "a.json").read_text() == "1\n"


def test_a_batch_that_fails_before_its_renames_leaves_no_file_of_it(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        atomic.write_many_atomic([(tmp_path / "first.json", b"1"), (tmp_path / "no" / "b", b"2")])
    assert os.listdir(tmp_path) == []  # neither the first file nor its temporary one


def test_a_taken_temporary_name_is_left_alone(tmp_path: Path, monkeypatch) -> None:
    """The batch's temporary names share one random part; a file that already has one
    (another writer's) is neither replaced nor removed: that file gets a name of its own."""
    monkeypatch.setattr(atomic.secrets, "token_hex", lambda _n: "fixed")
    taken = tmp_path / ".a.json.fixed-0.tmp"
    taken.write_text("another writer's")
    atomic.write_many_atomic([(tmp_path / "a.json", b"1"), (tmp_path / "b.json", b"2")])
    assert (tmp_path / "a.json").read_bytes() == b"1"
    assert (tmp_path / "b.json").read_bytes() == b"2"
    assert taken.read_text() == "another writer's"
    assert sorted(path.name for path in tmp_path.iterdir()) == [taken.name, "a.json", "b.json"]

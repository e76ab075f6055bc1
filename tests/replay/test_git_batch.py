"""GitPython's object database streamed (adapters/git_batch.py) and the blob readers' cap,
on real repositories built in tmp_path."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from support.scratch_git import commit, git, init

from orchestrator.adapters import git as git_adapter
from orchestrator.adapters.git_batch import CHUNK, Found, Objects
from orchestrator.errors import GitError, InputError

BIG = 5 * CHUNK + 123


@pytest.fixture
def repo(tmp_path: Path) -> tuple[Path, str]:
    path = init(tmp_path / "repo")
    (path / "big.bin").write_bytes(b"\1" * BIG)
    sha = commit(path, {"pyproject.toml": "[tool.x]\n", "tests/test_a.py": "x = 1\n"}, "c")
    return path, sha


@given(path=st.text(min_size=1).filter(lambda text: "\n" not in text and "\0" not in text))
def test_a_missing_name_is_never_read_as_an_object(objects, path):
    """Whatever the path (one that spells a header too), an absent one has no object."""
    store, sha = objects
    if path in ("big.bin", "pyproject.toml", "tests", "tests/test_a.py"):
        return
    assert store.header(f"{sha}:{path}") == Found(name=f"{sha}:{path}", kind=None)


@pytest.fixture(scope="module")
def objects(tmp_path_factory):
    """One object store over the repository, for every example of a property test."""
    path = init(tmp_path_factory.mktemp("objects") / "repo")
    (path / "big.bin").write_bytes(b"\1" * BIG)
    sha = commit(path, {"pyproject.toml": "[tool.x]\n", "tests/test_a.py": "x = 1\n"}, "c")
    with Objects(path) as store:
        yield store, sha


def test_a_header_gives_kind_and_size_and_the_blob_is_streamed_in_chunks(repo):
    path, sha = repo
    with Objects(path) as store:
        big = store.header(f"{sha}:big.bin")
        assert (big.kind, big.size, len(big.oid)) == ("blob", BIG, 40)
        sizes = [len(chunk) for chunk in store.chunks(big)]
        assert max(sizes) <= CHUNK
        assert sum(sizes) == BIG
        assert store.header(f"{sha}:nope").kind is None
        assert store.header(f"{sha}:tests").kind == "tree"  # its body never asked for
        toml = store.header(f"{sha}:pyproject.toml")
        assert store.read(toml) == b"[tool.x]\n"
        assert toml.size == len(b"[tool.x]\n")


def test_a_body_left_early_stops_the_batch_and_the_next_object_reads_whole(repo):
    path, sha = repo
    with Objects(path) as store:
        big = store.header(f"{sha}:big.bin")
        body = store.chunks(big)
        assert len(next(body)) == CHUNK
        process = store._repo.git.cat_file_all.proc
        body.close()  # 4 MiB left unread
        assert process.poll() is not None
        assert store.read(store.header(f"{sha}:pyproject.toml")) == b"[tool.x]\n"
        assert sum(len(chunk) for chunk in store.chunks(big)) == BIG


def test_a_blob_over_the_read_cap_is_exit_2_naming_it_and_never_read(repo, monkeypatch):
    path, sha = repo
    monkeypatch.setenv("ORCHESTRATOR_MAX_READ_BYTES", str(CHUNK))
    with pytest.raises(InputError) as refused:
        git_adapter.read_blobs(path, sha, ["pyproject.toml", "big.bin"])
    assert refused.value.message == (
        f"big.bin at {sha[:12]}: {BIG} bytes, over the cap of {CHUNK} bytes on a file the "
        "tool reads (ORCHESTRATOR_MAX_READ_BYTES)"
    )
    blob = git(path, "rev-parse", f"{sha}:big.bin")
    with pytest.raises(InputError, match=re.escape(f"big.bin (blob {blob[:12]}): {BIG} bytes")):
        git_adapter.read_objects(path, [blob], names={blob: "big.bin"})
    assert git_adapter.read_blobs(path, sha, ["pyproject.toml"]) == {
        "pyproject.toml": b"[tool.x]\n"
    }
    monkeypatch.setenv("ORCHESTRATOR_MAX_READ_BYTES", "many")
    with pytest.raises(InputError, match="ORCHESTRATOR_MAX_READ_BYTES must be"):
        git_adapter.read_blobs(path, sha, ["pyproject.toml"])


def test_a_corrupt_object_ends_the_batch_as_gits_failure(repo):
    path, sha = repo
    blob = git(path, "rev-parse", f"{sha}:tests/test_a.py")
    loose = path / ".git" / "objects" / blob[:2] / blob[2:]
    loose.chmod(0o644)
    loose.write_bytes(b"not a zlib stream")
    with pytest.raises(GitError, match="git cat-file failed"):
        git_adapter.read_objects(path, [blob])
    # git's batch says "missing" for an object it cannot unpack: a path reads as absent.
    assert git_adapter.read_blobs(path, sha, ["tests/test_a.py"]) == {"tests/test_a.py": None}


def test_a_name_with_a_line_break_is_no_batch_line(repo):
    path, sha = repo
    with Objects(path) as store, pytest.raises(ValueError, match="line break"):
        store.header("a\nb")
    # read_blobs names such a path by its object instead (absent here: None).
    assert git_adapter.read_blobs(path, sha, ["a\nb"]) == {"a\nb": None}


def test_a_name_ending_in_a_carriage_return_is_not_read_as_the_name_without_it(tmp_path):
    """The batch reads a line "<name>\\r\\n" as "<name>": a file "a\\r" beside "a" would be
    read as "a" (a tree a pull request can make)."""
    path = init(tmp_path / "repo")
    sha = commit(path, {"a": "plain\n", "a\r": "with a carriage return\n"}, "c")
    with Objects(path) as store:
        plain, other = store.header(f"{sha}:a"), store.header(f"{sha}:a\r")
        assert (other.kind, other.size) == ("blob", len("with a carriage return\n"))
        assert other.oid != plain.oid
        assert store.read(other) == b"with a carriage return\n"
        assert store.header(f"{sha}:b\r").kind is None

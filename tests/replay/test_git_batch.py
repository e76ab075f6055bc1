"""``git cat-file --batch`` streamed (adapters/git_batch.py) and the blob readers' cap,
on real repositories built in tmp_path."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from replay_gitrepo import commit, git, init

from orchestrator.adapters import git as git_adapter
from orchestrator.adapters.git_batch import CHUNK, CatFile, Found, parse_header
from orchestrator.errors import GitError, InputError

BIG = 5 * CHUNK + 123


@pytest.fixture
def repo(tmp_path: Path) -> tuple[Path, str]:
    path = init(tmp_path / "repo")
    (path / "big.bin").write_bytes(b"\1" * BIG)
    sha = commit(path, {"pyproject.toml": "[tool.x]\n", "tests/test_a.py": "x = 1\n"}, "c")
    return path, sha


@given(name=st.text(min_size=1).filter(lambda text: "\n" not in text))
def test_a_missing_line_is_never_read_as_an_object(name):
    for word in ("missing", "ambiguous"):
        line = f"{name} {word}\n".encode("utf-8", "surrogateescape")
        assert parse_header(name, line) == Found(name=name, kind=None)


@given(
    oid=st.sampled_from(["0" * 40, "a1" * 20, "f" * 64]),
    kind=st.sampled_from(["blob", "tree", "commit", "tag"]),
    size=st.integers(min_value=0, max_value=10**12),
)
def test_a_found_objects_header_gives_its_kind_and_size(oid, kind, size):
    found = parse_header("x", f"{oid} {kind} {size}\n".encode())
    assert (found.kind, found.size) == (kind, size)


def test_a_blob_is_streamed_in_chunks_and_the_batch_checked_complete(repo):
    path, sha = repo
    names = [f"{sha}:big.bin", f"{sha}:nope", f"{sha}:tests", f"{sha}:pyproject.toml"]
    with CatFile(path, names) as batch:
        objects = batch.objects()
        big = next(objects)
        assert (big.kind, big.size) == ("blob", BIG)
        sizes = [len(chunk) for chunk in batch.chunks()]
        assert max(sizes) <= CHUNK
        assert sum(sizes) == BIG
        assert next(objects).kind is None
        assert next(objects).kind == "tree"  # its body skipped, unread
        toml = next(objects)
        assert batch.read() == b"[tool.x]\n"
        assert toml.size == len(b"[tool.x]\n")
        assert next(objects, None) is None


def test_a_batch_left_early_is_stopped(repo):
    path, sha = repo
    with CatFile(path, [f"{sha}:big.bin"] * 200) as batch:
        process = batch._process
        assert next(batch.objects()).size == BIG  # then left, 1 GiB unread
    assert process is not None
    assert process.returncode is not None


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
    with pytest.raises(ValueError, match="line break"):
        CatFile(path, ["a\nb"])
    # read_blobs names such a path by its object instead (absent here: None).
    assert git_adapter.read_blobs(path, sha, ["a\nb"]) == {"a\nb": None}

"""The export writes each file as committed, counts it against the caps and never writes
through a link (adapters/tree_export.py), on real repositories built in tmp_path."""

from __future__ import annotations

import os
import stat
import subprocess
from pathlib import Path

import pytest
from support.scratch_git import ENV, git, init

from orchestrator.adapters import git as git_adapter
from orchestrator.adapters import tree_export, tree_files
from orchestrator.adapters.git_batch import parse_ls_tree
from orchestrator.core.test_files import SideOverlay
from orchestrator.core.tree_limits import TreeCaps
from orchestrator.errors import InputError

# Every conversion a checkout would apply: CRLF line ends, $Id$ expansion, UTF-32.
HOSTILE_ATTRIBUTES = b"* text eol=crlf ident working-tree-encoding=UTF-32LE\n*.dat filter=boom\n"
TEXT = b"a $Id$ line\n" * 100


def blob(repo: Path, data: bytes) -> str:
    """The blob of ``data`` as is (no filter of the repository's own applied)."""
    done = subprocess.run(
        ["git", "-C", str(repo), "hash-object", "-w", "--no-filters", "--stdin"],
        input=data, env=ENV, capture_output=True, check=True,
    )  # fmt: skip
    return done.stdout.decode().strip()


def commit_blobs(
    repo: Path, files: dict[str, bytes], *, modes: dict[str, str] | None = None
) -> str:
    """Commit ``files`` exactly (through the index only: nothing of the work tree)."""
    for path, data in files.items():
        mode = (modes or {}).get(path, "100644")
        git(repo, "update-index", "--add", "--cacheinfo", f"{mode},{blob(repo, data)},{path}")
    git(repo, "commit", "-q", "--allow-empty", "-m", "files")
    return git(repo, "rev-parse", "HEAD")


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    return init(tmp_path / "repo")


@pytest.fixture(autouse=True)
def private_tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    monkeypatch.setenv("TMPDIR", str(scratch))
    monkeypatch.setattr("tempfile.tempdir", None)
    return scratch


def test_files_are_written_as_committed_whatever_the_attributes_say(repo, tmp_path):
    marker = tmp_path / "filter-ran"
    # The operator's own settings that would convert too: autocrlf and a filter driver.
    git(repo, "config", "core.autocrlf", "true")
    git(repo, "config", "filter.boom.smudge", f"touch {marker}; cat")
    files = {".gitattributes": HOSTILE_ATTRIBUTES, "a.txt": TEXT, "b.dat": TEXT}
    sha = commit_blobs(repo, files)
    # What a checkout would have written, to know the attack is real on this git.
    checked = tmp_path / "checkout"
    checked.mkdir()
    git(repo, f"--work-tree={checked}", "checkout", sha, "--", ".")
    assert (checked / "a.txt").stat().st_size > 4 * len(TEXT)
    assert marker.exists()
    marker.unlink()

    with git_adapter.checkout(repo, sha) as tree:
        for name, data in files.items():
            assert (tree / name).read_bytes() == data
        assert tree_files.tree_usage(tree).total_bytes == sum(map(len, files.values()))
    assert not marker.exists(), "a filter driver ran on the tree's say"


def test_modes_links_and_submodules_are_kept(repo, tmp_path):
    sub = init(tmp_path / "sub")
    (sub / "f").write_text("x\n")
    git(sub, "add", "f")
    git(sub, "commit", "-q", "-m", "sub")
    files = {"run.sh": b"#!/bin/sh\n", "lib/a.py": b"A = 1\n", "link.py": b"lib/a.py"}
    git(
        repo,
        "update-index",
        "--add",
        "--cacheinfo",
        f"160000,{git(sub, 'rev-parse', 'HEAD')},vendored",
    )
    sha = commit_blobs(repo, files, modes={"run.sh": "100755", "link.py": "120000"})
    old = os.umask(0o077)  # the container's uid 1000 reads the tree whatever the umask
    try:
        with git_adapter.checkout(repo, sha) as tree:
            assert stat.S_IMODE((tree / "run.sh").stat().st_mode) == 0o755
            assert stat.S_IMODE((tree / "lib" / "a.py").stat().st_mode) == 0o644
            assert stat.S_IMODE((tree / "lib").stat().st_mode) == 0o755
            assert os.readlink(tree / "link.py") == "lib/a.py"
            assert (tree / "vendored").is_dir()
            assert not any((tree / "vendored").iterdir())
    finally:
        os.umask(old)


def crafted_tree(repo: Path, name: bytes) -> str:
    """A commit whose tree holds a folder ``name`` (git itself would never write one)
    with a file ``x`` in it, beside a plain file ``ok``."""
    data = bytes.fromhex(blob(repo, b"escaped\n"))

    def tree(body: bytes) -> bytes:
        done = subprocess.run(
            ["git", "-C", str(repo), "hash-object", "-t", "tree", "--literally", "-w", "--stdin"],
            input=body, env=ENV, capture_output=True, check=True,
        )  # fmt: skip
        return bytes.fromhex(done.stdout.decode().strip())

    inner = tree(b"100644 x\0" + data)
    outer = tree(b"40000 " + name + b"\0" + inner + b"100644 ok\0" + data)
    return git(repo, "commit-tree", outer.hex(), "-m", "crafted")


@pytest.mark.parametrize("name", [b"..", b".git", b".GIT"])
def test_a_path_out_of_the_tree_or_into_git_is_bad_input_before_a_byte(repo, tmp_path, name):
    sha = crafted_tree(repo, name)
    before = sorted(p.name for p in tmp_path.iterdir())
    with pytest.raises(InputError, match="nothing was written"), git_adapter.checkout(repo, sha):
        pass
    assert sorted(p.name for p in tmp_path.iterdir()) == before
    assert list((tmp_path / "scratch").iterdir()) == []


def test_the_written_total_never_passes_the_cap(repo, tmp_path):
    files = {f"f{index}.bin": bytes([index]) * 1000 for index in range(10)}
    sha = commit_blobs(repo, files)
    dest = tmp_path / "out"
    dest.mkdir()
    entries = parse_ls_tree(git(repo, "ls-tree", "-r", "-z", sha).encode())
    with pytest.raises(InputError, match=r"f4.bin \(1000 bytes\) would take the tree to 5000"):
        tree_export.write_tree(repo, sha, dest, entries, caps=TreeCaps(max_bytes=4500))
    assert tree_files.tree_usage(dest).total_bytes == 4000
    with pytest.raises(InputError, match="is in the tree twice"):  # a tree with one path twice
        tree_export.write_tree(repo, sha, dest, entries[:1], caps=TreeCaps())
    (tmp_path / "fresh").mkdir()
    with pytest.raises(InputError, match="past 3 files"):
        tree_export.write_tree(repo, sha, tmp_path / "fresh", entries, caps=TreeCaps(max_files=3))
    assert tree_files.tree_usage(tmp_path / "fresh").files == 3


def test_an_overlay_counts_what_the_tree_already_holds(repo, tmp_path, monkeypatch):
    base = commit_blobs(repo, {"big.bin": b"b" * 6000, "tests/test_a.py": b"a = 1\n"})
    git(repo, "rm", "-q", "--cached", "big.bin")  # each revision fits; laid over, not
    tests = commit_blobs(repo, {"tests/test_a.py": b"a = 2\n" * 100, "tests/test_b.py": b"b\n"})
    monkeypatch.setenv("ORCHESTRATOR_MAX_TREE_BYTES", "6500")
    overlay = SideOverlay(rev=tests, write=("tests/test_a.py", "tests/test_b.py"))
    with (
        pytest.raises(InputError, match=r"tests/test_a.py \(600 bytes\) would take the tree"),
        git_adapter.checkout(repo, base, tests=overlay),
    ):
        pass
    monkeypatch.setenv("ORCHESTRATOR_MAX_TREE_BYTES", "7000")
    with git_adapter.checkout(repo, base, tests=overlay) as tree:
        assert (tree / "tests" / "test_a.py").read_bytes() == b"a = 2\n" * 100
        assert tree_files.tree_usage(tree).total_bytes == 6000 + 600 + 2


def test_an_overlay_replaces_a_link_in_its_way_and_never_writes_through_it(repo, tmp_path):
    host = tmp_path / "host"
    host.mkdir()
    (host / "test_a.py").write_text("host file\n")
    base = commit_blobs(
        repo, {"tests": str(host).encode(), "lib.py": b""}, modes={"tests": "120000"}
    )
    git(repo, "rm", "-q", "--cached", "tests")
    tests = commit_blobs(repo, {"tests/test_a.py": b"def test_a():\n    pass\n"})
    overlay = SideOverlay(rev=tests, write=("tests/test_a.py",), remove=("tests/test_a.py",))
    with git_adapter.checkout(repo, base, tests=overlay) as tree:
        assert not (tree / "tests").is_symlink()
        assert (tree / "tests" / "test_a.py").read_bytes() == b"def test_a():\n    pass\n"
    assert (host / "test_a.py").read_text() == "host file\n"
    assert sorted(p.name for p in host.iterdir()) == ["test_a.py"]

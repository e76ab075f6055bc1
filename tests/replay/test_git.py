"""Sources: resolving revisions and exporting trees, on real repositories in tmp_path."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from support.scratch_git import commit, git, init

from orchestrator.adapters import git as git_adapter
from orchestrator.adapters import host as host_adapter
from orchestrator.core import owners
from orchestrator.errors import ExitCode, GitError, InputError, UnknownRevisionError


@pytest.fixture
def repo(tmp_path: Path) -> tuple[Path, str, str]:
    path = init(tmp_path / "repo")
    first = commit(path, {"lib.py": "VALUE = 1\n", "tests/test_lib.py": "import lib\n"}, "one")
    second = commit(path, {"lib.py": "VALUE = 2\n"}, "two")
    return path, first, second


@pytest.fixture(autouse=True)
def private_tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    monkeypatch.setenv("TMPDIR", str(scratch))
    monkeypatch.setattr("tempfile.tempdir", None)
    return scratch


def test_revisions_resolve_to_full_shas(repo):
    path, first, second = repo
    assert git_adapter.resolve_rev(path, "main") == second
    assert git_adapter.resolve_rev(path, "HEAD~1") == first
    assert git_adapter.resolve_rev(path, first[:8]) == first


@pytest.mark.parametrize("rev", ["no-such-branch", "HEAD~5", "", "0" * 40])
def test_an_unknown_revision_is_bad_input(repo, rev):
    with pytest.raises(UnknownRevisionError):
        git_adapter.resolve_rev(repo[0], rev)


def test_a_folder_that_is_not_a_repository_is_bad_input(tmp_path):
    with pytest.raises(InputError, match="not a git repository"):
        git_adapter.resolve_rev(tmp_path, "HEAD")


def test_checkout_exports_the_revision_without_git_and_removes_it(repo, private_tmp):
    path, first, second = repo
    with git_adapter.checkout(path, first) as tree:
        assert (tree / "lib.py").read_text() == "VALUE = 1\n"
        assert not (tree / ".git").exists()
        assert tree.is_relative_to(private_tmp)
        assert git_adapter.SCRATCH_PREFIX in tree.parent.name
    assert not tree.exists()
    assert list(private_tmp.iterdir()) == []
    # The repository itself is untouched: same HEAD, no worktree entries, clean status.
    assert git(path, "rev-parse", "HEAD") == second
    assert git(path, "worktree", "list").count("\n") == 0
    assert git(path, "status", "--porcelain") == ""


def test_checkout_is_removed_when_the_body_raises(repo, private_tmp):
    path, first, _ = repo
    with pytest.raises(RuntimeError), git_adapter.checkout(path, first):
        raise RuntimeError("boom")
    assert list(private_tmp.iterdir()) == []


def test_a_bare_repository_exports_too(repo, tmp_path):
    path, first, _ = repo
    bare = tmp_path / "bare.git"
    subprocess.run(["git", "clone", "-q", "--bare", str(path), str(bare)], check=True)
    with git_adapter.checkout(bare, first) as tree:
        assert (tree / "lib.py").read_text() == "VALUE = 1\n"


def test_export_ignore_does_not_hide_tests(tmp_path):
    path = init(tmp_path / "ignored")
    sha = commit(
        path, {".gitattributes": "tests export-ignore\n", "tests/test_a.py": "x = 1\n"}, "c"
    )
    with git_adapter.checkout(path, sha) as tree:
        assert (tree / "tests" / "test_a.py").exists()


def test_concurrent_checkouts_of_one_repository_do_not_collide(repo):
    path, first, second = repo
    seen: list[tuple[str, Path]] = []
    errors: list[BaseException] = []

    def export(sha: str) -> None:
        try:
            with git_adapter.checkout(path, sha) as tree:
                seen.append(((tree / "lib.py").read_text(), tree))
        except BaseException as error:
            errors.append(error)

    threads = [threading.Thread(target=export, args=(sha,)) for sha in (first, second) * 4]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    assert sorted(text for text, _ in seen) == ["VALUE = 1\n"] * 4 + ["VALUE = 2\n"] * 4
    assert len({tree for _, tree in seen}) == 8


def test_a_mutant_patch_is_applied_to_the_exported_tree_only(repo, tmp_path):
    path, first, _ = repo
    mutant = tmp_path / "mutant.diff"
    mutant.write_text("--- a/lib.py\n+++ b/lib.py\n@@ -1 +1 @@\n-VALUE = 1\n+VALUE = 99\n")
    with git_adapter.checkout(path, first, mutant=mutant) as tree:
        assert (tree / "lib.py").read_text() == "VALUE = 99\n"
    assert git(path, "show", f"{first}:lib.py") == "VALUE = 1"


def test_a_mutant_that_does_not_apply_is_bad_input_and_leaves_nothing(repo, tmp_path, private_tmp):
    path, _, second = repo
    mutant = tmp_path / "mutant.diff"
    mutant.write_text("--- a/lib.py\n+++ b/lib.py\n@@ -1 +1 @@\n-VALUE = 7\n+VALUE = 8\n")
    with (
        pytest.raises(InputError, match="does not apply"),
        git_adapter.checkout(path, second, mutant=mutant),
    ):
        pass
    assert list(private_tmp.iterdir()) == []


def test_bad_input_is_exit_2_and_git_failing_on_good_input_is_exit_3(repo, tmp_path, private_tmp):
    path, first, second = repo
    with pytest.raises(UnknownRevisionError) as unknown:
        git_adapter.resolve_rev(path, "no-such-branch")
    assert unknown.value.exit_code == ExitCode.USAGE
    mutant = tmp_path / "stale.diff"
    mutant.write_text("--- a/lib.py\n+++ b/lib.py\n@@ -1 +1 @@\n-VALUE = 7\n+VALUE = 8\n")
    with pytest.raises(InputError) as stale, git_adapter.checkout(path, second, mutant=mutant):
        pass
    assert stale.value.exit_code == ExitCode.USAGE

    # Good input, broken machine: the revision resolves, but a blob it needs is corrupt on
    # disk, so the export cannot read it. That is the infrastructure's failure, not the user's.
    blob = git(path, "rev-parse", f"{first}:lib.py")
    loose = path / ".git" / "objects" / blob[:2] / blob[2:]
    loose.chmod(0o644)
    loose.write_bytes(b"not a zlib stream")
    assert git_adapter.resolve_rev(path, first) == first
    with pytest.raises(GitError) as broken, git_adapter.checkout(path, first):
        pass
    assert broken.value.exit_code == ExitCode.UNDECIDED
    assert "git cat-file failed: lib.py" in str(broken.value)
    assert "\n" not in str(broken.value)
    assert list(private_tmp.iterdir()) == []


def test_read_blobs_reads_files_at_a_revision(repo):
    path, first, second = repo
    assert git_adapter.read_blobs(path, first, ["lib.py", "nope.py"]) == {
        "lib.py": b"VALUE = 1\n",
        "nope.py": None,
    }
    assert git_adapter.read_blobs(path, second, ["lib.py"]) == {"lib.py": b"VALUE = 2\n"}


def test_sweep_removes_only_folders_of_dead_processes(private_tmp):
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    left = private_tmp / f"{git_adapter.SCRATCH_PREFIX}{dead.pid}-src-x"  # an older name
    mine = private_tmp / f"{git_adapter.SCRATCH_PREFIX}{os.getpid()}-src-y"
    left.mkdir()
    mine.mkdir()

    removed = git_adapter.sweep_scratch(host_adapter.pid_alive)
    assert removed == [left]
    assert mine.exists()


def test_every_scratch_prefix_is_swept_by_owner_and_host(private_tmp):
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    here = host_adapter.host_id()
    gone = owners.ProcessOwner(host_id=here, pid=dead.pid, start="1")
    elsewhere = owners.ProcessOwner(host_id="f" * 16, pid=dead.pid, start="1")
    made = git_adapter.make_scratch("src", prefix=git_adapter.THAW_SCRATCH_PREFIX)
    folders = {
        "thaw-dead": git_adapter.THAW_SCRATCH_PREFIX + owners.scratch_stem(gone) + "-fixture-a",
        "replay-dead": git_adapter.SCRATCH_PREFIX + owners.scratch_stem(gone) + "-src-b",
        "other-host": git_adapter.SCRATCH_PREFIX + owners.scratch_stem(elsewhere) + "-src-c",
        "other-host-old": git_adapter.THAW_SCRATCH_PREFIX + owners.scratch_stem(elsewhere) + "-d",
    }
    for name in folders.values():
        (private_tmp / name).mkdir()
    day_and_more = time.time() - owners.FOREIGN_MAX_AGE_S - 60
    os.utime(private_tmp / folders["other-host-old"], (day_and_more, day_and_more))

    removed = {path.name for path in git_adapter.sweep_scratch()}

    assert removed == {folders["thaw-dead"], folders["replay-dead"], folders["other-host-old"]}
    assert (private_tmp / folders["other-host"]).exists()  # its pid means nothing here
    assert made.exists()  # ours, alive
    assert made.name.startswith(git_adapter.THAW_SCRATCH_PREFIX)
    git_adapter.remove_scratch(made)


def test_what_is_a_repository(repo, tmp_path):
    """The top of a work tree, a bare repository and a ``.git`` folder are repositories;
    a folder inside one, the inside of a ``.git`` folder and a missing path are not
    (nothing is searched upwards: ``--repo`` names the repository itself)."""
    path, _, second = repo
    bare = tmp_path / "bare.git"
    git(tmp_path, "clone", "-q", "--bare", str(path), str(bare))
    for good in (path, bare, path / ".git"):
        assert git_adapter.resolve_rev(good, "main") == second
    for bad in (path / "tests", path / ".git" / "objects", tmp_path / "missing"):
        with pytest.raises(InputError, match="not a git repository"):
            git_adapter.resolve_rev(bad, "main")
        with pytest.raises(InputError, match="not a git repository"):
            git_adapter.read_blobs(bad, second, ["lib.py"])


def test_read_blobs_takes_any_path_and_only_files(tmp_path):
    """Names git's batch reader could misread (spaces, a line break, the word "missing",
    non-ASCII) are read as they are; a folder, a submodule and an absent path are None;
    a symbolic link is its target's text, as a checkout writes it."""
    path = init(tmp_path / "repo")
    names = {
        "tests/with space.py": "a\n",
        "tests/x missing": "b\n",
        "tests/tést.py": "c\n",
        "tests/line\nbreak.py": "d\n",
        "tests/empty.py": "",
    }
    for name, text in names.items():
        (path / name).parent.mkdir(parents=True, exist_ok=True)
        (path / name).write_text(text)
    (path / "tests" / "link.py").symlink_to("tést.py")
    sub = init(tmp_path / "sub")
    sub_sha = commit(sub, {"f": "x\n"}, "sub")
    git(path, "update-index", "--add", "--cacheinfo", f"160000,{sub_sha},vendored")
    sha = commit(path, {}, "files")
    found = git_adapter.read_blobs(
        path, sha, [*names, "tests/link.py", "tests", "vendored", "nope.py", "tests/"]
    )
    assert found == {
        **{name: text.encode() for name, text in names.items()},
        "tests/link.py": b"t\xc3\xa9st.py",
        "tests": None,
        "vendored": None,
        "nope.py": None,
        "tests/": None,
    }
    # The import roots' listing takes regular files only (as the host reads a tree).
    assert set(git_adapter.list_paths(path, sha, "tests")) == set(names)
    (path / "top.py").symlink_to("tests/empty.py")
    (path / "top.txt").write_text("x\n")
    top = commit(path, {}, "top")
    modes = git_adapter.file_modes(path, top, ["tests", "top.py", "top.txt", "nope"])
    assert modes == {"tests": "040000", "top.py": "120000", "top.txt": "100644"}


def test_read_blobs_at_reads_several_revisions_in_order(repo):
    path, first, second = repo
    found = git_adapter.read_blobs_at(path, [(second, ["lib.py"]), (first, ["lib.py", "x"])])
    assert found == [{"lib.py": b"VALUE = 2\n"}, {"lib.py": b"VALUE = 1\n", "x": None}]


def test_the_mainline_root_is_the_first_commit(repo):
    path, first, second = repo
    assert git_adapter.mainline_root(path, second) == first


def test_without_the_git_command_the_line_says_so(repo, monkeypatch):
    monkeypatch.setenv("PATH", "/nonexistent")
    git_adapter._CHECKED.clear()  # checked by this process before: asked again
    with pytest.raises(GitError, match="git command is not installed"):
        git_adapter.resolve_rev(repo[0], "main")

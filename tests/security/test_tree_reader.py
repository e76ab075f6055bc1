"""The one guarded reader of an exported tree (adapters/tree_files.py), on real files.

A pull request's tree holds whatever links it likes. Whatever the tree, a read on the
host returns the bytes of a regular file reached without a link, or None (absent), or a
refusal naming the file: never a byte of a file outside the tree, never a blocked open,
never more than the cap in memory.
"""

from __future__ import annotations

import os
import stat
import tempfile
import threading
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from orchestrator.adapters import tree_files
from orchestrator.adapters.tree_files import TreeFileRefused, read_tree_file
from orchestrator.core.bounds import FileKind
from orchestrator.core.tree_files import Refusal
from orchestrator.core.tree_limits import READ_VARIABLE

SECRET = b"host-secret-7d1e: never read through a tree\n"


@pytest.fixture
def host(tmp_path: Path) -> Path:
    """A folder of the host beside the tree, with a secret in it."""
    folder = tmp_path / "host"
    folder.mkdir()
    (folder / "secret.toml").write_bytes(SECRET)
    return folder


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    root = tmp_path / "tree"
    (root / "src" / "pkg").mkdir(parents=True)
    (root / "pyproject.toml").write_bytes(b"[tool.pytest.ini_options]\n")
    (root / "src" / "pkg" / "__init__.py").write_bytes(b"")
    (root / "src" / "mod.py").write_bytes(b"x = 1\n")
    return root


def refusal(root: Path, path: str, **kwargs: int) -> TreeFileRefused:
    with pytest.raises(TreeFileRefused) as refused:
        read_tree_file(root, path, **kwargs)
    return refused.value


def test_a_regular_file_is_read_and_an_absent_one_is_none(tree):
    assert read_tree_file(tree, "pyproject.toml") == b"[tool.pytest.ini_options]\n"
    assert read_tree_file(tree, "src/mod.py") == b"x = 1\n"
    assert read_tree_file(tree, "setup.cfg") is None
    assert read_tree_file(tree, "nope/setup.cfg") is None
    assert read_tree_file(tree, "src/mod.py/x") is None  # a file where a folder would be


def test_a_link_to_a_host_file_is_refused_and_never_read(tree, host):
    (tree / "pyproject.toml").unlink()
    (tree / "pyproject.toml").symlink_to(host / "secret.toml")
    refused = refusal(tree, "pyproject.toml")
    assert refused.refusal is Refusal.LINK
    assert refused.path == "pyproject.toml"
    assert SECRET.decode() not in refused.message


def test_a_link_inside_the_tree_is_refused_too(tree):
    """The simple rule: no link is followed on the host, even one that stays inside."""
    (tree / "setup.cfg").symlink_to("pyproject.toml")
    assert refusal(tree, "setup.cfg").refusal is Refusal.LINK


def test_a_link_in_a_middle_folder_is_refused_naming_it(tree, host):
    (host / "pkg").mkdir()
    (host / "pkg" / "__init__.py").write_bytes(SECRET)
    (tree / "lib").symlink_to(host)
    refused = refusal(tree, "lib/pkg/__init__.py")
    assert refused.refusal is Refusal.LINK
    assert "lib is a symbolic link" in refused.message
    with pytest.raises(TreeFileRefused):
        tree_files.list_tree_dir(tree, "lib/pkg")
    with pytest.raises(TreeFileRefused):
        tree_files.tree_entry(tree, "lib/pkg/__init__.py")


def test_a_fifo_is_refused_without_blocking(tree):
    os.mkfifo(tree / "pytest.ini")  # no writer ever opens it: a blocking open never returns
    outcome: list[object] = []
    reader = threading.Thread(
        target=lambda: outcome.append(_outcome(tree, "pytest.ini")), daemon=True
    )
    reader.start()
    reader.join(timeout=60)
    assert not reader.is_alive(), "the read blocked on a FIFO"
    (refused,) = outcome
    assert isinstance(refused, TreeFileRefused)
    assert refused.refusal is Refusal.KIND
    assert "a FIFO in the tree, not a regular file" in refused.message


def _outcome(root: Path, path: str) -> object:
    try:
        return read_tree_file(root, path)
    except TreeFileRefused as refused:
        return refused


def test_a_device_is_refused(tree):
    try:
        os.mknod(tree / "tox.ini", 0o644 | stat.S_IFCHR, os.makedev(1, 5))  # /dev/zero's
    except PermissionError:
        pytest.skip("no CAP_MKNOD here")
    refused = refusal(tree, "tox.ini")
    assert refused.refusal is Refusal.KIND
    assert "a character device in the tree" in refused.message


def test_a_folder_is_refused(tree):
    (tree / "setup.cfg").mkdir()
    assert refusal(tree, "setup.cfg").refusal is Refusal.KIND


def test_a_file_over_the_cap_is_refused_naming_the_cap_and_never_read_whole(tree):
    with (tree / "pyproject.toml").open("wb") as sparse:  # a hole: no disk spent
        sparse.truncate(1 << 30)
    refused = refusal(tree, "pyproject.toml", cap=1 << 20)
    assert refused.refusal is Refusal.SIZE
    assert f"{1 << 30} bytes" in refused.message
    assert f"{1 << 20} bytes" in refused.message
    assert READ_VARIABLE in refused.message
    (tree / "small.toml").write_bytes(b"x" * 10)
    assert read_tree_file(tree, "small.toml", cap=10) == b"x" * 10
    assert refusal(tree, "small.toml", cap=9).refusal is Refusal.SIZE


def test_the_cap_comes_from_the_hosts_environment(tree, monkeypatch):
    monkeypatch.setenv(READ_VARIABLE, "8")
    assert refusal(tree, "pyproject.toml").refusal is Refusal.SIZE
    monkeypatch.setenv(READ_VARIABLE, "lots")
    with pytest.raises(tree_files.InputError, match=READ_VARIABLE):
        read_tree_file(tree, "pyproject.toml")


@pytest.mark.parametrize("path", ["../host/secret.toml", "/etc/passwd", "src/../../x", "", "a//b"])
def test_a_path_out_of_the_tree_is_refused(tree, path):
    assert refusal(tree, path).refusal is Refusal.PATH


def test_listing_and_walking_never_follow_a_link(tree, host):
    big = host / "big.bin"
    with big.open("wb") as sparse:
        sparse.truncate(1 << 30)
    (tree / "src" / "linked").symlink_to(host)
    (tree / "src" / "big.bin").symlink_to(big)
    entries = {entry.name: entry.kind for entry in tree_files.list_tree_dir(tree, "src") or ()}
    assert entries == {
        "big.bin": FileKind.SYMLINK,
        "linked": FileKind.SYMLINK,
        "mod.py": FileKind.REGULAR,
        "pkg": FileKind.DIRECTORY,
    }
    assert tree_files.list_tree_dir(tree, "nope") is None
    with pytest.raises(TreeFileRefused):
        tree_files.list_tree_dir(tree, "src/linked")
    usage = tree_files.tree_usage(tree)
    assert usage.files == 5  # three files, two links (counted as their targets' length)
    assert usage.total_bytes < 1 << 20


def test_removing_a_file_never_goes_through_a_link(tree, host):
    (host / "test_x.py").write_bytes(SECRET)
    (tree / "tests").symlink_to(host)
    assert tree_files.remove_tree_file(tree, "tests/test_x.py") is None
    assert (host / "test_x.py").read_bytes() == SECRET
    removed = tree_files.remove_tree_file(tree, "src/pkg/__init__.py")
    assert removed is not None
    assert removed.kind is FileKind.REGULAR
    assert not (tree / "src" / "pkg").exists()  # emptied, so pruned
    assert (tree / "src" / "mod.py").exists()


# ------------------------------------------------------------------ any tree at all

kinds = st.sampled_from(["file", "dir", "link-out", "link-in", "link-up"])
layouts = st.dictionaries(
    keys=st.lists(st.sampled_from(["a", "b", "c"]), min_size=1, max_size=3).map("/".join),
    values=kinds,
    max_size=12,
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(layout=layouts, wanted=st.lists(st.sampled_from(["a", "b", "c"]), min_size=1, max_size=4))
def test_any_tree_yields_only_its_own_regular_files(layout, wanted):
    """Whatever links a tree holds, a read returns the bytes of the file at that very path
    (reached through folders only), or None, or a refusal: never the host's secret."""
    with tempfile.TemporaryDirectory() as scratch:
        base = Path(scratch)
        (base / "host").mkdir()
        (base / "host" / "a").mkdir()
        for name in ("a", "b", "c"):
            (base / "host" / name if name != "a" else base / "host" / "a" / "b").write_bytes(SECRET)
        root = base / "tree"
        root.mkdir()
        made: dict[str, str] = {}  # what each path is, built without following a link
        for path, kind in sorted(layout.items()):
            parts = path.split("/")
            parents = ["/".join(parts[:depth]) for depth in range(1, len(parts))]
            if path in made or any(made.get(parent, "dir") != "dir" for parent in parents):
                continue  # under a file or a link: the layout is what it is
            for parent in parents:
                if parent not in made:
                    (root / parent).mkdir()
                    made[parent] = "dir"
            target = root / path
            if kind == "file":
                target.write_bytes(path.encode())
            elif kind == "dir":
                target.mkdir()
            elif kind == "link-out":
                target.symlink_to(base / "host")
            elif kind == "link-in":
                target.symlink_to(root / "a")
            else:
                target.symlink_to("../" * (path.count("/") + 1) + "host")
            made[path] = kind
        path = "/".join(wanted)
        data = _outcome(root, path)
        if isinstance(data, TreeFileRefused):
            assert data.refusal in (Refusal.LINK, Refusal.KIND)
            return
        lexical = root / path
        through_links = any(
            (root / "/".join(wanted[:depth])).is_symlink() for depth in range(1, len(wanted) + 1)
        )
        if data is None:
            assert through_links or not lexical.is_file()
        else:
            assert data == path.encode() != SECRET
            assert not through_links


# ------------------------------------------------- the revision and the tree agree


def test_import_roots_read_at_the_revision_and_in_the_tree_agree(tmp_path, host, monkeypatch):
    """A linked ``pyproject.toml`` and a linked ``src/`` package count as absent both
    where ``replay`` reads them (the revision) and where ``accept``, ``shrink --test`` and
    ``thaw`` read them (the exported tree); plain files count in both."""
    import subprocess

    from orchestrator.adapters import git as git_adapter
    from orchestrator.core.project_config import ProjectConfig
    from orchestrator.services.project_config import load_config
    from orchestrator.services.sides.side_run import planned_pythonpath, tree_pythonpath

    monkeypatch.setenv("TMPDIR", str(tmp_path))
    monkeypatch.setattr("tempfile.tempdir", None)
    (host / "secret.toml").write_text('[tool.pytest.ini_options]\npythonpath = ["leak"]\n')
    (host / "pkg").mkdir()
    (host / "pkg" / "__init__.py").write_bytes(b"")
    repo = tmp_path / "repo"
    repo.mkdir()
    env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@e", "HOME": str(tmp_path)}
    env |= {"GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@e"}

    def git(*args: str) -> str:
        done = subprocess.run(
            ["git", "-C", str(repo), *args], env=env, capture_output=True, check=True
        )
        return done.stdout.decode().strip()

    git("init", "-q")
    (repo / "pyproject.toml").symlink_to(host / "secret.toml")
    (repo / "setup.cfg").write_text("[tool:pytest]\npythonpath = lib\n")
    (repo / "src").mkdir()
    (repo / "src" / "pkg").symlink_to(host / "pkg")
    (repo / "src" / "other").mkdir()
    (repo / "src" / "other" / "__init__.py").write_bytes(b"")
    git("add", "-A")
    git("commit", "-q", "-m", "tree")
    sha = git("rev-parse", "HEAD")

    planned = planned_pythonpath(repo, sha)
    with git_adapter.checkout(repo, sha) as tree:
        assert (tree / "pyproject.toml").is_symlink()  # exported as the link it is
        found = tree_pythonpath(tree)
    assert found == planned
    assert "leak" not in found.entries
    assert found.entries == ("lib", "src")  # setup.cfg's pythonpath, src/other's layout
    # [tool.orchestrator] is read by the same rule: the link's text is no configuration.
    assert load_config(repo, sha).config == ProjectConfig()


def test_a_tar_of_the_tree_keeps_links_as_links_and_never_reads_through_them(tree, host, tmp_path):
    import tarfile

    (tree / "pyproject.toml").unlink()
    (tree / "pyproject.toml").symlink_to(host / "secret.toml")
    (tree / "lib").symlink_to(host)
    (tree / "src" / "__pycache__").mkdir()
    (tree / "src" / "__pycache__" / "mod.pyc").write_bytes(b"cache")
    (tree / "run.sh").write_bytes(b"#!/bin/sh\n")
    (tree / "run.sh").chmod(0o755)
    os.mkfifo(tree / "pipe")  # git never writes one: left out, and never opened

    def readable(info: tarfile.TarInfo) -> tarfile.TarInfo | None:
        return None if "__pycache__" in info.name.split("/") else info

    dest = tree_files.tar_tree(tree, tmp_path / "tree.tar", arcname="src", adjust=readable)
    assert SECRET not in dest.read_bytes()
    with tarfile.open(dest) as archive:
        members = {member.name: member for member in archive.getmembers()}
        assert sorted(members) == [
            "src", "src/lib", "src/pyproject.toml", "src/run.sh", "src/src", "src/src/mod.py",
            "src/src/pkg", "src/src/pkg/__init__.py",
        ]  # fmt: skip
        assert members["src/pyproject.toml"].issym()
        assert members["src/pyproject.toml"].linkname == str(host / "secret.toml")
        assert members["src/lib"].issym()
        assert members["src/run.sh"].mode & 0o100
        assert archive.extractfile("src/src/mod.py").read() == b"x = 1\n"

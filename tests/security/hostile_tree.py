"""Hostile trees (not hostile tests): a pull request whose *files* attack the host's reads
and writes of its exported tree, and any command line run against it.

The repositories are built blob by blob (``hash-object --no-filters`` and the index):
links, ``.gitattributes`` and huge files go in exactly as the attack wants them, whatever
this host's git would convert on ``add``. The command runs as a child process with the
canary in its environment and its peak memory measured (``hostile_repo``'s wrapper)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hostile_repo import _MEASURE, CANARY, CANARY_NAME, CLI, GIT_ENV, git

IMAGE = "orchestrator-runner:latest"
PROPERTY = "tests/test_tree.py::test_tree"
# A string only the host has: in a host file the tree links to, never in the tree.
SECRET = "host-config-" + "secret-91ad"
HOST_CONFIG = f'[tool.pytest.ini_options]\npythonpath = ["{SECRET}"]\n'
# The property: passes unless the fixture holds "x" or the host's secret reached the
# container's PYTHONPATH (the tree never spells the secret whole).
TEST = """\
import os

from tree_code import run


def test_tree(replay_fixture):
    assert run(replay_fixture, os.environ.get("PYTHONPATH", ""))
"""
CODE = """\
MARK = "host-config-" + "secret"


def run(fixture, pythonpath):
    return MARK not in pythonpath and "x" not in fixture
"""
# accept's mutant: the property must fail on it.
MUTANT = """\
--- a/tree_code.py
+++ b/tree_code.py
@@ -4,2 +4,2 @@
 def run(fixture, pythonpath):
-    return MARK not in pythonpath and "x" not in fixture
+    return False
"""


@dataclass(frozen=True)
class Repo:
    path: Path
    base: str
    head: str


def blob(repo: Path, data: bytes) -> str:
    done = subprocess.run(
        ["git", "-C", str(repo), "hash-object", "-w", "--no-filters", "--stdin"],
        input=data, env={**os.environ, **GIT_ENV}, capture_output=True, check=True,
    )  # fmt: skip
    return done.stdout.decode().strip()


def commit_files(repo: Path, files: dict[str, tuple[str, bytes]], message: str) -> str:
    """Commit ``files`` (path -> (mode, bytes)) over the index as it is."""
    for path, (mode, data) in files.items():
        git(repo, "update-index", "--add", "--cacheinfo", f"{mode},{blob(repo, data)},{path}")
    git(repo, "commit", "-q", "--allow-empty", "-m", message)
    return git(repo, "rev-parse", "HEAD")


def file(text: str | bytes) -> tuple[str, bytes]:
    return ("100644", text.encode() if isinstance(text, str) else text)


def link(target: str) -> tuple[str, bytes]:
    return ("120000", target.encode())


def toml_link_to(host_file: Path) -> str:
    """A link target that reaches ``host_file`` from the tree's root and is valid TOML
    too (``x=1`` and a comment), so that reading the link's own text as a
    ``pyproject.toml`` (as git shows it) parses, and only following it on the host
    would differ. The tree holds the folder ``x=1#``."""
    return "x=1#/" + "../" * 64 + str(host_file).lstrip("/")


def tree_repo(root: Path, attack: dict[str, tuple[str, bytes]]) -> Repo:
    """A base commit with the property passing, and a head commit (the pull request) that
    adds ``attack``'s files."""
    repo = root / "repo"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    git(repo, "config", "core.autocrlf", "false")
    base = commit_files(
        repo,
        {
            "tree_code.py": file(CODE),
            "tests/__init__.py": file(""),
            "tests/test_tree.py": file(TEST),
            "x=1#/keep": file(""),
        },
        "base",
    )
    head = commit_files(repo, attack, "the hostile tree")
    return Repo(path=repo, base=base, head=head)


def host_config(root: Path) -> Path:
    """The host file a hostile ``pyproject.toml`` links to."""
    path = root / "host" / "pyproject.toml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(HOST_CONFIG)
    return path


def fixture(root: Path, name: str, document: dict[str, Any]) -> Path:
    path = root / name
    path.write_text(json.dumps(document))
    return path


@dataclass(frozen=True)
class Run:
    code: int
    stdout: bytes
    stderr: bytes
    max_rss_kb: int
    cwd: Path
    scratch: Path

    def json(self) -> Any:
        try:
            return json.loads(self.stdout)
        except json.JSONDecodeError:
            raise AssertionError(f"no JSON (exit {self.code}): {self.tail()}") from None

    def tail(self) -> str:
        return self.stderr.decode(errors="replace")[-3000:]

    def error_lines(self) -> list[str]:
        text = self.stderr.decode(errors="replace")
        return [line for line in text.splitlines() if line.startswith("orchestrator:")]


def run_cli(
    root: Path, *args: str, env: dict[str, str] | None = None, deadline_s: float = 600
) -> Run:
    """``orchestrator ARGS`` in ``root/cwd`` with a private TMPDIR (``root/scratch``: the
    exported trees land there), the canary in its environment, its peak RSS measured."""
    scratch = root / "scratch"
    scratch.mkdir(exist_ok=True)
    cwd = root / "cwd"
    cwd.mkdir(exist_ok=True)
    rss_file = root / "max-rss-kb"
    environment = {**os.environ, "TMPDIR": str(scratch), "CI": "1", CANARY_NAME: CANARY}
    process = subprocess.Popen(
        [sys.executable, "-c", _MEASURE, str(rss_file), str(CLI), *args],
        env={**environment, **(env or {})},
        cwd=cwd,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        stdout, stderr = process.communicate(timeout=deadline_s)
    except subprocess.TimeoutExpired:
        process.kill()
        process.communicate()
        raise AssertionError(f"the command did not end within {deadline_s} s") from None
    return Run(
        code=process.returncode,
        stdout=stdout,
        stderr=stderr,
        max_rss_kb=int(rss_file.read_text()),
        cwd=cwd,
        scratch=scratch,
    )


def assert_nothing_of_the_host(run: Run, *folders: Path) -> None:
    """Neither the host file's secret nor the canary in any output or in any file the
    command wrote (its current folder: the ledger; ``folders``: run folders, outputs)."""
    blobs = [run.stdout, run.stderr]
    for folder in (run.cwd, *folders):
        for path in folder.rglob("*") if folder.exists() else ():
            assert not path.is_symlink(), f"{path} is a symlink"
            if path.is_file():
                blobs.append(path.read_bytes())
    for data in blobs:
        assert SECRET.encode() not in data
        assert CANARY.encode() not in data


def scratch_left(run: Run) -> list[str]:
    return sorted(path.name for path in run.scratch.iterdir())


def attack_repo(
    root: Path,
    patch: dict[str, tuple[str, bytes]],
    *,
    base: dict[str, tuple[str, bytes]] | None = None,
    drop: tuple[str, ...] = (),
) -> Repo:
    """``hostile_repo``'s layout (``tests/test_attack.py`` calls ``attack.run()``), built
    blob by blob: ``base`` adds to the base commit; the pull request adds ``patch`` and
    deletes ``drop``."""
    from hostile_repo import BASE_CODE
    from hostile_repo import TEST as ATTACK_TEST

    repo = root / "repo"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    git(repo, "config", "core.autocrlf", "false")
    first = {
        "attack.py": file(BASE_CODE),
        "tests/__init__.py": file(""),
        "tests/test_attack.py": file(ATTACK_TEST),
        **(base or {}),
    }
    base_sha = commit_files(repo, first, "base")
    if drop:
        git(repo, "rm", "-q", "--cached", *drop)
    head = commit_files(repo, patch, "the hostile tree")
    return Repo(path=repo, base=base_sha, head=head)


def linked_pyproject(root: Path) -> Repo:
    """A pull request whose ``pyproject.toml`` links to a host file (through a target
    that is valid TOML as text, so only following the link on the host tells)."""
    return tree_repo(root, {"pyproject.toml": link(toml_link_to(host_config(root)))})


# ------------------------------------------------- commands that read the exported tree


def accept(root: Path, repo: Repo, **env: str) -> Run:
    mutant = root / "mutant.patch"
    mutant.write_text(MUTANT)
    return run_cli(
        root,
        "accept", "--repo", str(repo.path), "--property", PROPERTY, "--mutant", str(mutant),
        "--rev", repo.head, "--fixture", str(fixture(root, "passes.json", {"y": 1})),
        "--replays", "1", "--image", IMAGE, "--json",
        "--ledger", f"sqlite:///{root / 'cwd' / 'ledger.db'}",
        env=env,
    )  # fmt: skip


def shrink(root: Path, repo: Repo, **env: str) -> Run:
    return run_cli(
        root,
        "shrink", str(fixture(root, "fails.json", {"x": 1, "y": 2, "z": 3})),
        "--test", PROPERTY, "--repo", str(repo.path), "--rev", repo.head, "--image", IMAGE,
        "--out", str(root / "cwd" / "minimal.json"), "--json",
        env=env,
    )  # fmt: skip


def thaw(root: Path, repo: Repo, image_id: str, **env: str) -> Run:
    """A flake freeze of the property, due an hour ago, re-probed at the pull request."""
    from datetime import UTC, datetime, timedelta

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "ledger"))
    from ledger_factories import FIXTURE_BYTES, ORIGIN_BYTES, eligible, flake_record

    from orchestrator.adapters.ledger import Ledger

    url = f"sqlite:///{root / 'cwd' / 'ledger.db'}"
    (root / "cwd").mkdir(exist_ok=True)
    now = datetime.now(UTC)
    record = flake_record(
        property_id=PROPERTY,
        image_digest=image_id,
        command="pytest -q",
        opened_at=now - timedelta(days=2),
        expires_at=now - timedelta(hours=1),
    )
    with Ledger.open(url) as ledger:
        written = ledger.write_flake_freeze(
            record,
            decision=eligible()[1],
            now=now - timedelta(days=2),
            fixture_bytes=FIXTURE_BYTES,
            origin_bytes=ORIGIN_BYTES,
        )
    assert written.written, written.codes
    return run_cli(
        root,
        "thaw", "--repo", str(repo.path), "--rev", repo.head, "--replays", "1",
        "--json", "--ledger", url,
        env=env,
    )  # fmt: skip


# ------------------------------------------------- a .gitattributes expansion bomb

EXPORT_CAP = 4 * 1024 * 1024
EXPORT_CAPPED = {"ORCHESTRATOR_MAX_TREE_BYTES": str(EXPORT_CAP)}
# Every conversion git 2.39 applies on checkout, on the bomb only (the code stays Python).
ATTRIBUTES = "*.txt text eol=crlf ident working-tree-encoding=UTF-32LE\n"
BOMB = b"$Id$\n" * (200 * 1024)  # 1 MiB as committed; 38 MiB once checked out
# The replayed test measures the tree it was given (/src, the host's scratch folder
# mounted read-only): on the host, nothing else could see a folder removed at the end.
MEASURE = f"""\
import os


def tree_bytes(root="/src"):
    total = 0
    for folder, _dirs, names in os.walk(root):
        for name in names:
            total += os.lstat(os.path.join(folder, name)).st_size
    return total


def check(bomb):
    total = tree_bytes()
    assert total <= {EXPORT_CAP}, f"the exported tree holds {{total}} bytes"
    assert os.path.getsize(bomb) == {len(BOMB)}, "not the committed bytes"
"""
TESTS_MEASURE = (
    MEASURE
    + """

def test_attack():
    check("/src/tests/data/bomb.txt")
"""
)


def gitattributes_bomb(root: Path) -> Repo:
    """The pull request adds the bomb, its ``.gitattributes`` and a test that measures
    the tree it was exported as."""
    attack = MEASURE + "\n\ndef run():\n    check('/src/data/bomb.txt')\n"
    return attack_repo(
        root,
        {
            ".gitattributes": file(ATTRIBUTES),
            "data/bomb.txt": file(BOMB),
            "attack.py": file(attack),
        },
    )


def gitattributes_bomb_in_tests(root: Path) -> Repo:
    """The same in the pull request's tests folder, for ``--tests-from patch`` to lay
    over the base side."""
    return attack_repo(
        root,
        {
            "tests/.gitattributes": file(ATTRIBUTES),
            "tests/data/bomb.txt": file(BOMB),
            "tests/test_attack.py": file(TESTS_MEASURE),
        },
    )


def as_hostile(repo: Repo, head: str | None = None) -> Any:
    """The shape ``hostile_repo.replay`` takes."""
    from hostile_repo import Repo as HostileRepo

    return HostileRepo(path=repo.path, base=repo.base, patch=head or repo.head)

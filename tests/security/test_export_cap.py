"""A pull request's files attack the host's disk through the export of its tree.

The tree cap is checked on the sizes git gives (``ls-tree -l``) before a byte is written;
a checkout would then apply the tree's own ``.gitattributes`` and write far more (``ident``
+ ``eol=crlf`` + ``working-tree-encoding=UTF-32LE`` make each ``$Id$`` line 38 times its
size). The export writes every file as committed and counts what it writes, so the tree
on disk is what the cap was checked against, also when ``--tests-from`` lays the pull
request's test files over the other side. The replayed test itself measures the tree it
was given (``/src``, the host's scratch folder mounted read-only): on the host, nothing
else could see a folder that is removed when the run ends. Real git, the CLI as a child
process with the canary, the Docker engine. docs/security.md lists these attacks."""

from __future__ import annotations

import subprocess

import pytest
from hostile_repo import GIT_ENV, PROPERTY, git, replay
from hostile_tree import EXPORT_CAPPED as CAPPED
from hostile_tree import (
    MEASURE,
    Repo,
    as_hostile,
    attack_repo,
    file,
    gitattributes_bomb,
    gitattributes_bomb_in_tests,
    scratch_left,
)

pytestmark = [pytest.mark.docker, pytest.mark.slow]


def assert_labels(run, base: str, patch: str) -> None:
    assert run.code in (0, 1), run.stderr.decode()[-3000:]
    decision = run.decision()
    assert decision["base_labels"] == [base], decision
    assert decision["patch_labels"] == [patch], decision


def test_a_gitattributes_bomb_is_written_as_committed(tmp_path):
    run = replay(tmp_path, as_hostile(gitattributes_bomb(tmp_path)), env=CAPPED)
    assert_labels(run, "assert_pass", "assert_pass")
    assert scratch_left(run) == []


def test_a_gitattributes_bomb_laid_over_the_other_side_is_written_as_committed(tmp_path):
    """``--tests-from patch``: the pull request's tests folder, with its own
    ``.gitattributes`` and bomb, is laid over the base side too."""
    repo = gitattributes_bomb_in_tests(tmp_path)
    run = replay(tmp_path, as_hostile(repo), "--tests-from", "patch", env=CAPPED)
    assert_labels(run, "assert_pass", "assert_pass")  # base: through the overlay alone
    assert scratch_left(run) == []


def test_an_overlay_that_would_pass_the_cap_is_exit_2_and_leaves_nothing(tmp_path):
    """Each revision fits under the cap; the base side with the pull request's tests laid
    over it would not: refused while writing, at most the cap written, all removed."""
    repo = attack_repo(
        tmp_path,
        {"tests/data.bin": file(b"t" * (2 * 1024 * 1024))},
        base={"big.bin": file(b"b" * (3 * 1024 * 1024))},
        drop=("big.bin",),
    )
    run = replay(tmp_path, as_hostile(repo), "--tests-from", "patch", env=CAPPED, json_out=False)
    assert run.code == 2, run.stderr.decode()[-3000:]
    errors = [line for line in run.stderr.decode().splitlines() if "error:" in line]
    assert len(errors) == 1, run.stderr.decode()[-3000:]
    assert "tests/data.bin" in errors[0]
    assert "ORCHESTRATOR_MAX_TREE_BYTES" in errors[0]
    assert scratch_left(run) == []


def test_a_path_out_of_the_tree_is_exit_2_before_a_byte_is_written(tmp_path):
    """A crafted tree (git itself never writes one) whose folder is named ``..``."""
    repo = attack_repo(tmp_path, {})
    head = crafted_commit(repo, b"..")
    run = replay(tmp_path, as_hostile(repo, head), env=CAPPED, json_out=False)
    assert run.code == 2, run.stderr.decode()[-3000:]
    assert b"'../x': a path with a '..' part" in run.stderr
    assert scratch_left(run) == []


def crafted_commit(repo: Repo, name: bytes) -> str:
    """The pull request's commit with a folder ``name`` holding a file ``x`` added."""

    def hashed(kind: str, body: bytes) -> bytes:
        done = subprocess.run(
            ["git", "-C", str(repo.path), "hash-object", "-t", kind, "--literally", "-w",
             "--stdin"],
            input=body, env=GIT_ENV, capture_output=True, check=True,
        )  # fmt: skip
        return bytes.fromhex(done.stdout.decode().strip())

    inner = hashed("tree", b"100644 x\0" + hashed("blob", b"escaped\n"))
    listing = subprocess.run(
        ["git", "-C", str(repo.path), "cat-file", "tree", f"{repo.head}^{{tree}}"],
        capture_output=True, check=True,
    ).stdout  # fmt: skip
    outer = hashed("tree", b"40000 " + name + b"\0" + inner + listing)
    return git(repo.path, "commit-tree", outer.hex(), "-p", repo.head, "-m", "crafted")


def test_the_measure_passes_on_a_tree_without_an_attack(tmp_path):
    """The measuring test decides a tree under the cap as passing: what the attacks above
    are judged by is the tree they were given, not the harness."""
    repo = attack_repo(tmp_path, {"attack.py": file(MEASURE + "\n\ndef run():\n    pass\n")})
    run = replay(tmp_path, as_hostile(repo), env=CAPPED)
    assert_labels(run, "assert_pass", "assert_pass")
    assert run.decision()["property_id"] == PROPERTY

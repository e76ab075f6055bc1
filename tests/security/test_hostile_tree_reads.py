"""A pull request's files attack the host's own reads of its exported tree.

``accept``, ``shrink --test`` and ``thaw`` find a side's import roots in its exported
tree (``side_run.tree_pythonpath``). A ``pyproject.toml`` linked to a host file, or a
``src/`` entry linked out of the tree, must never be followed there: the host file's
secret never reaches the container's ``PYTHONPATH``, any output, the ledger or a run
folder, and the link counts as absent (logged). A configuration file over the read cap
is exit 2 naming it, with the command's memory bounded. Everything runs for real: git,
the CLI as a child process with the canary in its environment, the Docker engine.
docs/security.md lists these attacks."""

from __future__ import annotations

import json

import pytest
from hostile_tree import (
    CODE,
    IMAGE,
    PROPERTY,
    SECRET,
    accept,
    assert_nothing_of_the_host,
    file,
    link,
    linked_pyproject,
    run_cli,
    scratch_left,
    shrink,
    thaw,
    tree_repo,
)

pytestmark = [pytest.mark.docker, pytest.mark.slow]

PEAK_RSS_KB = 256 * 1024  # a refusal's peak: the interpreter and the command modules


@pytest.fixture
def linked_config(tmp_path):
    """A pull request whose ``pyproject.toml`` links to a host file (through a target
    that is valid TOML as text, so only following the link on the host tells)."""
    return linked_pyproject(tmp_path)


def assert_refusal_logged(run, path: str) -> None:
    stderr = run.stderr.decode(errors="replace")
    assert "tree.file_refused" in stderr, run.tail()
    assert path in stderr


# ------------------------------------------------------------------ a linked config


def test_accept_never_follows_a_linked_pyproject(tmp_path, linked_config, runner_image_id):
    run = accept(tmp_path, linked_config)
    # The secret would make the property fail unmutated: accepted means it never arrived.
    assert run.code == 0, run.tail()
    assert run.json()["outcome"] == "accepted"
    assert_refusal_logged(run, "pyproject.toml")
    assert_nothing_of_the_host(run)
    assert scratch_left(run) == []


def test_shrink_test_never_follows_a_linked_pyproject(tmp_path, linked_config, runner_image_id):
    run = shrink(tmp_path, linked_config)
    assert run.code == 0, run.tail()
    # Shrunk to the one key the property fails on (with the secret it would fail on {}).
    assert list(json.loads((tmp_path / "cwd" / "minimal.json").read_text())) == ["x"]
    assert_refusal_logged(run, "pyproject.toml")
    assert_nothing_of_the_host(run)
    assert scratch_left(run) == []


def test_thaw_never_follows_a_linked_pyproject(tmp_path, linked_config, runner_image_id):
    run = thaw(tmp_path, linked_config, runner_image_id)
    assert run.code == 0, run.tail()
    (result,) = run.json()["results"]
    assert (result["outcome"], result["labels"]) == ("thawed", ["assert_pass"])
    assert_refusal_logged(run, "pyproject.toml")
    assert_nothing_of_the_host(run)
    assert scratch_left(run) == []


def test_a_src_entry_linked_out_of_the_tree_is_not_an_import_root(tmp_path, runner_image_id):
    """``src/pkg`` linked to a host package: the host never looks into it (a src layout
    found through it would put ``/src/src`` on the path and tell the host's layout)."""
    outside = tmp_path / "host" / "pkg"
    outside.mkdir(parents=True)
    (outside / "__init__.py").write_text(f"# {SECRET}\n")
    check = CODE.replace('"host-config-" + "secret"', '"/src/src"')  # the mutant applies
    assert check != CODE
    repo = tree_repo(tmp_path, {"src/pkg": link(str(outside)), "tree_code.py": file(check)})
    run = accept(tmp_path, repo)
    assert run.code == 0, run.tail()
    assert run.json()["outcome"] == "accepted"
    assert_refusal_logged(run, "src/pkg")
    assert_nothing_of_the_host(run)


# ------------------------------------------------------------------ an oversize config


def test_a_600_mib_pyproject_is_refused_with_bounded_memory(tmp_path, runner_image_id):
    """The read cap's default (64 MiB) holds a 600 MiB ``pyproject.toml`` off: exit 2
    naming the file, its size, the cap and the variable, before anything is exported,
    without the blob ever in memory (whole, it would take the command past 1 GiB)."""
    size = 600 * 1024 * 1024
    repo = tree_repo(tmp_path, {"pyproject.toml": file(b"#" * size)})
    run = run_cli(
        tmp_path,
        "replay", "--repo", str(repo.path), "--base", repo.base, "--patch", repo.head,
        "--image", IMAGE, "--property", PROPERTY, "--replays", "1", "--no-record",
        "--out", str(tmp_path / "run"),
    )  # fmt: skip
    assert run.code == 2, run.tail()
    (line,) = run.error_lines()
    assert f"pyproject.toml at {repo.head[:12]}: {size} bytes" in line
    assert "ORCHESTRATOR_MAX_READ_BYTES" in line
    assert str(64 * 1024 * 1024) in line
    assert run.max_rss_kb < PEAK_RSS_KB
    assert scratch_left(run) == []
    assert_nothing_of_the_host(run)


@pytest.mark.parametrize("command", ["accept", "shrink", "thaw"])
def test_an_oversize_pyproject_in_the_exported_tree_is_exit_2(tmp_path, command, runner_image_id):
    """Over a lowered read cap (4 MiB against 1 MiB): refused where each command reads
    it, in the revision or in the exported tree, with the command's memory bounded."""
    repo = tree_repo(tmp_path, {"pyproject.toml": file(b"#" * (4 << 20))})
    cap = {"ORCHESTRATOR_MAX_READ_BYTES": str(1 << 20)}
    if command == "accept":
        run = accept(tmp_path, repo, **cap)
    elif command == "shrink":
        run = shrink(tmp_path, repo, **cap)
    else:
        run = thaw(tmp_path, repo, runner_image_id, **cap)
    assert run.code == 2, run.tail()
    (line,) = run.error_lines()
    assert "pyproject.toml" in line
    assert str(4 << 20) in line
    assert "ORCHESTRATOR_MAX_READ_BYTES" in line
    assert run.max_rss_kb < PEAK_RSS_KB
    assert scratch_left(run) == []
    assert_nothing_of_the_host(run)


def test_the_attacks_above_decide_when_there_is_no_attack(tmp_path, runner_image_id):
    """The same property, with a plain ``pyproject.toml`` naming a real import root: the
    harness itself is not what the attacks above are judged by."""
    config = '[tool.pytest.ini_options]\npythonpath = ["lib"]\n'
    repo = tree_repo(tmp_path, {"pyproject.toml": file(config), "lib/keep.py": file("")})
    run = accept(tmp_path, repo)
    assert run.code == 0, run.tail()
    assert run.json()["outcome"] == "accepted"
    assert "tree.file_refused" not in run.stderr.decode(errors="replace")

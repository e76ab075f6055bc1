"""The command line refuses what would spend the host before anything runs.

Huge counts, a FIFO, a device, a link or a huge file as a JSON input: each is exit 2 with
one line naming the option, found before any container starts, the ledger is opened or
the run folder is written, in a child process that is never blocked (it would be killed
at the deadline) and whose own peak memory stays small.

Those child processes (an interpreter start each) run in `make test`; `make test-fast`
keeps the ones that could block (the FIFOs) and runs every other refusal in its own
process instead (the end of this module): same arguments, same exit status and line,
nothing written, without the peak-memory check.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from orchestrator.core import bounds
from orchestrator.core.bounds import FileKind

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "replay"))

from cli_process import Finished, run_cli, tree_of
from support.cli import ERROR, invoke
from support.scratch_git import commit, init

# A child process per case: the whole suite's; the inner loop has the same refusals
# in its own process (below).
in_child_only = pytest.mark.slow

# What a refusal may cost: the interpreter, Typer and the command modules, far below
# what the counts or files refused here would take (gigabytes).
PEAK_RSS_BYTES = 256 * 1024 * 1024
HUGE = "1000000000"
IMAGE = "orchestrator-runner:latest"


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    """An empty current folder (where the default ledger and run folders would go) with a
    real repository beside it."""
    repo = init(tmp_path / "repo")
    commit(repo, {"tests/test_a.py": "def test_a():\n    assert True\n"}, "base")
    here = tmp_path / "cwd"
    here.mkdir()
    return here


def repo_of(workspace: Path) -> str:
    return str(workspace.parent / "repo")


def assert_refused_early(workspace: Path, done: Finished, *named: str) -> None:
    assert not done.killed, "blocked until the deadline"
    assert done.code == 2, done.stderr
    line = done.error_line
    for text in named:
        assert text in line
    assert done.peak_rss_bytes < PEAK_RSS_BYTES
    assert tree_of(workspace) == []  # no ledger, no run folder


def replay(workspace: Path, *extra: str) -> list[str]:
    return ["replay", "--repo", repo_of(workspace), "--base", "main", "--patch", "main",
            "--image", IMAGE, *extra]  # fmt: skip


HUGE_COUNTS = {
    "replay --replays": (["--replays", HUGE], "--replays"),
    "replay --screen": (["--screen", HUGE], "--screen"),
    "replay --jobs": (["--jobs", HUGE], "--jobs"),
    "replay --slots": (["--slots", HUGE], "--slots"),
    "replay --shard": (["--shard", f"1/{HUGE}"], "--shard"),
    "replay --timeout": (["--timeout", "1e308"], "--timeout"),
}


@in_child_only
@pytest.mark.parametrize("row", list(HUGE_COUNTS))
def test_a_huge_count_on_replay_is_exit_2_before_anything_runs(workspace, row):
    extra, option = HUGE_COUNTS[row]
    done = run_cli(*replay(workspace, *extra), cwd=workspace)
    assert_refused_early(workspace, done, option)


HUGE_COMMANDS = pytest.mark.parametrize(
    ("command", "option"),
    [
        (["accept", "--property", "tests/test_a.py::test_a", "--mutant", "main", "--rev", "main",
          "--replays", HUGE], "--replays"),
        (["thaw", "--rev", "main", "--replays", HUGE], "--replays"),
        (["budget", "--rev", "main", "--property", "tests/test_a.py::test_a", "--budget-ms", "1",
          "--image", IMAGE, "--samples", HUGE], "--samples"),
        (["shrink", "-", "--test", "tests/test_a.py::test_a", "--attempts", HUGE], "--attempts"),
    ],
    ids=["accept", "thaw", "budget", "shrink"],
)  # fmt: skip


@in_child_only
@HUGE_COMMANDS
def test_a_huge_count_on_any_command_is_exit_2(workspace, command, option):
    if command[0] != "shrink":
        command = [command[0], "--repo", repo_of(workspace), *command[1:]]
    done = run_cli(*command, cwd=workspace)
    assert_refused_early(workspace, done, option)


@in_child_only
def test_more_screening_replays_than_replays_is_exit_2_naming_both(workspace):
    done = run_cli(*replay(workspace, "--screen", "6", "--replays", "5"), cwd=workspace)
    assert_refused_early(workspace, done, "--screen 6", "--replays 5")


def test_as_many_screening_replays_as_replays_is_accepted():
    assert bounds.screen_problem(5, 5) is None


# ------------------------------------------------------------ JSON input files


def fifo(workspace: Path) -> Path:
    path = workspace.parent / "fixture.fifo"
    os.mkfifo(path)  # no writer ever opens it: a blocking open never returns
    return path


def huge_file(workspace: Path) -> Path:
    path = workspace.parent / "huge.json"
    with path.open("wb") as sparse:  # no disk spent: a hole the size of the cap, and one more
        sparse.truncate(bounds.MAX_INPUT_BYTES + 1)
    return path


def link_to_a_host_file(workspace: Path) -> Path:
    path = workspace.parent / "innocent.json"
    path.symlink_to("/etc/passwd")
    return path


INPUTS = {  # the attack -> the file it leaves, the words of the refusal
    "fifo": (fifo, "a FIFO, not a regular file"),
    "huge": (huge_file, "more than the 64 MiB"),
    "link": (link_to_a_host_file, "a symbolic link, not a regular file"),
    "device": (lambda workspace: Path("/dev/zero"), "a character device, not a regular file"),
    "folder": (lambda workspace: workspace.parent / "repo", "a directory, not a regular file"),
}
# Every command line that reads a JSON document a user (or a job definition) names.
READERS = {
    "replay --fixture": lambda w, f: replay(w, "--fixture", f),
    "replay --shrink-report": lambda w, f: replay(
        w, "--fixture", str(w.parent / "repo" / "tests" / "test_a.py"), "--shrink-report", f
    ),
    "accept --fixture": lambda w, f: ["accept", "--repo", repo_of(w), "--property",
        "tests/test_a.py::test_a", "--mutant", "main", "--rev", "main", "--fixture", f],
    "budget --fixture": lambda w, f: ["budget", "--repo", repo_of(w), "--rev", "main",
        "--property", "tests/test_a.py::test_a", "--budget-ms", "1", "--image", IMAGE,
        "--fixture", f],
    "shrink FIXTURE": lambda w, f: ["shrink", f, "--test", "tests/test_a.py::test_a",
        "--repo", repo_of(w), "--rev", "main", "--image", IMAGE],
    "digest FILE": lambda w, f: ["digest", f],
    "classify EVIDENCE": lambda w, f: ["classify", f],
    "admit REQUEST": lambda w, f: ["admit", f],
}  # fmt: skip


# A FIFO could block whoever opens it: a child process with a deadline in both tiers.
BLOCKING_ATTACKS = ("fifo",)


@pytest.mark.parametrize(
    ("reader", "attack"),
    [
        pytest.param(
            reader,
            attack,
            id=f"{reader}-{attack}",
            marks=() if attack in BLOCKING_ATTACKS else in_child_only,
        )
        for attack in INPUTS
        for reader in READERS
    ],
)
def test_a_json_input_must_be_a_small_regular_file(workspace, reader, attack):
    make, words = INPUTS[attack]
    path = str(make(workspace))
    done = run_cli(*READERS[reader](workspace, path), cwd=workspace, deadline_s=60)
    assert_refused_early(workspace, done, words, path)


def test_the_origin_of_a_shrink_must_be_a_small_regular_file(workspace):
    path = str(fifo(workspace))
    fixture = workspace.parent / "fixture.json"
    fixture.write_text("{}")
    report = workspace.parent / "report.json"
    report.write_text("{}")
    args = replay(
        workspace, "--fixture", str(fixture), "--shrink-report", str(report), "--origin", path
    )
    done = run_cli(*args, cwd=workspace, deadline_s=60)
    assert_refused_early(workspace, done, "--origin", "a FIFO")


# ------------------------------------------------------------ the pure rules


@given(value=st.integers(min_value=-(10**12), max_value=10**12), maximum=st.integers(1, 10**6))
def test_a_count_is_refused_exactly_outside_its_range(value, maximum):
    problem = bounds.count_problem("--n", value, maximum=maximum)
    assert (problem is None) is (1 <= value <= maximum)
    if problem is not None:
        assert problem.startswith(f"--n {value}:")
        assert str(maximum) in problem
        assert "\n" not in problem


@given(screen=st.none() | st.integers(1, 5000), replays=st.integers(1, 5000))
def test_screening_never_asks_for_more_than_the_replays(screen, replays):
    problem = bounds.screen_problem(screen, replays)
    assert (problem is None) is (screen is None or screen <= replays)
    if problem is not None:
        assert f"--screen {screen}" in problem
        assert f"--replays {replays}" in problem


@given(
    kind=st.sampled_from(FileKind),
    size=st.integers(0, 2 * bounds.MAX_INPUT_BYTES),
    name=st.text(min_size=1, max_size=20),
)
def test_only_a_regular_file_under_the_cap_is_read(kind, size, name):
    problem = bounds.input_file_problem(name, kind=kind, size=size)
    assert (problem is None) is (kind is FileKind.REGULAR and size <= bounds.MAX_INPUT_BYTES)
    if problem is not None:
        assert problem.startswith(f"{name}: ")


def test_the_options_refuse_a_huge_count_too():
    from orchestrator.commands._option_groups import Scheduling
    from orchestrator.errors import InputError

    # A count from the project's configuration is not bounded by the command line's parser.
    with pytest.raises(InputError, match="--replays 1000000000: must be between 1 and 1000"):
        Scheduling(replays=10**9).validate()


def test_a_run_folder_claiming_a_billion_shards_is_refused_before_counting_them():
    from orchestrator.core.shards import ShardRun, check_shards
    from orchestrator.errors import InputError

    run = ShardRun(
        name="run-a", run_log={"shard": {"index": 1, "count": 10**9}}, summary={"decisions": []}
    )
    with pytest.raises(InputError, match="shard count is not a number from 1 to 1000"):
        check_shards([run])


def test_a_fifo_in_a_downloaded_run_folder_is_refused_without_blocking(workspace):
    folder = workspace.parent / "artifact"
    folder.mkdir()
    decision = {"property_id": "t.py::t", "lane": "no_freeze", "code": "not_reproduced",
                "evidence_file": "evidence-1.json"}  # fmt: skip
    summary = {"schema": "replay-report/1", "run_id": "r", "decisions": [decision]}
    (folder / "summary.json").write_text(json.dumps(summary))
    os.mkfifo(folder / "evidence-1.json")
    done = run_cli("report", str(folder), "--markdown", cwd=workspace, deadline_s=60)
    assert_refused_early(workspace, done, "evidence-1.json: a FIFO, not a regular file")


def test_a_fifo_for_the_property_store_is_refused_without_blocking(workspace):
    folder = workspace.parent / "artifact-2"
    folder.mkdir()
    summary = {"schema": "replay-report/2", "run_id": "r", "decisions": []}
    (folder / "summary.json").write_text(json.dumps(summary))
    os.mkfifo(folder / "properties.jsonl.gz")
    done = run_cli("report", str(folder), "--markdown", cwd=workspace, deadline_s=60)
    assert_refused_early(workspace, done, "properties.jsonl.gz: a FIFO, not a regular file")


# ------------------------------------------------------------ the same refusals in this process


def assert_refused_in_process(
    capsys: pytest.CaptureFixture[str], workspace: Path, args: list[str], *named: str
) -> None:
    """``orchestrator args`` through ``orchestrator.cli.main`` in this process, from
    ``workspace``: exit 2, one error line naming ``named``, nothing written there."""
    run = invoke(capsys, args)
    assert run.exit_code == 2, run.stderr
    errors = [line for line in run.stderr.splitlines() if line.startswith(ERROR)]
    assert len(errors) == 1, run.stderr
    for text in named:
        assert text in errors[0]
    assert tree_of(workspace) == []  # no ledger, no run folder


@pytest.fixture
def here(workspace: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The workspace as this process's current folder."""
    monkeypatch.chdir(workspace)
    return workspace


@pytest.mark.parametrize("row", list(HUGE_COUNTS))
def test_a_huge_count_on_replay_is_exit_2_in_process(capsys, here, row):
    extra, option = HUGE_COUNTS[row]
    assert_refused_in_process(capsys, here, replay(here, *extra), option)


@HUGE_COMMANDS
def test_a_huge_count_on_any_command_is_exit_2_in_process(capsys, here, command, option):
    if command[0] != "shrink":
        command = [command[0], "--repo", repo_of(here), *command[1:]]
    assert_refused_in_process(capsys, here, command, option)


def test_more_screening_replays_than_replays_is_exit_2_in_process(capsys, here):
    args = replay(here, "--screen", "6", "--replays", "5")
    assert_refused_in_process(capsys, here, args, "--screen 6", "--replays 5")


@pytest.mark.parametrize("attack", [name for name in INPUTS if name not in BLOCKING_ATTACKS])
@pytest.mark.parametrize("reader", list(READERS))
def test_a_json_input_must_be_a_small_regular_file_in_process(capsys, here, reader, attack):
    make, words = INPUTS[attack]
    path = str(make(here))
    assert_refused_in_process(capsys, here, READERS[reader](here, path), words, path)

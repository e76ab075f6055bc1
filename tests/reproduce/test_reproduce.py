"""``orchestrator reproduce`` end to end: real runs of the bundled example on the real engine,
then one replay of them run again, watched, stepped into (through a pseudo-terminal).

One run of the example (the extra clock read: ``test_clock_budget`` passes on base and
fails on the patch; ``test_shared_state`` alternates pass, fail on both sides because its
replays share one container's /tmp) is made once for the module; every test reproduces a
replay of it (or of a copy it damages) in a process of its own, with a private TMPDIR, so
that the containers (by their owner pid label) and the folders it leaves can be counted.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pexpect
import pytest
from support.polling import wait_for

from orchestrator.core.neutralise import neutraliser_args

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from fixtures.build_example import (  # noqa: E402
    BUDGET_PROPERTY,
    FLAKY_PROPERTY,
    PATCH_TEMPLATES,
    ExampleRepo,
    build_example,
)
from fixtures.sleepy import build_sleepy  # noqa: E402
from orchestrator.adapters import docker as docker_adapter  # noqa: E402
from orchestrator.adapters import git as git_adapter  # noqa: E402

pytestmark = [pytest.mark.docker, pytest.mark.slow]

CLI = ROOT / ".venv" / "bin" / "orchestrator"
IMAGE = "orchestrator-runner:latest"
PID_LABEL = "orchestrator.pid"
NEW_TEST = "tests/test_new_trim.py::test_tab_is_trimmed"
NEW_TEST_SOURCE = """\
from eventlib.normalize import normalize_event


def test_tab_is_trimmed(deps):
    clock = deps.clock(start=1_000.0)
    event = normalize_event({"id": "\\tevt-9 ", "type": "View"}, now=clock)
    assert event["id"] == "evt-9"
"""


@dataclass(frozen=True, kw_only=True)
class Done:
    code: int
    stdout: str
    stderr: str
    pid: int


class Cli:
    """Runs the CLI with a private TMPDIR (exported trees and folders land there)."""

    def __init__(self, scratch: Path) -> None:
        self.scratch = scratch
        scratch.mkdir(parents=True, exist_ok=True)
        self.env = {**os.environ, "TMPDIR": str(scratch), "CI": "1"}

    def run(self, *args: str, timeout: float = 300) -> Done:
        process = subprocess.Popen(
            [str(CLI), *args],
            env=self.env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            stdin=subprocess.DEVNULL,
            text=True,
        )
        try:
            stdout, stderr = process.communicate(timeout=timeout)
        finally:
            if process.poll() is None:
                process.kill()
        return Done(code=process.returncode, stdout=stdout, stderr=stderr, pid=process.pid)

    def spawn(self, *args: str) -> pexpect.spawn:
        """The CLI on a pseudo-terminal of 40 x 120, as a person would run it."""
        env = {key: value for key, value in self.env.items() if key != "CI"}
        return pexpect.spawn(
            str(CLI),
            list(args),
            env={**env, "TERM": "xterm"},
            encoding="utf-8",
            timeout=120,
            dimensions=(40, 120),
        )

    def folders_left(self) -> list[str]:
        return sorted(p.name for p in self.scratch.iterdir() if p.name.startswith("orchestrator-"))


def containers_of(client: Any, pid: int) -> list[Any]:
    return list(
        client.containers.list(
            all=True, ignore_removed=True, filters={"label": f"{PID_LABEL}={pid}"}
        )
    )


def replay(cli: Cli, repo: ExampleRepo, out: Path, patch: str, *extra: str) -> dict[str, Any]:
    done = cli.run(
        "replay", "--repo", str(repo.path), "--base", repo.base, "--patch", repo.rev(patch),
        "--image", IMAGE, "--out", str(out), "--timeout", "30", "--no-record", "--json", *extra,
    )  # fmt: skip
    assert done.code in (0, 1, 3), done.stderr  # a lane's exit status, whichever
    report: dict[str, Any] = json.loads(done.stdout)
    return report


def labels(report: dict[str, Any], property_id: str, side: str) -> list[str]:
    (entry,) = [e for e in report["decisions"] if e["property_id"] == property_id]
    return list(entry[f"{side}_labels"])


@dataclass(frozen=True, kw_only=True)
class Recorded:
    repo: ExampleRepo
    run_dir: Path
    report: dict[str, Any]


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory, runner_image_id: str) -> Recorded:
    root = tmp_path_factory.mktemp("reproduce")
    repo = build_example(root / "example")
    run_dir = root / "run"
    report = replay(
        Cli(root / "scratch"), repo, run_dir, "extra-clock-read",
        "--property", BUDGET_PROPERTY, "--property", FLAKY_PROPERTY,
        "--fixture", str(repo.fixture), "--replays", "2",
    )  # fmt: skip
    # What the tests below rely on: the record itself.
    assert labels(report, BUDGET_PROPERTY, "base") == ["assert_pass"] * 2
    assert labels(report, BUDGET_PROPERTY, "patch") == ["assert_fail"] * 2
    assert labels(report, FLAKY_PROPERTY, "patch") == ["assert_pass", "assert_fail"]
    return Recorded(repo=repo, run_dir=run_dir, report=report)


@pytest.fixture
def cli(tmp_path: Path) -> Cli:
    return Cli(tmp_path / "scratch")


def assert_removed(client: Any, cli: Cli, done: Done) -> None:
    """Nothing of the reproduction is left: no container, no exported tree or folder."""
    assert containers_of(client, done.pid) == []
    assert cli.folders_left() == []


def table_row(stdout: str, heading: str) -> list[str]:
    """The cells of the comparison table's row named ``heading`` (two spaces apart)."""
    (line,) = [line for line in stdout.splitlines() if line.startswith(heading + "  ")]
    return re.split(r"\s{2,}", line[len(heading) :].strip())


# -- the same labels ------------------------------------------------------------------------


def test_a_recorded_assert_fail_comes_out_the_same(recorded, cli, docker_client):
    done = cli.run("reproduce", str(recorded.run_dir), BUDGET_PROPERTY, "--replay", "2")
    assert done.code == 0, done.stderr
    # pytest's own output, streamed, then the label the probe gives and the recorded one.
    assert "E       assert 2 == 1" in done.stdout
    assert "1 failed" in done.stdout
    assert table_row(done.stdout, "recorded") == ["assert_fail at tests/test_budget.py:11"]
    assert table_row(done.stdout, "now") == ["assert_fail at tests/test_budget.py:11"]
    assert table_row(done.stdout, "calls now") == ["clock 2"]
    assert table_row(done.stdout, "reproduced") == ["yes"]
    assert table_row(done.stdout, "replay") == ["2, seed 0"]
    assert done.stdout.rstrip().endswith("reproduced: the probe labels it as the run did")
    assert_removed(docker_client, cli, done)


def test_a_recorded_assert_pass_comes_out_the_same(recorded, cli, docker_client):
    done = cli.run("reproduce", str(recorded.run_dir), BUDGET_PROPERTY, "--side", "base")
    assert done.code == 0, done.stderr
    assert "1 passed" in done.stdout
    assert table_row(done.stdout, "now") == ["assert_pass"]
    assert table_row(done.stdout, "calls now") == ["clock 1"]
    assert_removed(docker_client, cli, done)


def test_both_sides_one_after_the_other_then_side_by_side(recorded, cli, docker_client):
    done = cli.run("reproduce", str(recorded.run_dir), BUDGET_PROPERTY, "--side", "both")
    assert done.code == 0, done.stderr
    base, patch = recorded.repo.base[:12], recorded.repo.rev("extra-clock-read")[:12]
    headers = [line for line in done.stdout.splitlines() if line.startswith("== ")]
    assert [line.split()[1:3] for line in headers] == [["base", f"{base}:"], ["patch", f"{patch}:"]]
    # The two outputs in two columns: base's on the left, the patch's on the right.
    (heading,) = [line for line in done.stdout.splitlines() if " | patch " in line]
    assert heading.startswith(f"base {base}")
    rows = [line.split(" | ", 1) for line in done.stdout.splitlines() if " | " in line]
    assert any("1 passed" in left for left, _ in rows)
    assert any("1 failed" in right for _, right in rows)
    assert not any("1 failed" in left for left, _ in rows)
    assert table_row(done.stdout, "now") == [
        "assert_pass",
        "assert_fail at tests/test_budget.py:11",
    ]
    assert table_row(done.stdout, "calls now") == ["clock 1", "clock 2"]
    assert table_row(done.stdout, "reproduced") == ["yes", "yes"]
    assert_removed(docker_client, cli, done)


def test_a_flaky_replay_may_not_come_out_the_same_and_says_so(recorded, cli, docker_client):
    # Replay 2 failed on the state replay 1 left in the container's /tmp; run alone, in
    # a fresh container, it passes: not reproducible, which is evidence of the flake.
    done = cli.run("reproduce", str(recorded.run_dir), FLAKY_PROPERTY)
    assert done.code == 1, done.stderr
    assert table_row(done.stdout, "replay") == ["2, seed 0"]  # the first that did not pass
    assert table_row(done.stdout, "reproduced") == ["NO"]
    assert (
        "not reproduced: patch replay 2: recorded assert_fail at tests/test_flaky.py:34, "
        "now assert_pass"
    ) in done.stdout
    assert "ran after 1 other replay in one container (isolation side)" in done.stdout
    first = cli.run("reproduce", str(recorded.run_dir), FLAKY_PROPERTY, "--replay", "1")
    assert first.code == 0, first.stderr
    assert_removed(docker_client, cli, done)


def test_the_header_counts_the_replays_the_property_really_got(tmp_path, cli, docker_client):
    # A whole-suite run screens each test once; only the tests with signal get --replays 3.
    repo = build_example(tmp_path / "example")
    run_dir = tmp_path / "run"
    report = replay(
        cli, repo, run_dir, "extra-clock-read", "--replays", "3", "--fixture", str(repo.fixture)
    )
    quiet = next(
        entry["property_id"]
        for entry in report["decisions"]
        if entry["patch_labels"] == ["assert_pass"]  # screened once, no signal
    )
    assert len(labels(report, BUDGET_PROPERTY, "patch")) == 3  # replayed to N
    done = cli.run("reproduce", str(run_dir), quiet)
    assert done.code == 0, done.stderr
    (header,) = [line for line in done.stdout.splitlines() if line.startswith("== ")]
    assert f"{quiet}, replay 1 of 1 (seed" in header
    replayed = cli.run("reproduce", str(run_dir), BUDGET_PROPERTY, "--side", "base")
    assert replayed.code == 0, replayed.stderr
    (header,) = [line for line in replayed.stdout.splitlines() if line.startswith("== ")]
    assert f"{BUDGET_PROPERTY}, replay 1 of 3 (seed" in header


def test_a_run_made_with_workers_is_reproduced_in_one_session(tmp_path, cli, docker_client):
    # --jobs 2 split each replay of the whole suite across two pytest workers (and the
    # limits scaled with them); reproducing one property runs it alone, in one session.
    repo = build_example(tmp_path / "example")
    run_dir = tmp_path / "run"
    report = replay(
        cli, repo, run_dir, "extra-clock-read",
        "--jobs", "2", "--replays-all", "--replays", "1", "--fixture", str(repo.fixture),
    )  # fmt: skip
    assert report["run_log"]["jobs"] == 2
    assert labels(report, BUDGET_PROPERTY, "patch") == ["assert_fail"]
    raw = json.loads((run_dir / "raw" / "patch" / "replay-001.json").read_text())
    assert raw["workers"] == 2  # the run really was split
    done = cli.run("reproduce", str(run_dir), BUDGET_PROPERTY, "--side", "patch")
    assert done.code == 0, done.stderr
    assert "1 failed" in done.stdout
    assert table_row(done.stdout, "now") == ["assert_fail at tests/test_budget.py:11"]
    assert table_row(done.stdout, "reproduced") == ["yes"]
    assert "--workers" not in done.stdout
    assert_removed(docker_client, cli, done)


def test_a_run_made_with_tests_from_is_reproduced_with_the_same_overlay(
    tmp_path, cli, docker_client, runner_image_id
):
    # The patch fixes the id and brings its own new test; --tests-from patch lays that test
    # over the base tree, where it fails. The base tree alone has no such test (not_found).
    fix = (PATCH_TEMPLATES / "fix-trim-id" / "eventlib" / "normalize.py").read_text()
    repo = build_example(
        tmp_path / "example",
        extra_patches={
            "fix-with-test": {
                "eventlib/normalize.py": fix,
                "tests/test_new_trim.py": NEW_TEST_SOURCE,
            }
        },
    )
    run_dir = tmp_path / "run"
    report = replay(
        cli, repo, run_dir, "fix-with-test",
        "--property", NEW_TEST, "--tests-from", "patch", "--replays", "1",
    )  # fmt: skip
    assert labels(report, NEW_TEST, "base") == ["assert_fail"]
    done = cli.run("reproduce", str(run_dir), NEW_TEST, "--side", "base")
    assert done.code == 0, done.stderr
    tests_from = repo.rev("fix-with-test")[:12]
    assert f"tests from {tests_from}" in done.stdout
    assert table_row(done.stdout, "now") == ["assert_fail at tests/test_new_trim.py:7"]
    assert_removed(docker_client, cli, done)
    # Without the overlay the same node id is not there at all on base: what reproducing
    # a run made without --tests-from gives.
    plain_dir = tmp_path / "plain"
    plain = replay(cli, repo, plain_dir, "fix-with-test", "--property", NEW_TEST, "--replays", "1")
    assert labels(plain, NEW_TEST, "base") == ["harness_error"]
    again = cli.run("reproduce", str(plain_dir), NEW_TEST, "--side", "base")
    assert again.code == 0, again.stderr
    assert table_row(again.stdout, "now") == ["harness_error(not_found)"]


@pytest.fixture(scope="module")
def hung(tmp_path_factory: pytest.TempPathFactory, runner_image_id: str) -> Path:
    """A run of the patch that waits forever: its one replay is a timeout."""
    root = tmp_path_factory.mktemp("hung")
    repo = build_example(root / "example")
    report = replay(
        Cli(root / "scratch"), repo, root / "run", "hang",
        "--property", BUDGET_PROPERTY, "--fixture", str(repo.fixture),
        "--replays", "1", "--timeout", "3",
    )  # fmt: skip
    assert labels(report, BUDGET_PROPERTY, "patch") == ["timeout"]
    return root / "run"


def test_a_recorded_timeout_comes_out_a_timeout(hung, cli, docker_client):
    done = cli.run("reproduce", str(hung), BUDGET_PROPERTY)
    assert done.code == 0, done.stderr
    assert table_row(done.stdout, "now") == ["timeout(replay_timeout)"]
    assert_removed(docker_client, cli, done)


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_an_interruption_removes_the_container_and_exits_130_in_one_line(
    hung, cli, docker_client, signum
):
    # With --pdb the replay has no deadline: it hangs until the signal.
    process = subprocess.Popen(
        [str(CLI), "reproduce", str(hung), BUDGET_PROPERTY, "--pdb"],
        env=cli.env,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:

        def running() -> list[Any]:
            assert process.poll() is None, process.communicate()
            return [c for c in containers_of(docker_client, process.pid) if c.status == "running"]

        wait_for(running, timeout=120, what="the replay's container to run")
        process.send_signal(signum)
        _, stderr = process.communicate(timeout=120)
    finally:
        if process.poll() is None:
            process.kill()
    assert process.returncode == 130, stderr
    assert "Traceback" not in stderr, stderr
    errors = [line for line in stderr.splitlines() if line.startswith("orchestrator: error:")]
    name = signal.Signals(signum).name
    assert errors == [
        f"orchestrator: error: interrupted ({name}); containers and sources removed"
    ], stderr
    assert containers_of(docker_client, process.pid) == []
    assert cli.folders_left() == []


ENV_TEST = "tests/test_env.py::test_flag_and_a_writable_tree"
ENV_TEST_SOURCE = """\
import os
from pathlib import Path


def test_flag_and_a_writable_tree():
    assert os.environ["EXAMPLE_FLAG"] == "on"
    Path("written-by-the-test.txt").write_text("x")
"""


def test_the_runs_environment_and_writable_tree_are_honoured(tmp_path, cli, docker_client):
    # The test passes only with --env's variable and a tree it may write into: a
    # reproduction without either would fail it.
    repo = build_example(tmp_path / "example", extra_files={"tests/test_env.py": ENV_TEST_SOURCE})
    run_dir = tmp_path / "run"
    report = replay(
        cli, repo, run_dir, "extra-clock-read", "--property", ENV_TEST, "--replays", "1",
        "--env", "EXAMPLE_FLAG=on", "--writable-tree",
    )  # fmt: skip
    assert labels(report, ENV_TEST, "patch") == ["assert_pass"]
    done = cli.run("reproduce", str(run_dir), ENV_TEST, "--side", "both")
    assert done.code == 0, done.stdout + done.stderr
    assert table_row(done.stdout, "now") == ["assert_pass", "assert_pass"]
    assert "the environment differs" not in done.stdout
    assert_removed(docker_client, cli, done)
    child = cli.spawn("reproduce", str(run_dir), ENV_TEST, "--shell")
    try:
        child.expect("a writable copy of the tree at /src")
        child.expect(PROMPT)
        child.sendline('echo "flag=$EXAMPLE_FLAG home=$HOME"; ls tests; touch new && echo wrote')
        child.expect("flag=on home=/tmp/home")
        child.expect("test_env.py")
        child.expect("wrote")
        child.expect(PROMPT)
        child.sendline("exit")
        status = finish(child)
    finally:
        child.close(force=True)
    assert status == 0
    assert containers_of(docker_client, child.pid) == []


# -- refused before any container starts ---------------------------------------------------


def one_error_line(done: Done) -> str:
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, done.stderr
    assert lines[0].startswith("orchestrator: error: ")
    return lines[0]


@pytest.fixture
def damaged(recorded: Recorded, tmp_path: Path) -> Path:
    """A copy of the recorded run folder, for a test to damage."""
    copy = tmp_path / "run-copy"
    shutil.copytree(recorded.run_dir, copy)
    return copy


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("{missing}", BUDGET_PROPERTY), "no such run folder"),
        (("{run}", "tests/test_budget.py::test_nope"), "not a property of the run in"),
        (("{run}", BUDGET_PROPERTY, "--replay", "3"), "--replay 3: the run has replays 1 to 2"),
        (("{run}", BUDGET_PROPERTY, "--shell", "--pdb"), "--shell and --pdb do not go together"),
        (("{run}", BUDGET_PROPERTY, "--repo", "{missing}"), "not a git repository"),
        (("{run}", BUDGET_PROPERTY, "--repo", "{other}"), "unknown revision"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(recorded, cli, docker_client, tmp_path, args, message):
    other = build_sleepy(tmp_path / "other", count=1, seconds=0.1)  # not the run's commits
    values = {
        "run": str(recorded.run_dir),
        "missing": str(tmp_path / "nowhere"),
        "other": str(other.path),
    }
    done = cli.run("reproduce", *(arg.format(**values) for arg in args))
    assert done.code == 2
    assert message in one_error_line(done)
    assert_removed(docker_client, cli, done)


def test_a_fixture_whose_bytes_changed_is_refused(damaged, cli, docker_client):
    fixture = damaged / "fixture.json"
    fixture.write_text(fixture.read_text().replace("evt-1", "evt-2"))
    done = cli.run("reproduce", str(damaged), BUDGET_PROPERTY)
    assert done.code == 2
    assert "its bytes no longer match the run's fixture digest" in one_error_line(done)
    assert_removed(docker_client, cli, done)


def test_a_run_folder_that_kept_no_fixture_is_refused(damaged, cli, docker_client):
    (damaged / "fixture.json").unlink()
    done = cli.run("reproduce", str(damaged), BUDGET_PROPERTY)
    assert done.code == 2
    assert "fixture.json: no such file" in one_error_line(done)


def test_an_image_no_longer_on_the_engine_is_exit_3(damaged, cli, docker_client):
    log = json.loads((damaged / "run-log.json").read_text())
    log["image_digest"] = "sha256:" + "0" * 64  # an image ID no engine holds
    (damaged / "run-log.json").write_text(json.dumps(log))
    done = cli.run("reproduce", str(damaged), BUDGET_PROPERTY)
    assert done.code == 3
    line = one_error_line(done)
    assert f"the run's image sha256:{'0' * 64} (orchestrator-runner:latest) is no longer" in line
    assert_removed(docker_client, cli, done)


# -- kept for docker exec -----------------------------------------------------------------


def test_a_kept_container_stays_up_labelled_and_is_swept_later(recorded, cli, docker_client):
    done = cli.run("reproduce", str(recorded.run_dir), BUDGET_PROPERTY, "--keep")
    assert done.code == 0, done.stderr
    (kept,) = containers_of(docker_client, done.pid)
    assert kept.status == "running"
    assert f"kept: container {kept.name}, running" in done.stdout
    assert f"docker exec -it -e PYTHONHASHSEED=0 {kept.name} bash" in done.stdout
    assert kept.labels[docker_adapter.LABEL_RUN] == recorded.report["run_id"]
    assert kept.labels[docker_adapter.LABEL_SIDE] == "patch"
    # Everything the replay had is still in place for docker exec.
    fixture = kept.exec_run(["sh", "-c", 'cat "$REPLAY_FIXTURE"'])
    assert fixture.output == (recorded.run_dir / "fixture.json").read_bytes()
    tests = kept.exec_run(["ls", "/src/tests"]).output.decode().split()
    (source,) = [m["Source"] for m in kept.attrs["Mounts"] if m["Destination"] == "/src"]
    assert "test_budget.py" in tests, (source, Path(source).exists(), cli.folders_left())
    assert cli.folders_left() != []
    # Its owner is gone: the next sweep (every replay and reproduce starts with one)
    # removes the container and, by the same rule, its folders.
    assert kept.name in docker_adapter.sweep_leftovers(docker_client)
    git_adapter.sweep_scratch(root=cli.scratch)
    assert_removed(docker_client, cli, done)


# -- a terminal: --shell and --pdb ---------------------------------------------------------

PROMPT = r"\$ "


def finish(child: pexpect.spawn) -> int:
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus is not None, child.signalstatus
    return int(child.exitstatus)


def test_a_shell_in_the_replays_container_runs_the_printed_command(recorded, cli, docker_client):
    child = cli.spawn("reproduce", str(recorded.run_dir), BUDGET_PROPERTY, "--shell")
    try:
        child.expect(r"the replay, labelled:  (\S[^\r\n]*)\r\n")
        command = child.match.group(1)
        assert command.startswith("python3 -m orchestrator.probe.replay --replays 1")
        # The run was recorded with its neutralisers (run-log.json's neutralise): the same.
        neutralised = " ".join(neutraliser_args(0))
        assert command.endswith(
            f"-- -p no:cacheprovider --continue-on-collection-errors -q {neutralised} "
            f"-- {BUDGET_PROPERTY}"
        )
        child.expect(r"pytest alone: +([^\r\n]*)\r\n")
        child.expect(PROMPT)
        child.sendline('echo "seed=$REPLAY_SEED hash=$PYTHONHASHSEED in $(pwd)"')
        child.expect("seed=0 hash=0 in /src")
        child.expect(PROMPT)
        child.sendline('cat "$REPLAY_FIXTURE"; echo')
        child.expect('"id": "evt-1"')
        child.expect(PROMPT)
        child.sendline(command)  # the replay, as printed: pytest's output on this terminal
        child.expect("E +assert 2 == 1")
        child.expect("1 failed")
        child.expect(PROMPT)
        child.sendline("exit")
        # The shell ran the replay: its result is labelled and compared as any other.
        child.expect(r"reproduced +yes")
        status = finish(child)
    finally:
        child.close(force=True)
    assert status == 0
    assert containers_of(docker_client, child.pid) == []
    assert cli.folders_left() == []


def test_pdb_stops_at_the_failing_assertion_on_the_terminal(recorded, cli, docker_client):
    child = cli.spawn("reproduce", str(recorded.run_dir), BUDGET_PROPERTY, "--pdb")
    try:
        child.expect(r"-> assert clock\.calls == 1")
        child.expect(r"\(Pdb\) ")
        child.sendline("p clock.calls")  # the extra clock read, seen from inside the test
        child.expect(r"\r\n2\r\n")
        child.expect(r"\(Pdb\) ")
        child.sendline("c")
        child.expect("1 failed")
        child.expect(r"now +assert_fail at tests/test_budget\.py:11")
        child.expect("reproduced: the probe labels it as the run did")
        status = finish(child)
    finally:
        child.close(force=True)
    assert status == 0
    assert containers_of(docker_client, child.pid) == []
    assert cli.folders_left() == []

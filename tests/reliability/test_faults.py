"""Faults outside the container phase: each defect has its own test here, or its own
case of a parametrized one.

Real engine, real git, real SQLite, the real `orchestrator` command in a subprocess. The
engine that drops requests is a relay in front of the real socket (engine_relay.py); a
locked ledger is a second process holding SQLite's write lock; a full disk is a small
tmpfs. Every test checks what the user sees: the exit status, exactly one
`orchestrator: error:` line and no traceback, and what is left: the run folder complete
or marked incomplete, no container, no scratch folder, nothing recorded that should not be.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from engine_relay import CONNECTING, PING_AND_VERSION, DroppingRelay
from replay_helpers import (
    CLI,
    HANG_TIMEOUT_S,
    InProcess,
    Run,
    Runner,
    replay_args,
    run_containers,
    running_containers,
    wait_for,
)

from fixtures.build_example import BUDGET_PROPERTY, ExampleRepo, build_example, write_mutant
from orchestrator.adapters.ledger import Ledger

pytestmark = [pytest.mark.docker]

ERROR = "orchestrator: error: "


def error_lines(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if line.startswith(ERROR)]


def assert_one_line(stderr: str, *needles: str) -> str:
    """Exactly one error line, no traceback; returns the line."""
    assert "Traceback" not in stderr, stderr[-3000:]
    lines = error_lines(stderr)
    assert len(lines) == 1, stderr[-3000:]
    for needle in needles:
        assert needle in lines[0], lines[0]
    return lines[0]


def ledger_events(url: str) -> list[Any]:
    with Ledger.open(url) as ledger:
        return ledger.events()


def handlers_installed(pid: int) -> bool:
    """Has the process installed its SIGTERM handler (the tool's first statement)?"""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return True  # it ended: nothing to wait for
    caught = next(line for line in status.splitlines() if line.startswith("SigCgt:"))
    return bool(int(caught.split()[1], 16) & (1 << (signal.SIGTERM - 1)))


@pytest.fixture
def ledger_url(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'ledger.db'}"


# ------------------------------------------------ 1. the engine drops while planning


@pytest.fixture
def relay_socket(tmp_path: Path) -> Iterator[Path]:
    path = Path(f"/tmp/orch-relay-{os.getpid()}-{tmp_path.name[-12:]}.sock")  # <= 108 bytes
    yield path
    path.unlink(missing_ok=True)


# Which requests the relay answers, by phase: the request it then drops, what the one
# error line names, and whether the run folder was begun (then it is marked incomplete).
DROPPED_WHILE = {
    "sizing the pool": (PING_AND_VERSION, b"/info", "", False),
    "pinning the image": (CONNECTING, b"/images/", "image {image} cannot be inspected", False),
    "sweeping": (
        re.compile(CONNECTING.pattern + rb"|^/(v[0-9.]+/)?images/"),
        b"/containers/json",
        "",
        True,
    ),
}


@pytest.mark.parametrize("phase", list(DROPPED_WHILE))
def test_engine_dropping_before_any_replay_is_one_line_exit_3(
    phase: str, runner: Runner, example: ExampleRepo, image: str, tmp_path: Path, relay_socket: Path
) -> None:
    answered, dropped, needle, begun = DROPPED_WHILE[phase]
    relay = DroppingRelay(relay_socket, answered=answered)
    out = tmp_path / "run"
    args = replay_args(
        example,
        patch="extra-clock-read",
        properties=[BUDGET_PROPERTY],
        image=image,
        out=out,
        replays=1,
        extra=["--no-record"],
    )
    try:
        run = runner.run(args, out, env={"DOCKER_HOST": relay.url})
    finally:
        relay.close()
    assert any(dropped in line for line in relay.dropped), relay.dropped
    assert run.exit_code == 3, run.stderr[-2000:]
    assert_one_line(run.stderr, needle.format(image=image))
    if begun:
        assert (out / "INCOMPLETE").exists()
        assert not (out / "summary.json").exists()
    else:
        assert not out.exists()  # nothing had run, nothing was written
    assert runner.leftover_trees() == []


# The other commands that ask the engine for the image first: their arguments after the
# CLI's path (``{repo}``, ``{rev}``, ``{image}``, ``{fixture}``, ``{mutant}``, ``{ledger}``).
OTHER_COMMANDS_ON_THE_ENGINE = {
    "budget": [
        "budget", "--repo", "{repo}", "--rev", "{rev}", "--image", "{image}",
        "--property", BUDGET_PROPERTY, "--budget-ms", "100",
    ],
    "accept": [
        "accept", "--repo", "{repo}", "--property", BUDGET_PROPERTY, "--mutant", "{mutant}",
        "--fixture", "{fixture}", "--image", "{image}", "--ledger", "{ledger}", "--json",
    ],
}  # fmt: skip


@pytest.mark.parametrize("command", list(OTHER_COMMANDS_ON_THE_ENGINE))
def test_engine_dropping_under_another_command_is_exit_3(
    command: str,
    example: ExampleRepo,
    image: str,
    relay_socket: Path,
    runner: Runner,
    tmp_path: Path,
) -> None:
    values = {
        "repo": example.path,
        "rev": example.base,
        "image": image,
        "fixture": example.fixture,
        "mutant": write_mutant(example, "extra-clock-read", tmp_path / "clock.patch"),
        "ledger": f"sqlite:///{tmp_path / 'ledger.db'}",
    }
    argv = [arg.format(**values) for arg in OTHER_COMMANDS_ON_THE_ENGINE[command]]
    relay = DroppingRelay(relay_socket)
    try:
        done = subprocess.run(
            [str(CLI), *argv],
            env={**runner.env, "DOCKER_HOST": relay.url},
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
        )
    finally:
        relay.close()
    assert relay.dropped
    assert done.returncode == 3, done.stderr[-2000:]
    assert "Traceback" not in done.stderr
    if command == "accept":
        result = json.loads(done.stdout)
        assert result["outcome"] == "infra"  # never an acceptance, and recorded as one
        assert "cannot be inspected" in result["infra_reason"]
    else:
        assert_one_line(done.stderr, "cannot be inspected")


# ------------------------------------------------ 2. the ledger, checked before anything runs


@pytest.mark.parametrize("where", ["not a url", "under a file", "a folder"])
def test_an_unusable_ledger_is_exit_2_before_anything_runs(
    docker_client: Any,
    where: str,
    in_process: InProcess,
    example: ExampleRepo,
    image: str,
    tmp_path: Path,
) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    url = {
        "not a url": "garbage",
        "under a file": f"sqlite:///{blocker}/ledger.db",
        "a folder": f"sqlite:///{tmp_path}",
    }[where]
    out = tmp_path / "run"
    args = replay_args(
        example,
        patch="extra-clock-read",
        properties=[BUDGET_PROPERTY],
        image=image,
        out=out,
        replays=1,
        extra=["--ledger", url],
    )
    run = in_process(args, out)
    assert run.exit_code == 2, run.stderr[-2000:]
    assert_one_line(run.stderr, "ledger")
    assert not out.exists()  # refused before the run folder, before any container
    assert run_containers(docker_client, run.pid) == []


class LedgerLock:
    """Another writer: a process holding SQLite's write lock on the ledger until closed."""

    SCRIPT = (
        "import sqlite3, sys\n"
        "db = sqlite3.connect(sys.argv[1], isolation_level=None)\n"
        "db.execute('BEGIN IMMEDIATE')\n"
        "print('locked', flush=True)\n"
        "sys.stdin.read()\n"
    )

    def __init__(self, database: Path) -> None:
        self.process = subprocess.Popen(
            [sys.executable, "-c", self.SCRIPT, str(database)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        assert self.process.stdout is not None
        assert self.process.stdout.readline().strip() == "locked"

    def release(self) -> None:
        if self.process.poll() is None:
            assert self.process.stdin is not None
            self.process.stdin.close()
            self.process.wait(timeout=30)


def test_a_ledger_locked_past_the_wait_is_one_line_exit_3_and_the_report_is_intact(
    runner: Runner, example: ExampleRepo, image: str, tmp_path: Path
) -> None:
    database = tmp_path / "ledger.db"
    url = f"sqlite:///{database}"
    Ledger.open(url).close()  # an existing ledger, as in CI
    out = tmp_path / "run"
    args = replay_args(
        example,
        patch="extra-clock-read",
        properties=[BUDGET_PROPERTY],
        image=image,
        out=out,
        replays=1,
        extra=["--ledger", url],
    )
    lock = LedgerLock(database)
    try:
        run = runner.run(args, out, env={"ORCHESTRATOR_LEDGER_WAIT_S": "1"})
    finally:
        lock.release()
    assert run.exit_code == 3, run.stderr[-2000:]
    assert_one_line(run.stderr, "not recorded", "locked", str(out))
    report = run.report  # the --json report is printed whole
    assert report["decisions"][0]["lane"] == "property_regression"
    assert report["ledger"]["recorded"] is False
    summary = json.loads((out / "summary.json").read_text())
    assert summary["decisions"] == report["decisions"]
    assert not (out / "INCOMPLETE").exists()  # the folder is complete; `report` reads it
    assert ledger_events(url) == []  # nothing recorded


def test_ctrl_c_while_waiting_for_the_ledger_lock_exits_130_and_records_nothing(
    runner: Runner, example: ExampleRepo, image: str, tmp_path: Path
) -> None:
    database = tmp_path / "ledger.db"
    url = f"sqlite:///{database}"
    Ledger.open(url).close()
    out = tmp_path / "run"
    args = replay_args(
        example,
        patch="extra-clock-read",
        properties=[BUDGET_PROPERTY],
        image=image,
        out=out,
        replays=1,
        extra=["--ledger", url],
    )
    lock = LedgerLock(database)
    try:
        process = runner.start(args, env={"ORCHESTRATOR_LEDGER_WAIT_S": "600"})
        # summary.json is written before recording: once it is there, the run waits for
        # the lock (a 10-minute wait: only acting on the signal ends the process in time).
        wait_for(
            lambda: (out / "summary.json").exists() or process.poll() is not None,
            timeout=240,
            what="the run to reach its recording",
        )
        process.send_signal(signal.SIGINT)
        run = runner.finish(process, out, timeout=120)
    finally:
        lock.release()
    assert run.exit_code == 130, run.stderr[-2000:]
    assert_one_line(run.stderr, "interrupted (SIGINT)", "marked incomplete")
    assert (out / "INCOMPLETE").exists()
    assert ledger_events(url) == []


# ------------------------------------------------ 3. the run folder


@contextlib.contextmanager
def tmpfs(where: Path, size: str, *, read_only: bool = False) -> Iterator[Path]:
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root")
    where.mkdir(parents=True, exist_ok=True)
    options = f"size={size}" + (",ro" if read_only else "")
    subprocess.run(["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(where)], check=True)
    try:
        yield where
    finally:
        subprocess.run(["umount", "-l", str(where)], check=False)


def fill(folder: Path) -> None:
    """Write until the file system says it is full."""
    with contextlib.suppress(OSError), (folder / "filler").open("wb") as handle:
        while True:
            handle.write(b"\0" * 65536)
            handle.flush()


@pytest.mark.parametrize("case", ["a file", "under a file", "read-only", "full"])
def test_an_unusable_run_folder_is_exit_2_before_anything_runs(
    case: str, in_process: InProcess, example: ExampleRepo, image: str, tmp_path: Path
) -> None:
    with contextlib.ExitStack() as stack:
        if case == "a file":
            out = tmp_path / "run"
            out.write_text("mine\n")
        elif case == "under a file":
            (tmp_path / "a-file").write_text("mine\n")
            out = tmp_path / "a-file" / "run"
        elif case == "read-only":
            out = stack.enter_context(tmpfs(tmp_path / "ro", "1m", read_only=True)) / "run"
        else:
            disk = stack.enter_context(tmpfs(tmp_path / "small", "256k"))
            fill(disk)
            out = disk / "run"
        args = replay_args(
            example,
            patch="extra-clock-read",
            properties=[BUDGET_PROPERTY],
            image=image,
            out=out,
            replays=1,
            extra=["--no-record"],
        )
        run = in_process(args, out)
        assert run.exit_code == 2, run.stderr[-2000:]
        assert_one_line(run.stderr, "--out")
        assert not (out.is_dir() and any(out.iterdir()))
    if case == "a file":
        assert out.read_text() == "mine\n"


def test_a_disk_filling_mid_run_is_one_line_exit_3_disk_full(
    docker_client: Any, runner: Runner, example: ExampleRepo, image: str, tmp_path: Path
) -> None:
    with tmpfs(tmp_path / "small", "2m") as disk:
        out = disk / "run"
        args = replay_args(
            example,
            patch="extra-clock-read",
            properties=[BUDGET_PROPERTY],
            image=image,
            out=out,
            replays=2,
            extra=["--no-record"],
        )
        process = runner.start(args)
        wait_for(
            lambda: (out / "run-log.json").exists() or process.poll() is not None,
            timeout=240,
            what="the run log",
        )
        fill(disk)  # before any replay finished: its results have nowhere to go
        run = runner.finish(process, out)
        assert run.exit_code == 3, run.stderr[-2000:]
        assert_one_line(run.stderr, "disk_full")
        assert "docker_api" not in run.stderr
        assert (out / "INCOMPLETE").exists()
        assert not (out / "summary.json").exists()
    assert runner.leftover_trees() == []
    assert run_containers(docker_client, run.pid) == []


# ------------------------------------------------ 4 and 7. signals at every moment


def _start_and_signal(
    runner: Runner, args: list[str], moment: str, out: Path, signum: int, docker_client: Any
) -> Run:
    process = runner.start(args)
    if moment == "start":
        wait_for(lambda: handlers_installed(process.pid), timeout=60, what="the handlers")
    elif moment == "after the run log":
        wait_for(
            lambda: (out / "run-log.json").exists() or process.poll() is not None,
            timeout=240,
            what="the run log",
        )
    elif moment == "containers":
        wait_for(
            lambda: running_containers(docker_client, process),
            timeout=120,
            what="the replay's containers",
        )
    process.send_signal(signum)
    return runner.finish(process, out, timeout=180)


@pytest.mark.parametrize("moment", ["start", "planning", "after the run log", "containers"])
@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_every_interruption_is_one_line_exit_130_and_a_marked_folder(
    docker_client: Any,
    moment: str,
    signum: int,
    runner: Runner,
    example: ExampleRepo,
    image: str,
    tmp_path: Path,
    relay_socket: Path,
    ledger_url: str,
) -> None:
    out = tmp_path / "run"
    args = replay_args(
        example,
        patch="hang",
        properties=[BUDGET_PROPERTY],
        image=image,
        out=out,
        replays=1,
        timeout_s=HANG_TIMEOUT_S,
        extra=["--ledger", ledger_url],
    )
    env: dict[str, str] = {}
    relay = None
    if moment == "planning":  # the image's inspection is held: the run is planning
        images = re.compile(rb"^/(v[0-9.]+/)?images/")
        relay = DroppingRelay(relay_socket, answered=re.compile(rb""), stalled=images)
        env["DOCKER_HOST"] = relay.url
    try:
        if relay is not None:
            process = runner.start(args, env=env)
            wait_for(relay.stalling.is_set, timeout=120, what="the image inspection")
            process.send_signal(signum)
            run = runner.finish(process, out, timeout=120)
        else:
            run = _start_and_signal(runner, args, moment, out, signum, docker_client)
    finally:
        if relay is not None:
            relay.close()
    name = signal.Signals(signum).name
    assert run.exit_code == 130, run.stderr[-2000:]
    assert_one_line(run.stderr, f"interrupted ({name})")
    if out.exists():  # only a run folder marked incomplete is left
        assert (out / "INCOMPLETE").exists()
        assert not (out / "summary.json").exists()
        refused = subprocess.run(
            [str(CLI), "report", str(out)], capture_output=True, text=True, check=False
        )
        assert refused.returncode == 2
        assert "marked incomplete" in refused.stderr
    assert run_containers(docker_client, run.pid) == []
    assert runner.leftover_trees() == []
    if Path(ledger_url.removeprefix("sqlite:///")).exists():
        assert ledger_events(ledger_url) == []


def test_a_sigkilled_run_leaves_a_folder_marked_incomplete_and_the_next_run_sweeps(
    docker_client: Any,
    runner: Runner,
    example: ExampleRepo,
    image: str,
    tmp_path: Path,
    ledger_url: str,
) -> None:
    out = tmp_path / "killed"
    args = replay_args(
        example,
        patch="hang",
        properties=[BUDGET_PROPERTY],
        image=image,
        out=out,
        replays=1,
        timeout_s=HANG_TIMEOUT_S,
        extra=["--ledger", ledger_url],
    )
    killed = _start_and_signal(runner, args, "containers", out, signal.SIGKILL, docker_client)
    assert killed.exit_code == -signal.SIGKILL
    assert (out / "INCOMPLETE").exists()
    assert run_containers(docker_client, killed.pid) != []  # what a killed run leaves ...
    assert runner.leftover_trees() != []
    after = tmp_path / "after"
    args = replay_args(
        example,
        patch="extra-clock-read",
        properties=[BUDGET_PROPERTY],
        image=image,
        out=after,
        replays=1,
        extra=["--ledger", ledger_url],
    )
    run = runner.run(args, after)
    assert run.exit_code == 1, run.stderr[-2000:]
    assert run_containers(docker_client, killed.pid) == []  # ... the next run removes them
    assert runner.leftover_trees() == []
    assert not (after / "INCOMPLETE").exists()
    run_ids = {e.detail.get("run_id") for e in ledger_events(ledger_url)}
    assert run_ids == {run.report["run_id"]}  # the killed run recorded nothing


# ------------------------------------------------ 8. a property on neither side


STAR_IMPORTED = """\
from eventlib import *  # noqa: F403 - a star import: the source cannot tell what it binds


def test_something_else():
    assert True
"""


# A property no side collects: its extra test files and its node id.
NEITHER_SIDE = {
    # Known from the sources: refused before any replay.
    "from the sources": ({}, "tests/test_budget.py::test_no_such_property"),
    # A star import might bind it: only pytest knows, so it is replayed first.
    "after collection": ({"tests/test_star.py": STAR_IMPORTED}, "tests/test_star.py::test_typo"),
}


@pytest.mark.parametrize("case", list(NEITHER_SIDE))
def test_a_property_on_neither_side_is_exit_2_never_infra(
    case: str,
    runner: Runner,
    in_process: InProcess,
    image: str,
    tmp_path: Path,
    ledger_url: str,
) -> None:
    files, prop = NEITHER_SIDE[case]
    repo = build_example(tmp_path / "repo", extra_files=files)
    out = tmp_path / "run"
    args = replay_args(
        repo,
        patch="extra-clock-read",
        properties=[prop],
        image=image,
        out=out,
        replays=1,
        extra=["--ledger", ledger_url],
    )
    replayed = case == "after collection"
    run = runner.run(args, out) if replayed else in_process(args, out)
    assert run.exit_code == 2, run.stderr[-2000:]
    assert_one_line(run.stderr, f"no test collected as {prop} on either side")
    if replayed:
        assert (out / "raw").is_dir()  # it was replayed ...
        assert not (out / "properties.jsonl.gz").exists()  # ... and decided nothing
        assert (out / "INCOMPLETE").exists()
    else:
        assert not out.exists()  # no replay ran
    with Ledger.open(ledger_url) as ledger:
        assert ledger.infra_entries() == []
        assert ledger.events() == []


def test_a_run_that_finishes_leaves_a_complete_folder(
    runner: Runner, example: ExampleRepo, image: str, tmp_path: Path, ledger_url: str
) -> None:
    out = tmp_path / "run"
    args = replay_args(
        example,
        patch="extra-clock-read",
        properties=[BUDGET_PROPERTY],
        image=image,
        out=out,
        replays=1,
        extra=["--ledger", ledger_url],
    )
    run = runner.run(args, out)
    assert run.exit_code == 1, run.stderr[-2000:]
    assert not (out / "INCOMPLETE").exists()
    summary = json.loads((out / "summary.json").read_text())
    assert summary["ledger"]["recorded"] is True
    assert {e.detail.get("run_id") for e in ledger_events(ledger_url)} == {summary["run_id"]}


# ------------------------------------------------ the bad-input table


BAD_INPUT = {  # row -> (what to change in a good command line, exit status, in the line)
    "nonexistent repo": ({"--repo": "{tmp}/no-such-repo"}, 2, "not a git repository"),
    "bad revision": ({"--patch": "no-such-rev"}, 2, "unknown revision"),
    "missing image": ({"--image": "orchestrator-missing:never"}, 3, "not present"),
    "malformed image reference": ({"--image": "Not An:Image"}, 2, "not an image reference"),
    "--replays 0": ({"--replays": "0"}, 2, "--replays"),
    "--timeout nan": ({"--timeout": "nan"}, 2, "--timeout"),
    "--timeout inf": ({"--timeout": "inf"}, 2, "--timeout"),
    "fixture not JSON": ({"--fixture": "{tmp}/not-json.json"}, 2, "not JSON"),
    "missing fixture": ({"--fixture": "{tmp}/missing.json"}, 2, "no such file"),
    "unknown property": (
        {"--property": "tests/test_budget.py::test_typo"},
        2,
        "no test collected as tests/test_budget.py::test_typo on either side",
    ),
    "bad ledger URL": ({"--ledger": "not-a-url"}, 2, "not a database URL"),
    "ledger path under a file": ({"--ledger": "sqlite:///{tmp}/a-file/ledger.db"}, 2, "a file"),
    "unwritable --out": ({"--out": "{tmp}/a-file/run"}, 2, "--out"),
    # The options of a run spread over engines or cut into shards (issue 16).
    "malformed --engine": ({"--engine": "ftp://somewhere"}, 2, "expected unix://PATH"),
    "--engine given twice": (
        {"--engine": ["unix://{tmp}/e.sock", "unix://{tmp}/e.sock"]},
        2,
        "given twice",
    ),
    "no engine at --engine": (
        {"--engine": "unix://{tmp}/no-engine.sock"},
        3,
        "no Docker engine answers",
    ),
    "--shard out of range": ({"--shard": "3/2"}, 2, "between 1 and N"),
    "--slots 0": ({"--slots": "0"}, 2, "--slots"),
    "malformed --env": ({"--env": "NO_EQUALS_SIGN"}, 2, "KEY=VALUE"),
    "malformed --run-id": ({"--run-id": "a/b"}, 2, "--run-id"),
}


@pytest.mark.parametrize("row", list(BAD_INPUT))
def test_bad_input_is_its_documented_exit_code_and_one_line(
    row: str,
    runner: Runner,
    in_process: InProcess,
    example: ExampleRepo,
    image: str,
    tmp_path: Path,
    docker_client: Any,
) -> None:
    changes, status, needle = BAD_INPUT[row]
    (tmp_path / "a-file").write_text("")
    (tmp_path / "not-json.json").write_text("{not json")
    out = tmp_path / "run"
    args = replay_args(
        example,
        patch="extra-clock-read",
        properties=[BUDGET_PROPERTY],
        image=image,
        out=out,
        replays=1,
        extra=["--ledger", f"sqlite:///{tmp_path / 'ledger.db'}"],
    )
    for option, value in changes.items():
        if isinstance(value, list):  # a repeated option, added
            for each in value:
                args += [option, each.format(tmp=tmp_path)]
        elif option in args:
            args[args.index(option) + 1] = value.format(tmp=tmp_path)
        else:
            args += [option, value.format(tmp=tmp_path)]
    run = in_process(args, out)
    assert run.exit_code == status, run.stderr[-2000:]
    line = assert_one_line(run.stderr, needle)
    assert len(line) < 400
    assert not out.exists()  # found before anything was written or run
    assert run_containers(docker_client, run.pid) == []
    assert runner.leftover_trees() == []


# ------------------------------------------------ the rows that apply to the other commands


OTHER_COMMANDS = {  # row -> (arguments after `orchestrator`, exit status, in the line)
    "image build: nonexistent repo": (
        ["image", "build", "--repo", "{tmp}/no-such-repo"],
        2,
        "not a git repository",
    ),
    "image build: bad revision": (
        ["image", "build", "--repo", "{repo}", "--rev", "no-such-rev"],
        2,
        "unknown revision",
    ),
    "image build: malformed image reference": (
        ["image", "build", "--repo", "{repo}", "--python-image", "Not An:Image"],
        2,
        "not an image reference",
    ),
    "image build: missing image": (
        # (a network given: the index options are not what this row is about)
        [
            "image",
            "build",
            "--repo",
            "{repo}",
            "--python-image",
            "orchestrator-missing:never",
            "--network",
            "host",
        ],
        3,
        "not present",
    ),
    "merge: missing run folder": (["merge", "{tmp}/no-such-run"], 2, "no such run folder"),
    "merge: not a finished run": (["merge", "{tmp}/empty"], 2, "not a finished run"),
    "merge: unwritable --out": (
        ["merge", "{tmp}/empty", "--out", "{tmp}/a-file/merged"],
        2,
        "--out",
    ),
    "merge: --out a file": (["merge", "{tmp}/empty", "--out", "{tmp}/a-file"], 2, "--out"),
    "reproduce: missing run folder": (
        ["reproduce", "{tmp}/no-such-run", BUDGET_PROPERTY],
        2,
        "no such run folder",
    ),
    "reproduce: not a finished run": (
        ["reproduce", "{tmp}/empty", BUDGET_PROPERTY],
        2,
        "not a finished run",
    ),
}


@pytest.mark.parametrize("row", list(OTHER_COMMANDS))
def test_bad_input_to_the_other_commands_is_its_exit_code_and_one_line(
    row: str, runner: Runner, in_process: InProcess, example: ExampleRepo, tmp_path: Path
) -> None:
    argv, status, needle = OTHER_COMMANDS[row]
    (tmp_path / "a-file").write_text("")
    (tmp_path / "empty").mkdir()
    values = {"tmp": tmp_path, "repo": example.path}
    done = in_process([arg.format(**values) for arg in argv], tmp_path / "no-run")
    assert done.exit_code == status, done.stderr[-2000:]
    assert_one_line(done.stderr, needle)
    assert done.stdout == ""
    assert not (tmp_path / "a-file" / "merged").exists()
    assert (tmp_path / "a-file").read_text() == ""
    assert list((tmp_path / "empty").iterdir()) == []
    assert runner.leftover_trees() == []

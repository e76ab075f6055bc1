"""The replay driver end to end: real child processes, real deadlines, real signals."""

from __future__ import annotations

import hashlib
import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest
from support.polling import wait_for

from orchestrator.probe import PROBE_VERSION
from orchestrator.probe.jobs import child_environment, encode_run, read_result
from orchestrator.probe.options import parse_args
from orchestrator.probe.replay import wanted_hash_seed

PACKAGE_ROOT = str(Path(__file__).resolve().parents[2])


SPAWN_MODES = pytest.mark.parametrize("spawn", ["fork", "exec"])


def driver_command(
    out: Path,
    *pytest_args: str,
    replays: int = 1,
    timeout: float = 60,
    spawn: str = "fork",
    seed: int = 5,
) -> list:
    return [
        sys.executable,
        "-m",
        "orchestrator.probe.replay",
        "--replays",
        str(replays),
        "--timeout",
        str(timeout),
        "--out",
        str(out),
        "--seed",
        str(seed),
        "--spawn",
        spawn,
        "--",
        "-p",
        "no:hypothesispytest",  # keeps each replay's start-up small
        *pytest_args,
    ]


def driver_env(**extra: str) -> dict[str, str]:
    # Nothing of this test session's own pytest (PYTEST_XDIST_WORKER under `make test-fast`,
    # PYTEST_CURRENT_TEST): a replay's container never has it.
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(("REPLAY_", "PYTEST_"))
    }
    env.pop("PYTHONHASHSEED", None)
    env["PYTHONPATH"] = PACKAGE_ROOT
    env.update(extra)
    return env


def run_driver(
    project: Path, out: Path, *pytest_args: str, env: dict[str, str] | None = None, **options: Any
):
    return subprocess.run(
        driver_command(out, *pytest_args, **options),
        cwd=project,
        env=driver_env() if env is None else env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def own_lines(stdout: str, out: Path) -> list[str]:
    """The driver's lines but its result announcements, each checked against the file it
    names (``result replay-<k>.json <sha256 of its bytes>``)."""
    kept = []
    for line in stdout.splitlines():
        if line.startswith("result "):
            _, name, digest = line.split(" ")
            assert hashlib.sha256((out / name).read_bytes()).hexdigest() == digest
        else:
            kept.append(line)
    return kept


def load(path: Path) -> dict[str, Any]:
    document: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    return document


def write(project: Path, name: str, source: str) -> None:
    (project / name).write_text(textwrap.dedent(source), encoding="utf-8")


@SPAWN_MODES
def test_replays_write_one_result_each_then_driver_json(tmp_path, spawn):
    write(
        tmp_path,
        "test_mixed.py",
        """
        def test_pass():
            assert True

        def test_fail():
            assert 1 == 2
        """,
    )
    out = tmp_path / "out"
    completed = run_driver(tmp_path, out, "test_mixed.py", replays=3, spawn=spawn)
    assert completed.returncode == 0, completed.stderr
    # Each finished test's progress line (from the probe), then the replay's own line.
    assert own_lines(completed.stdout, out) == [
        line
        for k in (1, 2, 3)
        for line in ("test 1/2 passed", "test 2/2 failed", f"replay {k}/3 completed")
    ]
    assertion_ids = set()
    for k in (1, 2, 3):
        run = load(out / f"replay-{k:03d}.json")
        assert run["schema"] == "replay-run/1"
        assert (run["replay"], run["status"], run["seed"]) == (k, "completed", 5)
        assert run["spawn"] == spawn
        assert run["probe_version"] == PROBE_VERSION
        assert run["exit_code"] == 1  # pytest's "tests failed"
        assert run["wall_ms"] > 0
        result = run["result"]
        assert result["schema"] == "replay-probe/1"
        assert result["seed"] == 5
        labels = {entry["nodeid"]: entry["label"] for entry in result["tests"]}
        assert labels == {
            "test_mixed.py::test_pass": "assert_pass",
            "test_mixed.py::test_fail": "assert_fail",
        }
        assertion_ids |= {entry["assertion_id"] for entry in result["tests"]}
    assert assertion_ids == {None, "test_mixed.py::test_fail@test_mixed.py:6:AssertionError"}
    assert load(out / "driver.json") == {
        "schema": "replay-driver/1",
        "probe_version": PROBE_VERSION,
        "replays": 3,
        "finished": True,
    }
    # Only whole files: no temporary or intermediate result files are left behind.
    names = sorted(path.name for path in out.iterdir())
    assert names == [
        "driver.json",
        "replay-001.json",
        "replay-001.log",
        "replay-002.json",
        "replay-002.log",
        "replay-003.json",
        "replay-003.log",
    ]


@SPAWN_MODES
def test_each_replay_is_a_fresh_process_that_imports_the_project_afresh(tmp_path, spawn):
    # State that survived from one replay to the next would flip these tests: the
    # project's own module already imported, a mark on sys or on pytest itself, a
    # pytest-level setting changed by the previous session's conftest.
    write(tmp_path, "helper_module.py", "LOADED_BY = []\n")
    write(
        tmp_path,
        "conftest.py",
        """
        import pytest

        def pytest_configure(config):
            assert not hasattr(pytest, "_replay_leak"), "pytest mutated by an earlier replay"
            pytest._replay_leak = True
        """,
    )
    write(
        tmp_path,
        "test_state.py",
        """
        import os, sys

        def test_first_in_this_process():
            assert "helper_module" not in sys.modules
            import helper_module
            assert helper_module.LOADED_BY == []
            helper_module.LOADED_BY.append(os.getpid())
            assert not hasattr(sys, "_replay_marker")
            sys._replay_marker = os.getpid()
        """,
    )
    out = tmp_path / "out"
    completed = run_driver(tmp_path, out, "test_state.py", replays=3, spawn=spawn)
    assert completed.returncode == 0, completed.stderr
    for k in (1, 2, 3):
        run = load(out / f"replay-{k:03d}.json")
        assert run["exit_code"] == 0, (out / f"replay-{k:03d}.log").read_text()
        (entry,) = run["result"]["tests"]
        assert entry["label"] == "assert_pass"
    # Nothing of the project is ever imported by the driver itself.
    assert "helper_module" not in completed.stdout + completed.stderr


HASH_TEST = """
    import os

    def test_hash():
        with open(os.environ["HASH_OUT"] + "-" + str(os.getpid()), "w") as handle:
            handle.write(str(hash("replay-probe")))
"""


def _expected_hash(seed: int) -> int:
    done = subprocess.run(
        [sys.executable, "-c", "print(hash('replay-probe'))"],
        env={**os.environ, "PYTHONHASHSEED": str(seed % 2**32)},
        capture_output=True,
        text=True,
        check=True,
    )
    return int(done.stdout)


@SPAWN_MODES
@pytest.mark.parametrize("driver_hash_seed", [None, "0", "4242"])
def test_every_replay_hashes_with_the_seed_whatever_the_driver_started_with(
    tmp_path, spawn, driver_hash_seed
):
    write(tmp_path, "test_hash.py", HASH_TEST)
    extra = {"HASH_OUT": str(tmp_path / "hash")}
    if driver_hash_seed is not None:
        extra["PYTHONHASHSEED"] = driver_hash_seed
    out = tmp_path / "out"
    completed = run_driver(
        tmp_path, out, "test_hash.py", replays=2, seed=7, spawn=spawn, env=driver_env(**extra)
    )
    assert completed.returncode == 0, completed.stderr
    written = sorted(tmp_path.glob("hash-*"))
    assert len(written) == 2  # one per replay, each from its own process
    assert {int(path.read_text()) for path in written} == {_expected_hash(7)}
    assert _expected_hash(7) != _expected_hash(8)  # the check can tell seeds apart


def test_counts_start_at_zero_in_every_forked_replay(tmp_path):
    # The driver imported the probe (audit hook, sleep wrapper) before forking: each
    # replay must count only its own calls, once each, from zero.
    data = tmp_path / "data.txt"
    data.write_text("x")
    write(
        tmp_path,
        "test_counts.py",
        f"""
        import time

        def test_effects():
            for _ in range(3):
                with open({str(data)!r}) as handle:
                    handle.read()
            time.sleep(0)
        """,
    )
    out = tmp_path / "out"
    completed = run_driver(tmp_path, out, "test_counts.py", replays=3)
    assert completed.returncode == 0, completed.stderr
    for k in (1, 2, 3):
        (entry,) = load(out / f"replay-{k:03d}.json")["result"]["tests"]
        assert (entry["calls"]["open"], entry["calls"]["sleep"]) == (3, 1)
        assert entry["calls"]["subprocess"] == 0  # the driver's own fork is not counted


def test_a_forked_replay_never_returns_into_the_driver(tmp_path):
    # A test that raises SystemExit from an atexit hook, or otherwise unwinds, must end
    # its own process: the driver writes each run file once and prints one line each.
    write(
        tmp_path,
        "test_exit.py",
        """
        import atexit, sys

        def test_registers_an_exit():
            atexit.register(sys.exit, 3)
        """,
    )
    out = tmp_path / "out"
    completed = run_driver(tmp_path, out, "test_exit.py", replays=2)
    assert completed.returncode == 0, completed.stderr
    assert own_lines(completed.stdout, out) == [
        "test 1/1 passed",
        "replay 1/2 completed",
        "test 1/1 passed",
        "replay 2/2 completed",
    ]
    assert load(out / "driver.json")["finished"] is True


@SPAWN_MODES
def test_hanging_replay_is_killed_with_its_process_group_and_recorded_as_timeout(tmp_path, spawn):
    pid_file = tmp_path / "background.pid"
    write(
        tmp_path,
        "test_hang.py",
        f"""
        import subprocess, sys, time

        def test_hangs():
            child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)"])
            with open({str(pid_file)!r}, "w") as handle:
                handle.write(str(child.pid))
            time.sleep(300)
        """,
    )
    out = tmp_path / "out"
    started = time.monotonic()
    completed = run_driver(tmp_path, out, "test_hang.py", replays=2, timeout=2, spawn=spawn)
    elapsed = time.monotonic() - started
    assert completed.returncode == 0, completed.stderr
    assert own_lines(completed.stdout, out) == ["replay 1/2 timeout", "replay 2/2 timeout"]
    assert elapsed < 60  # both replays were cut at their deadline, not at 300 s
    for k in (1, 2):
        run = load(out / f"replay-{k:03d}.json")
        assert (run["status"], run["exit_code"], run["result"]) == ("timeout", None, None)
        assert run["wall_ms"] >= 2000
    background = int(pid_file.read_text())
    assert not _alive(background), "the test's background process outlived the replay"
    assert load(out / "driver.json")["finished"] is True


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie is dead but not yet reaped by its (re-)parent.
    stat = Path(f"/proc/{pid}/stat")
    return stat.exists() and stat.read_text().split()[2] != "Z"


@SPAWN_MODES
def test_pytest_exiting_before_the_session_is_no_result(tmp_path, spawn):
    write(tmp_path, "test_ok.py", "def test_ok():\n    pass\n")
    out = tmp_path / "out"
    completed = run_driver(tmp_path, out, "--no-such-option", "test_ok.py", spawn=spawn)
    assert own_lines(completed.stdout, out) == ["replay 1/1 no_result"]
    run = load(out / "replay-001.json")
    assert (run["status"], run["result"]) == ("no_result", None)
    assert run["exit_code"] == pytest.ExitCode.USAGE_ERROR
    # What pytest said, so that the host can say why there is no result.
    assert "unrecognized arguments: --no-such-option" in run["output_tail"]


def test_a_replay_that_prints_much_before_failing_keeps_only_the_end(tmp_path):
    write(
        tmp_path,
        "conftest.py",
        """
        import sys

        for number in range(5000):
            print(f"noise line {number}", file=sys.stderr)
        raise RuntimeError("the conftest gave up here")
        """,
    )
    write(tmp_path, "test_ok.py", "def test_ok():\n    pass\n")
    out = tmp_path / "out"
    run_driver(tmp_path, out, "test_ok.py")
    run = load(out / "replay-001.json")
    assert run["status"] == "no_result"
    lines = run["output_tail"].splitlines()
    assert any("RuntimeError: the conftest gave up here" in line for line in lines)
    assert len(lines) <= 8
    assert "noise line 0" not in run["output_tail"]
    assert len(run["output_tail"]) <= 2000


@SPAWN_MODES
def test_a_garbled_result_is_corrupt_result(tmp_path, spawn):
    # A conftest that clobbers the result after the probe wrote it.
    write(
        tmp_path,
        "conftest.py",
        """
        import os

        def pytest_unconfigure(config):
            with open(os.environ["REPLAY_RESULT"], "w") as handle:
                handle.write('{"schema": "replay-probe/1", "tests": [')
        """,
    )
    write(tmp_path, "test_ok.py", "def test_ok():\n    pass\n")
    out = tmp_path / "out"
    completed = run_driver(tmp_path, out, "test_ok.py", spawn=spawn)
    assert own_lines(completed.stdout, out) == ["test 1/1 passed", "replay 1/1 corrupt_result"]
    run = load(out / "replay-001.json")
    assert (run["status"], run["result"], run["exit_code"]) == ("corrupt_result", None, 0)
    assert "output_tail" not in run or "passed" in run["output_tail"]


def test_unknown_node_id_is_completed_with_a_not_found_entry(tmp_path):
    write(tmp_path, "test_ok.py", "def test_ok():\n    pass\n")
    out = tmp_path / "out"
    run_driver(tmp_path, out, "test_ok.py::test_absent")
    run = load(out / "replay-001.json")
    assert run["status"] == "completed"
    (entry,) = run["result"]["tests"]
    assert (entry["nodeid"], entry["reason"]) == ("test_ok.py::test_absent", "not_found")


@SPAWN_MODES
def test_sigterm_kills_the_running_replay_and_exits(tmp_path, spawn):
    marker = tmp_path / "running"
    write(
        tmp_path,
        "test_wait.py",
        f"""
        import os, time

        def test_waits():
            with open({str(marker)!r}, "w") as handle:
                handle.write(str(os.getpid()))
            time.sleep(300)
        """,
    )
    out = tmp_path / "out"
    driver = subprocess.Popen(
        driver_command(out, "test_wait.py", replays=3, timeout=300, spawn=spawn),
        cwd=tmp_path,
        env=driver_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:

        def started() -> str:
            assert driver.poll() is None, driver.communicate()
            return marker.read_text() if marker.exists() else ""

        pytest_pid = int(wait_for(started, timeout=60, what="the replay's marker"))
        driver.send_signal(signal.SIGTERM)
        stdout, stderr = driver.communicate(timeout=30)
    finally:
        if driver.poll() is None:
            driver.kill()
    assert driver.returncode == 128 + signal.SIGTERM, stderr
    assert stdout == ""  # no replay finished
    assert not _alive(pytest_pid)
    assert load(out / "driver.json")["finished"] is False
    assert not (out / "replay-001.json").exists()


# -- --attach (orchestrator reproduce) ----------------------------------------------------


def attached(command: list) -> list:
    """The driver's command line with --attach among its own options."""
    split = command.index("--")
    return [*command[:split], "--attach", *command[split:]]


@SPAWN_MODES
def test_an_attached_replay_writes_pytest_output_to_the_drivers_own(tmp_path, spawn):
    write(tmp_path, "test_one.py", "def test_fails():\n    assert 1 == 2\n")
    out = tmp_path / "out"
    completed = subprocess.run(
        attached(driver_command(out, "-q", "test_one.py", spawn=spawn)),
        cwd=tmp_path,
        env=driver_env(),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert completed.returncode == 0, completed.stderr
    assert "test_one.py:2: AssertionError" in completed.stdout
    assert "1 failed" in completed.stdout
    assert "replay 1/1" not in completed.stdout  # the driver says nothing of its own
    # No log file: the output went out; the labelled result is written as always.
    assert sorted(path.name for path in out.iterdir()) == ["driver.json", "replay-001.json"]
    (entry,) = load(out / "replay-001.json")["result"]["tests"]
    assert entry["label"] == "assert_fail"


@SPAWN_MODES
def test_an_attached_replay_reads_the_terminal_in_the_foreground(tmp_path, spawn):
    # A replay is a process group of its own: left in the background it would be
    # stopped (SIGTTIN) the moment it read the terminal, and this would hang.
    import pexpect

    write(
        tmp_path,
        "test_asks.py",
        """
        def test_asks():
            answer = input("name? ")
            assert answer == "ada"
        """,
    )
    out = tmp_path / "out"
    command = attached(driver_command(out, "-q", "-s", "test_asks.py", spawn=spawn))
    child = pexpect.spawn(
        command[0], command[1:], cwd=str(tmp_path), env=driver_env(), encoding="utf-8", timeout=60
    )
    try:
        child.expect_exact("name? ")
        child.sendline("ada")
        child.expect("1 passed")
        child.expect(pexpect.EOF)
    finally:
        child.close(force=True)
    assert child.exitstatus == 0
    (entry,) = load(out / "replay-001.json")["result"]["tests"]
    assert entry["label"] == "assert_pass"


# -- pieces ------------------------------------------------------------------------------


def test_arguments_after_the_separator_go_to_pytest(monkeypatch):
    monkeypatch.delenv("REPLAY_SEED", raising=False)
    options = parse_args(["--replays", "2", "--timeout", "1.5", "--out", "o", "--", "-q", "--x"])
    assert (options.replays, options.timeout_s, options.seed) == (2, 1.5, 0)
    assert options.pytest_args == ("-q", "--x")
    monkeypatch.setenv("REPLAY_SEED", "17")
    assert parse_args(["--replays", "1", "--timeout", "1", "--out", "o"]).seed == 17


@pytest.mark.parametrize(
    "argv",
    [
        ["--replays", "0", "--timeout", "1", "--out", "o"],
        ["--replays", "1", "--timeout", "0", "--out", "o"],
        ["--replays", "1", "--timeout", "1"],
    ],
)
def test_bad_arguments_exit_2(argv, capsys):
    with pytest.raises(SystemExit) as stopped:
        parse_args(argv)
    assert stopped.value.code == 2


def test_child_environment_pins_result_seed_and_package(tmp_path):
    env = child_environment({"PYTHONPATH": "/elsewhere"}, result_path=tmp_path / "r", seed=-3)
    assert env["REPLAY_RESULT"] == str(tmp_path / "r")
    assert env["REPLAY_SEED"] == "-3"
    assert env["PYTHONHASHSEED"] == str(-3 % 2**32)
    assert env["PYTHONPATH"].split(os.pathsep) == [PACKAGE_ROOT, "/elsewhere"]


@pytest.mark.parametrize(
    ("content", "status"),
    [
        (None, "no_result"),
        (b"", "corrupt_result"),
        (b'{"schema": "replay-probe/1", "tests": [', "corrupt_result"),
        (b'{"schema": "other/1", "tests": []}', "corrupt_result"),
        (b'{"schema": "replay-probe/1", "tests": {}}', "corrupt_result"),
        (b'{"schema": "replay-probe/1", "tests": []}', "completed"),
    ],
)
def test_read_result_never_trusts_a_half_or_foreign_file(tmp_path, content, status):
    path = tmp_path / "result.json"
    if content is not None:
        path.write_bytes(content)
    assert read_result(path)[0] == status


@pytest.mark.parametrize(
    "result", [None, b'{"schema": "replay-probe/1", "tests": [{"n": "\xc3\xa9"}]}\n']
)
def test_encoded_run_is_the_run_with_the_result_spliced_in(result):
    run = {"schema": "replay-run/1", "replay": 2, "status": "completed", "note": "é"}
    decoded = json.loads(encode_run(run, result).decode("utf-8"))
    expected_result = None if result is None else json.loads(result)
    assert decoded == {**run, "result": expected_result}


@pytest.mark.parametrize(
    ("argv", "environ", "wanted"),
    [
        (["--replays", "1", "--seed", "7"], {}, "7"),
        (["--seed=-3"], {}, str(-3 % 2**32)),
        ([], {"REPLAY_SEED": "12"}, "12"),
        ([], {}, "0"),
        (["--seed", "7", "--spawn", "exec"], {}, None),  # exec: each replay sets its own
        (["--seed", "x"], {}, None),  # the driver's parser reports this one
        (["--", "--seed", "9"], {}, "0"),  # pytest's arguments are not the driver's
    ],
)
def test_the_entry_module_pins_the_hash_seed_fork_mode_needs(argv, environ, wanted):
    assert wanted_hash_seed(argv, environ) == wanted


# An assert on a tuple makes pytest warn while it rewrites the module: only the replay
# that rewrote it says so.
REWRITTEN_WITH_A_WARNING = """
def test_always_true():
    assert (1 == 2, "a tuple is always true")

def test_fails():
    assert [1, 2] == [1, 3]
"""


def test_later_replays_load_the_code_the_first_rewrote(tmp_path):
    # An assert on a tuple makes pytest warn while it rewrites the module: only the replay
    # that rewrote it says so. Labels and assertion ids are the same in every replay.
    write(tmp_path, "test_rewrite.py", REWRITTEN_WITH_A_WARNING)
    out = tmp_path / "out"
    env = driver_env(PYTHONDONTWRITEBYTECODE="1")
    completed = run_driver(tmp_path, out, "test_rewrite.py", replays=3, env=env)
    assert completed.returncode == 0, completed.stderr
    logs = [(out / f"replay-{k:03d}.log").read_text() for k in (1, 2, 3)]
    assert ["assertion is always true" in log for log in logs] == [True, False, False]
    results = [load(out / f"replay-{k:03d}.json")["result"]["tests"] for k in (1, 2, 3)]
    for tests in results:
        assert [(t["nodeid"], t["label"], t["assertion_id"]) for t in tests] == [
            (t["nodeid"], t["label"], t["assertion_id"]) for t in results[0]
        ]
    assert "assert [1, 2] == [1, 3]" in logs[2]  # the rewritten assert explains itself
    assert not (out / ".rewritten").exists()
    assert not list(tmp_path.rglob("__pycache__"))


def test_a_named_rewrite_cache_outlives_its_driver_for_the_next(tmp_path):
    # Two drivers in a row, as the screening's and the second phase's in one container:
    # the second rewrites nothing, even its first replay, and the cache is left in place.
    write(tmp_path, "test_rewrite.py", REWRITTEN_WITH_A_WARNING)
    cache = tmp_path / "cache"
    env = driver_env(PYTHONDONTWRITEBYTECODE="1")
    logs: list[str] = []
    labels = []
    entries = []
    for name, replays in (("first", 1), ("second", 2)):
        out = tmp_path / name
        command = driver_command(out, "test_rewrite.py", replays=replays)
        command[command.index("--") : command.index("--")] = ["--rewrite-cache", str(cache)]
        completed = subprocess.run(
            command, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120, check=False
        )
        assert completed.returncode == 0, completed.stderr
        for k in range(1, replays + 1):
            logs.append((out / f"replay-{k:03d}.log").read_text())
            tests = load(out / f"replay-{k:03d}.json")["result"]["tests"]
            labels.append([(t["nodeid"], t["label"], t["assertion_id"]) for t in tests])
        assert not (out / ".rewritten").exists()
        entries.append(sorted(cache.iterdir()))
    # The test module's rewritten code (and that of plugins pytest rewrites), made once.
    assert entries[0]
    assert entries[1] == entries[0]
    assert ["assertion is always true" in log for log in logs] == [True, False, False]
    assert labels[1] == labels[0]
    assert labels[2] == labels[0]
    assert "assert [1, 2] == [1, 3]" in logs[2]


def test_the_driver_imports_no_pytest_and_its_parts_never_import_it():
    # The host imports hash_seed from the driver without pytest installed; the driver's
    # parts import each other one way only.
    parts = "runner, spawn, workers, jobs, options, deadline, workspace"
    checks = [
        "import sys, orchestrator.probe.driver; assert 'pytest' not in sys.modules",
        f"import sys; from orchestrator.probe import {parts}; "
        "assert 'orchestrator.probe.driver' not in sys.modules",
    ]
    for check in checks:
        subprocess.run([sys.executable, "-c", check], check=True, env=driver_env(), timeout=60)

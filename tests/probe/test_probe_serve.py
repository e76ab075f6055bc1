"""The replay driver's serve mode: jobs in, replay-run/1 results out, one warm driver.

Real child processes on the host (the host's pytest, so the protocol is checked with
the pytest the suite runs under as well as with the runner image's in tests/shrink):
jobs through standard input and output, and through the FIFOs of the host's job
channel (orchestrator.adapters.job_channel), as a container gets them.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest

from orchestrator.adapters.job_channel import CLOSED, TIMED_OUT, JobChannel, Received
from orchestrator.probe import JOB_SCHEMA, PROBE_VERSION
from orchestrator.probe.jobs import BadJob, encode_run_line, parse_job
from orchestrator.probe.options import parse_args

PACKAGE_ROOT = str(Path(__file__).resolve().parents[2])
QUIET = ("-p", "no:hypothesispytest")  # keeps each job's start-up small

PROJECT = {
    "test_records.py": """
        import json, os, sys

        def test_role(replay_fixture):
            if replay_fixture["user_id"] >= 0:
                assert replay_fixture["role"] in {"admin", "viewer"}

        def test_fresh_process():
            # A mark left by an earlier job would survive here if jobs shared a process.
            assert not hasattr(sys, "_served_before")
            sys._served_before = True

        def test_hash_of_a_string():
            print("HASH", hash("orchestrator"))
            assert os.environ["REPLAY_SEED"] == os.environ["PYTHONHASHSEED"]

        def test_no_fixture_variable():
            assert "REPLAY_FIXTURE" not in os.environ

        def test_hangs():
            import threading
            threading.Event().wait()
    """,
}


def write_project(root: Path) -> Path:
    for name, source in PROJECT.items():
        (root / name).write_text(textwrap.dedent(source), encoding="utf-8")
    return root


def job(job_id: str, *args: str, fixture: Path | None = None, **extra: Any) -> dict[str, Any]:
    document: dict[str, Any] = {
        "schema": JOB_SCHEMA,
        "id": job_id,
        "pytest_args": [*QUIET, *args],
        "fixture": None if fixture is None else str(fixture),
        "timeout_s": 30,
    }
    document.update(extra)
    return document


def serve_env() -> dict[str, str]:
    env = {key: value for key, value in os.environ.items() if not key.startswith("REPLAY_")}
    env.pop("PYTHONHASHSEED", None)
    env["PYTHONPATH"] = PACKAGE_ROOT
    return env


def serve_command(
    out: Path, *, jobs: str = "-", results: str = "-", seed: int = 3, files: bool = False
) -> list[str]:
    return [
        sys.executable,
        "-m",
        "orchestrator.probe.replay",
        "--serve",
        "--jobs",
        jobs,
        "--results",
        results,
        "--out",
        str(out),
        "--seed",
        str(seed),
        *(["--result-files"] if files else []),
    ]


def serve_stdio(
    project: Path, lines: list[str], *, seed: int = 3, files: bool = False
) -> subprocess.CompletedProcess:
    return subprocess.run(
        serve_command(project / "out", seed=seed, files=files),
        cwd=project,
        env=serve_env(),
        input="".join(line + "\n" for line in lines),
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )


def results_of(completed: subprocess.CompletedProcess) -> list[dict[str, Any]]:
    return [json.loads(line) for line in completed.stdout.splitlines()]


def labels(result: dict[str, Any]) -> dict[str, str]:
    return {entry["nodeid"]: entry["label"] for entry in result["result"]["tests"]}


def fixture_file(folder: Path, name: str, payload: Any) -> Path:
    path = folder / name
    path.write_text(json.dumps(payload), encoding="utf-8")
    return path


def test_each_job_gets_one_result_line_with_its_id_and_its_own_fixture(tmp_path):
    project = write_project(tmp_path)
    failing = fixture_file(tmp_path, "failing.json", {"user_id": 4, "role": "ghost"})
    passing = fixture_file(tmp_path, "passing.json", {"user_id": 4, "role": "admin"})
    completed = serve_stdio(
        project,
        [
            json.dumps(job("a.1", "test_records.py::test_role", fixture=failing)),
            "",  # blank lines are skipped
            json.dumps(job("a.2", "test_records.py::test_role", fixture=passing)),
        ],
    )
    assert completed.returncode == 0, completed.stderr
    first, second = results_of(completed)
    assert (first["job"], first["replay"], first["status"]) == ("a.1", 1, "completed")
    assert (second["job"], second["replay"], second["status"]) == ("a.2", 2, "completed")
    for result in (first, second):
        assert result["schema"] == "replay-run/1"
        assert (result["seed"], result["spawn"], result["timeout_s"]) == (3, "fork", 30)
        assert result["probe_version"] == PROBE_VERSION
        assert result["wall_ms"] > 0
        assert result["cpu_ms"] > 0
        assert result["result"]["schema"] == "replay-probe/1"
    assert labels(first) == {"test_records.py::test_role": "assert_fail"}
    assert labels(second) == {"test_records.py::test_role": "assert_pass"}
    assert first["result"]["fixture"] == str(failing)
    (entry,) = first["result"]["tests"]
    assert entry["assertion_key"] == "test_records.py::test_role@test_role+2:AssertionError"
    assert "job 1 a.1 completed" in completed.stderr
    out = project / "out"
    assert json.loads((out / "driver.json").read_text()) == {
        "schema": "replay-driver/1",
        "probe_version": PROBE_VERSION,
        "replays": 2,
        "finished": True,
    }
    assert sorted(path.name for path in out.iterdir()) == [
        "driver.json",
        "job-000001.log",
        "job-000002.log",
    ]


def test_every_job_is_a_fresh_process_and_a_fixture_of_null_unsets_the_variable(tmp_path):
    project = write_project(tmp_path)
    fixture = fixture_file(tmp_path, "f.json", {"user_id": 0, "role": ""})
    lines = [
        json.dumps(job(str(n), "test_records.py::test_fresh_process", fixture=fixture))
        for n in range(3)
    ]
    lines.append(json.dumps(job("none", "test_records.py::test_no_fixture_variable")))
    completed = serve_stdio(project, lines)
    assert completed.returncode == 0, completed.stderr
    results = results_of(completed)
    assert [labels(result) for result in results[:3]] == [
        {"test_records.py::test_fresh_process": "assert_pass"}
    ] * 3
    assert labels(results[3]) == {"test_records.py::test_no_fixture_variable": "assert_pass"}


def test_a_hanging_job_times_out_and_the_next_job_still_runs(tmp_path):
    project = write_project(tmp_path)
    fixture = fixture_file(tmp_path, "f.json", {"user_id": 0, "role": ""})
    completed = serve_stdio(
        project,
        [
            json.dumps(job("hang", "test_records.py::test_hangs", timeout_s=2)),
            json.dumps(job("after", "test_records.py::test_role", fixture=fixture)),
        ],
    )
    assert completed.returncode == 0, completed.stderr
    hung, after = results_of(completed)
    assert (hung["job"], hung["status"], hung["result"]) == ("hang", "timeout", None)
    assert hung["exit_code"] is None
    assert (after["job"], after["status"]) == ("after", "completed")
    assert labels(after) == {"test_records.py::test_role": "assert_fail"}


def test_a_job_with_another_seed_runs_in_a_new_interpreter_hashing_with_it(tmp_path):
    project = write_project(tmp_path)
    completed = serve_stdio(
        project,
        [
            json.dumps(job("same", "-s", "test_records.py::test_hash_of_a_string")),
            json.dumps(job("other", "-s", "test_records.py::test_hash_of_a_string", seed=11)),
        ],
    )
    assert completed.returncode == 0, completed.stderr
    same, other = results_of(completed)
    assert (same["spawn"], same["seed"]) == ("fork", 3)
    assert (other["spawn"], other["seed"]) == ("exec", 11)
    assert (
        labels(same) == labels(other) == {"test_records.py::test_hash_of_a_string": "assert_pass"}
    )
    out = project / "out"

    def printed_hash(log: str) -> str:
        found = re.search(r"HASH -?\d+", log)
        assert found is not None, log
        return found.group(0)

    expected = {}
    for seed in (3, 11):
        expected[seed] = subprocess.run(
            [sys.executable, "-c", "print('HASH', hash('orchestrator'))"],
            env={**serve_env(), "PYTHONHASHSEED": str(seed)},
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
    assert printed_hash((out / "job-000001.log").read_text()) == expected[3]
    assert printed_hash((out / "job-000002.log").read_text()) == expected[11]


def test_a_line_that_is_no_job_ends_the_driver_with_exit_2(tmp_path):
    project = write_project(tmp_path)
    fixture = fixture_file(tmp_path, "f.json", {"user_id": 0, "role": ""})
    completed = serve_stdio(
        project,
        [
            json.dumps(job("ok", "test_records.py::test_role", fixture=fixture)),
            json.dumps({**job("bad", "x"), "timeout_s": 0}),
            json.dumps(job("never", "test_records.py::test_role", fixture=fixture)),
        ],
    )
    assert completed.returncode == 2
    assert [result["job"] for result in results_of(completed)] == ["ok"]
    assert "job bad: timeout_s must be a number greater than 0" in completed.stderr
    driver = json.loads((project / "out" / "driver.json").read_text())
    assert (driver["finished"], driver["replays"]) == (False, 1)
    assert "timeout_s" in driver["error"]


def test_with_result_files_each_job_leaves_its_result_in_its_own_folder_and_says_its_digest(
    tmp_path,
):
    project = write_project(tmp_path)
    out = project / "out"
    (out / "job-000002").mkdir(parents=True)  # something in the way: replaced, not used
    (out / "job-000002" / "replay-001.json").write_text("{}")
    completed = serve_stdio(
        project,
        [
            json.dumps(job("first", "test_records.py::test_no_fixture_variable")),
            json.dumps(job("second", "test_records.py::test_fresh_process")),
        ],
        files=True,
    )
    assert completed.returncode == 0, completed.stderr
    notices = results_of(completed)
    assert [(n["job"], n["replay"], n["status"]) for n in notices] == [
        ("first", 1, "completed"),
        ("second", 2, "completed"),
    ]
    # Each job's folder is removed once the next job starts: only the last is left.
    assert not (out / "job-000001").exists()
    result = out / "job-000002" / notices[1]["result"]
    data = result.read_bytes()
    assert notices[1]["sha256"] == hashlib.sha256(data).hexdigest()
    document = json.loads(data)
    assert (document["job"], document["replay"]) == ("second", 2)
    assert labels(document) == {"test_records.py::test_fresh_process": "assert_pass"}
    assert oct(result.stat().st_mode & 0o777) == "0o644"
    # A notice carries no result: only its name and digest.
    assert set(notices[0]) == {"job", "replay", "status", "result", "sha256"}


# -- the host's job channel, as a container's driver gets it ------------------------------


def test_jobs_and_results_through_the_fifos_of_the_job_channel(tmp_path):
    project = write_project(tmp_path)
    channel = JobChannel(tmp_path / "channel")
    channel.open()
    driver = subprocess.Popen(
        serve_command(
            project / "out", jobs=str(channel.jobs_path), results=str(channel.results_path)
        ),
        cwd=project,
        env=serve_env(),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        for n, role in enumerate(["ghost", "admin", ""], start=1):
            path = channel.put_file(
                f"fixture-{n}.json", json.dumps({"user_id": n, "role": role}).encode()
            )
            assert oct(path.stat().st_mode & 0o777) == "0o644"
            channel.send(job(f"c.{n}", "test_records.py::test_role", fixture=path))
            received = channel.receive(time.monotonic() + 120)
            assert isinstance(received, Received), received
            assert received.document is not None
            assert (received.document["job"], received.document["replay"]) == (f"c.{n}", n)
            expected = "assert_pass" if role == "admin" else "assert_fail"
            assert labels(received.document) == {"test_records.py::test_role": expected}
        # Nothing more was asked: a wait ends at its deadline.
        assert channel.receive(time.monotonic() + 0.2) is TIMED_OUT
        channel.end_input()  # the driver reads the end of its input and exits
        assert driver.wait(timeout=60) == 0
        assert channel.receive(time.monotonic() + 10) is CLOSED
    finally:
        driver.kill()
        driver.wait()
        channel.close()
    assert json.loads((project / "out" / "driver.json").read_text())["replays"] == 3


def test_a_driver_that_dies_closes_the_channel(tmp_path):
    project = write_project(tmp_path)
    channel = JobChannel(tmp_path / "channel")
    channel.open()
    driver = subprocess.Popen(
        serve_command(
            project / "out", jobs=str(channel.jobs_path), results=str(channel.results_path)
        ),
        cwd=project,
        env=serve_env(),
        stdin=subprocess.DEVNULL,
    )
    try:
        channel.send(job("first", "test_records.py::test_no_fixture_variable"))
        # Its result proves the driver opened the results FIFO (one that dies before
        # that never sends an end of file: then the container's end wakes the wait).
        assert isinstance(channel.receive(time.monotonic() + 120), Received)
        driver.kill()
        assert channel.receive(time.monotonic() + 60) is CLOSED
    finally:
        driver.kill()
        driver.wait()
        channel.close()


def test_a_wake_ends_a_wait_for_a_driver_that_never_opened_its_results(tmp_path):
    channel = JobChannel(tmp_path / "channel")
    channel.open()
    try:
        channel.wake()
        assert channel.receive(time.monotonic() + 30) is CLOSED
    finally:
        channel.close()
    channel.close()  # idempotent
    channel.wake()  # and harmless afterwards


# -- pieces ------------------------------------------------------------------------------


def test_parse_job_reads_the_protocol_and_names_what_is_wrong():
    line = json.dumps(job("x", "-q", "t.py::test_a", fixture=Path("/f.json"), seed=4)).encode()
    parsed = parse_job(line, 7, default_seed=4, spawn="fork")
    assert (parsed.number, parsed.job_id, parsed.seed, parsed.spawn) == (7, "x", 4, "fork")
    assert parsed.pytest_args == (*QUIET, "-q", "t.py::test_a")
    assert (parsed.fixture, parsed.timeout_s) == ("/f.json", 30.0)
    without_seed = job("z")  # no "seed": the driver's own
    assert parse_job(json.dumps(without_seed).encode(), 1, default_seed=9, spawn="fork").seed == 9
    assert parse_job(line, 1, default_seed=5, spawn="fork").spawn == "exec"
    for bad, fragment in [
        (b"{not json", "not a JSON line"),
        (json.dumps({"schema": "other/1"}).encode(), JOB_SCHEMA),
        (json.dumps({**job("a"), "id": 3}).encode(), "id must be a string"),
        (json.dumps({**job("a"), "pytest_args": "-q"}).encode(), "pytest_args"),
        (json.dumps({**job("a"), "fixture": 1}).encode(), "fixture"),
        (json.dumps({**job("a"), "timeout_s": True}).encode(), "timeout_s"),
        (json.dumps({**job("a"), "seed": "1"}).encode(), "seed"),
    ]:
        with pytest.raises(BadJob, match=fragment):
            parse_job(bad, 1, default_seed=0, spawn="fork")


def test_serve_mode_arguments():
    options = parse_args(["--serve", "--jobs", "-", "--results", "r", "--out", "o", "--seed", "2"])
    assert (options.serve, options.jobs, options.results, options.seed) == (True, "-", "r", 2)
    for argv in (
        ["--serve", "--jobs", "-", "--out", "o"],
        ["--serve", "--jobs", "-", "--results", "-", "--replays", "2", "--out", "o"],
        ["--serve", "--jobs", "-", "--results", "-", "--out", "o", "--", "-q"],
        ["--replays", "1", "--timeout", "1", "--out", "o", "--jobs", "-"],
        ["--replays", "1", "--timeout", "1", "--out", "o", "--result-files"],
        ["--out", "o"],
    ):
        with pytest.raises(SystemExit):
            parse_args(argv)


def test_a_result_line_is_one_line_whatever_the_result_bytes():
    run = {"schema": "replay-run/1", "job": "a", "status": "completed"}
    indented = b'{\n  "schema": "replay-probe/1",\n  "tests": []\n}\n'
    line = encode_run_line(run, indented)
    assert line.endswith(b"\n")
    assert line.count(b"\n") == 1
    assert json.loads(line) == {**run, "result": {"schema": "replay-probe/1", "tests": []}}
    assert json.loads(encode_run_line(run, None)) == {**run, "result": None}

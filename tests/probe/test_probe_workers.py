"""A replay split across J pytest workers (driver --workers, probe/workers.py, probe/share.py).

Real processes throughout: the driver on this machine's Python and pytest, and in the
runner image (Python 3.11, pytest 7.2) on the real engine; the worker's share plugin in an
inner pytest session. The merge of worker results is pure and tested on its own.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from test_probe_in_runner import run_in_runner

from orchestrator.probe.schedule import module_of, split_by_module
from orchestrator.probe.share import SPLIT_SCHEMA, parse_share, read_durations
from orchestrator.probe.workers import WorkerOutcome, merge_results

PACKAGE_ROOT = str(Path(__file__).resolve().parents[2])

# Module-level state that only holds when a module's tests run in one process, in order;
# each test appends "<nodeid> <pid>" to $TRACE so the test can see who ran what.
STATEFUL = """
    import os

    SEEN = []

    def trace(name):
        with open(os.environ["TRACE"], "a") as handle:
            handle.write(f"{__name__}::{name} {os.getpid()}\\n")

    def test_first():
        SEEN.append("first")
        trace("test_first")

    def test_second():
        assert SEEN == ["first"]
        trace("test_second")

    def test_third():
        assert SEEN == ["first"]
        trace("test_third")
"""
# No shared state: every test's outcome depends on its own body only.
STATELESS = """
    import time

    def test_pass_{n}():
        assert sum(range({n})) == {n} * ({n} - 1) // 2

    def test_fail_{n}():
        assert {n} == -1

    def test_sleep_{n}():
        time.sleep(0)
        time.sleep(0)

    def test_open_{n}(tmp_path):
        (tmp_path / "x").write_text("x")
"""
KILLER = """
    import os
    import signal

    def test_before():
        pass

    def test_kill():
        os.kill(os.getpid(), signal.SIGKILL)

    def test_after():
        pass
"""


def write_suite(project: Path, modules: dict[str, str]) -> None:
    project.mkdir(parents=True, exist_ok=True)
    for name, source in modules.items():
        (project / name).write_text(textwrap.dedent(source), encoding="utf-8")


def run_driver(project: Path, out: Path, *args: str, workers: int, **env: str) -> dict[str, Any]:
    """One replay on this machine's Python; its replay-run/1 document."""
    environment = {k: v for k, v in os.environ.items() if not k.startswith("REPLAY_")}
    environment.pop("PYTHONHASHSEED", None)
    environment.update(PYTHONPATH=PACKAGE_ROOT, **env)
    command = [
        sys.executable, "-m", "orchestrator.probe.replay", "--replays", "1", "--timeout", "120",
        "--out", str(out), "--workers", str(workers),
        "--", "-p", "no:hypothesispytest", "-q", *args,
    ]  # fmt: skip
    done = subprocess.run(
        command,
        cwd=project,
        env=environment,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    document: dict[str, Any] = json.loads((out / "replay-001.json").read_text())
    return document


def entries(run: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {entry["nodeid"]: entry for entry in run["result"]["tests"]}


def verdicts(run: dict[str, Any]) -> dict[str, tuple[Any, ...]]:
    """What decides a label, per test (durations and messages aside)."""
    return {
        nodeid: (entry["label"], entry["reason"], entry["assertion_key"], entry["calls"])
        for nodeid, entry in entries(run).items()
    }


def test_one_modules_tests_stay_in_one_worker_in_order(tmp_path):
    project = tmp_path / "project"
    write_suite(project, {f"test_m{m}.py": STATEFUL for m in range(5)})
    trace = tmp_path / "trace.txt"
    run = run_driver(project, tmp_path / "out", workers=3, TRACE=str(trace))
    assert run["status"] == "completed"
    assert run["workers"] == 3
    assert [worker["status"] for worker in run["worker_runs"]] == ["completed"] * 3
    assert sum(worker["tests"] for worker in run["worker_runs"]) == 15
    # Every test passed, so each module's state was built in order in one process.
    assert {entry["label"] for entry in entries(run).values()} == {"assert_pass"}
    lines = [line.split() for line in trace.read_text().splitlines()]
    pids: dict[str, set[str]] = {}
    order: dict[str, list[str]] = {}
    for name, pid in lines:
        module, test = name.split("::")
        pids.setdefault(module, set()).add(pid)
        order.setdefault(module, []).append(test)
    assert all(len(found) == 1 for found in pids.values())
    assert all(tests == ["test_first", "test_second", "test_third"] for tests in order.values())
    assert len({pid for found in pids.values() for pid in found}) == 3  # three workers ran


def test_j_workers_give_the_results_of_one_process_on_a_suite_without_shared_state(tmp_path):
    project = tmp_path / "project"
    write_suite(project, {f"test_s{n}.py": STATELESS.format(n=n) for n in range(1, 7)})
    alone = run_driver(project, tmp_path / "one", workers=1)
    split = run_driver(project, tmp_path / "three", workers=3)
    assert len(verdicts(alone)) == 24
    assert verdicts(split) == verdicts(alone)
    assert split["result"]["exit_status"] == alone["result"]["exit_status"] == 1


def test_the_split_follows_recorded_durations(tmp_path):
    project = tmp_path / "project"
    write_suite(project, {f"test_s{n}.py": STATELESS.format(n=n) for n in range(1, 5)})
    durations = tmp_path / "durations.json"
    # test_s1.py is recorded as long: it gets a worker of its own.
    recorded = {
        f"test_s{n}.py::test_{kind}_{n}": 1000.0 if n == 1 else 1.0
        for n in range(1, 5)
        for kind in ("pass", "fail", "sleep", "open")
    }
    durations.write_text(json.dumps({"schema": "replay-durations/1", "durations_ms": recorded}))
    run = run_driver(project, tmp_path / "out", workers=2, REPLAY_DURATIONS=str(durations))
    assert [worker["tests"] for worker in run["worker_runs"]] == [4, 12]
    assert verdicts(run)["test_s1.py::test_pass_1"][0] == "assert_pass"


@pytest.mark.docker
def test_a_worker_killed_by_sigkill_labels_only_its_own_tests(
    docker_client, runner_image_id, tmp_path
):
    project = tmp_path / "project"
    modules = {f"test_s{n}.py": STATELESS.format(n=n) for n in range(1, 4)}
    modules["test_killer.py"] = KILLER
    write_suite(project, modules)
    out = tmp_path / "out"
    code = run_in_runner(
        docker_client, runner_image_id, project, out,
        "--replays", "1", "--timeout", "60", "--workers", "2", "--", "-q",
    )  # fmt: skip
    assert code == 0
    run = json.loads((out / "replay-001.json").read_text())
    assert run["status"] == "completed"
    assert run["exit_code"] == -9
    killed = [worker for worker in run["worker_runs"] if worker["exit_code"] == -9]
    survivor = [worker for worker in run["worker_runs"] if worker["exit_code"] != -9]
    assert len(killed) == 1
    assert len(survivor) == 1
    assert survivor[0]["status"] == "completed"
    found = entries(run)
    lost = {nodeid for nodeid, entry in found.items() if entry["reason"] == "signal"}
    # Exactly the killed worker's share, whole modules, the killer's module among them.
    assert len(lost) == killed[0]["tests"]
    assert {"test_killer.py::test_before", "test_killer.py::test_after"} <= lost
    assert all(found[nodeid]["label"] == "harness_error" for nodeid in lost)
    lost_modules = {module_of(nodeid) for nodeid in lost}
    for nodeid, entry in found.items():
        if module_of(nodeid) not in lost_modules:
            assert entry["reason"] != "signal"
            assert entry["label"] in ("assert_pass", "assert_fail")
    assert len(found) == 15


@pytest.mark.docker
def test_workers_in_the_runner_image_match_one_process(docker_client, runner_image_id, tmp_path):
    project = tmp_path / "project"
    write_suite(project, {f"test_s{n}.py": STATELESS.format(n=n) for n in range(1, 5)})
    runs = {}
    for workers in (1, 2):
        out = tmp_path / f"out{workers}"
        code = run_in_runner(
            docker_client, runner_image_id, project, out,
            "--replays", "2", "--timeout", "60", "--workers", str(workers), "--", "-q",
        )  # fmt: skip
        assert code == 0
        runs[workers] = [json.loads((out / f"replay-00{k}.json").read_text()) for k in (1, 2)]
    for alone, split in zip(runs[1], runs[2], strict=True):
        assert split["result"]["pytest"].startswith("7.")
        assert verdicts(split) == verdicts(alone)
        assert len(verdicts(split)) == 16


# ---------------------------------------------------------------- the share plugin


def test_a_worker_keeps_its_share_after_the_selection(pytester, monkeypatch):
    for n in range(1, 5):
        pytester.makepyfile(**{f"test_s{n}": STATELESS.format(n=n)})
    split_file = pytester.path / "split.json"
    monkeypatch.setenv("REPLAY_WORKER", "2/2")
    monkeypatch.setenv("REPLAY_SPLIT", str(split_file))
    monkeypatch.delenv("REPLAY_DURATIONS", raising=False)
    monkeypatch.delenv("REPLAY_RESULT", raising=False)
    result = pytester.runpytest_inprocess(
        "-p", "orchestrator.probe.plugin", "-p", "no:cacheprovider", "-p", "no:hypothesispytest",
        "-W", "ignore::pytest.PytestAssertRewriteWarning", "-k", "not sleep",
    )  # fmt: skip
    document = json.loads(split_file.read_text())
    assert document["schema"] == SPLIT_SCHEMA
    assert (document["worker"], document["workers"]) == (2, 2)
    collected = [
        f"test_s{n}.py::test_{k}_{n}" for n in range(1, 5) for k in ("pass", "fail", "open")
    ]
    # -k deselected the sleeping tests first; the rest is split in collection order.
    assert document["bins"] == [list(part) for part in split_by_module(collected, {}, 2)]
    mine = document["bins"][1]
    outcomes = result.parseoutcomes()
    assert outcomes["passed"] + outcomes["failed"] == len(mine)
    assert outcomes["deselected"] == 16 - len(mine)


@pytest.mark.parametrize(
    ("text", "message"),
    [("", "w/J"), ("2", "w/J"), ("0/2", "not in 1..2"), ("3/2", "not in 1..2"),
     ("a/b", "invalid literal"), ("1/0", "not in 1..0")],
)  # fmt: skip
def test_a_bad_share_is_refused(text, message):
    with pytest.raises(ValueError, match=message):
        parse_share(text)


def test_durations_files_that_cannot_be_read_are_no_durations(tmp_path):
    path = tmp_path / "d.json"
    assert read_durations(str(path)) == {}
    path.write_text("{not json")
    assert read_durations(str(path)) == {}
    path.write_text(
        json.dumps({"schema": "replay-durations/1", "durations_ms": {"a": 1, "b": "x"}})
    )
    assert read_durations(str(path)) == {"a": 1.0}
    path.write_text(json.dumps([1, 2]))
    assert read_durations(str(path)) == {}


# ---------------------------------------------------------------- the merge (pure)


def entry(nodeid: str, label: str = "assert_pass") -> dict[str, Any]:
    return {"nodeid": nodeid, "label": label, "reason": None, "calls": {}, "duration_ms": 1.0}


def outcome(worker: int, bins: Any, *, tests=None, status="completed", exit_code=0, result=True):
    document = None
    if result:
        document = {
            "schema": "replay-probe/1",
            "exit_status": exit_code,
            "skipped": [],
            "tests": tests if tests is not None else [entry(t) for t in bins[worker - 1]],
        }
    return WorkerOutcome(
        worker=worker, status=status, exit_code=exit_code, wall_ms=1.0, result=document, bins=bins
    )


@given(st.lists(st.sampled_from("abcdef"), unique=True, min_size=1), st.integers(1, 4))
def test_a_merge_of_completed_workers_holds_every_test_once(modules, count):
    ids = [f"tests/test_{m}.py::test_{n}" for m in modules for n in range(3)]
    bins = split_by_module(ids, {}, count)
    status, merged = merge_results([outcome(w, bins) for w in range(1, count + 1)], count)
    assert status == "completed"
    assert merged is not None
    assert sorted(test["nodeid"] for test in merged["tests"]) == sorted(ids)


def test_a_dead_worker_without_a_split_of_its_own_is_known_by_the_others():
    bins = (("a.py::t1", "a.py::t2"), ("b.py::t1",))
    dead = WorkerOutcome(
        worker=2, status="no_result", exit_code=-9, wall_ms=1.0, result=None, bins=None
    )
    status, merged = merge_results([outcome(1, bins), dead], 2)
    assert status == "completed"
    assert merged is not None
    labels = {t["nodeid"]: (t["label"], t["reason"]) for t in merged["tests"]}
    assert labels == {
        "a.py::t1": ("assert_pass", None),
        "a.py::t2": ("assert_pass", None),
        "b.py::t1": ("harness_error", "signal"),
    }


def test_a_worker_past_the_deadline_times_out_only_its_own_tests():
    bins = (("a.py::t1",), ("b.py::t1", "b.py::t2"))
    late = outcome(2, bins, status="timeout", exit_code=None, result=False)
    status, merged = merge_results([outcome(1, bins), late], 2)
    assert status == "completed"
    assert merged is not None
    labels = {t["nodeid"]: (t["label"], t["reason"]) for t in merged["tests"]}
    assert labels["b.py::t2"] == ("timeout", "replay_timeout")
    assert labels["a.py::t1"] == ("assert_pass", None)


def test_nothing_known_is_the_replays_own_status():
    def gone(worker: int, status: str) -> WorkerOutcome:
        return WorkerOutcome(
            worker=worker, status=status, exit_code=None, wall_ms=1.0, result=None, bins=None
        )

    assert merge_results([gone(1, "timeout"), gone(2, "timeout")], 2) == ("timeout", None)
    assert merge_results([gone(1, "no_result"), gone(2, "timeout")], 2) == ("no_result", None)


def test_entries_of_nodes_no_share_owns_are_kept_once():
    bins = (("a.py::t1",), ())
    broken = {**entry("b.py", "harness_error"), "reason": "collection_error"}
    first = outcome(1, bins, tests=[entry("a.py::t1"), broken], exit_code=2)
    second = outcome(2, bins, tests=[broken], exit_code=2)
    _, merged = merge_results([first, second], 2)
    assert merged is not None
    assert [t["nodeid"] for t in merged["tests"]] == ["a.py::t1", "b.py"]
    assert merged["exit_status"] == 2

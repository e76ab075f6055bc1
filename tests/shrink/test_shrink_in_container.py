"""Shrinking against the real test in its pinned container, end to end.

Real engine, real git, the runner image: the bundled example's wide user record
(seed 000's walkthrough, 200 keys) fails tests/test_users.py on patch/raw-role;
`orchestrator shrink --test` and `orchestrator replay --shrink` run in subprocesses with a
private TMPDIR, and every test checks that no container or exported tree is left.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from support.cli import stored_evidence  # noqa: E402

from fixtures.build_example import (  # noqa: E402
    MINIMAL_USER,
    ROLE_PROPERTY,
    ExampleRepo,
    build_example,
    wide_user,
)
from orchestrator.core.digest import digest  # noqa: E402
from orchestrator.core.shrink import replay_shrink_path  # noqa: E402

pytestmark = [pytest.mark.docker, pytest.mark.slow]

CLI = ROOT / ".venv" / "bin" / "orchestrator"
SCRATCH_PREFIX = "orchestrator-replay-"
PID_LABEL = "orchestrator.pid"
ROLE_KEY = f"{ROLE_PROPERTY}@test_known_users_carry_an_allowed_role+3:AssertionError"

# Seed 000's own digest rule, spelled out as the seed writes it.
SEED_DIGEST = (
    "sha256:"
    + hashlib.sha256(
        json.dumps({"user_id": 0, "role": ""}, sort_keys=True, separators=(",", ":")).encode()
    ).hexdigest()
)

PROFILE_TEST = """
from eventlib.users import ALLOWED_ROLES, normalize_user


def test_complete_profiles_carry_an_allowed_role(replay_fixture):
    user = normalize_user(replay_fixture)
    assert len(replay_fixture) > 2, "a profile has more than an id and a role"
    if user["user_id"] >= 0:
        assert user["role"] in ALLOWED_ROLES
"""
PROFILE_PROPERTY = "tests/test_profiles.py::test_complete_profiles_carry_an_allowed_role"

HANG_TEST = """
import threading

from eventlib.users import ALLOWED_ROLES, normalize_user


def test_small_records_hang(replay_fixture):
    if len(replay_fixture) < 150:
        threading.Event().wait()  # waits for a signal nobody sends
    assert normalize_user(replay_fixture)["role"] in ALLOWED_ROLES
"""
HANG_PROPERTY = "tests/test_slow_profiles.py::test_small_records_hang"


@dataclass(frozen=True, kw_only=True)
class Done:
    code: int
    stdout: str
    stderr: str
    pid: int

    def json(self) -> Any:
        try:
            return json.loads(self.stdout)
        except json.JSONDecodeError:
            raise AssertionError(f"no JSON (exit {self.code}): {self.stderr[-3000:]}") from None

    def error_lines(self) -> list[str]:
        return [line for line in self.stderr.splitlines() if line.startswith("orchestrator:")]


class Cli:
    """`orchestrator` in a subprocess, with a private TMPDIR (exported trees land there)."""

    def __init__(self, tmp_path: Path) -> None:
        self.scratch = tmp_path / "scratch"
        self.scratch.mkdir()
        self.cwd = tmp_path

    def __call__(self, *args: str, timeout: float = 600) -> Done:
        if not CLI.exists():
            pytest.fail(f"{CLI} is missing: run `make venv`")
        process = subprocess.Popen(
            [str(CLI), *args],
            env={**os.environ, "TMPDIR": str(self.scratch), "CI": "1"},
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            cwd=self.cwd,
        )
        stdout, stderr = process.communicate(timeout=timeout)
        return Done(code=process.returncode, stdout=stdout, stderr=stderr, pid=process.pid)

    def leftover_trees(self) -> list[str]:
        return sorted(p.name for p in self.scratch.iterdir() if p.name.startswith(SCRATCH_PREFIX))


def assert_nothing_left(client: Any, cli: Cli, done: Done) -> None:
    containers = client.containers.list(
        all=True, ignore_removed=True, filters={"label": f"{PID_LABEL}={done.pid}"}
    )
    assert containers == [], f"containers left: {[c.name for c in containers]}"
    assert cli.leftover_trees() == [], "an exported tree or a channel folder was left"


def shrink_args(
    repo: ExampleRepo, test: str, image: str, *extra: str, rev: str = "raw-role"
) -> list[str]:
    return [
        "shrink",
        str(repo.user_fixture),
        "--test",
        test,
        "--repo",
        str(repo.path),
        "--rev",
        repo.rev(rev) if rev in repo.patches else rev,
        "--image",
        image,
        "--timeout",
        "60",
        *extra,
    ]


@pytest.fixture(scope="module")
def example(tmp_path_factory: pytest.TempPathFactory) -> ExampleRepo:
    return build_example(tmp_path_factory.mktemp("shrink") / "example")


@pytest.fixture
def cli(tmp_path: Path) -> Cli:
    return Cli(tmp_path)


def test_shrink_test_reaches_the_walkthrough_minimum_on_both_attempts(
    example: ExampleRepo, cli: Cli, runner_image_id: str, docker_client: Any, tmp_path: Path
) -> None:
    out = tmp_path / "min.json"
    done = cli(*shrink_args(example, ROLE_PROPERTY, "orchestrator-runner:latest"), "--json",
               "--out", str(out))  # fmt: skip
    assert done.code == 0, done.stderr[-3000:]
    report = done.json()
    assert report["schema"] == "shrink-report/1"
    assert report["minimal"] == MINIMAL_USER
    assert report["minimal_digest"] == SEED_DIGEST == digest(MINIMAL_USER)
    assert [attempt["minimal_digest"] for attempt in report["minima"]] == [SEED_DIGEST] * 2
    assert (report["attempts"], report["identical_minima"], report["stable"]) == (2, 2, True)
    # The pins that make the minimum evidence: test, revision, image ID, seed.
    assert report["test"] == ROLE_PROPERTY
    assert report["rev"] == example.rev("raw-role")
    assert report["image_id"] == runner_image_id
    assert report["image_ref"] == "orchestrator-runner:latest"
    assert report["seed"] == 0
    assert report["assertion_key"] == ROLE_KEY
    assert report["property"] is None
    # The wide record travels with the report, and the path rebuilds the minimum from it.
    assert report["origin"] == wide_user() == json.loads(example.user_fixture.read_text())
    assert report["origin_digest"] == digest(wide_user())
    assert replay_shrink_path(report["origin"], report["shrink_path"]) == MINIMAL_USER
    calls = [attempt["property_calls"] for attempt in report["minima"]]
    assert calls[0] == calls[1] == report["property_calls"] > 0
    assert json.loads(out.read_text()) == MINIMAL_USER
    assert_nothing_left(docker_client, cli, done)

    # replay --shrink-report accepts the report as it accepts a host-side one, and the
    # evidence says where the minimum came from.
    report_file = tmp_path / "shrink.json"
    report_file.write_text(done.stdout)
    run_dir = tmp_path / "run"
    replayed = cli(
        "replay", "--repo", str(example.path), "--base", example.base,
        "--patch", example.rev("raw-role"), "--image", runner_image_id,
        "--property", ROLE_PROPERTY, "--fixture", str(out), "--shrink-report", str(report_file),
        "--replays", "1", "--timeout", "60", "--out", str(run_dir), "--no-record", "--json",
    )  # fmt: skip
    assert replayed.code == 1, replayed.stderr[-3000:]
    evidence = stored_evidence(run_dir)
    assert evidence["fixture_digest"] == SEED_DIGEST
    assert evidence["origin_digest"] == digest(wide_user())
    shrink = evidence["shrink"]
    assert (shrink["stable"], shrink["identical_minima"], shrink["attempts"]) == (True, 2, 2)
    assert (shrink["test"], shrink["rev"], shrink["image_id"], shrink["seed"]) == (
        ROLE_PROPERTY,
        example.rev("raw-role"),
        runner_image_id,
        0,
    )


def test_a_smaller_candidate_failing_another_way_does_not_pull_the_shrink(
    cli: Cli, runner_image_id: str, docker_client: Any, tmp_path: Path
) -> None:
    repo = build_example(tmp_path / "repo", extra_files={"tests/test_profiles.py": PROFILE_TEST})
    done = cli(*shrink_args(repo, PROFILE_PROPERTY, runner_image_id), "--json")
    assert done.code == 0, done.stderr[-3000:]
    report = done.json()
    # Two keys fail the size assertion instead: refused, so a third key stays.
    minimal = report["minimal"]
    assert len(minimal) == 3
    assert (minimal["role"], minimal["user_id"]) == ("", 0)
    assert report["assertion_key"] == (
        f"{PROFILE_PROPERTY}@test_complete_profiles_carry_an_allowed_role+4:AssertionError"
    )
    assert report["stable"] is True
    assert_nothing_left(docker_client, cli, done)


def test_a_candidate_that_hangs_stops_the_shrink_with_exit_3_naming_it(
    cli: Cli, runner_image_id: str, docker_client: Any, tmp_path: Path
) -> None:
    repo = build_example(tmp_path / "repo", extra_files={"tests/test_slow_profiles.py": HANG_TEST})
    out = tmp_path / "min.json"
    args = shrink_args(repo, HANG_PROPERTY, runner_image_id, "--out", str(out))
    args[args.index("--timeout") + 1] = "3"
    done = cli(*args)
    assert done.code == 3, done.stderr[-3000:]
    (line,) = done.error_lines()
    # The original (200 keys) fails; the first candidate of attempt 1 (100 keys) hangs.
    assert line.startswith(
        "orchestrator: error: shrink stopped at candidate 2 of attempt 1 (sha256:"
    )
    assert f"{HANG_PROPERTY} gave timeout (replay_timeout)" in line
    assert "never the same failure" in line
    assert not out.exists()
    assert_nothing_left(docker_client, cli, done)


NEW_TEST = """
from eventlib.users import ALLOWED_ROLES


def test_records_carry_an_allowed_role(replay_fixture):
    if replay_fixture["user_id"] >= 0:
        assert replay_fixture["role"] in ALLOWED_ROLES
"""
NEW_PROPERTY = "tests/test_new_users.py::test_records_carry_an_allowed_role"


def test_shrink_tests_from_lays_another_revisions_tests_over_the_tree(
    cli: Cli, runner_image_id: str, docker_client: Any, tmp_path: Path
) -> None:
    # The test is new on a branch: on base it exists only through --tests-from.
    repo = build_example(
        tmp_path / "repo", extra_patches={"new-test": {"tests/test_new_users.py": NEW_TEST}}
    )
    without = cli(*shrink_args(repo, NEW_PROPERTY, runner_image_id, rev=repo.base))
    assert without.code == 2, without.stderr[-3000:]
    assert "no file tests/test_new_users.py" in without.error_lines()[0]
    done = cli(*shrink_args(repo, NEW_PROPERTY, runner_image_id, "--json",
                            "--tests-from", "patch/new-test", rev=repo.base))  # fmt: skip
    assert done.code == 0, done.stderr[-3000:]
    report = done.json()
    assert report["minimal"] == MINIMAL_USER
    assert (report["rev"], report["tests_from"]) == (repo.base, repo.rev("new-test"))
    assert report["stable"] is True
    assert_nothing_left(docker_client, cli, done)


def test_a_test_that_does_not_fail_on_the_fixture_is_exit_2(
    example: ExampleRepo, cli: Cli, runner_image_id: str, docker_client: Any
) -> None:
    # On base a role outside the allow-list falls back to the default: the test passes.
    done = cli(*shrink_args(example, ROLE_PROPERTY, runner_image_id, rev=example.base))
    assert done.code == 2, done.stderr[-3000:]
    (line,) = done.error_lines()
    assert "does not fail on this fixture" in line
    assert_nothing_left(docker_client, cli, done)


def replay_shrink_args(
    repo: ExampleRepo, image: str, run_dir: Path, patch: str, *extra: str
) -> Sequence[str]:
    return [
        "replay", "--repo", str(repo.path), "--base", repo.base, "--patch", repo.rev(patch),
        "--image", image, "--property", ROLE_PROPERTY, "--fixture", str(repo.user_fixture),
        "--shrink", "--replays", "2", "--timeout", "60", "--out", str(run_dir), "--json", *extra,
    ]  # fmt: skip


def test_replay_shrink_decides_on_the_minimal_fixture_with_a_stable_shrink(
    example: ExampleRepo, cli: Cli, runner_image_id: str, docker_client: Any, tmp_path: Path
) -> None:
    run_dir = tmp_path / "run"
    ledger = f"sqlite:///{tmp_path / 'ledger.db'}"
    page = tmp_path / "report.html"
    done = cli(*replay_shrink_args(example, runner_image_id, run_dir, "raw-role"),
               "--ledger", ledger, "--html", str(page))  # fmt: skip
    assert done.code == 1, done.stderr[-3000:]  # base passes, the patch fails: blocking
    summary = done.json()
    assert summary == json.loads((run_dir / "summary.json").read_text())
    assert summary["run_dir"] == str(run_dir)
    (entry,) = summary["decisions"]
    assert (entry["lane"], entry["code"]) == ("property_regression", "assertion_regression")
    shrink = summary["shrink"]
    assert (shrink["outcome"], shrink["wide_run_dir"], shrink["stable"]) == ("shrunk", "wide", True)
    assert shrink["rev"] == example.rev("raw-role")
    assert shrink["minimal_digest"] == SEED_DIGEST
    assert shrink["origin_digest"] == digest(wide_user())
    assert shrink["wide_decision"]["code"] == "assertion_regression"
    # The run folder is the deciding replay's: the minimal fixture's digest, the wide
    # one's as origin, a stable shrink made on the patch in the same image and seed.
    evidence = stored_evidence(run_dir, entry["property_id"])
    assert evidence["fixture_digest"] == SEED_DIGEST
    assert evidence["origin_digest"] == digest(wide_user())
    assert evidence["shrink"]["stable"] is True
    assert evidence["shrink"]["identical_minima"] == evidence["shrink"]["attempts"] == 2
    assert evidence["shrink"]["minimal_digest"] == SEED_DIGEST
    assert (evidence["shrink"]["test"], evidence["shrink"]["image_id"]) == (
        ROLE_PROPERTY,
        runner_image_id,
    )
    assert [replay["label"] for replay in evidence["patch"]] == ["assert_fail"] * 2
    assert [replay["label"] for replay in evidence["base"]] == ["assert_pass"] * 2
    run_log = json.loads((run_dir / "run-log.json").read_text())
    assert run_log["fixture_digest"] == SEED_DIGEST
    # Both fixtures stay, and the wide replay that started it all, whole, in wide/.
    assert (run_dir / "fixture-origin.json").read_bytes() == example.user_fixture.read_bytes()
    assert json.loads((run_dir / "fixture-minimal.json").read_text()) == MINIMAL_USER
    assert json.loads((run_dir / "shrink-report.json").read_text())["stable"] is True
    wide = stored_evidence(run_dir / "wide")
    assert wide["fixture_digest"] == digest(wide_user())
    assert wide["shrink"] is None
    assert json.loads((run_dir / "wide" / "summary.json").read_text())["run_dir"] == str(
        run_dir / "wide"
    )
    assert sorted(path.name for path in (run_dir / "wide" / "raw").iterdir()) == ["base", "patch"]
    # Each run keeps the fixture bytes its replays read (what `reproduce` mounts again).
    assert (run_dir / "wide" / "fixture.json").read_bytes() == example.user_fixture.read_bytes()
    assert digest(json.loads((run_dir / "fixture.json").read_text())) == SEED_DIGEST
    # Only the deciding run is recorded, and the page is the deciding run's.
    (recorded,) = summary["ledger"]["entries"]
    assert recorded["property_id"] == ROLE_PROPERTY
    assert ROLE_PROPERTY in page.read_text()
    assert_nothing_left(docker_client, cli, done)


def test_replay_shrink_leaves_a_property_that_does_not_fail_on_the_patch_alone(
    example: ExampleRepo, cli: Cli, runner_image_id: str, docker_client: Any, tmp_path: Path
) -> None:
    run_dir = tmp_path / "run"
    done = cli(*replay_shrink_args(example, runner_image_id, run_dir, "refactor-type"),
               "--no-record")  # fmt: skip
    assert done.code == 0, done.stderr[-3000:]
    summary = done.json()
    (entry,) = summary["decisions"]
    assert (entry["lane"], entry["code"]) == ("no_freeze", "not_reproduced")
    shrink = summary["shrink"]
    assert (shrink["outcome"], shrink["wide_run_dir"]) == ("not_failing_on_patch", None)
    assert shrink["minimal_digest"] is None
    evidence = stored_evidence(run_dir, entry["property_id"])
    assert evidence["fixture_digest"] == digest(wide_user())
    assert not (run_dir / "wide").exists()
    assert not (run_dir / "fixture-minimal.json").exists()
    assert (run_dir / "fixture-origin.json").is_file()
    assert_nothing_left(docker_client, cli, done)


def test_replay_shrink_stopped_by_a_hanging_candidate_is_exit_3_and_keeps_the_wide_decision(
    cli: Cli, runner_image_id: str, docker_client: Any, tmp_path: Path
) -> None:
    repo = build_example(tmp_path / "repo", extra_files={"tests/test_slow_profiles.py": HANG_TEST})
    run_dir = tmp_path / "run"
    args = list(replay_shrink_args(repo, runner_image_id, run_dir, "raw-role", "--no-record"))
    args[args.index(ROLE_PROPERTY)] = HANG_PROPERTY
    args[args.index("--timeout") + 1] = "3"
    done = cli(*args)
    assert done.code == 3, done.stderr[-3000:]
    (line,) = done.error_lines()
    assert "shrink stopped at candidate 2 of attempt 1" in line
    summary = done.json()
    assert summary["exit_status"] == 3
    assert (summary["shrink"]["outcome"], summary["shrink"]["message"]) == (
        "stopped",
        line.removeprefix("orchestrator: error: "),
    )
    (entry,) = summary["decisions"]  # the wide replay's, which did finish
    assert (entry["lane"], entry["code"]) == ("property_regression", "assertion_regression")
    assert not (run_dir / "fixture-minimal.json").exists()
    assert_nothing_left(docker_client, cli, done)


WEAK_TEST = """
def test_known_users_carry_an_allowed_role(replay_fixture):
    assert replay_fixture is not None  # weakened with the patch: passes on any record
"""
RAW_ROLE_USERS = ROOT / "fixtures" / "example" / "patches" / "raw-role" / "eventlib" / "users.py"


def test_replay_shrink_with_tests_from_shrinks_under_the_same_tests(
    cli: Cli, runner_image_id: str, docker_client: Any, tmp_path: Path
) -> None:
    # The patch breaks the code and weakens its test; --tests-from base judges both sides
    # with base's test, and so must every candidate of the shrink on the patch.
    repo = build_example(
        tmp_path / "repo",
        extra_patches={
            "weakened": {
                "eventlib/users.py": RAW_ROLE_USERS.read_text(),
                "tests/test_users.py": WEAK_TEST,
            }
        },
    )
    run_dir = tmp_path / "run"
    done = cli(*replay_shrink_args(repo, runner_image_id, run_dir, "weakened"),
               "--tests-from", "base", "--no-record")  # fmt: skip
    assert done.code == 1, done.stderr[-3000:]
    summary = done.json()
    assert (summary["shrink"]["outcome"], summary["shrink"]["minimal_digest"]) == (
        "shrunk",
        SEED_DIGEST,
    )
    report = json.loads((run_dir / "shrink-report.json").read_text())
    assert (report["rev"], report["tests_from"]) == (repo.rev("weakened"), repo.base)
    evidence = stored_evidence(run_dir, summary["decisions"][0]["property_id"])
    assert evidence["tests_from"] == repo.base
    assert evidence["fixture_digest"] == SEED_DIGEST
    assert_nothing_left(docker_client, cli, done)

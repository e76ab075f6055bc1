"""The GitLab recipe (docs/ci/gitlab-ci.yml), run for real: gitlab-ci-local (shell executor,
no network) on a scratch repository with a small flaky suite, the real engine and the tool
of this checkout. A merge request's pipeline (the test job with the quarantine, three
`parallel:` replay shards, the merge, its JUnit report and exit status), and the scheduled
thaw pipeline before and after the flaky test's fix lands."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest
from junitparser import Failure, JUnitXml, Skipped
from scratch_repo import FIXED_TEST, FLAKY, FLAKY_TEST
from support.cli import stored_records
from support.scratch_git import commit, git, init

ROOT = Path(__file__).resolve().parents[2]
VENV = ROOT / ".venv"
GITLAB_CI_LOCAL = Path(
    os.environ.get("ORCHESTRATOR_GITLAB_CI_LOCAL")
    or ROOT / ".cache" / "npm" / "node_modules" / ".bin" / "gitlab-ci-local"
)
RECIPE = ROOT / "docs" / "ci" / "gitlab-ci.yml"

LIB = "def add(a, b):\n    return a + b\n"
LIB_RESTATED = "def add(a, b):\n    return b + a\n"
LIB_BROKEN = "def add(a, b):\n    return a - b\n"
ADD_TEST = "import lib\n\n\ndef test_add():\n    assert lib.add(2, 2) == 4\n"
ADD = "tests/test_lib.py::test_add"


@dataclass(frozen=True)
class Pipeline:
    code: int
    output: str
    jobs: dict[str, str]  # job name -> PASS / FAIL
    artifacts: Path  # gitlab-ci-local's folder of each job's artifacts

    def artifact(self, job: str, name: str) -> Path:
        found = self.artifacts / job / name
        assert found.exists(), f"{job} left no {name}: {self.output[-3000:]}"
        return found


def run_pipeline(repo: Path, tmp_path: Path, *jobs: str, **variables: str) -> Pipeline:
    """gitlab-ci-local in ``repo``: each job in a copy of the repository (its own build
    folder, artifacts handed on), the tool from this checkout's .venv, the runner image
    already there."""
    if not GITLAB_CI_LOCAL.is_file():
        pytest.fail(f"{GITLAB_CI_LOCAL} is missing (`make gitlab-ci-local` installs it)")
    given = {
        "ORCHESTRATOR_SETUP": f"ln -sfn {VENV} .venv",
        "ORCHESTRATOR_IMAGE_SETUP": "true",
        "REPLAYS": "3",
        **variables,
    }
    env = {k: v for k, v in os.environ.items() if not k.startswith("ORCHESTRATOR_")}
    # A fresh pipeline, as GitLab's fresh clones: no build folder or artifact of the last.
    git(repo, "clean", "-ffdxq")
    done = subprocess.run(
        [str(GITLAB_CI_LOCAL), "--shell-isolation", "--no-artifacts-to-source", "--no-color",
         "--home", str(tmp_path / "home"),
         "--concurrency", "2", *(f"--variable={k}={v}" for k, v in given.items()),
         *(["--needs", *jobs] if jobs else [])],
        cwd=repo, env=env, capture_output=True, text=True, check=False, timeout=900,
    )  # fmt: skip
    output = done.stdout + done.stderr
    statuses = {
        name.strip(): word
        for word, name in re.findall(r"^ (PASS|FAIL) +(\S[^\n]*?) *$", output, re.MULTILINE)
    }
    return Pipeline(done.returncode, output, statuses, repo / ".gitlab-ci-local" / "artifacts")


def cases(junit: Path) -> dict[str, object]:
    return {
        f"{case.classname}.{case.name}": case
        for suite in JUnitXml.fromfile(str(junit))
        for case in suite
    }


def test_the_gitlab_pipeline_runs_end_to_end(tmp_path: Path, docker_client: object) -> None:
    repo = init(tmp_path / "repo")
    files = {
        ".gitlab-ci.yml": RECIPE.read_text(encoding="utf-8"),
        ".gitignore": ".venv\n.gitlab-ci-local/\n",
        "pytest.ini": "[pytest]\n",
        "lib.py": LIB,
        "tests/test_lib.py": ADD_TEST,
        "tests/test_flaky.py": FLAKY_TEST,
    }
    base = commit(repo, files, "a suite with a flaky test")
    ledger = f"sqlite:///{tmp_path / 'ledger.db'}"
    state = tmp_path / "state"  # the flaky test's state on the CI machine: it ran once
    state.mkdir()

    # An earlier replay froze the flaky test (no fixture), for 12 hours.
    git(repo, "checkout", "-q", "-b", "earlier")
    earlier = commit(repo, {"lib.py": LIB_RESTATED}, "an earlier change")
    frozen = subprocess.run(
        [str(VENV / "bin" / "orchestrator"), "replay", "--repo", str(repo), "--base", base,
         "--patch", earlier, "--image", "orchestrator-runner:latest", "--property", FLAKY,
         "--replays", "4", "--ledger", ledger, "--freeze", "--owner", "team-a",
         "--expires", "12h", "--json"],
        cwd=tmp_path, capture_output=True, text=True, check=False, timeout=600,
        env={**os.environ, "TMPDIR": str(state)},
    )  # fmt: skip
    assert frozen.returncode == 0, frozen.stderr[-3000:]
    (entry,) = json.loads(frozen.stdout)["ledger"]["entries"]
    freeze_id = entry["freeze_id"]
    assert isinstance(freeze_id, int), entry

    # The nightly pipeline on the default branch: the test is still flaky there, so the
    # freeze stays (overdue) and the job fails; its export still lists the freeze.
    git(repo, "checkout", "-q", "main")
    nightly = run_pipeline(
        repo, tmp_path, CI_PIPELINE_SOURCE="schedule", ORCHESTRATOR_LEDGER=ledger
    )
    assert nightly.jobs == {"thaw": "FAIL"}, nightly.output[-3000:]
    assert nightly.code != 0
    report = json.loads(nightly.artifact("thaw", "thaw-report.json").read_text())
    assert [(r["freeze_id"], r["code"]) for r in report["results"]] == [
        (freeze_id, "still_failing")
    ]
    freezes = tmp_path / "freezes-night-1.json"
    shutil.copy(nightly.artifact("thaw", "freezes.json"), freezes)
    assert [f["id"] for f in json.loads(freezes.read_text())["freezes"]] == [freeze_id]

    # A merge request that changes nothing the tests see: the flaky test fails in the test
    # job (its state says so) and is quarantined from the nightly export; the replay is
    # sharded three ways, merged, reported; the pipeline passes.
    git(repo, "checkout", "-q", "-b", "feature", "main")
    commit(repo, {"lib.py": LIB_RESTATED}, "restate add")
    (state / "shared-state").write_text("1")
    mr_variables = {
        "CI_PIPELINE_SOURCE": "merge_request_event",
        "CI_MERGE_REQUEST_DIFF_BASE_SHA": base,
        "ORCHESTRATOR_QUARANTINE": str(freezes),
        "TMPDIR": str(state),
    }
    clean = run_pipeline(repo, tmp_path, **mr_variables)
    jobs = {"tests", "replay: [1/3]", "replay: [2/3]", "replay: [3/3]", "merge"}
    assert clean.jobs == dict.fromkeys(jobs, "PASS"), clean.output[-4000:]
    assert clean.code == 0
    assert f"QUARANTINED {FLAKY} - quarantined by flake freeze {freeze_id} (owner team-a" in (
        clean.output
    )
    tests_report = cases(clean.artifact("tests", "junit-tests.xml"))
    (skipped,) = tests_report["tests.test_flaky.test_leaks_state"].result
    assert isinstance(skipped, Skipped)
    assert skipped.message.startswith(f"quarantined by flake freeze {freeze_id} (owner team-a")
    for shard in (1, 2, 3):
        assert clean.artifact(f"replay{_suffix(clean, shard)}", f"replay-shard-{shard}").is_dir()
    merged = json.loads(clean.artifact("merge", "merged/summary.json").read_text())
    assert merged["exit_status"] == 0
    assert len(merged["run_log"]["merged_from"]) == 3
    assert merged["properties"] == 2  # the table lists what needs a look; the store has all
    merged_records = stored_records(clean.artifact("merge", "merged"))
    assert {record["property_id"] for record in merged_records} == {ADD, FLAKY}
    merged_report = cases(clean.artifact("merge", "junit.xml"))
    assert not any(isinstance(r, Failure) for case in merged_report.values() for r in case.result)

    # A merge request that breaks add: the merge job's verdict (exit 1) fails the pipeline
    # and its JUnit report shows the regression; the test job fails on it too, the flaky
    # test still quarantined beside it.
    git(repo, "checkout", "-q", "-b", "regression", "main")
    commit(repo, {"lib.py": LIB_BROKEN}, "break add")
    (state / "shared-state").write_text("1")
    broken = run_pipeline(repo, tmp_path, **mr_variables)
    assert broken.jobs["merge"] == "FAIL", broken.output[-4000:]
    assert broken.jobs["tests"] == "FAIL"
    assert {broken.jobs[f"replay: [{i}/3]"] for i in (1, 2, 3)} == {"PASS"}
    assert broken.code != 0
    merged = json.loads(broken.artifact("merge", "merged/summary.json").read_text())
    assert merged["exit_status"] == 1
    lanes = {d["property_id"]: (d["lane"], d["code"]) for d in merged["decisions"]}
    assert lanes[ADD] == ("property_regression", "assertion_regression")
    (failure,) = cases(broken.artifact("merge", "junit.xml"))["tests.test_lib.test_add"].result
    assert isinstance(failure, Failure)
    tests_report = cases(broken.artifact("tests", "junit-tests.xml"))
    assert isinstance(tests_report["tests.test_lib.test_add"].result[0], Failure)
    assert isinstance(tests_report["tests.test_flaky.test_leaks_state"].result[0], Skipped)

    # The fix lands on the default branch: the next nightly thaws the freeze, exports none,
    # and the merge request's test job (still on the flaky version) fails on it again.
    git(repo, "checkout", "-q", "main")
    commit(repo, {"tests/test_flaky.py": FIXED_TEST}, "stop leaking state")
    thawed = run_pipeline(repo, tmp_path, CI_PIPELINE_SOURCE="schedule", ORCHESTRATOR_LEDGER=ledger)
    assert thawed.jobs == {"thaw": "PASS"}, thawed.output[-3000:]
    assert thawed.code == 0
    report = json.loads(thawed.artifact("thaw", "thaw-report.json").read_text())
    assert [(r["freeze_id"], r["code"]) for r in report["results"]] == [(freeze_id, "all_pass")]
    freezes_after = tmp_path / "freezes-night-2.json"
    shutil.copy(thawed.artifact("thaw", "freezes.json"), freezes_after)
    assert json.loads(freezes_after.read_text())["freezes"] == []
    git(repo, "checkout", "-q", "feature")
    (state / "shared-state").write_text("1")
    after = run_pipeline(
        repo, tmp_path, "tests", **{**mr_variables, "ORCHESTRATOR_QUARANTINE": str(freezes_after)}
    )
    assert after.jobs == {"tests": "FAIL"}, after.output[-3000:]
    assert f"FAILED {FLAKY}" in after.output


def _suffix(pipeline: Pipeline, shard: int) -> str:
    """gitlab-ci-local names a parallel job's artifacts folder `replay<hash><i>...`."""
    (found,) = [
        p.name.removeprefix("replay")
        for p in pipeline.artifacts.iterdir()
        if p.name.startswith("replay") and (p / f"replay-shard-{shard}").exists()
    ]
    return found

"""[tool.orchestrator] in a real repository: `orchestrator replay --base main --patch
feature` from inside it just works, with the base's settings (never the patch's)."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
from support.scratch_git import commit, git, init

from orchestrator.adapters.docker import build_image

pytestmark = pytest.mark.docker

CLI = Path(__file__).resolve().parents[2] / ".venv" / "bin" / "orchestrator"
PROJECT = f"cfgproj-{os.getpid()}"

PYPROJECT_BASE = f"""\
[project]
name = "{PROJECT}"
version = "0"

[tool.orchestrator]
command = "pytest -q"
test-paths = ["checks"]
replays = 2
timeout = 30
pythonpath = ["code"]
env = {{ GREETING = "from-base" }}
"""
# What a hostile patch would like: its own command, no replays, its own environment,
# and a key this version does not know. None of it is read.
PYPROJECT_PATCH = f"""\
[project]
name = "{PROJECT}"
version = "0"

[tool.orchestrator]
command = "true"
replays = 1
env = {{ GREETING = "from-patch" }}
not-a-key = 1
"""
LIB = "def greet():\n    return 'hello'\n"
CHECKS = """\
import os

import lib


def test_greet():
    assert lib.greet() == "hello"


def test_greeting_comes_from_the_base():
    assert os.environ["GREETING"] == "from-base"
"""


@pytest.fixture(scope="module")
def repo(tmp_path_factory) -> Path:
    path = init(tmp_path_factory.mktemp("config") / "repo")
    commit(
        path,
        {"pyproject.toml": PYPROJECT_BASE, "code/lib.py": LIB, "checks/test_lib.py": CHECKS},
        "base",
    )
    git(path, "checkout", "-q", "-b", "feature")
    commit(path, {"pyproject.toml": PYPROJECT_PATCH, "code/lib.py": LIB + "\n"}, "patch")
    git(path, "checkout", "-q", "main")
    git(path, "checkout", "-q", "-b", "broken")
    commit(path, {"pyproject.toml": PYPROJECT_BASE + "comand = 'pytest'\n"}, "typo")
    git(path, "checkout", "-q", "main")
    return path


def replay(cwd: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [str(CLI), "replay", *args],
        cwd=cwd,
        env={**os.environ, "CI": "1"},
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def test_a_configured_repository_replays_with_only_base_and_patch(repo, runner_image_id, tmp_path):
    out = tmp_path / "run"
    done = replay(
        repo, "--base", "main", "--patch", "feature", "--out", str(out), "--no-record", "--json"
    )
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    lanes = {entry["property_id"]: entry for entry in report["decisions"]}
    assert set(lanes) == {
        "checks/test_lib.py::test_greet",
        "checks/test_lib.py::test_greeting_comes_from_the_base",
    }
    for entry in lanes.values():
        assert entry["base_labels"][0] == entry["patch_labels"][0] == "assert_pass"
    log = json.loads((out / "run-log.json").read_text())
    assert log["command"] == "pytest -q checks"  # the base's command and test paths
    assert log["replays"] == 2
    assert log["timeout_s"] == 30
    assert log["environment"]["GREETING"] == "from-base"
    assert all(paths[0] == "/src/code" for paths in log["pythonpath"].values())
    assert log["image_digest"] == runner_image_id  # no project image: the runner image
    assert log["repo"] == str(repo.resolve()) or Path(log["repo"]).resolve() == repo.resolve()


def test_the_command_line_wins_over_the_table(repo, tmp_path):
    out = tmp_path / "run"
    done = replay(
        tmp_path,
        "--repo", str(repo), "--base", "main", "--patch", "feature",
        "--replays", "1", "--timeout", "20", "--env", "GREETING=from-base", "--env", "X=1",
        "--image", "orchestrator-runner:latest",
        "--out", str(out), "--no-record", "--json",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    log = json.loads((out / "run-log.json").read_text())
    assert log["replays"] == 1
    assert log["timeout_s"] == 20
    assert log["environment"]["X"] == "1"
    assert log["command"] == "pytest -q checks"


def test_a_bad_key_at_the_base_is_exit_2_in_one_line_and_writes_nothing(repo, tmp_path):
    out = tmp_path / "run"
    done = replay(repo, "--base", "broken", "--patch", "feature", "--out", str(out))
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert "'comand'" in lines[0]
    assert "[tool.orchestrator]" in lines[0]
    assert not out.exists()


def test_without_image_the_newest_project_image_built_at_the_base_is_used(
    repo, runner_image_id, docker_client, tmp_path
):
    # Stand-ins for what `orchestrator image build` makes: the runner image with the
    # project image labels. First one built at the feature branch (a pull request's
    # revision, its packages chosen by its files) and one without a revision label (an
    # older tool's): neither is the base's default. Then one built at main: it is.
    context = tmp_path / "context"
    context.mkdir()
    (context / "Dockerfile").write_text(f"FROM {runner_image_id}\n")
    made: dict[str, tuple[str, str]] = {}

    def stand_in(name: str, revision: str | None) -> None:
        labels = {"orchestrator.project-image": "1", "orchestrator.project": PROJECT}
        if revision is not None:
            labels["orchestrator.revision"] = revision
        tag = f"orchestrator-project/{PROJECT}:{name}"
        made[name] = (
            tag,
            build_image(docker_client, context, tag=tag, labels=labels, buildargs={}),
        )

    def replayed(out: Path) -> tuple[dict, str]:
        done = replay(
            repo, "--base", "main", "--patch", "feature", "--out", str(out), "--no-record"
        )
        assert done.returncode == 0, done.stderr
        return json.loads((out / "run-log.json").read_text()), done.stderr

    try:
        stand_in("feature", git(repo, "rev-parse", "feature"))
        stand_in("unlabelled", None)
        log, stderr = replayed(tmp_path / "before")
        assert log["image_digest"] == runner_image_id
        skipped = [line for line in stderr.splitlines() if "project_image_skipped" in line]
        assert any(made["feature"][0] in line and "not the base" in line for line in skipped), (
            stderr
        )
        assert any(
            made["unlabelled"][0] in line and "no orchestrator.revision" in line for line in skipped
        ), stderr

        stand_in("main", git(repo, "rev-parse", "main"))
        log, stderr = replayed(tmp_path / "after")
        assert (log["image_ref"], log["image_digest"]) == made["main"], stderr
    finally:
        for tag, _image_id in made.values():
            docker_client.images.remove(tag)

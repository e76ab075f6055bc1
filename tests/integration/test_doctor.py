"""`orchestrator doctor` as a user runs it: a subprocess, a real engine, a real dead socket."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def doctor(*args: str, env_extra: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    env = {**os.environ, **(env_extra or {})}
    return subprocess.run(
        [sys.executable, "-m", "orchestrator", "doctor", *args],
        capture_output=True,
        text=True,
        env=env,
        cwd=ROOT,
        timeout=120,
        check=False,
    )


@pytest.mark.docker
def test_doctor_reports_each_part_on_one_line(docker_client, runner_image_id):
    result = doctor()
    assert result.returncode == 0, result.stderr
    parts = result.stdout.splitlines()
    # Then one line per project image on the engine (`orchestrator image build`), if any.
    lines = [line for line in parts if not line.startswith("project image: ")]
    assert parts[: len(lines)] == lines
    assert [line.split(":", 1)[0] for line in lines] == ["engine", "runner image", "git", "python"]
    assert all(": ok " in line for line in lines)
    engine_line, image_line = lines[0], lines[1]
    assert docker_client.version()["Version"] in engine_line
    assert f"storage {docker_client.info()['Driver']}" in engine_line
    assert runner_image_id in image_line
    assert f"{sys.version_info.major}.{sys.version_info.minor}" in lines[3]


@pytest.mark.docker
def test_doctor_json_document(runner_image_id):
    result = doctor("--json")
    assert result.returncode == 0, result.stderr
    doc = json.loads(result.stdout)
    assert doc["schema"] == "doctor/1"
    assert doc["ok"] is True
    checks = {check["name"]: check for check in doc["checks"]}
    assert checks["runner image"]["id"] == runner_image_id
    assert checks["engine"]["storage_driver"]


def test_doctor_with_no_engine_exits_3_with_one_line_reason(tmp_path):
    # No engine needed (and no docker mark): `-m "not docker"` runs it too.
    dead = f"unix://{tmp_path / 'docker.sock'}"  # nothing listens there
    result = doctor(env_extra={"DOCKER_HOST": dead})
    assert result.returncode == 3
    assert "Traceback" not in result.stderr
    errors = [line for line in result.stderr.splitlines() if line.startswith("orchestrator:")]
    assert len(errors) == 1
    assert dead in errors[0]
    assert "DOCKER_HOST" in errors[0]  # what to do about it
    assert result.stdout.splitlines()[0].startswith("engine: MISSING")


@pytest.mark.docker
def test_doctor_with_a_missing_image_exits_3_naming_it(docker_client):
    result = doctor("--image", "orchestrator-absent/never-built:0", "--json")
    assert result.returncode == 3
    assert "Traceback" not in result.stderr
    doc = json.loads(result.stdout)
    assert doc["ok"] is False
    assert [c["ok"] for c in doc["checks"]] == [True, False, True, True]
    assert "orchestrator-absent/never-built:0" in result.stderr
    assert "`orchestrator image runner`" in result.stderr  # what to run, without a checkout

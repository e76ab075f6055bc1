"""scripts/ensure-docker, scripts/stop-docker and scripts/build-images on the real machine.

The engine `make test` brought up is left running: these tests only exercise the paths
that must not start or stop anything.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

pytestmark = pytest.mark.docker

ROOT = Path(__file__).resolve().parents[2]


def script(name: str, env_extra: dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run(
        [str(ROOT / "scripts" / name)],
        capture_output=True,
        text=True,
        env={**os.environ, **env_extra},
        timeout=300,
        check=False,
    )


def test_ensure_docker_uses_an_answering_engine(docker_client, tmp_path):
    result = script("ensure-docker", {"ORCHESTRATOR_STATE_DIR": str(tmp_path)})
    assert result.returncode == 0, result.stderr
    assert docker_client.version()["Version"] in result.stderr
    assert not (tmp_path / "dockerd.pid").exists()  # it started nothing


def test_ensure_docker_refuses_a_dead_docker_host_in_one_line(tmp_path):
    dead = f"unix://{tmp_path / 'docker.sock'}"
    result = script("ensure-docker", {"DOCKER_HOST": dead, "ORCHESTRATOR_STATE_DIR": str(tmp_path)})
    assert result.returncode == 1
    assert result.stderr.count("\n") == 1
    assert dead in result.stderr
    assert not (tmp_path / "dockerd.pid").exists()


def test_stop_docker_without_a_record_stops_nothing(docker_client, tmp_path):
    result = script("stop-docker", {"ORCHESTRATOR_STATE_DIR": str(tmp_path)})
    assert result.returncode == 0
    assert "nothing to stop" in result.stderr
    assert docker_client.ping()


def test_stop_docker_leaves_a_process_that_is_not_its_dockerd(tmp_path):
    bystander = subprocess.Popen(["sleep", "60"])
    try:
        (tmp_path / "dockerd.pid").write_text(f"{bystander.pid}\n")
        result = script("stop-docker", {"ORCHESTRATOR_STATE_DIR": str(tmp_path)})
        assert result.returncode == 0
        assert bystander.poll() is None  # still running
        assert not (tmp_path / "dockerd.pid").exists()  # the stale record is forgotten
    finally:
        bystander.kill()
        bystander.wait()


def test_build_images_reuses_an_unchanged_context(runner_image_id):
    result = script("build-images", {})
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == runner_image_id
    assert "not rebuilding" in result.stderr
    assert "building" not in result.stderr.replace("not rebuilding", "")

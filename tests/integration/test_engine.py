"""The engine adapter and the runner image, against the real Docker engine."""

from __future__ import annotations

import ast
import os
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from orchestrator.adapters.engine import (
    RUNNER_IMAGE,
    ImagePin,
    connect,
    engine_info,
    resolve_image,
)
from orchestrator.errors import EngineUnavailableError, ExitCode, ImageNotFoundError

pytestmark = pytest.mark.docker

PROBE = "import pytest, sys; print(tuple(sys.version_info[:2]), pytest.__version__)"


def run_in_runner(client: Any, image_id: str, command: list[str]) -> tuple[int, str]:
    """Create + start a hermetic container (no network, read-only, user runner); always remove."""
    container = client.containers.create(
        image_id,
        command=command,
        user="runner",
        network_mode="none",
        read_only=True,
        labels={"orchestrator.test": "engine"},
    )
    try:
        container.start()
        status = container.wait(timeout=60)["StatusCode"]
        output = container.logs(stdout=True, stderr=True).decode()
        return status, output
    finally:
        container.remove(force=True)


def test_runner_image_has_python_311_pytest_7_and_user_1000(docker_client, runner_image_id):
    status, output = run_in_runner(docker_client, runner_image_id, ["python3", "-c", PROBE])
    assert status == 0, output
    version_text, pytest_version = output.strip().rsplit(" ", 1)
    assert ast.literal_eval(version_text) == (3, 11)
    assert pytest_version.split(".")[0] == "7"

    status, output = run_in_runner(docker_client, runner_image_id, ["id", "-u"])
    assert (status, output.strip()) == (0, "1000")


def test_runner_container_has_no_network_and_a_read_only_root(docker_client, runner_image_id):
    script = (
        "import socket, pathlib\n"
        "names = sorted(p.name for p in pathlib.Path('/sys/class/net').iterdir())\n"
        "try:\n"
        "    pathlib.Path('/etc/probe').write_text('x')\n"
        "    writable = True\n"
        "except OSError:\n"
        "    writable = False\n"
        "print(names, writable)\n"
    )
    status, output = run_in_runner(docker_client, runner_image_id, ["python3", "-c", script])
    assert status == 0, output
    assert output.strip() == "['lo'] False"


def test_containers_are_removed_after_a_run(docker_client, runner_image_id):
    run_in_runner(docker_client, runner_image_id, ["true"])
    left = docker_client.containers.list(all=True, filters={"label": "orchestrator.test=engine"})
    assert left == []


def test_resolve_image_pins_the_id_and_tags(docker_client, runner_image_id):
    pin = resolve_image(docker_client, RUNNER_IMAGE)
    assert isinstance(pin, ImagePin)
    assert pin.id == runner_image_id
    assert pin.id.startswith("sha256:")
    assert len(pin.id) == len("sha256:") + 64
    assert RUNNER_IMAGE in pin.tags
    # The image is also tagged by its build-context digest (scripts/build-images).
    assert any(tag.startswith("orchestrator-runner:ctx-") for tag in pin.tags)
    # Resolving by ID gives the same pin: the ID is what replays record.
    assert resolve_image(docker_client, pin.id).id == pin.id


def test_resolve_image_never_pulls_a_missing_image(docker_client):
    missing = "orchestrator-absent/never-built:0"
    with pytest.raises(ImageNotFoundError) as caught:
        resolve_image(docker_client, missing)
    assert missing in str(caught.value)
    assert "\n" not in str(caught.value)
    assert caught.value.exit_code == ExitCode.UNDECIDED
    with pytest.raises(Exception, match="No such image"):
        docker_client.images.get(missing)  # still absent: nothing was pulled


def test_engine_info_reports_version_and_storage_driver(docker_client):
    info = engine_info(docker_client)
    assert info.server_version == docker_client.version()["Version"]
    assert info.storage_driver == docker_client.info()["Driver"]
    assert info.storage_driver  # e.g. overlay2


def test_connect_respects_docker_host(docker_client):
    # The same engine reached through an explicit DOCKER_HOST answers with the same ID.
    url = os.environ.get("DOCKER_HOST") or "unix:///var/run/docker.sock"
    client = connect({"DOCKER_HOST": url})
    try:
        assert client.info()["ID"] == docker_client.info()["ID"]
    finally:
        client.close()


@pytest.fixture
def silent_socket(tmp_path: Path) -> Iterator[str]:
    """A unix socket that accepts connections but never answers: a hung engine."""
    path = tmp_path / "hung.sock"
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(str(path))
    server.listen(8)
    yield f"unix://{path}"
    server.close()


def test_connect_to_a_socket_where_nothing_listens_fails_in_one_line(tmp_path):
    url = f"unix://{tmp_path / 'nothing.sock'}"
    with pytest.raises(EngineUnavailableError) as caught:
        connect({"DOCKER_HOST": url})
    message = str(caught.value)
    assert url in message
    assert "\n" not in message
    assert caught.value.exit_code == ExitCode.UNDECIDED


def test_connect_to_a_hung_engine_gives_up(silent_socket):
    with pytest.raises(EngineUnavailableError) as caught:
        connect({"DOCKER_HOST": silent_socket}, timeout_s=1)
    assert silent_socket in str(caught.value)

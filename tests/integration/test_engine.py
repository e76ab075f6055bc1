"""The Docker adapter and the runner image, against the real Docker engine.

Tests that need the engine carry the ``docker`` mark; the ones that only need a dead
or a silent socket do not, so ``-m "not docker"`` still runs them.
"""

from __future__ import annotations

import ast
import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from orchestrator.adapters import docker as docker_adapter
from orchestrator.adapters.docker import (
    RUNNER_IMAGE,
    Container,
    ImagePin,
    connect,
    engine_info,
    resolve_image,
)
from orchestrator.errors import EngineError, EngineUnavailableError, ExitCode, ImageNotFoundError

PROBE = "import pytest, sys; print(tuple(sys.version_info[:2]), pytest.__version__)"


@pytest.fixture
def owner() -> docker_adapter.Owner:
    return docker_adapter.Owner.current(f"test-engine-{os.urandom(4).hex()}")


def config_for(owner: docker_adapter.Owner, image_id: str, command: list[str]) -> dict[str, Any]:
    """The adapter's hermetic settings (no network, read-only root, user 1000), our labels."""
    return docker_adapter.container_config(
        image_id=image_id,
        name=f"orchestrator-test-{owner.run_id}-{os.urandom(3).hex()}",
        command=command,
        mounts=[],
        environment={},
        labels=owner.labels("t"),
        limits=docker_adapter.Limits(),
        working_dir="/tmp",
    )


def ours(client: Any, owner: docker_adapter.Owner) -> list[str]:
    """Every container, running or not, that carries this test's run label."""
    found = client.containers.list(
        all=True, filters={"label": f"{docker_adapter.LABEL_RUN}={owner.run_id}"}
    )
    return [container.name for container in found]


def run_in_runner(
    client: Any, owner: docker_adapter.Owner, image_id: str, command: list[str]
) -> tuple[int | None, str]:
    """Run ``command`` in a container of the adapter; its exit status and its output."""
    lines: list[str] = []
    with Container(client, config_for(owner, image_id, command)) as container:
        reader = container.follow_logs(lines.append)
        exit_ = container.wait(deadline=time.monotonic() + 60)
        reader.join()  # the stream ends when the container does
    return exit_.status_code, "\n".join(lines)


@pytest.mark.docker
def test_runner_image_has_python_311_pytest_7_and_user_1000(docker_client, runner_image_id, owner):
    status, output = run_in_runner(docker_client, owner, runner_image_id, ["python3", "-c", PROBE])
    assert status == 0, output
    version_text, pytest_version = output.strip().rsplit(" ", 1)
    assert ast.literal_eval(version_text) == (3, 11)
    assert pytest_version.split(".")[0] == "7"

    status, output = run_in_runner(docker_client, owner, runner_image_id, ["id", "-u"])
    assert (status, output.strip()) == (0, "1000")


@pytest.mark.docker
def test_runner_container_has_no_network_and_a_read_only_root(
    docker_client, runner_image_id, owner
):
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
    status, output = run_in_runner(docker_client, owner, runner_image_id, ["python3", "-c", script])
    assert status == 0, output
    assert output.strip() == "['lo'] False"


@pytest.mark.docker
def test_containers_are_removed_after_a_run(docker_client, runner_image_id, owner):
    with Container(docker_client, config_for(owner, runner_image_id, ["true"])) as container:
        assert ours(docker_client, owner) == [container.name]  # it was there
        exit_ = container.wait(deadline=time.monotonic() + 60)
    assert exit_.status_code == 0
    assert ours(docker_client, owner) == []


def running(client: Any, container: Container) -> bool:
    return bool(client.containers.get(container.id).attrs["State"]["Running"])


@pytest.mark.docker
def test_a_container_is_removed_when_the_body_raises(docker_client, runner_image_id, owner):
    seen: list[bool] = []

    def body(container: Container) -> None:
        seen.append(running(docker_client, container))
        raise RuntimeError("the body failed")

    config = config_for(owner, runner_image_id, ["sleep", "60"])
    with (
        pytest.raises(RuntimeError, match="the body failed"),
        Container(docker_client, config) as c,
    ):
        body(c)
    assert seen == [True]
    assert ours(docker_client, owner) == []


@pytest.mark.docker
def test_a_container_is_killed_and_removed_on_keyboard_interrupt(
    docker_client, runner_image_id, owner
):
    seen: list[bool] = []

    def body(container: Container) -> None:
        seen.append(running(docker_client, container))
        raise KeyboardInterrupt

    config = config_for(owner, runner_image_id, ["sleep", "60"])
    with pytest.raises(KeyboardInterrupt), Container(docker_client, config) as c:
        body(c)
    assert seen == [True]
    assert ours(docker_client, owner) == []


@pytest.mark.docker
def test_a_container_cancelled_before_start_is_removed_unstarted(
    docker_client, runner_image_id, owner
):
    cancelled = threading.Event()
    cancelled.set()
    live = docker_adapter.LiveContainers()
    config = config_for(owner, runner_image_id, ["true"])
    with (
        pytest.raises(docker_adapter.Cancelled),
        Container(docker_client, config, live=live, cancelled=cancelled),
    ):
        pytest.fail("the body of a cancelled container ran")
    assert ours(docker_client, owner) == []
    assert live.snapshot() == []


@pytest.mark.docker
def test_an_engine_refusal_is_an_engine_error_not_an_sdk_error(
    docker_client, runner_image_id, owner
):
    config = config_for(owner, runner_image_id, ["true"])
    config["mem_limit"] = "not-a-size"  # the engine refuses it: a docker_api failure
    with pytest.raises(EngineError) as caught, Container(docker_client, config):
        pytest.fail("a container the engine refused was entered")
    assert caught.value.reason == "docker_api"
    assert caught.value.exit_code == ExitCode.UNDECIDED
    assert ours(docker_client, owner) == []


@pytest.mark.docker
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


@pytest.mark.docker
def test_resolve_image_never_pulls_a_missing_image(docker_client):
    missing = "orchestrator-absent/never-built:0"
    with pytest.raises(ImageNotFoundError) as caught:
        resolve_image(docker_client, missing)
    assert missing in str(caught.value)
    assert "\n" not in str(caught.value)
    assert caught.value.exit_code == ExitCode.UNDECIDED
    with pytest.raises(Exception, match="No such image"):
        docker_client.images.get(missing)  # still absent: nothing was pulled


@pytest.mark.docker
def test_engine_info_reports_version_and_storage_driver(docker_client):
    info = engine_info(docker_client)
    assert info.server_version == docker_client.version()["Version"]
    assert info.storage_driver == docker_client.info()["Driver"]
    assert info.storage_driver  # e.g. overlay2


@pytest.mark.docker
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


@pytest.fixture
def closing_tcp_port() -> Iterator[int]:
    """A local TCP port that accepts connections and closes them at once: no SSH server."""
    server = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    server.bind(("127.0.0.1", 0))
    server.listen(8)

    def serve() -> None:
        while True:
            try:
                conn, _ = server.accept()
            except OSError:  # shut down at teardown
                return
            conn.close()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    yield server.getsockname()[1]
    server.shutdown(socket.SHUT_RDWR)  # wakes the blocked accept (close alone does not)
    thread.join()
    server.close()


SSH_CONNECT = """
import sys
from orchestrator.adapters import docker as docker_adapter
from orchestrator.errors import EngineUnavailableError
print("paramiko" in sys.modules)
try:
    docker_adapter.connect({}, url=sys.argv[1], timeout_s=5)
except EngineUnavailableError as error:
    print("paramiko" in sys.modules)
    print(error)
"""


def test_ssh_transport_is_loaded_for_the_first_ssh_engine_only(closing_tcp_port):
    # A fresh interpreter: the adapter imports the SDK without paramiko; an ssh:// engine
    # then gets paramiko's transport, and paramiko's own error becomes the one-line reason.
    url = f"ssh://nobody@127.0.0.1:{closing_tcp_port}"
    done = subprocess.run(
        [sys.executable, "-c", SSH_CONNECT, url], capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr
    before, after, message = done.stdout.splitlines()
    assert (before, after) == ("False", "True")
    assert message.startswith(f"no Docker engine answers at {url} (")
    assert "SSH protocol banner" in message  # paramiko's, not the SDK's "Install paramiko"

"""Processes run in a started container (``docker exec``), a terminal relayed to one, and a
kept container: the Docker adapter and the terminal adapter against the real engine."""

from __future__ import annotations

import os
import socket
import subprocess
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from orchestrator.adapters import docker as docker_adapter
from orchestrator.adapters import terminal
from orchestrator.adapters.docker import Container

pytestmark = pytest.mark.docker

IDLE = ["sleep", "infinity"]


def config_for(owner: docker_adapter.Owner, image_id: str, command: list[str]) -> dict[str, Any]:
    return docker_adapter.container_config(
        image_id=image_id,
        name=f"orchestrator-test-{owner.run_id}-{os.urandom(3).hex()}",
        command=command,
        mounts=[],
        environment={"FROM_CONTAINER": "yes"},
        labels=owner.labels("t"),
        limits=docker_adapter.Limits(),
        working_dir="/tmp",
    )


def ours(client: Any, owner: docker_adapter.Owner) -> list[Any]:
    return client.containers.list(
        all=True, filters={"label": f"{docker_adapter.LABEL_RUN}={owner.run_id}"}
    )


@pytest.fixture
def owner() -> docker_adapter.Owner:
    return docker_adapter.Owner.current(f"test-exec-{os.urandom(4).hex()}")


def test_an_exec_streams_its_output_and_ends_with_its_exit_code(
    docker_client, runner_image_id, owner
):
    chunks: list[bytes] = []
    with Container(docker_client, config_for(owner, runner_image_id, IDLE)) as container:
        exit_ = container.exec_stream(
            ["sh", "-c", 'echo "out $FROM_CONTAINER $EXTRA"; echo err >&2; exit 3'],
            environment={"EXTRA": "given"},
            on_output=chunks.append,
            deadline=time.monotonic() + 60,
        )
    output = b"".join(chunks).decode()
    assert "out yes given" in output  # the container's environment, and the exec's own
    assert "err" in output
    assert (exit_.status_code, exit_.killed_at_deadline) == (3, False)
    assert ours(docker_client, owner) == []


def test_an_exec_past_its_deadline_is_ended_by_killing_the_container(
    docker_client, runner_image_id, owner
):
    with Container(docker_client, config_for(owner, runner_image_id, IDLE)) as container:
        exit_ = container.exec_stream(
            ["sleep", "300"],
            environment={},
            on_output=lambda chunk: None,
            deadline=time.monotonic() + 1,
        )
        state = docker_client.containers.get(container.id).attrs["State"]
    assert exit_.killed_at_deadline
    assert not state["Running"]
    assert ours(docker_client, owner) == []


def test_a_terminal_exec_is_relayed_both_ways(docker_client, runner_image_id, owner, tmp_path):
    # Standard input here is a pipe, not a terminal: the bytes go through all the same,
    # and its end of file reaches the process in the container.
    stdin_read, stdin_write = os.pipe()
    os.write(stdin_write, b"hello\n")
    os.close(stdin_write)
    captured = tmp_path / "captured"
    with (
        Container(docker_client, config_for(owner, runner_image_id, IDLE)) as container,
        captured.open("wb") as sink,
    ):
        session = container.exec_terminal(
            ["sh", "-c", 'read line; echo "got $line"; tty; cat; echo "eof seen"; exit 5'],
            environment={},
        )
        try:
            terminal.relay(
                session.socket,
                stdin_fd=stdin_read,
                stdout_fd=sink.fileno(),
                on_resize=session.resize,
            )
        finally:
            session.close()
            os.close(stdin_read)
        status = session.exit_code()
    output = captured.read_text()
    assert "got hello" in output
    assert "/dev/pts/" in output  # the process has a terminal of its own
    assert "eof seen" in output
    assert status == 5
    assert isinstance(session.socket, socket.socket)


def test_a_kept_container_stays_up_and_is_swept_once_its_owner_is_gone(
    docker_client, runner_image_id
):
    # An owner process of our own, so that it can be gone without this test ending.
    stand_in = subprocess.Popen(["sleep", "300"])
    try:
        owner = docker_adapter.Owner(
            run_id=f"test-keep-{os.urandom(4).hex()}",
            session=docker_adapter.SESSION,
            pid=stand_in.pid,
            pid_start=docker_adapter.process_start(stand_in.pid) or "",
            host=socket.gethostname(),
        )
        with Container(
            docker_client, config_for(owner, runner_image_id, IDLE), keep=True
        ) as container:
            name = container.name
        (kept,) = ours(docker_client, owner)
        assert kept.name == name
        assert kept.attrs["State"]["Running"]
        assert name not in docker_adapter.sweep_leftovers(docker_client)
        assert [c.name for c in ours(docker_client, owner)] == [name]  # its owner lives
    finally:
        stand_in.kill()
        stand_in.wait()
    assert name in docker_adapter.sweep_leftovers(docker_client)
    assert ours(docker_client, owner) == []


def test_a_kept_container_that_never_started_is_removed(docker_client, runner_image_id, owner):
    cancelled = threading.Event()
    cancelled.set()
    config = config_for(owner, runner_image_id, IDLE)
    with (
        pytest.raises(docker_adapter.Cancelled),
        Container(docker_client, config, cancelled=cancelled, keep=True),
    ):
        pytest.fail("a container that did not start was entered")
    assert ours(docker_client, owner) == []


def test_a_kept_tree_stays_until_its_owner_is_gone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import tempfile

    from orchestrator.adapters import git as git_adapter

    scratch = tmp_path / "scratch"  # a temp dir of our own: the sweep sees only our folders
    scratch.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(scratch))

    subprocess.run(["git", "init", "-q", str(tmp_path / "repo")], check=True)
    (tmp_path / "repo" / "a.txt").write_text("a\n")
    env = {
        **os.environ,
        "GIT_AUTHOR_NAME": "t",
        "GIT_AUTHOR_EMAIL": "t@example.invalid",
        "GIT_COMMITTER_NAME": "t",
        "GIT_COMMITTER_EMAIL": "t@example.invalid",
    }
    subprocess.run(["git", "-C", str(tmp_path / "repo"), "add", "."], check=True, env=env)
    subprocess.run(["git", "-C", str(tmp_path / "repo"), "commit", "-qm", "a"], check=True, env=env)
    sha = git_adapter.resolve_rev(tmp_path / "repo", "HEAD")
    with git_adapter.checkout(tmp_path / "repo", sha, keep=True) as tree:
        pass
    assert (tree / "a.txt").read_text() == "a\n"
    assert tree.parent.parent == scratch
    assert git_adapter.sweep_scratch(lambda pid: True, root=scratch) == []
    assert tree.exists()
    assert git_adapter.sweep_scratch(lambda pid: False, root=scratch) == [tree.parent]
    assert not tree.exists()

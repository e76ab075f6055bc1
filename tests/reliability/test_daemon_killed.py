"""The Docker daemon dies mid-run: harness_error and exit 3, never a verdict.

The test starts its OWN second dockerd (own socket, data root, exec root, cgroup
parent; no bridge, no iptables), loads the runner image into it, points
`orchestrator replay` at it with DOCKER_HOST, and SIGKILLs that daemon while the
patch side's container runs. The main daemon is never touched. Afterwards the second
daemon is restarted on the same roots (so Docker itself kills and forgets the orphaned
containers), stopped, and its folders removed.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import tempfile
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import docker
import pytest
from replay_helpers import Runner, labels_of, replay_args, running_containers, wait_for, worktrees

from fixtures.build_example import BUDGET_PROPERTY, ExampleRepo

pytestmark = [pytest.mark.docker, pytest.mark.slow]


class PrivateDaemon:
    """A second dockerd on its own socket and roots, started and stopped by this test."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.socket = root / "docker.sock"
        self.cgroup_parent = f"orch-reliability-{uuid.uuid4().hex[:8]}"
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"unix://{self.socket}"

    def start(self) -> docker.DockerClient:
        log = (self.root / "dockerd.log").open("ab")
        self.process = subprocess.Popen(
            [
                "dockerd",
                "--host",
                self.url,
                "--data-root",
                str(self.root / "data"),
                "--exec-root",
                str(self.root / "exec"),
                "--pidfile",
                str(self.root / "dockerd.pid"),
                "--bridge=none",
                "--iptables=false",
                "--ip-masq=false",
                "--storage-driver=overlay2",
                "--cgroup-parent",
                self.cgroup_parent,
            ],
            stdout=log,
            stderr=log,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
        log.close()

        def client_if_answering() -> docker.DockerClient | None:
            assert self.process is not None
            if self.process.poll() is not None:
                raise AssertionError(f"dockerd exited: {self.log_tail()}")
            try:
                client = docker.DockerClient(base_url=self.url, timeout=120)
            except docker.errors.DockerException:
                return None  # not listening yet
            return client if client.ping() else None

        return wait_for(client_if_answering, timeout=60, what="the private dockerd to answer")

    def kill(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGKILL)
            self.process.wait(timeout=30)

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=30)

    def log_tail(self) -> str:
        path = self.root / "dockerd.log"
        return path.read_text(errors="replace")[-1500:] if path.exists() else ""

    def stray_pids(self) -> list[int]:
        """Processes this daemon left: its containerd and shims (by our root in their
        command line) and container processes (by our cgroup parent)."""
        found: set[int] = set()
        for proc in Path("/proc").iterdir():
            if not proc.name.isdigit():
                continue
            with contextlib.suppress(OSError):
                cmdline = (proc / "cmdline").read_bytes()
                cgroups = (proc / "cgroup").read_text()
                if str(self.root).encode() in cmdline or f"/{self.cgroup_parent}/" in cgroups:
                    found.add(int(proc.name))
        found.discard(os.getpid())
        return sorted(found)

    def remove(self) -> None:
        """Stop everything this daemon started and delete its folders."""
        self.kill()
        # A fresh start on the same roots kills the orphaned containers (no live-restore)
        # and a clean stop takes its containerd and shims down with it.
        with contextlib.suppress(Exception):
            self.start().close()
        self.stop()
        for pid in self.stray_pids():
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        mounts = Path("/proc/self/mounts").read_text().splitlines()
        for target in sorted((line.split()[1] for line in mounts), reverse=True):
            if target.startswith(str(self.root)):
                subprocess.run(["umount", "-l", target], check=False)
        shutil.rmtree(self.root, ignore_errors=True)


@pytest.fixture
def private_daemon(docker_client: Any, runner_image_id: str) -> Iterator[PrivateDaemon]:
    # A short path: unix socket paths are limited to 108 bytes.
    daemon = PrivateDaemon(Path(tempfile.mkdtemp(prefix="orch-dockerd-", dir="/tmp")))
    try:
        client = daemon.start()
        image_tar = b"".join(docker_client.images.get(runner_image_id).save(named=True))
        (loaded,) = client.images.load(image_tar)
        assert loaded.id == runner_image_id  # content-addressed: the very same image
        client.close()
        yield daemon
    finally:
        daemon.remove()
        assert not daemon.root.exists()


def test_daemon_killed_mid_run_is_a_harness_error_and_exit_3(
    private_daemon: PrivateDaemon,
    runner_image_id: str,
    runner: Runner,
    example: ExampleRepo,
    tmp_path: Path,
) -> None:
    out = tmp_path / "run"
    args = replay_args(
        example,
        patch="hang",
        properties=[BUDGET_PROPERTY],
        image=runner_image_id,
        out=out,
        replays=2,
        timeout_s=120,
    )
    process = runner.start(args, env={"DOCKER_HOST": private_daemon.url})
    watcher = docker.DockerClient(base_url=private_daemon.url, timeout=10)
    try:
        wait_for(
            lambda: running_containers(watcher, process),
            timeout=90,
            what="the replay's containers to run on the private daemon",
        )
    finally:
        watcher.close()
    started = time.monotonic()
    private_daemon.kill()
    run = runner.finish(process, out, timeout=180)
    assert time.monotonic() - started < 120, "the CLI waited for the replay deadline"
    assert run.exit_code == 3, run.stderr[-2000:]
    decisions = run.decisions()
    # Never a verdict: either no decision at all, or the infra queue.
    assert all(d["lane"] == "infra_queue" for d in decisions), decisions
    for evidence in run.evidence():
        assert set(labels_of(evidence, "patch")) == {"harness_error"}, evidence["patch"]
    assert worktrees(example) == [f"worktree {example.path}"]
    assert runner.leftover_trees() == []

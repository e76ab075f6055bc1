"""A second local Docker engine, private to this test session.

``SecondEngine`` is started with the project's own ``scripts/ensure-docker`` under a
private root (``ORCHESTRATOR_DOCKERD_ROOT``: its own socket, data root, exec root and pid
file, beside the machine's engine) and stopped with ``scripts/stop-docker``, which stop
only the daemon they recorded. A test may SIGKILL it (``kill``): the daemon is then
waited for until it is reaped (its pid gone from /proc) before it is started again on the
same root (``restart``; without live-restore Docker itself stops the orphaned
containers). When the session ends it is stopped, what it left (its containerd and shims,
by its root in their command line) is killed and reaped, its mounts are unmounted and its
root removed (``remove``). The machine's engine is never touched.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import tempfile
from pathlib import Path
from typing import Any

from support.polling import wait_for

ROOT = Path(__file__).resolve().parents[2]
SCRIPTS = ROOT / "scripts"
MARK_LABEL = "orchestrator.replay=1"


def _gone(pid: int) -> bool:
    """Reaped: no /proc entry at all (a zombie still holds its pid and its pid file)."""
    return not Path(f"/proc/{pid}").exists()


def _dead(pid: int) -> bool:
    """Exited, reaped or not (a zombie's parent, not this session, reaps it)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return True
    return state == "Z"


class SecondEngine:
    """A private dockerd beside the machine's, started and stopped by this test session."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.url = f"unix://{root}/docker.sock"
        self.env = {**os.environ, "ORCHESTRATOR_DOCKERD_ROOT": str(root), "DOCKER_HOST": self.url}
        self.pid: int | None = None

    def _script(self, name: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [str(SCRIPTS / name)],
            env=self.env,
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
        )

    def recorded_pid(self) -> int | None:
        try:
            return int((self.root / "dockerd.pid").read_text().strip())
        except (OSError, ValueError):
            return None

    def start(self) -> None:
        started = self._script("ensure-docker")
        if started.returncode != 0:
            raise AssertionError(f"the second engine did not start: {started.stderr[-2000:]}")
        self.pid = self.recorded_pid()

    def client(self, timeout: int = 120) -> Any:
        import docker

        return docker.DockerClient(base_url=self.url, version="auto", timeout=timeout)

    def load_image(self, source: Any, image_id: str, tag: str) -> None:
        """``image_id`` from the ``source`` engine's client, offline (save | load) unless it
        is here already, tagged ``tag`` as there. Content-addressed: the very same image."""
        client = self.client()
        try:
            try:
                image = client.images.get(image_id)
            except Exception:
                (image,) = client.images.load(b"".join(source.images.get(image_id).save()))
            assert image.id == image_id, (image.id, image_id)
            if tag not in image.tags:
                image.tag(tag)
        finally:
            client.close()

    def kill(self) -> None:
        """SIGKILL the daemon, then wait until it is reaped (a restart on the same root
        would refuse to start while a zombie holds its pid file)."""
        pid = self.pid if self.pid is not None else self.recorded_pid()
        assert pid is not None, "the second engine is not running"
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
        wait_for(lambda: _gone(pid), timeout=60, what=f"the killed dockerd {pid} to be reaped")
        self.pid = None

    def alive(self) -> bool:
        pid = self.recorded_pid()
        return pid is not None and not _gone(pid)

    def restart(self) -> None:
        """Start it again if a test killed it (whoever did: the pid file says)."""
        pid = self.recorded_pid()
        if pid is not None and not _gone(pid):
            self.pid = pid
            return
        self.start()

    def clean(self) -> None:
        """Remove every container and volume on this engine (ours alone: nothing else uses
        it), so that what one test left cannot pass or fail the next."""
        client = self.client()
        try:
            for container in client.containers.list(all=True):
                with contextlib.suppress(Exception):
                    container.remove(force=True, v=True)
            for volume in client.volumes.list():
                with contextlib.suppress(Exception):
                    volume.remove(force=True)
        finally:
            client.close()

    def stray_pids(self) -> list[int]:
        """Processes this daemon left behind: its containerd and shims (by our root in
        their command line)."""
        found = []
        marker = str(self.root).encode()
        for proc in Path("/proc").iterdir():
            if not proc.name.isdigit() or int(proc.name) == os.getpid():
                continue
            with contextlib.suppress(OSError):
                if marker in (proc / "cmdline").read_bytes():
                    found.append(int(proc.name))
        return sorted(found)

    def remove(self) -> None:
        """Stop it (only it), kill and reap what it left, unmount its data root, delete
        its root."""
        pid = self.recorded_pid()
        self._script("stop-docker")
        if pid is not None and not _gone(pid):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        strays = self.stray_pids()
        for stray in strays:
            with contextlib.suppress(ProcessLookupError):
                os.kill(stray, signal.SIGKILL)
        if pid is not None:
            wait_for(lambda: _gone(pid), timeout=60, what=f"dockerd {pid} to be reaped")
        for stray in strays:
            wait_for(lambda s=stray: _dead(s), timeout=60, what=f"process {stray} to exit")
        unmount_under(self.root)
        shutil.rmtree(self.root, ignore_errors=True)
        self.pid = None


def unmount_under(root: Path) -> None:
    """Unmount (lazily, deepest first) every mount at or below ``root``."""
    mounts = Path("/proc/self/mounts").read_text().splitlines()
    for target in sorted((line.split()[1] for line in mounts), reverse=True):
        if target == str(root) or target.startswith(f"{root}/"):
            subprocess.run(["umount", "-l", target], check=False, capture_output=True)


def new_second_engine() -> SecondEngine:
    # A short path: unix socket paths (containerd's too, below the exec root) are limited
    # to 108 bytes.
    return SecondEngine(Path(tempfile.mkdtemp(prefix="o16-", dir="/tmp")))

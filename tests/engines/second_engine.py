"""A second local Docker engine for the tests that need two, and the replay CLI around it.

``SecondEngine`` is started with the project's own ``scripts/ensure-docker`` under a
private root (``ORCHESTRATOR_DOCKERD_ROOT``: its own socket, data root, exec root and pid
file, beside the machine's engine) and stopped with ``scripts/stop-docker``, which stop
only the daemon they recorded. A test may SIGKILL it; the daemon is then waited for
until it is reaped (its pid gone from /proc) before it is started again on the same
root. When the session ends it is stopped, what it left (its containerd and shims, by
its root in their command line) is killed, its mounts are unmounted and its root
removed. The machine's engine is never touched.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

CLI = ROOT / ".venv" / "bin" / "orchestrator"
SCRIPTS = ROOT / "scripts"
PID_LABEL = "orchestrator.pid"
MARK_LABEL = "orchestrator.replay=1"


def example_tests() -> int:
    """How many tests the bundled example's base has (every one is a property)."""
    tests = ROOT / "fixtures" / "example" / "base" / "tests"
    return sum(path.read_text().count("\ndef test_") for path in tests.glob("test_*.py"))


def wait_for(predicate: Any, *, timeout: float, what: str, poll: float = 0.05) -> Any:
    """Poll ``predicate`` until it returns something truthy (a condition, not a sleep)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(poll)
    raise AssertionError(f"timed out after {timeout}s waiting for {what}")


class SecondEngine:
    """A private dockerd beside the machine's, started and stopped by this test session."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.url = f"unix://{root}/docker.sock"
        self.pid: int | None = None

    def _script(self, name: str) -> subprocess.CompletedProcess[str]:
        env = {**os.environ, "ORCHESTRATOR_DOCKERD_ROOT": str(self.root), "DOCKER_HOST": self.url}
        return subprocess.run(
            [str(SCRIPTS / name)],
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
        )

    def start(self) -> None:
        started = self._script("ensure-docker")
        if started.returncode != 0:
            raise AssertionError(f"the second engine did not start: {started.stderr[-2000:]}")
        self.pid = int((self.root / "dockerd.pid").read_text())

    def client(self, timeout: int = 120) -> Any:
        import docker

        return docker.DockerClient(base_url=self.url, version="auto", timeout=timeout)

    def kill(self) -> None:
        """SIGKILL the daemon, then wait until it is reaped (a zombie still holds its pid
        file, and a restart on the same root would refuse to start)."""
        assert self.pid is not None
        pid = self.pid
        os.kill(pid, signal.SIGKILL)
        wait_for(
            lambda: not Path(f"/proc/{pid}").exists(),
            timeout=60,
            what=f"the killed dockerd {pid} to be reaped",
        )
        self.pid = None

    def restart(self) -> None:
        if self.pid is not None and Path(f"/proc/{self.pid}").exists():
            return
        self.start()

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
        """Stop it (only it), kill what it left, unmount its data root, delete its root."""
        self._script("stop-docker")
        for pid in self.stray_pids():
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        mounts = Path("/proc/self/mounts").read_text().splitlines()
        for target in sorted((line.split()[1] for line in mounts), reverse=True):
            if target.startswith(str(self.root)):
                subprocess.run(["umount", "-l", target], check=False, capture_output=True)
        shutil.rmtree(self.root, ignore_errors=True)


def new_second_engine() -> SecondEngine:
    # A short path: unix socket paths (containerd's too, below the exec root) are limited
    # to 108 bytes.
    return SecondEngine(Path(tempfile.mkdtemp(prefix="o16-", dir="/tmp")))


# ---------------------------------------------------------------- the replay CLI


@dataclass(frozen=True, kw_only=True)
class Run:
    exit_code: int
    stdout: str
    stderr: str
    pid: int
    out: Path

    def summary(self) -> dict[str, Any]:
        path = self.out / "summary.json"
        if not path.exists():
            raise AssertionError(f"no summary.json (exit {self.exit_code}): {self.stderr[-3000:]}")
        return json.loads(path.read_text())

    def run_log(self) -> dict[str, Any]:
        return json.loads((self.out / "run-log.json").read_text())

    def lanes(self) -> dict[str, str]:
        return {entry["property_id"]: entry["lane"] for entry in self.summary()["decisions"]}

    def evidence(self) -> list[dict[str, Any]]:
        return [
            json.loads((self.out / entry["evidence_file"]).read_text())
            for entry in self.summary()["decisions"]
        ]


def replay_command(
    repo: Path,
    base: str,
    patch: str,
    *,
    image: str,
    out: Path,
    replays: int = 2,
    timeout_s: float = 60.0,
    engines: Sequence[str] = (),
    properties: Sequence[str] = (),
    extra: Sequence[str] = (),
) -> list[str]:
    args = [
        str(CLI),
        "replay",
        "--repo",
        str(repo),
        "--base",
        base,
        "--patch",
        patch,
        "--image",
        image,
        "--out",
        str(out),
        "--replays",
        str(replays),
        "--timeout",
        str(timeout_s),
        "--no-record",
    ]
    for url in engines:
        args += ["--engine", url]
    for node_id in properties:
        args += ["--property", node_id]
    return [*args, *extra]


def start(
    args: Sequence[str], scratch: Path, env: Mapping[str, str] | None = None
) -> subprocess.Popen[str]:
    scratch.mkdir(parents=True, exist_ok=True)
    return subprocess.Popen(
        list(args),
        env={**os.environ, "TMPDIR": str(scratch), "CI": "1", **(env or {})},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=scratch,
    )


def finish(process: subprocess.Popen[str], out: Path, timeout: float = 600) -> Run:
    try:
        stdout, stderr = process.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        process.send_signal(signal.SIGINT)
        stdout, stderr = process.communicate(timeout=120)
        raise AssertionError(f"replay did not finish in {timeout}s: {stderr[-3000:]}") from None
    return Run(exit_code=process.returncode, stdout=stdout, stderr=stderr, pid=process.pid, out=out)


def run(args: Sequence[str], out: Path, scratch: Path, env: Mapping[str, str] | None = None) -> Run:
    return finish(start(args, scratch, env), out)


def ours(client: Any, pid: int) -> tuple[list[str], list[str]]:
    """The containers and volumes a replay process left on an engine (by its labels)."""
    label = f"{PID_LABEL}={pid}"
    containers = [c.name for c in client.containers.list(all=True, filters={"label": label})]
    volumes = [v.name for v in client.volumes.list(filters={"label": label})]
    return containers, volumes

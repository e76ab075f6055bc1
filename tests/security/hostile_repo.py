"""A scratch repository whose patch is an attack, and the CLI run against it.

The base commit holds one passing test; the patch replaces its body with the attack.
Everything runs for real: git, the CLI as a subprocess, the Docker engine."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

CLI = Path(sys.executable).parent / "orchestrator"
PROPERTY = "tests/test_attack.py::test_attack"
# Put into the CLI's environment: it must never come back in any output or file.
CANARY_NAME = "ORCHESTRATOR_TEST_SECRET"
CANARY = "canary-3f9c1d-never-in-output"
GIT_ENV = {
    "GIT_AUTHOR_NAME": "t",
    "GIT_AUTHOR_EMAIL": "t@example.com",
    "GIT_COMMITTER_NAME": "t",
    "GIT_COMMITTER_EMAIL": "t@example.com",
    "GIT_CONFIG_NOSYSTEM": "1",
    "HOME": "/nonexistent",
}
# The test calls the code under test; the patch changes only that code (the test, its
# oracle, stays the same), so what the attack does decides the replay's label.
TEST = "from attack import run\n\n\ndef test_attack():\n    run()\n"
BASE_CODE = "def run():\n    return None\n"


def git(repo: Path, *args: str, stdin: bytes | None = None) -> str:
    done = subprocess.run(
        ["git", "-C", str(repo), *args],
        input=stdin,
        capture_output=True,
        check=True,
        env={**os.environ, **GIT_ENV},
    )
    return done.stdout.decode().strip()


def write_and_commit(repo: Path, files: dict[str, str], message: str) -> str:
    for name, text in files.items():
        path = repo / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", message)
    return git(repo, "rev-parse", "HEAD")


@dataclass(frozen=True)
class Repo:
    path: Path
    base: str
    patch: str


def hostile_repo(root: Path, attack: str, *, extra: dict[str, str] | None = None) -> Repo:
    """``attack``: the patch's ``attack.py``, a module with a ``run()`` the test calls."""
    repo = root / "repo"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    base = write_and_commit(
        repo,
        {"attack.py": BASE_CODE, "tests/test_attack.py": TEST, "tests/__init__.py": ""},
        "base",
    )
    patch = write_and_commit(repo, {"attack.py": attack, **(extra or {})}, "the hostile patch")
    return Repo(path=repo, base=base, patch=patch)


@dataclass(frozen=True)
class Run:
    code: int
    stdout: bytes
    stderr: bytes
    wall_s: float
    max_rss_kb: int
    run_dir: Path
    scratch: Path

    def report(self) -> dict[str, Any]:
        return json.loads(self.stdout)

    def decision(self) -> dict[str, Any]:
        (decision,) = [d for d in self.report()["decisions"] if d["property_id"] == PROPERTY]
        return decision


def replay(
    tmp_path: Path,
    repo: Repo,
    *args: str,
    deadline_s: float = 240,
    json_out: bool = True,
    env: dict[str, str] | None = None,
    select: bool = True,
) -> Run:
    """The CLI's replay of the attack, as a subprocess whose peak RSS is measured; with
    ``select`` false the run names no property (the whole suite, as the results say)."""
    scratch = tmp_path / "scratch"
    scratch.mkdir(exist_ok=True)
    run_dir = tmp_path / "run"
    command = [
        str(CLI), "replay", "--repo", str(repo.path), "--base", repo.base,
        "--patch", repo.patch, "--image", "orchestrator-runner:latest",
        *(("--property", PROPERTY) if select else ()), "--replays", "1", "--timeout", "60",
        "--out", str(run_dir), "--no-record", *(["--json"] if json_out else []), *args,
    ]  # fmt: skip
    environment = {
        **os.environ,
        "TMPDIR": str(scratch),
        "CI": "1",
        CANARY_NAME: CANARY,
        **(env or {}),
    }
    rss_file = tmp_path / "max-rss-kb"
    # A wrapper whose only child is the CLI: its children's peak RSS is the CLI's own.
    wrapper = [sys.executable, "-c", _MEASURE, str(rss_file), *command]
    started = time.monotonic()
    process = subprocess.Popen(
        wrapper, env=environment, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    try:
        stdout, stderr = process.communicate(timeout=deadline_s)
    except subprocess.TimeoutExpired:
        process.kill()
        process.communicate()
        raise AssertionError(f"the run did not end within {deadline_s} s") from None
    wall = time.monotonic() - started
    return Run(
        code=process.returncode,
        stdout=stdout,
        stderr=stderr,
        wall_s=wall,
        max_rss_kb=int(rss_file.read_text()),
        run_dir=run_dir,
        scratch=scratch,
    )


_MEASURE = (
    "import resource, subprocess, sys\n"
    "code = subprocess.run(sys.argv[2:]).returncode\n"
    "with open(sys.argv[1], 'w') as f:\n"
    "    f.write(str(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss))\n"
    "sys.exit(code)\n"
)


def folder_bytes(folder: Path) -> int:
    total = 0
    for path in folder.rglob("*") if folder.exists() else ():
        if path.is_file() and not path.is_symlink():
            total += path.stat().st_size
    return total


def assert_no_host_bytes(run: Run, *secrets: bytes) -> None:
    """Nothing of the host in any output or file the run wrote: the canary from the
    tool's environment, and each of ``secrets`` (host file contents)."""
    needles = [CANARY.encode(), *secrets]
    outputs = [run.stdout, run.stderr]
    for path in run.run_dir.rglob("*") if run.run_dir.exists() else ():
        assert not path.is_symlink(), f"{path} is a symlink"
        if path.is_file():
            outputs.append(path.read_bytes())
    for blob in outputs:
        for needle in needles:
            assert needle not in blob


# ---------------------------------------------------------------- the attacks

# The results folder wherever a driver is told to write it; the attack kills its driver
# (the replay's parent) so that the tool finds what the test left there.
SWAP_AND_KILL = """\
import os, signal

def run():
    for folder in ("/replay-out", "/replay/out"):
        if os.path.isdir(folder):
            for index in range(1, 4):
                target = os.path.join(folder, "replay-%03d.json" % index)
                try:
                    os.unlink(target)
                except OSError:
                    pass
                {make}
    os.kill(os.getppid(), signal.SIGKILL)
"""


def swap_attack(make: str) -> str:
    return SWAP_AND_KILL.replace("{make}", make)


FILL_DISK = """\
import os

def run():
    chunk = b"x" * (1024 * 1024)
    for folder in ("/replay-out", "/replay/out", "/tmp", os.path.expanduser("~")):
        try:
            with open(os.path.join(folder, "fill"), "wb") as handle:
                for _ in range(4096):  # 4 GiB, if nothing stops it
                    handle.write(chunk)
        except OSError:
            pass
"""


FLOOD = """\
import os

def run():
    chunk = b"\\x1b[2J" + b"y" * (1024 * 1024)  # no newline anywhere
    for _ in range(192):
        os.write(1, chunk)
    try:  # the container's own log, through its init's standard output
        with open("/proc/1/fd/1", "wb") as log:
            for _ in range(64):
                log.write(chunk)
    except OSError:
        pass
"""


FLOOD_INI = {"pytest.ini": "[pytest]\naddopts = -s -p no:cacheprovider\n"}
HUGE_RESULT = "open(target, 'w').write('{\"pad\": \"' + 'x' * (40 * 1024 * 1024) + '\"}')"
BOMB_BYTES = 96 * 1024 * 1024
BOMB_CAP = {"ORCHESTRATOR_MAX_TREE_BYTES": str(64 * 1024 * 1024)}

# name -> (the patch's attack.py, extra files of the patch)
ATTACKS: dict[str, tuple[str, dict[str, str]]] = {
    "symlink /etc/shadow": (swap_attack("os.symlink('/etc/shadow', target)"), {}),
    "symlink /proc/self/environ": (swap_attack("os.symlink('/proc/self/environ', target)"), {}),
    "fifo": (swap_attack("os.mkfifo(target)"), {}),
    "/dev/zero": (swap_attack("os.symlink('/dev/zero', target)"), {}),
    "40 MiB result": (swap_attack(HUGE_RESULT), {}),
    "disk fill": (FILL_DISK, {}),
    "log flood": (FLOOD, FLOOD_INI),
}


def bomb_repo(root: Path) -> Repo:
    """A patch that adds :data:`BOMB_BYTES` of zeros (packed to some 100 KiB)."""
    repo = hostile_repo(root, "def run():\n    return 2\n")
    blob = git(repo.path, "hash-object", "-w", "--stdin", stdin=b"\0" * BOMB_BYTES)
    git(repo.path, "update-index", "--add", "--cacheinfo", f"100644,{blob},data/zeros.bin")
    git(repo.path, "commit", "-q", "-m", "a bomb")
    return Repo(path=repo.path, base=repo.base, patch=git(repo.path, "rev-parse", "HEAD"))

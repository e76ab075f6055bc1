"""Small real git repositories for the quarantine's end-to-end tests."""

from __future__ import annotations

import subprocess
from pathlib import Path

GIT_ENV = {
    "GIT_AUTHOR_NAME": "t",
    "GIT_AUTHOR_EMAIL": "t@example.invalid",
    "GIT_COMMITTER_NAME": "t",
    "GIT_COMMITTER_EMAIL": "t@example.invalid",
    "GIT_CONFIG_NOSYSTEM": "1",
    "HOME": "/nonexistent",
    "PATH": "/usr/bin:/bin:/usr/local/bin",
}


def git(repo: Path, *args: str) -> str:
    done = subprocess.run(
        ["git", "-C", str(repo), *args], env=GIT_ENV, capture_output=True, text=True, check=True
    )
    return done.stdout.strip()


def init(repo: Path) -> Path:
    repo.mkdir(parents=True, exist_ok=True)
    git(repo, "init", "-q", "-b", "main")
    return repo


def commit(repo: Path, files: dict[str, str], message: str) -> str:
    """Write ``files`` (path -> text), commit them, return the full SHA."""
    for name, text in files.items():
        path = repo / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", message)
    return git(repo, "rev-parse", "HEAD")


# A test that leaks state into the container's /tmp: in one container its replays pass and
# fail in turn (flake_queue_eligible on both sides); on a CI machine it fails when the state
# file says it ran before, which is how a test here makes it fail on purpose.
FLAKY_TEST = """\
import os
import tempfile

COUNTER = os.path.join(tempfile.gettempdir(), "shared-state")


def test_leaks_state():
    try:
        with open(COUNTER) as handle:
            runs = int(handle.read()) + 1
    except FileNotFoundError:
        runs = 1
    with open(COUNTER, "w") as handle:
        handle.write(str(runs))
    assert runs % 2 == 1, "fails on every second run"
"""
# The fix; re-probed by thaw as it was replayed, without a fixture.
FIXED_TEST = """\
import os


def test_leaks_state():
    assert "REPLAY_FIXTURE" not in os.environ
"""
STEADY_TEST = """\
import lib


def test_value():
    assert lib.X >= 1
"""
FLAKY = "tests/test_flaky.py::test_leaks_state"

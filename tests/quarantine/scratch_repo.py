"""The suites of the quarantine's end-to-end tests (their repositories: support.scratch_git)."""

from __future__ import annotations

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

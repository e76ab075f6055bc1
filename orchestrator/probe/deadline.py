"""The running pytest sessions' process groups, and the deadline that kills them.

The driver only blocks in waitpid: SIGALRM, not a timer thread (which would make fork
unsafe) nor a poll tick, ends a run that passed its deadline. Standard library only.
"""

from __future__ import annotations

import contextlib
import os
import signal
from collections.abc import Iterable
from types import FrameType


def kill_groups(groups: Iterable[int]) -> None:
    """SIGKILL each process group (a session's pid is its group's id)."""
    for group in groups:
        # A group may already be gone; that is the outcome we wanted.
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(group, signal.SIGKILL)


def kill_and_reap(groups: list[int]) -> None:
    """Kill every group in ``groups``, reap their leaders and empty the list (on a stop)."""
    pids = list(groups)
    groups.clear()
    kill_groups(pids)
    for pid in pids:
        with contextlib.suppress(ChildProcessError):
            os.waitpid(pid, 0)


class Deadline:
    """SIGALRM after ``timeout_s`` kills every group in ``groups``; ``expired`` says it fired."""

    def __init__(self, groups: Iterable[int], timeout_s: float) -> None:
        self.groups = tuple(groups)
        self.timeout_s = timeout_s
        self.expired = False

    def _fire(self, signum: int, frame: FrameType | None) -> None:
        self.expired = True
        kill_groups(self.groups)

    def __enter__(self) -> Deadline:
        signal.signal(signal.SIGALRM, self._fire)
        signal.setitimer(signal.ITIMER_REAL, self.timeout_s)
        return self

    def __exit__(self, *exc: object) -> None:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, signal.SIG_DFL)

"""Live progress of a replay's sides: the driver's lines parsed, the counts kept per side,
and when a line of them is due in a log. Pure.

The driver (orchestrator/probe/driver.py) prints `replay <k>/<N> <status>` after each
replay, and its probes print `test <done>/<total> <outcome> [+<n>]` for the tests
finished since their last line (at most one line every 0.1 s, but at once for the first
test, a failing one and the selection's last), where <total> is the size of the whole
replay's selection. The tests under replay write to the
same stream and can forge either line: progress is shown, never decided on, so a line is
parsed strictly, its numbers bounded, and a forged one only moves a counter.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from typing import Final

# Larger numbers on a line are not a real suite's (and would only be a forged line's).
MAX_COUNT: Final = 10_000_000
LOG_EVERY_S: Final = 10.0
OUTCOMES: Final = ("passed", "failed", "error", "skipped")
FAILING: Final = frozenset({"failed", "error"})

_TEST_LINE: Final = re.compile(
    r"test ([1-9][0-9]{0,7})/([1-9][0-9]{0,7}) (passed|failed|error|skipped)"
    r"(?: \+([1-9][0-9]{0,7}))?"
)
_REPLAY_LINE: Final = re.compile(r"replay ([1-9][0-9]{0,7})/([1-9][0-9]{0,7}) (\S+)")


@dataclass(frozen=True, kw_only=True)
class FinishedTest:
    """One finished test: ``done`` of this pytest session's tests, of ``total`` in the replay."""

    done: int
    total: int
    outcome: str
    count: int = 1  # the tests the line stands for: this one and those since the last line

    @property
    def failing(self) -> bool:
        return self.outcome in FAILING


@dataclass(frozen=True, kw_only=True)
class ReplayLine:
    """Replay ``number`` of the ``of`` a container runs ended with ``status``."""

    number: int
    of: int
    status: str


def parse_test_line(line: str) -> FinishedTest | None:
    """``test <done>/<total> <outcome>`` or ``test <done>/<total> <outcome> +<n>`` (the
    line stands for the n tests since the last one, ``outcome`` the last one's; surrounding
    blanks allowed), else None."""
    match = _TEST_LINE.fullmatch(line.strip())
    if match is None:
        return None
    done, total = int(match.group(1)), int(match.group(2))
    count = int(match.group(4) or 1)
    if done > total or total > MAX_COUNT or count > done:
        return None
    return FinishedTest(done=done, total=total, outcome=match.group(3), count=count)


def parse_replay_line(line: str) -> ReplayLine | None:
    """``replay <k>/<N> <status>`` (surrounding blanks allowed), else None."""
    match = _REPLAY_LINE.fullmatch(line.strip())
    if match is None:
        return None
    number, of = int(match.group(1)), int(match.group(2))
    if number > of or of > MAX_COUNT:
        return None
    return ReplayLine(number=number, of=of, status=match.group(3))


@dataclass(frozen=True, kw_only=True)
class SideProgress:
    """What one side has done so far in one run of its containers."""

    side: str
    started_s: float  # on the monotonic clock of whoever keeps the counts
    replays_total: int
    replays_done: int = 0
    tests_done: int = 0
    failures: int = 0
    tests_per_replay: int = 0  # the largest replay selection a test line announced

    @property
    def tests_total(self) -> int:
        """Tests the side will have run: a replay's selection times the replays (never
        below what is done already)."""
        return max(self.tests_done, min(self.tests_per_replay * self.replays_total, MAX_COUNT))

    @property
    def finished(self) -> bool:
        return self.replays_done >= self.replays_total

    def elapsed_s(self, now_s: float) -> float:
        return max(0.0, now_s - self.started_s)


def with_test(progress: SideProgress, line: FinishedTest) -> SideProgress:
    """``progress`` after the tests a line stands for (a failing test has a line of its
    own: at most the last of them fails)."""
    return replace(
        progress,
        tests_done=min(progress.tests_done + line.count, MAX_COUNT),
        failures=min(progress.failures + (1 if line.failing else 0), MAX_COUNT),
        tests_per_replay=max(progress.tests_per_replay, line.total),
    )


def with_replays(progress: SideProgress, done: int) -> SideProgress:
    """``progress`` with ``done`` replays finished (counts never go back)."""
    return replace(
        progress,
        replays_done=max(progress.replays_done, min(done, progress.replays_total)),
    )


def log_due(
    last_logged_s: float | None, now_s: float, *, finished: bool, every_s: float = LOG_EVERY_S
) -> bool:
    """Whether a side's progress line is due in a log: its first, then at most one every
    ``every_s`` seconds, and always the one that says the side is finished."""
    if finished or last_logged_s is None:
        return True
    return now_s - last_logged_s >= every_s
